"""Every place the course reaches into Triton: the patch points, their version check and undo, and
the events they emit (see :mod:`gpu_course.interpose` for the subscribe API). Checked on triton 3.6
to 3.9; nothing is patched at import, and triton is never imported here.

Events and their fields:

* ``launch`` / ``launched``: ``kernel[grid](...)`` (``JITFunction.run`` on a GPU,
  ``InterpretedFunction.run`` in the interpreter; ``__getitem__`` is routed to ``run`` meanwhile, and
  autotune / heuristics wrappers call ``run`` for what they launch). ``kind`` ("triton"), ``kernel``,
  ``fn`` (its Python function), ``args``, ``kwargs`` (without grid and warmup), ``grid`` (as given,
  or as a callable grid resolved it), ``arg_names``; after the launch ``error`` (the exception's
  class name, or None). Handlers may keep their own fields on the event between the two.
* ``access``: a load, store or atomic of the interpreter, before it happens: ``op`` ("load",
  "store", "atomic_cas", "atomic_rmw"), ``what`` ("tl.load reads" ...), ``builder`` (its
  ``grid_idx`` is the program), ``ptrs`` (the pointer block), ``mask`` (or None), ``origin`` (the
  :class:`Arg` the pointers came from, None where that was lost) and ``launch`` (the
  :class:`Interpreted` launch under way: its kernel name and tensor arguments).
* ``dot``: the interpreter runs a ``tl.dot``: ``builder``, ``macs`` (M × N × K of its operands) and ``loaded``
  (how many of its two operands hold data a ``tl.load`` read, through casts, transposes, reshapes and
  ``tl.where``: a tile computed in the kernel, an identity say, is not loaded; known only while ``access``
  is listened to, 0 otherwise), ``made_up`` (how many of its two operands are neither loaded nor computed from loaded
  data: a tile built from constants, ``tl.arange`` and comparisons, an identity say; 0 where ``access`` is not
  listened to), ``inputs`` (the :class:`Arg` of every tensor argument those loaded operands were read from).

Besides the events, two settings of the interpreter's ``tl.dot`` (:func:`tf32_rounding`, :func:`dots_scaled`):
inputs rounded to TF32 where that precision is asked for (as the GPU's tensor cores compute), and the
products scaled (to see whether they reach a kernel's output).

Besides the events, the touch points other modules call: :func:`compiled_launcher_fits` /
:func:`run_compiled` (a compiled kernel's own launcher, for ``triton_launch``), :func:`launch_hooks_set`,
:func:`interpreted_function` and :func:`interpreting` (for ``triton_debug``).
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from . import Bus, Event, Patches, UnknownVersion, loaded, patch_when_imported, raised_by_handler

__all__ = ["tf32_rounding", "dots_scaled", "round_tf32", "subscribe", "unsubscribe", "subscribed", "listening", "Arg", "Interpreted", "check_interpreter",
           "uninstall", "compiled_launcher_fits", "run_compiled", "launch_hooks_set", "hook_active", "interpreted_function",
           "interpreting", "JIT", "INTERPRETER"]

JIT = "triton.runtime.jit"
INTERPRETER = "triton.runtime.interpreter"
_TAG = "_course_arg"          # the attribute that carries a pointer's tensor argument
_LOADED = "_course_loaded"    # on a value a tl.load read (and what is cast or moved from it): the Args it came from
_DATA = "_course_data"        # on a value computed from loaded data (any operand loaded or itself data)
_STATE = threading.local()    # .launch: the Interpreted launch under way in this thread, or None
ACCESSES = {"create_masked_load": ("load", "tl.load reads", 0, 1),
            "create_masked_store": ("store", "tl.store writes", 0, 2),
            "create_atomic_cas": ("atomic_cas", "tl.atomic_cas touches", 0, None),
            "create_atomic_rmw": ("atomic_rmw", "an atomic operation touches", 1, 3)}
_REQUIRED_ACCESSES = ("create_masked_load", "create_masked_store")
# builder methods whose result is the same memory as their pointer operand(s): the tag follows
CARRIERS = ("create_addptr", "create_splat", "create_broadcast", "create_expand_dims", "create_reshape",
            "create_trans", "create_bitcast", "create_select", "create_cat", "create_join", "create_permute",
            "create_unsplat")
# builder methods that convert a value: a loaded value stays loaded (pointers never pass through them)
VALUE_CARRIERS = ("create_si_to_fp", "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui", "create_fp_ext",
                  "create_fp_trunc", "create_int_cast", "create_fp_to_fp")
LOADS = ("create_descriptor_load",)   # loads whose result may be a new handle after the masked load (TF32 rounding)
# builder methods whose result is not computed from their operands' values, or is not a value: never data
NOT_DERIVED = ("create_get_program_id", "create_get_num_programs", "create_make_range", "create_load", "create_store",
               "create_dot", "create_print", "create_assert", "create_assume", "create_barrier",
               "create_make_tensor_descriptor", "create_descriptor_store", "create_descriptor_scatter",
               "create_atomic_store", "create_atomic_poll")

_PATCHES = Patches()


@dataclass(eq=False)
class Arg:
    """A tensor argument of an interpreted launch: its name, first element's address and storage's
    bytes ``[lo, hi)`` (what the kernel may touch through it), elements and dtype."""
    name: str
    ptr: int
    lo: int
    hi: int
    numel: int
    dtype: str


@dataclass(eq=False)
class Interpreted:
    """An interpreted launch under way: the kernel's name, its arguments' names by data pointer, and
    the :class:`Arg` of each tensor argument converted so far."""
    kernel: str
    names: dict
    args: list


def _refresh() -> None:
    """Install the patch points some subscriber needs, put back the others."""
    want_launch = _BUS.listening("launch", "launched")
    want_access = _BUS.listening("access")
    want_dot = _BUS.listening("dot")
    jit = loaded(JIT)
    interp = loaded(INTERPRETER)
    if want_launch or want_access or want_dot:
        for name in (JIT, INTERPRETER):
            if name not in sys.modules:
                patch_when_imported(name, lambda _m: _refresh())
    if jit is not None and hasattr(jit, "JITFunction"):
        _set_launch(jit.JITFunction, want_launch)
    if interp is not None and hasattr(interp, "InterpretedFunction"):
        if want_launch and "run" not in vars(interp.InterpretedFunction):
            raise UnknownVersion(f"this triton's interpreter has no InterpretedFunction.run to record launches "
                                 f"with (triton >= 3.3 has it; this is {_version()})")
        _set_launch(interp.InterpretedFunction, want_launch)
    if interp is not None:
        _set_access(interp, want_access)
        builder = getattr(interp, "InterpreterBuilder", None)
        if builder is not None and "create_dot" in vars(builder):
            if want_dot or _DOT["tf32"] or _DOT["scale"] is not None:
                _PATCHES.put(builder, "create_dot", _dot_hook)
            else:
                _PATCHES.undo(builder, "create_dot")


_BUS = Bus("triton", ("launch", "launched", "access", "dot"), _refresh)
subscribe, unsubscribe, subscribed, listening = _BUS.subscribe, _BUS.unsubscribe, _BUS.subscribed, _BUS.listening


def uninstall() -> None:
    """Put back every patch point (subscribers stay subscribed but hear nothing until the next
    subscription change)."""
    _PATCHES.undo_all()


def _version() -> str:
    t = sys.modules.get("triton")
    return f"triton {getattr(t, '__version__', '?')}"


# ------------------------------------------------------------------------------------------------
# launches

def _set_launch(cls, on: bool) -> None:
    if on:
        _PATCHES.put(cls, "run", run_hook)
        _PATCHES.put(cls, "__getitem__", lambda _orig: _getitem)
    else:
        _PATCHES.undo(cls, "run")
        _PATCHES.undo(cls, "__getitem__")


def _getitem(self, grid):
    return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)


def run_hook(original):
    def run(self, *args, **kwargs):
        if kwargs.get("warmup") or not _BUS.listening("launch", "launched"):
            return original(self, *args, **kwargs)
        fn = getattr(self, "fn", None)
        grid = kwargs.get("grid")
        ev = Event(kind="triton", kernel=self, fn=fn, args=args, arg_names=list(getattr(self, "arg_names", None) or []),
                   kwargs={k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}, grid=grid,
                   block=None, error=None, synchronize=None)
        if callable(grid):
            def resolving_grid(meta, _grid=grid):
                g = _grid(meta)
                ev.grid = g
                return g
            kwargs["grid"] = resolving_grid
        return _BUS.around(ev, lambda: original(self, *args, **kwargs))
    return run


# ------------------------------------------------------------------------------------------------
# the interpreter's accesses, with the tensor argument each pointer came from

def check_interpreter(interp) -> None:
    """Raise :class:`UnknownVersion` if the interpreter module ``interp`` lacks a hook point the
    access events need."""
    builder = getattr(interp, "InterpreterBuilder", None)
    missing = [n for n in ("InterpreterBuilder", "GridExecutor", "_implicit_cvt", "InterpreterError")
               if not hasattr(interp, n)]
    missing += [f"InterpreterBuilder.{m}" for m in _REQUIRED_ACCESSES if builder and not hasattr(builder, m)]
    if missing:
        raise UnknownVersion(f"this triton's interpreter ({_version()}) has no {', '.join(missing)}: the "
                             f"course's interposition knows triton 3.6 to 3.9")


def _set_access(interp, on: bool) -> None:
    builder = getattr(interp, "InterpreterBuilder", None)
    if on:
        check_interpreter(interp)
        for name, (op, what, ptr_pos, mask_pos) in ACCESSES.items():
            if name in vars(builder):
                _PATCHES.put(builder, name, lambda orig, s=(op, what, ptr_pos, mask_pos): _access_hook(orig, *s))
        for name in CARRIERS:
            if name in vars(builder):
                _PATCHES.put(builder, name, _carrier_hook)
        for name in VALUE_CARRIERS:
            if name in vars(builder):
                _PATCHES.put(builder, name, _value_hook)
        for name in LOADS:
            if name in vars(builder):
                _PATCHES.put(builder, name, _loaded_hook)
        for name in _derivers(builder):
            _PATCHES.put(builder, name, _derived_hook)
        _PATCHES.put(interp, "_implicit_cvt", _cvt_hook)
        _PATCHES.put(interp.GridExecutor, "__call__", lambda orig: _executor_hook(orig, interp))
    elif builder is not None:
        for name in list(ACCESSES) + list(CARRIERS) + list(VALUE_CARRIERS) + list(LOADS) + _derivers(builder):
            _PATCHES.undo(builder, name)
        _PATCHES.undo(interp, "_implicit_cvt")
        _PATCHES.undo(interp.GridExecutor, "__call__")


def _access_hook(original, op, what, ptr_pos, mask_pos):
    def access(self, *args, **kwargs):
        ptrs = args[ptr_pos]
        mask = args[mask_pos] if mask_pos is not None and len(args) > mask_pos else kwargs.get("mask")
        _BUS.emit("access", Event(op=op, what=what, builder=self, ptrs=ptrs, mask=mask,
                                  origin=getattr(ptrs, _TAG, None), launch=getattr(_STATE, "launch", None)))
        out = original(self, *args, **kwargs)
        if op == "load":
            origin = getattr(ptrs, _TAG, None)
            _mark_loaded(out, frozenset() if origin is None else frozenset([origin]))
        return out
    return access


def _mark_loaded(h, origins=frozenset()) -> None:
    """Mark handle ``h`` as loaded data, from the tensor arguments ``origins`` (:class:`Arg`; empty where unknown)."""
    try:
        setattr(h, _LOADED, frozenset(origins))
    except AttributeError:
        pass


def _loaded_from(handles):
    """The union of the origins of the loaded ones among ``handles``, or None if none is loaded."""
    marks = [m for m in (getattr(h, _LOADED, None) for h in handles) if m is not None]
    return frozenset().union(*marks) if marks else None


def _loaded_hook(original):
    def loaded(self, desc, *args, **kwargs):
        out = original(self, desc, *args, **kwargs)
        origin = getattr(getattr(desc, "base", None), _TAG, None)   # the descriptor's tensor, where known
        _mark_loaded(out, (_loaded_from([out]) or frozenset()) | (frozenset([origin]) if origin else frozenset()))
        return out
    return loaded


def _carry_loaded(out, args) -> None:
    """``out``, made from ``args`` by a move or a conversion, is loaded data if one of them is (their origins),
    and data computed from loads if one of them is that."""
    origins = _loaded_from(args)
    if out is not None and origins is not None:
        _mark_loaded(out, origins)
    elif out is not None and any(_is_data(a) for a in args):
        _mark_data(out)


def _is_data(h) -> bool:
    """Whether handle ``h`` holds loaded data or values computed from it (not a tile made of constants)."""
    return getattr(h, _LOADED, None) is not None or getattr(h, _DATA, False)


def _mark_data(h) -> None:
    try:
        setattr(h, _DATA, True)
    except AttributeError:
        pass


def _derivers(builder) -> list:
    """The builder's methods that compute a value from their operands (arithmetic, math, comparisons, reductions'
    pieces): the hooks of :data:`ACCESSES`, :data:`CARRIERS`, :data:`VALUE_CARRIERS` and :data:`LOADS` carry
    the marks themselves, and :data:`NOT_DERIVED` make no value from values."""
    hooked = set(ACCESSES) | set(CARRIERS) | set(VALUE_CARRIERS) | set(LOADS) | set(NOT_DERIVED)
    return [n for n in vars(builder) if n.startswith("create_") and n not in hooked] if builder else []


def _derived_hook(original):
    def derived(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if out is not None and any(_is_data(a) for a in args):
            _mark_data(out)
        return out
    return derived


def _value_hook(original):
    def converted(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        _carry_loaded(out, args)
        return out
    return converted


_DOT = {"tf32": 0, "scale": None}   # tf32: how many tf32_rounding blocks are open; scale: dots_scaled's factor


def round_tf32(x):
    """fp32 array ``x`` (NumPy) rounded to TF32, as the tensor cores read it: 10 mantissa bits, to
    nearest (ties away from zero, as ``cvt.rna.tf32.f32``); infinities and NaN kept.

    >>> import numpy as np
    >>> float(round_tf32(np.float32([1 + 2**-11]))[0]), float(round_tf32(np.float32([1 + 2**-12]))[0])
    (1.0009765625, 1.0)
    """
    import numpy as np
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).astype(np.uint32)
    return np.where(finite, rounded, bits).astype(np.uint32).view(np.float32).reshape(np.shape(x))


def _tf32_asked(precision) -> bool:
    return getattr(precision, "name", str(precision).rsplit(".", 1)[-1]) == "TF32"


def _dot_hook(original):
    def create_dot(self, a, b, d, input_precision, *args, **kwargs):
        if _BUS.listening("dot"):
            shape_a, shape_b = getattr(a.data, "shape", ()), getattr(b.data, "shape", ())
            macs = int(shape_a[-2] * shape_a[-1] * shape_b[-1]) if len(shape_a) >= 2 and len(shape_b) >= 2 else 0
            _BUS.emit("dot", Event(builder=self, macs=macs,
                                   loaded=sum(getattr(h, _LOADED, None) is not None for h in (a, b)),
                                   made_up=sum(not _is_data(h) for h in (a, b)) if _BUS.listening("access") else 0,
                                   inputs=_loaded_from((a, b)) or frozenset()))
        from_data = any(_is_data(h) for h in (a, b, d))   # before TF32 rounding replaces the operands
        if _DOT["tf32"] and _tf32_asked(input_precision):
            a, b = (_as_tf32(h) for h in (a, b))
        out = original(self, a, b, d, input_precision, *args, **kwargs)
        factor = _DOT["scale"]
        if factor is not None:
            out.data = (out.data + (factor - 1) * (out.data - d.data)).astype(out.data.dtype)
        if from_data:
            _mark_data(out)   # a product of data is data (attention's scores, then P)
        return out
    return create_dot


def _as_tf32(h):
    import numpy as np
    if getattr(h.data, "dtype", None) != np.float32:
        return h
    return type(h)(round_tf32(h.data), h.dtype)


@contextmanager
def tf32_rounding():
    """Within the block, the interpreter's ``tl.dot`` on fp32 inputs with ``input_precision="tf32"``
    (Triton's default) rounds its inputs to TF32 first, as a GPU's tensor cores do, instead of
    multiplying in full fp32: a tolerance judged in cpu mode is then the GPU's."""
    _DOT["tf32"] += 1
    _refresh()
    try:
        yield
    finally:
        _DOT["tf32"] -= 1
        _refresh()


@contextmanager
def dots_scaled(factor: float):
    """Within the block, every ``tl.dot(a, b, acc)`` of the interpreter returns ``acc + factor * a @ b``:
    a kernel whose output does not change is one whose products do not reach it."""
    old = _DOT["scale"]
    _DOT["scale"] = factor
    _refresh()
    try:
        yield
    finally:
        _DOT["scale"] = old
        _refresh()


def _carrier_hook(original):
    def carried(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        _carry_loaded(out, args)      # a loaded value moved (transposed, reshaped, selected) is still loaded
        origin = None
        for a in args:
            o = getattr(a, _TAG, None)
            if o is not None:
                if origin is not None and o is not origin:
                    return out   # pointers into two tensors: origin unknown
                origin = o
        if origin is not None and out is not None:
            try:
                setattr(out, _TAG, origin)
            except AttributeError:
                pass
        return out
    return carried


def _describe(t, name) -> Arg | None:
    base = getattr(t, "base", None) if type(t).__name__ == "TensorWrapper" else t
    if not hasattr(base, "untyped_storage"):
        return None
    storage = base.untyped_storage()
    lo = storage.data_ptr()
    return Arg(name, base.data_ptr(), lo, lo + storage.nbytes(), base.numel(),
               str(getattr(t, "dtype", base.dtype)).replace("torch.", ""))


def _cvt_hook(original):
    def _implicit_cvt(arg):
        out = original(arg)
        launch = getattr(_STATE, "launch", None)
        if launch is not None and hasattr(arg, "data_ptr") and hasattr(out, "handle"):
            a = _describe(arg, launch.names.get(arg.data_ptr(), "a tensor argument"))
            if a is not None:
                launch.args.append(a)
                setattr(out.handle, _TAG, a)
        return out
    return _implicit_cvt


def _executor_hook(original, interp):
    def __call__(self, *args, **kwargs):
        names = list(getattr(self, "arg_names", ()) or ())
        named = list(zip(names, args)) + [(k, v) for k, v in kwargs.items() if k in names]
        by_ptr = {}

        def collect(name, v):
            if isinstance(v, tuple):
                for i, x in enumerate(v):
                    collect(f"{name}[{i}]", x)
            elif hasattr(v, "data_ptr"):
                by_ptr.setdefault(v.data_ptr(), name)
            elif hasattr(v, "base") and hasattr(getattr(v, "base"), "data_ptr"):  # a descriptor
                by_ptr.setdefault(v.base.data_ptr(), f"{name}.base")

        for name, v in named:
            collect(name, v)
        outer = getattr(_STATE, "launch", None)
        _STATE.launch = Interpreted(getattr(self.fn, "__name__", "?"), by_ptr, [])
        try:
            return original(self, *args, **kwargs)
        except interp.InterpreterError as e:
            mine = raised_by_handler(e.__cause__)   # a handler's exception, wrapped by the interpreter
            if mine is not None:
                raise mine.with_traceback(mine.__traceback__) from None
            raise
        finally:
            _STATE.launch = outer
    return __call__


# ------------------------------------------------------------------------------------------------
# touch points called directly

def compiled_launcher_fits(ck) -> bool:
    """Whether ``ck.run`` (a ``CompiledKernel``'s launcher) has the signature :func:`run_compiled`
    calls: ``(gridX, gridY, gridZ, stream, function, *args)`` with packed metadata (Triton 3.x)."""
    import inspect
    try:
        params = list(inspect.signature(ck.run).parameters)
    except (TypeError, ValueError):
        return False
    return params == ["gridX", "gridY", "gridZ", "stream", "function", "args"] and hasattr(ck, "packed_metadata")


def run_compiled(ck, grid3, stream, args) -> None:
    """Launch compiled kernel ``ck`` on ``grid3`` (3 ints) and ``stream`` with its runtime arguments
    and trailing constexprs ``args``, through its own launcher (no launch hooks, no metadata)."""
    ck.run(grid3[0], grid3[1], grid3[2], stream, ck.function, ck.packed_metadata, None, None, None, *args)


_KNOBS: list = []


def launch_hooks_set() -> bool:
    """Whether a launch hook of ``triton.knobs.runtime`` does anything (profilers such as Proton set
    them): None, or an empty ``HookChain`` (what recent Tritons hold when nobody added one), does not."""
    if not _KNOBS:
        try:
            from triton import knobs
        except ImportError:  # a Triton without knobs (before 3.4): no launch hooks to honour
            knobs = None
        _KNOBS.append(knobs)
    if _KNOBS[0] is None:
        return False
    rt = _KNOBS[0].runtime
    return hook_active(rt.launch_enter_hook) or hook_active(rt.launch_exit_hook)


def hook_active(hook) -> bool:
    """Whether one launch hook does anything (None or an empty ``HookChain`` does not)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if isinstance(calls, list) else True


def interpreted_function(kernel):
    """The interpreter's function for a ``@triton.jit`` kernel (itself if it already is one);
    TypeError for anything else."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction
    if isinstance(kernel, InterpretedFunction):
        return kernel
    fn = getattr(kernel, "fn", None)
    if not isinstance(kernel, triton.runtime.JITFunction) or not callable(fn):
        raise TypeError(f"interpreted: give a @triton.jit kernel, got {type(kernel).__name__}")
    return InterpretedFunction(fn)


@contextmanager
def interpreting():
    """Within the block, Triton launches as under ``TRITON_INTERPRET=1`` (``triton.knobs``)."""
    import triton
    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = True
        yield
