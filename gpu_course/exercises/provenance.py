"""Where an answer comes from: the learner's own code, not a library's, the course's, the check's
reference or a function defined inside the check cell (:func:`provenance_problem`, the code running
a check: :func:`check_scopes`); and whether the check's own tools are still the originals
(:func:`rebound`)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from . import guard


_LIBRARIES = ("torch", "triton", "numba", "numba_cuda", "numpy", "builtins", "math", "operator",
              "functools")
_COURSE = ("gpu_course", "utils")


def _top(module: str | None) -> str:
    return (module or "").split(".")[0]


def py_function(obj):
    """The Python function under a kernel object: a Triton JITFunction / InterpretedFunction (also
    under autotune/heuristics wrappers), a Numba dispatcher or simulator kernel, or ``obj``."""
    for _ in range(8):
        inner = getattr(obj, "py_func", None) or getattr(obj, "fn", None)
        if inner is None or inner is obj:
            break
        obj = inner
    return obj


def _module_of(obj) -> str:
    fn = py_function(obj)
    return getattr(fn, "__module__", None) or getattr(obj, "__module__", None) or ""


def name_of(obj) -> str:
    fn = py_function(obj)
    return getattr(fn, "__name__", None) or getattr(obj, "__name__", None) or type(obj).__name__


@dataclass
class _Scope:
    """Lines of one code object: the cell (or function) that runs a check."""
    filename: str
    first: int
    last: int

    def holds(self, obj) -> bool:
        code = getattr(py_function(obj), "__code__", None)
        return (code is not None and code.co_filename == self.filename
                and self.first <= code.co_firstlineno <= self.last)


def _scope(code) -> _Scope:
    lines = [ln for _, _, ln in code.co_lines() if ln]
    return _Scope(code.co_filename, code.co_firstlineno, max(lines, default=code.co_firstlineno))


def _is_cell(filename: str) -> bool:
    return filename.startswith("<ipython-input") or "ipykernel_" in filename


def check_scopes() -> list[_Scope]:
    """The code that is running a check: the caller of the exercise helper and its callers in
    the same file (a test and its helpers), and the notebook cell around them (the ``<module>``
    frame of an IPython cell) if there is one."""
    here = Path(__file__).resolve().parent  # this subpackage
    f = sys._getframe(1)
    while f is not None and (Path(f.f_code.co_filename).resolve().parent == here
                             or f.f_globals.get("__name__") in ("utils", "gpu_course")):
        f = f.f_back
    scopes, g = [], f
    while g is not None and g.f_code.co_filename == f.f_code.co_filename:
        scopes.append(_scope(g.f_code))
        g = g.f_back
    while g is not None:
        if g.f_code.co_name == "<module>" and _is_cell(g.f_code.co_filename):
            scopes.append(_scope(g.f_code))
            break
        g = g.f_back
    return scopes


def provenance_problem(obj, what: str, kind, scopes, reference=None) -> str | None:
    """Why ``obj`` (an answer or a kernel) cannot be the learner's own work for an exercise of ``kind``
    (a :class:`.kinds.Kind`), or None."""
    from .kinds import kind_of
    if reference is not None and obj is reference:
        return (f"that is the reference the check compares with: hand in your own {what}, "
                f"which launches your {kind.label} kernel")
    if not callable(obj):
        return None
    name, module = name_of(obj), _module_of(obj)
    if any(s.holds(obj) for s in scopes):
        return (f"{name} is defined inside the check cell: define it in your own cell above the "
                f"check and hand that in")
    if _top(module) in _COURSE:
        return f"{name} comes from the course package ({module}): write your own {what}"
    if _top(module) in _LIBRARIES:
        return (f"{name} is {module}'s, not yours: the exercise asks for a {what} that launches "
                f"your own {kind.label} kernel")
    other = kind_of(obj)
    if other is not None and other is not kind:
        return (f"{name} is a {other.label} kernel; this exercise asks for a {kind.label} "
                f"kernel, launched as {kind.syntax.format(k='kernel')}")
    return None


def rebound() -> str | None:
    """Why a check cannot be trusted now: a function of torch or of the course was reassigned."""
    name = guard.reassigned()
    if name:
        return (f"{name} is not the original any more (it was reassigned in this session), and the check "
                f"relies on it: restart the kernel and run the notebook again without reassigning it")
    return None
