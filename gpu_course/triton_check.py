"""Bounds checks for Triton's interpreter (cpu mode): an access outside the tensors a kernel was
given raises :class:`TritonOutOfBounds` instead of corrupting memory or killing the process.

On a GPU an unmasked ``tl.store(o + tl.arange(0, 1024), ...)`` into a 10-element tensor is an
illegal memory access (or silent corruption); in the interpreter (``TRITON_INTERPRET=1``) the same
store writes wherever the address points, and often ends the Python process with a segmentation
fault (a Jupyter kernel dies with no traceback). This module checks every load, store and atomic
the interpreter performs, as ``compute-sanitizer`` does on a GPU, and names the kernel, the
program, the learner's line, the tensor argument and the offsets that fall outside it::

    @triton.jit
    def copy(x, o, n):
        offs = tl.arange(0, 16)
        tl.store(o + offs, tl.load(x + offs))

    copy[(1,)](torch.ones(10), torch.zeros(10), 10)
    # TritonOutOfBounds: Triton kernel copy, program (0, 0, 0), line 4: tl.store(o + offs, ...)
    #   tl.load reads outside the tensor 'x' (10 float32 elements, valid offsets 0 to 9): 6 of the
    #   16 active lanes reach offsets 10 to 15. ...

How: the interpreter turns each tensor argument into its address (``_implicit_cvt``); that address
is tagged with the argument (its name and storage's byte range), and the tag follows the pointer
through pointer arithmetic and shape ops (``create_addptr``, ``create_splat``, ``create_broadcast``
...). Each access (``InterpreterBuilder.create_masked_load`` / ``create_masked_store`` /
``create_atomic_cas`` / ``create_atomic_rmw``: every load and store of the interpreter goes
through them) is checked, lanes the mask turns off excepted, against the storage of the tensor the
pointer came from, or, where the origin is lost (a pointer made from an integer, say), against
all the tensor arguments. The cost is a few numpy reductions per access.

:func:`install` applies it when ``triton.runtime.interpreter`` is imported (or now, if it is);
``mode`` calls it in cpu mode. Checked on triton 3.6 and 3.9; a triton whose interpreter lacks
these hook points makes the install raise a clear error (``COURSE_TRITON_CHECK=0`` skips it).
"""
from __future__ import annotations

import linecache
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODULE = "triton.runtime.interpreter"
ENV = "COURSE_TRITON_CHECK"
_TAG = "_course_arg"          # the attribute that carries a pointer's tensor argument
_STATE = threading.local()    # .launch: the _Launch under way in this thread, or None
_ACCESSES = ("create_masked_load", "create_masked_store")
# builder methods whose result is the same memory as their pointer operand(s): the tag follows
_CARRIERS = ("create_addptr", "create_splat", "create_broadcast", "create_expand_dims",
             "create_reshape", "create_trans", "create_bitcast", "create_select", "create_cat",
             "create_join", "create_permute", "create_unsplat")


class TritonOutOfBounds(IndexError):
    """A Triton kernel, run by the interpreter, accessed memory outside the tensors it was given.
    ``kernel``, ``argument`` and ``offsets`` (element offsets from the argument's first element)
    say which."""

    def __init__(self, message, kernel=None, argument=None, offsets=None):
        super().__init__(message)
        self.kernel, self.argument, self.offsets = kernel, argument, offsets


@dataclass(eq=False)
class _Arg:
    """A tensor argument of a launch: its name, first element's address and storage's bytes."""
    name: str
    ptr: int          # data_ptr(): where offset 0 of the argument is
    lo: int           # the storage's bytes [lo, hi): what the kernel may touch through it
    hi: int
    numel: int
    dtype: str


@dataclass(eq=False)
class _Launch:
    kernel: str
    names: dict       # data_ptr -> argument name
    args: list


def _describe(t, name) -> _Arg | None:
    base = getattr(t, "base", None) if type(t).__name__ == "TensorWrapper" else t
    if not hasattr(base, "untyped_storage"):
        return None
    storage = base.untyped_storage()
    lo = storage.data_ptr()
    return _Arg(name, base.data_ptr(), lo, lo + storage.nbytes(), base.numel(),
                str(getattr(t, "dtype", base.dtype)).replace("torch.", ""))


def _learner_line() -> str:
    """``line N: text`` of the innermost frame outside triton and this module (the kernel's)."""
    skip = (str(Path(__file__).resolve()),)
    triton_mod = sys.modules.get("triton")
    triton_dir = str(Path(triton_mod.__file__).parent) if triton_mod else None
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if fn not in skip and not (triton_dir and fn.startswith(triton_dir)) and "numpy" not in fn:
            text = linecache.getline(fn, f.f_lineno).strip()
            return f"line {f.f_lineno}" + (f": {text}" if text else "")
        f = f.f_back
    return ""


def _itemsize(handle) -> int:
    ty = handle.dtype
    while hasattr(ty, "element_ty"):
        ty = ty.element_ty
    return max(1, getattr(ty, "primitive_bitwidth", 8) // 8)


def _check(builder, what: str, ptrs, mask) -> None:
    """Raise TritonOutOfBounds if an active lane of ``ptrs`` reaches outside its tensor."""
    launch = getattr(_STATE, "launch", None)
    if launch is None or not launch.args:
        return
    p = np.asarray(ptrs.data)
    if mask is not None:
        m = np.asarray(getattr(mask, "data", mask))
        if m.dtype != np.bool_:
            m = m.astype(bool)
        if not m.all():
            p = p[np.broadcast_to(m, p.shape)]
    if p.size == 0:
        return
    p = p.astype(np.uint64, copy=False).ravel()
    size = _itemsize(ptrs)
    lo, hi = int(p.min()), int(p.max()) + size
    origin = getattr(ptrs, _TAG, None)
    allowed = [origin] if origin is not None else launch.args
    if any(a.lo <= lo and hi <= a.hi for a in allowed):   # the usual case: one comparison
        return
    ok = np.zeros(p.shape, bool)
    for a in allowed:
        ok |= (p >= a.lo) & (p <= a.hi - size)
    if ok.all():
        return
    bad = p[~ok]
    _raise(builder, launch, what, bad, p.size, size, origin)


def _raise(builder, launch, what, bad, active, size, origin) -> None:
    first = int(bad.min())
    if origin is None:   # the argument the pointer most likely came from: the nearest below it
        below = [a for a in launch.args if a.ptr <= first]
        origin = max(below, key=lambda a: a.ptr) if below else min(launch.args, key=lambda a: a.ptr)
    offs = (bad.astype(np.int64) - np.int64(origin.ptr)) // size
    lo_off, hi_off = int(offs.min()), int(offs.max())
    span = f"offset {lo_off}" if lo_off == hi_off else f"offsets {lo_off} to {hi_off}"
    where = ", ".join(x for x in (f"program {tuple(getattr(builder, 'grid_idx', ()) or ())}",
                                  _learner_line()) if x)
    n = origin.numel
    msg = (f"Triton kernel {launch.kernel}, {where}\n"
           f"  {what} outside the tensor '{origin.name}' ({n} {origin.dtype} element"
           f"{'' if n == 1 else 's'}, valid offsets 0 to {n - 1}): {len(bad)} of the {active} "
           f"active lanes reach {span}.\n"
           f"  On a GPU this is an illegal memory access or silently corrupts other data. Give the "
           f"access a mask that is False for the lanes outside, e.g. mask=offs < n.")
    raise TritonOutOfBounds(msg, kernel=launch.kernel, argument=origin.name,
                            offsets=np.unique(offs))


def _wrap_access(original, what, ptr_pos, mask_pos):
    def checked(self, *args, **kwargs):
        ptrs = args[ptr_pos]
        mask = args[mask_pos] if mask_pos is not None and len(args) > mask_pos else kwargs.get("mask")
        _check(self, what, ptrs, mask)
        return original(self, *args, **kwargs)
    checked.__wrapped__ = original
    return checked


def _wrap_carrier(original):
    def carried(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
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
    carried.__wrapped__ = original
    return carried


def _wrap_cvt(original):
    def _implicit_cvt(arg):
        out = original(arg)
        launch = getattr(_STATE, "launch", None)
        if launch is not None and hasattr(arg, "data_ptr") and hasattr(out, "handle"):
            a = _describe(arg, launch.names.get(arg.data_ptr(), "a tensor argument"))
            if a is not None:
                launch.args.append(a)
                setattr(out.handle, _TAG, a)
        return out
    _implicit_cvt.__wrapped__ = original
    return _implicit_cvt


def _wrap_executor(original, interp):
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
        _STATE.launch = _Launch(getattr(self.fn, "__name__", "?"), by_ptr, [])
        try:
            return original(self, *args, **kwargs)
        except interp.InterpreterError as e:
            cause = e.__cause__   # a helper @triton.jit function wraps it once more
            while isinstance(cause, interp.InterpreterError):
                cause = cause.__cause__
            if isinstance(cause, TritonOutOfBounds):
                raise cause.with_traceback(cause.__traceback__) from None
            raise
        finally:
            _STATE.launch = outer
    __call__.__wrapped__ = original
    return __call__


def _patch(interp) -> None:
    """Install the checks into the interpreter module ``interp`` (idempotent)."""
    builder = getattr(interp, "InterpreterBuilder", None)
    executor = getattr(interp, "GridExecutor", None)
    missing = [n for n in ("InterpreterBuilder", "GridExecutor", "_implicit_cvt", "InterpreterError")
               if not hasattr(interp, n)]
    missing += [f"InterpreterBuilder.{m}" for m in _ACCESSES if builder and not hasattr(builder, m)]
    if missing:
        import triton
        raise RuntimeError(
            f"The course's bounds check for Triton's interpreter does not know this triton "
            f"({triton.__version__}): its interpreter has no {', '.join(missing)}. Use triton 3.6 to "
            f"3.9, or set {ENV}=0 to run without the check (an out-of-bounds access may then kill "
            f"the Python process).")
    if getattr(interp, "_course_checked", False):
        return
    spec = {"create_masked_load": ("tl.load reads", 0, 1),
            "create_masked_store": ("tl.store writes", 0, 2),
            "create_atomic_cas": ("tl.atomic_cas touches", 0, None),
            "create_atomic_rmw": ("an atomic operation touches", 1, 3)}
    for name, (what, ptr_pos, mask_pos) in spec.items():
        if name in vars(builder):
            setattr(builder, name, _wrap_access(vars(builder)[name], what, ptr_pos, mask_pos))
    for name in _CARRIERS:
        if name in vars(builder):
            setattr(builder, name, _wrap_carrier(vars(builder)[name]))
    interp._implicit_cvt = _wrap_cvt(interp._implicit_cvt)
    executor.__call__ = _wrap_executor(executor.__call__, interp)
    interp._course_checked = True


def install() -> None:
    """Check the interpreter's accesses from now on: now if ``triton.runtime.interpreter`` is
    imported, else when it is (idempotent; ``COURSE_TRITON_CHECK=0`` turns it off)."""
    if os.environ.get(ENV, "1") == "0":
        return
    from .simulator_fix import patch_when_imported
    patch_when_imported(MODULE, _patch)
