"""Launching a compiled Triton kernel for less CPU time than ``kernel[grid](...)``.

Before it reaches the driver, ``kernel[grid](*args)`` does per call what only changes when the
arguments' kinds change: it binds the arguments to the signature, specialises each one (a tensor's
dtype and 16-byte alignment, whether an int is 1 or a multiple of 16), hashes a cache key, looks the
compiled kernel up, and builds launch metadata for profiler hooks. In notebook 10's run on an H100
host (Triton 3.6) skipping it saved 18.3 µs of CPU per call of the LayerNorm forward launcher, 63.8
against 45.5 µs (the launcher's Python checks and allocations included), which matters when the kernel
itself takes a few tens of µs: a training step then waits for the CPU.

:class:`Launcher` does that work once per *key* and then calls the compiled kernel's own launcher
(``CompiledKernel.run``, the C function ``kernel[grid]`` ends in) directly. The key is the caller's
promise: two calls with equal keys must specialise alike, so it must name every dtype, every pointer's
alignment and every int's kind that can vary between calls (:func:`int_kind`, :func:`aligned`), or be
left to :func:`spec_key`, which works it out from the arguments. Every Triton kernel the course ships
launches through one (the matmul, the softmax, the means, the attention forward with pointer loads, the
LayerNorm); for an autotuned kernel the key also holds the exact values the autotuner keys on, so a new
autotuning key is tuned as before, and the direct path then launches the configuration it chose.

The direct path is taken only where it is the same launch: on a GPU (the interpreter has no compiled
kernel), with no launch hooks set (profilers such as Proton set them), outside a ``utils.launches``
block (which records what ``kernel[grid]`` sees), and with a Triton whose launcher has the signature it
was written for (3.x: ``run(gridX, gridY, gridZ, stream, function, *args)``). Anywhere else it is
``kernel[grid](...)``.

>>> int_kind(1), int_kind(32), int_kind(33)
('one', 'x16', 'int')
"""
from __future__ import annotations

import functools

import torch

from .interpose import triton as _triton
from .mode import ON_GPU

__all__ = ["Launcher", "int_kind", "aligned", "spec_key", "direct", "through_jit", "direct_allowed"]

_DIRECT = [True]   # False inside through_jit(): every Launcher takes kernel[grid]

_I32_MAX = 2 ** 31 - 1


def int_kind(v: int) -> str:
    """How Triton specialises an int argument: ``'one'`` (compiled in as a constant), ``'x16'`` (a
    multiple of 16: the compiler may assume it), ``'i64'`` (too large for 32 bits), else ``'int'``.

    >>> [int_kind(v) for v in (1, 0, 48, 2 ** 40, 7)]
    ['one', 'x16', 'x16', 'i64', 'int']
    """
    if v == 1:
        return "one"
    if v > _I32_MAX or v < -_I32_MAX - 1:
        return "i64"
    return "x16" if v % 16 == 0 else "int"


def aligned(t: torch.Tensor) -> bool:
    """Whether ``t``'s data starts on a 16-byte boundary (Triton compiles such pointers with wider
    loads; a view that starts mid-row may not). While ``torch.compile`` traces, True without looking:
    Dynamo cannot trace ``data_ptr()`` (a graph break, an error under ``fullgraph=True``), and every
    launch then goes through ``kernel[grid]``, which ignores the key."""
    if torch.compiler.is_compiling():
        return True
    return t.data_ptr() % 16 == 0


class Launcher:
    """``Launcher(kernel)(grid, key, *args, **constexprs)`` launches ``kernel[grid](*args, **constexprs)``;
    after the first call with a given ``key`` (on the current device, with the same constexprs), it
    calls the compiled kernel's launcher directly (see the module docstring).

    ``kernel`` is a ``@triton.jit`` function or a ``triton.autotune`` of one. ``key=None`` lets the launcher
    work the key out itself (:func:`spec_key`: each tensor's dtype and alignment, each int's kind, and the
    exact value of every argument the autotuner keys on); a caller that knows its arguments better passes its
    own (the LayerNorm's launchers do: cheaper, and the C++ node finds the kernels by it). With an autotuner,
    the first call of a key is the autotuner's: it tunes (once per autotuning key, as always) and launches;
    the launcher then keeps the compiled kernel of the configuration it chose, and ``grid``, where it is a
    function of the configuration (``meta``), is evaluated on each call with the arguments and that
    configuration. An autotuner with hooks (``pre_hook``, ``reset_to_zero``, ...) always runs as itself.

    ``args`` are the kernel's runtime arguments in order, ``constexprs`` its trailing ``tl.constexpr``
    parameters by name, plus launch options (``num_warps``, ``num_stages``); a trailing parameter left to
    its default keeps every launch on ``kernel[grid]``. ``direct`` counts the launches that took the direct
    path (tests and notebooks read it)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self._compiled = {}   # (device, key, constexpr values) -> (CompiledKernel, constexpr values in order, meta)
        self.direct = 0
        self.last = None      # the compiled kernel of the latest launch (what kernel[grid] returned), for callers
        self._tuner = hasattr(kernel, "configs") and hasattr(kernel, "fn")   # a triton.autotune
        keys = getattr(kernel, "keys", ()) if self._tuner else ()
        self._exact = frozenset(i for i, n in enumerate(kernel.arg_names) if n in keys)

    def __getitem__(self, grid):
        """``launcher[grid](*args, **constexprs)``: a launch with the key left to :func:`spec_key`, written
        like ``kernel[grid](...)``."""
        return functools.partial(self, grid, None)

    def compiled(self, key, **constexprs):
        """The ``CompiledKernel`` an earlier call with ``key`` and these constexprs (same names, same order,
        on the current device) registered for the direct path, or None."""
        hit = self._compiled.get(self._full_key(key, constexprs)) if ON_GPU else None
        return hit[0] if hit else None

    @staticmethod
    def _full_key(key, constexprs):
        # the device kernel[grid] launches on (torch.cuda.current_device, less Python), the caller's key,
        # the constexprs' values in the order given
        return (torch._C._cuda_getDevice(), key, *constexprs.values())

    def __call__(self, grid, key, *args, **constexprs):
        # While torch.compile traces (an autograd.Function's forward, say), kernel[grid] is what Dynamo
        # knows as a Triton launch; tracing the direct path would guard on the cache's keys, which
        # hold triton dtypes it cannot name (an InternalTorchDynamoError on a GPU).
        if not direct_allowed():
            self.last = self.kernel[grid](*args, **constexprs)
            return self.last
        if key is None:
            key = spec_key(args, self._exact)
            if key is None:                          # an argument it cannot key on: always kernel[grid]
                self.last = self.kernel[grid](*args, **constexprs)
                return self.last
        full = self._full_key(key, constexprs)
        dev = full[0]
        hit = self._compiled.get(full)
        if hit is None:
            ck = self.last = self.kernel[grid](*args, **constexprs)   # tunes, compiles if need be, and launches
            self._register(full, ck, args, constexprs)
            return ck
        ck, tail, meta = hit
        if self._tuner:                              # what the autotuner would say it chose, for readers
            self.kernel.best_config = meta["_config"]
        if callable(grid):                           # grid = f(meta): the arguments and the chosen configuration
            grid = grid(dict(zip(self.kernel.arg_names, args), **meta))
        g = tuple(grid) + (1, 1)
        stream = torch._C._cuda_getCurrentRawStream(dev)
        _triton.run_compiled(ck, g, stream, args + tail)
        self.direct += 1
        self.last = ck
        return ck

    def _register(self, full, ck, args, constexprs):
        """Keep ``ck`` for the direct path of ``full`` where the same launch can be made without
        ``kernel[grid]``: a launcher of the expected signature, every trailing constexpr known, no hooks."""
        if ck is None or not _triton.compiled_launcher_fits(ck):
            return
        consts = dict(constexprs)
        if self._tuner:
            cfg = getattr(self.kernel, "best_config", None)
            if cfg is None or tuner_has_hooks(self.kernel) or getattr(cfg, "pre_hook", None):
                return
            consts.update(cfg.all_kwargs())
            consts["_config"] = cfg
        names = self.kernel.arg_names[len(args):]
        if all(n in consts for n in names):
            self._compiled[full] = (ck, tuple(consts[n] for n in names), consts)


_LAUNCHERS: dict = {}   # id(kernel) -> (kernel, its Launcher), for direct()


def direct(kernel) -> Launcher:
    """The one :class:`Launcher` of ``kernel`` (a ``@triton.jit`` function or an autotuner of one), made on
    first use: ``direct(kernel)[grid](*args, **constexprs)`` launches like ``kernel[grid](...)``, and after
    the first call of a key, without Triton's per-call Python."""
    hit = _LAUNCHERS.get(id(kernel))      # by identity: a kernel's own hash and == are not ours to rely on
    if hit is None or hit[0] is not kernel:
        hit = _LAUNCHERS[id(kernel)] = (kernel, Launcher(kernel))
    return hit[1]


def tuner_has_hooks(tuner) -> bool:
    """Whether a ``triton.autotune`` runs code of its own around each launch (a user's ``pre_hook`` or
    ``post_hook``, ``reset_to_zero``, ``restore_value``): such a launch is never made directly."""
    return bool(getattr(tuner, "user_defined_pre_hook", True) or getattr(tuner, "user_defined_post_hook", True)
                or getattr(tuner, "reset_to_zero", None) or getattr(tuner, "restore_value", None))


def spec_key(args, exact=frozenset()):
    """What Triton specialises and the autotuner keys on, for runtime ``args``: a tensor's dtype and
    16-byte alignment, an int's :func:`int_kind` (its value where its index is in ``exact``: the arguments
    an autotuner keys on), a float's type (its value where in ``exact``), None, a bool or a string as
    itself; None (no key: launch through ``kernel[grid]``) for anything else (a tensor descriptor, say).

    >>> t = torch.zeros(64)
    >>> spec_key((t, 64, 3, 0.5), exact={2})
    ((torch.float32, True), 'x16', 3, <class 'float'>)
    >>> spec_key((t[1:], 1, 3, 0.5))
    ((torch.float32, False), 'one', 'int', <class 'float'>)
    """
    key = []
    for i, a in enumerate(args):
        kind = type(a)
        if kind is torch.Tensor or isinstance(a, torch.Tensor):
            key.append((a.dtype, a.data_ptr() % 16 == 0))
        elif kind is int:
            key.append(a if i in exact else int_kind(a))
        elif kind is float:
            key.append(a if i in exact else float)
        elif a is None or kind in (bool, str):
            key.append(a)
        else:
            return None
    return tuple(key)


def direct_allowed() -> bool:
    """Whether a launch may bypass ``kernel[grid]`` here and now (the module docstring's conditions):
    on a GPU, not while ``torch.compile`` traces, outside :class:`through_jit`, a ``utils.launches``
    block and launch hooks."""
    return not torch.compiler.is_compiling() and ON_GPU and _DIRECT[0] and not _triton.listening("launch", "launched") \
        and not _triton.launch_hooks_set()


class through_jit:
    """``with through_jit():`` every :class:`Launcher` launches through ``kernel[grid](...)``, as if it
    had no direct path: what a launch costs without it, for comparisons.

    >>> with through_jit():
    ...     _DIRECT[0]
    False
    """

    def __enter__(self):
        self._was = _DIRECT[0]
        _DIRECT[0] = False
        return self

    def __exit__(self, *exc):
        _DIRECT[0] = self._was
