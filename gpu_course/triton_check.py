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

How: :mod:`gpu_course.interpose.triton` (which owns every patch point of Triton) tags the address
of each tensor argument with the argument (its name and storage's byte range), follows the tag
through pointer arithmetic and shape ops, and emits an ``access`` event before each load, store and
atomic of the interpreter; :func:`install` subscribes :func:`check_access` to it, which checks the
active lanes (those the mask leaves on) against the storage of the tensor the pointer came from, or,
where the origin is lost (a pointer made from an integer, say), against all the tensor arguments.
The cost is a few numpy reductions per access.

:func:`install` subscribes when ``triton.runtime.interpreter`` is imported (or now, if it is);
``mode`` calls it in cpu mode. A triton whose interpreter lacks the hook points makes the install
raise a clear error (``COURSE_TRITON_CHECK=0`` skips it).
"""
from __future__ import annotations

import linecache
import os
import sys
from pathlib import Path

import numpy as np

from .interpose import UnknownVersion
from .interpose import triton as _triton

ENV = "COURSE_TRITON_CHECK"


class TritonOutOfBounds(IndexError):
    """A Triton kernel, run by the interpreter, accessed memory outside the tensors it was given.
    ``kernel``, ``argument`` and ``offsets`` (element offsets from the argument's first element)
    say which."""

    def __init__(self, message, kernel=None, argument=None, offsets=None):
        super().__init__(message)
        self.kernel, self.argument, self.offsets = kernel, argument, offsets


def _learner_line() -> str:
    """``line N: text`` of the innermost frame outside triton and this module (the kernel's)."""
    skip = (str(Path(__file__).resolve()), str(Path(_triton.__file__).resolve().parent))
    triton_mod = sys.modules.get("triton")
    triton_dir = str(Path(triton_mod.__file__).parent) if triton_mod else None
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(skip) and not (triton_dir and fn.startswith(triton_dir)) and "numpy" not in fn:
            text = linecache.getline(fn, f.f_lineno).strip()
            return f"line {f.f_lineno}" + (f": {text}" if text else "")
        f = f.f_back
    return ""


def _itemsize(handle) -> int:
    ty = handle.dtype
    while hasattr(ty, "element_ty"):
        ty = ty.element_ty
    return max(1, getattr(ty, "primitive_bitwidth", 8) // 8)


def check_access(ev) -> None:
    """Raise TritonOutOfBounds if an active lane of an ``access`` event's pointers reaches outside
    its tensor (the handler :func:`install` subscribes)."""
    launch, builder, what, ptrs, mask = ev.launch, ev.builder, ev.what, ev.ptrs, ev.mask
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
    origin = ev.origin
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


_SUBSCRIPTION = []


def check_interpreter(interp) -> None:
    """Raise RuntimeError if the interpreter module ``interp`` lacks the hook points the check needs."""
    try:
        _triton.check_interpreter(interp)
    except UnknownVersion as e:
        raise RuntimeError(f"The course's bounds check for Triton's interpreter: {e}. Use triton 3.6 to 3.9, "
                           f"or set {ENV}=0 to run without the check (an out-of-bounds access may then kill "
                           f"the Python process).") from None


def install() -> None:
    """Check the interpreter's accesses from now on: now if ``triton.runtime.interpreter`` is
    imported, else when it is (idempotent; ``COURSE_TRITON_CHECK=0`` turns it off)."""
    if os.environ.get(ENV, "1") == "0" or _SUBSCRIPTION:
        return
    interp = sys.modules.get(_triton.INTERPRETER)
    if interp is not None:
        check_interpreter(interp)
    try:
        _SUBSCRIPTION.append(_triton.subscribe("access", check_access))
    except UnknownVersion as e:
        raise RuntimeError(f"The course's bounds check for Triton's interpreter: {e}. Set {ENV}=0 to run "
                           f"without the check.") from None
