"""What a check relies on, kept out of the learner's reach: the course's and torch's functions as
they were at import (a check refuses to judge once one of them was reassigned), the evidence the
course made (a function that only looks like ``utils.grid_is(...)`` is refused), plain values
(an object whose ``==`` says yes to everything is not a number), and refused helpers recognised
by their code, not by their identity (a copy made with ``exec`` is still the helper).

>>> plain(3), plain((1, 2.5)), plain({"a"})
(3, (1, 2.5), frozenset({'a'}))
>>> class Yes(int):
...     def __eq__(self, other): return True
>>> plain(Yes(1))
Traceback (most recent call last):
...
TypeError: a Yes, not a plain value (a number, a string, a tuple, list, set or dict of them)
"""
from __future__ import annotations

import sys
import sysconfig
import types
import weakref

import torch

_WATCHED = ("torch", "torch.nn.functional", "torch.library", "torch.autograd", "torch.testing",
            "gpu_course", "gpu_course.checking", "gpu_course.launches", "gpu_course.launch",
            "gpu_course.exercises", "gpu_course.exercises.runner", "gpu_course.exercises.provenance",
            "gpu_course.exercises.judging", "gpu_course.exercises.evidence", "gpu_course.exercises.formulas",
            "gpu_course.exercises.watching", "gpu_course.exercises.replay", "gpu_course.timing", "gpu_course.user_timing",
            "gpu_course.launch_records", "gpu_course.module_launches", "gpu_course.exercises.problem",
            "gpu_course.exercises.kinds", "gpu_course.exercises.kinds.python_code", "gpu_course.exercises.kinds.triton",
            "gpu_course.exercises.kinds.numba", "gpu_course.exercises.kinds.cuda", "gpu_course.exercises.kinds.helion",
            "gpu_course.exercises.host_torch")
_CLASSES = (torch.Tensor,)
_AT_IMPORT: dict[tuple, object] = {}
_GENUINE: "weakref.WeakSet" = weakref.WeakSet()


def _spaces():
    for name in _WATCHED:
        mod = sys.modules.get(name)
        if mod is not None:
            yield name, vars(mod)
    for cls in _CLASSES:
        yield f"{cls.__module__}.{cls.__qualname__}".replace("torch._tensor.Tensor", "torch.Tensor"), vars(cls)


def _callable(v) -> bool:
    return callable(v) or isinstance(v, (staticmethod, classmethod))


def remember() -> None:
    """Record the public functions of torch and of the course as they are now (at import)."""
    for where, space in _spaces():
        for k, v in list(space.items()):
            if not k.startswith("_") and _callable(v) and (where, k) not in _AT_IMPORT:
                _AT_IMPORT[(where, k)] = v


def reassigned() -> str | None:
    """``"torch.relu"`` if a recorded function was reassigned since import (also through
    ``utils``, which shares the course's functions), else None."""
    remember()  # modules imported since (e.g. gpu_course.timing) join the record
    for (where, k), v in _AT_IMPORT.items():
        mod = sys.modules.get(where)
        space = vars(mod) if mod is not None else next((s for w, s in _spaces() if w == where), None)
        if space is not None and k in space and space[k] is not v and _users(space[k]):
            return f"{where}.{k}"
    utils = sys.modules.get("utils")
    course = sys.modules.get("gpu_course")
    if utils is not None and course is not None and getattr(utils, "__file__", "").endswith("utils.py"):
        for k in getattr(course, "__all__", ()):
            if k in vars(utils) and vars(utils)[k] is not vars(course).get(k, vars(utils)[k]) \
                    and _users(vars(utils)[k]):
                return f"utils.{k}"
    return None


_LIBRARY_DIRS = tuple({str(p) for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                         sysconfig.get_paths()["stdlib"])})


def _users(value) -> bool:
    """Whether ``value`` (what now stands where a recorded function stood) is the user's code, not
    a library's: libraries wrap torch's functions for their own reasons (a test runner, a profiler),
    a learner's cell or module replaces them to fool a check."""
    fn = getattr(value, "__func__", value)
    code = getattr(fn, "__code__", None)
    if code is None:
        return not callable(value)  # a non-function object put there (or a C function: a library's)
    return not code.co_filename.startswith(_LIBRARY_DIRS)


def genuine(fn):
    """Mark ``fn`` as evidence the course made (see :func:`is_genuine`)."""
    _GENUINE.add(fn)
    return fn


def is_genuine(fn) -> bool:
    try:
        return fn in _GENUINE
    except TypeError:
        return False


_NUMBERS = (bool, int, float)


def plain(x, _depth=0):
    """``x`` as a plain value (numbers, strings, None, and tuples, lists, sets and dicts of them;
    NumPy scalars as Python numbers; a set as a frozenset), or TypeError: the exact type of each
    part is checked, so a subclass with its own ``==`` is refused."""
    if _depth > 20:
        raise TypeError("a value nested too deeply")
    t = type(x)
    if x is None or t in _NUMBERS or t is str:
        return x
    np = sys.modules.get("numpy")
    if np is not None and t.__module__ == "numpy" and isinstance(x, np.generic) and t is not np.object_:
        return plain(x.item(), _depth + 1)
    if t is tuple or t is list:
        return t(plain(v, _depth + 1) for v in x)
    if t is set or t is frozenset:
        return frozenset(plain(v, _depth + 1) for v in x)
    if t is dict:
        return {plain(k, _depth + 1): plain(v, _depth + 1) for k, v in x.items()}
    raise TypeError(f"a {t.__name__}, not a plain value (a number, a string, a tuple, list, set or dict "
                    f"of them)")


def same(got, expected) -> bool:
    """``got`` equals ``expected``, judged by ``expected``'s type: plain values part by part with
    exact types (1 == 1.0 is allowed, True is not 1); any other expected value (a course object,
    such as a ``dim3``) only by an object of exactly its type, with its own ``==``."""
    try:
        e = plain(expected)
    except TypeError:
        return type(got) is type(expected) and bool(type(expected).__eq__(expected, got) is True)
    g = plain(got)
    return _same_plain(g, e)


def _same_plain(g, e) -> bool:
    if type(e) is bool or type(g) is bool:
        return type(g) is type(e) and g == e
    if type(e) in (int, float):
        return type(g) in (int, float) and g == e
    if type(e) is not type(g):
        return False
    if type(e) in (tuple, list):
        return len(g) == len(e) and all(_same_plain(a, b) for a, b in zip(g, e))
    if type(e) is dict:
        return set(g) == set(e) and all(_same_plain(g[k], e[k]) for k in e)
    return g == e  # str, None, frozenset of plain values


_NOT_CODE = {"RESUME", "NOP", "CACHE", "EXTENDED_ARG", "PRECALL"}
# A function this long is not written again instruction for instruction by chance: a copy of its code is
# refused under any names, with or without its docstring. A shorter one (a formula on one line) may be
# exactly what a learner who worked it out writes: only a verbatim copy of it (its docstring too) is refused.
COPY_MIN_INSTRUCTIONS = 40


def _shape(code: types.CodeType) -> tuple:
    """The instructions of ``code`` with what they use: constants by value (a docstring, which no
    instruction loads, is left out), global and attribute names as written, locals by their slot (renamed
    locals read the same), nested code by its own shape."""
    import dis
    out, every = [], list(dis.get_instructions(code))
    at, n = {}, 0   # an instruction's offset -> the index of the next one kept (jump targets: no offsets)
    for ins in every:
        at[ins.offset] = n
        n += ins.opname not in _NOT_CODE
    for ins in every:
        if ins.opname in _NOT_CODE:
            continue
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            arg = at.get(ins.argval, ins.argval)
        elif ins.opcode in dis.hasconst:
            v = ins.argval
            arg = _shape(v) if isinstance(v, types.CodeType) else (type(v).__name__, repr(v))
        elif ins.opcode in dis.haslocal or ins.opcode in dis.hasfree:
            arg = ins.arg
        elif ins.opcode in dis.hasname:
            arg = ins.argval
        else:
            arg = ins.argval if isinstance(ins.argval, (int, str, tuple, type(None))) else repr(ins.argval)
        out.append(({"LOAD_METHOD": "LOAD_ATTR"}.get(ins.opname, ins.opname), arg))
    return (code.co_argcount, code.co_kwonlyargcount, tuple(out))


def _size(shape: tuple) -> int:
    return sum(1 + (_size(a[1]) if isinstance(a[1], tuple) and len(a[1]) == 3 and isinstance(a[1][2], tuple)
                    and a[0] == "LOAD_CONST" else 0) for a in shape[2])


def code_key(code: types.CodeType):
    """What makes two code objects the same code, wherever and however they were made (a copy made by
    ``exec`` of the same source, under another name, has an equal key): the instructions with their
    constants and names (see :func:`_shape`), the local names and the docstring, nested code included."""
    doc = code.co_consts[0] if code.co_consts and isinstance(code.co_consts[0], str) else None
    return ("verbatim", _shape(code), code.co_varnames, doc)


def code_keys(code: types.CodeType, undocumented: bool = True) -> list:
    """The keys under which a copy of ``code`` is known: :func:`code_key` (a verbatim copy; with
    ``undocumented`` False only where the code has a docstring: a short lambda without one may be what a
    learner writes on their own, names and all), and, for code of at least COPY_MIN_INSTRUCTIONS
    instructions, its shape alone (a copy renamed, its docstring removed)."""
    shape = _shape(code)
    key = code_key(code)
    keys = [key] if undocumented or key[3] is not None else []
    if _size(shape) >= COPY_MIN_INSTRUCTIONS:
        keys.append(("shape", shape))
    return keys


def copied_from(code: types.CodeType, known: dict):
    """``known[key]`` for the first key of ``code`` (see :func:`code_keys`) in ``known``, else None."""
    for k in code_keys(code):
        if k in known:
            return known[k]
    return None
