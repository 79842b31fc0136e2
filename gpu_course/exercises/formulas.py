"""Numbers worked out by hand, asked as formulas: :func:`formula_exercise` tries the learner's
function of the question's parameters on several cases, so a number copied from a stored output
cannot pass, and refuses an answer that calls the function that computes it.

The learner's function runs in a worker process of its own (:func:`_results_elsewhere`: forked before
the check computes anything, one per check), on the visible cases and on cases drawn at random at check
time (:func:`draw_cases`: each parameter taken from another visible case); only its results come back,
and the expected values are computed afterwards, in the check's process: the check's frame holds no
expected value the function could read, a table typed from the visible cases misses the drawn ones, and
in the worker the reference (and each refused helper) is replaced by a function that reports the call, so a
copy of its code made there is a copy of that report."""
from __future__ import annotations

import copy
import math
import os
import pickle
import random
import select
import sys

from ..launch import cdiv  # noqa: F401  (used by the doctest)
from . import guard
from .provenance import check_scopes, name_of, py_function, rebound
from .runner import first_line, hint_note


def formula_exercise(title: str, answer, expected, cases, *, rtol: float = 0.0,
                     hint: str | None = None, labels=None, refuse=()) -> None:
    """Check a number the learner works out, asked as a function of the question's parameters:
    ``answer(*case)`` must equal ``expected(*case)`` for every ``case`` (within ``rtol``). A number
    copied from a stored output cannot pass: it is not a function, and a function returning it
    fails the other cases. ``cases`` needs at least two with different expected values. The
    answers may be any values ``==`` compares (numbers, tuples, sets).

    Refused: not a function, the ``expected`` function itself, a function defined inside the
    check cell, and a function that calls ``expected`` or one of ``refuse`` (the notebook's own
    function that computes the answer: the exercise is to work it out) while it runs. ``labels`` (one string
    per case) name the cases in the messages instead of the arguments' ``repr``, for arguments
    such as functions. ``hint`` is registered for :func:`hint`, never printed here. Never raises.

    >>> blocks = lambda n: cdiv(n, 256)   # the learner's cell
    >>> formula_exercise("blocks of 256 for n items", blocks, lambda n: -(-n // 256),
    ...                  [(1000,), (1_000_000,), (256,)])
    ✅ blocks of 256 for n items: correct
    >>> formula_exercise("blocks of 256 for n items", 3907, lambda n: -(-n // 256), [(1000,), (256,)])
    ❌ blocks of 256 for n items: not yet: give a function of the question's parameters ...
    >>> formula_exercise("blocks of 256 for n items", blocks, lambda n: -(-n // 256),
    ...                  [(1000,), (256,)], refuse=[cdiv])
    ❌ blocks of 256 for n items: not yet: for 1000 it calls cdiv, which computes the answer: work it out yourself
    """
    note = hint_note(title, hint)
    if answer is None:
        print(f"⬜ {title}: not answered yet{note}")
        return
    scopes = check_scopes()
    try:
        _two_answers(expected, cases)   # the expected values are computed again after the worker ran
        if labels is not None and len(labels) != len(cases):
            raise ValueError(f"{len(labels)} labels for {len(cases)} cases")
    except Exception as e:  # noqa: BLE001
        print(f"❌ {title}: the check is set up wrongly ({first_line(e)})")
        return
    names = list(labels) if labels is not None else [_args(c) for c in cases]
    # the check's function and the notebook's helpers are refused as themselves and as copies of their code
    # (made by exec of their source, under another name; see guard.code_keys)
    refused = {c: name_of(f) for f in (expected,) for c in [getattr(py_function(f), "__code__", None)]
               if c is not None}
    refused.update({k: name_of(f) for f in (expected, *refuse)
                    for c in [getattr(py_function(f), "__code__", None)] if c is not None
                    for k in guard.code_keys(c, undocumented=any(f is r for r in refuse))})
    own = getattr(py_function(answer), "__code__", None) if callable(answer) else None
    copy_of = guard.copied_from(own, refused) if own is not None and answer is not expected else None
    rebound_now = rebound()
    if rebound_now:
        why = rebound_now
    elif not callable(answer):
        what = "number" if isinstance(answer, (int, float)) else type(answer).__name__
        why = (f"give a function of the question's parameters (e.g. lambda n: ...), not a {what}: "
               f"the check tries it on other cases")
    elif answer is expected:
        why = "that is the function the check compares with: write your own"
    elif any(answer is f for f in refuse):
        why = f"that is {name_of(answer)}, which computes the answer: work it out yourself"
    elif copy_of is not None:
        why = f"that is a copy of the code of {copy_of}, which computes the answer: work it out yourself"
    elif any(s.holds(answer) for s in scopes):
        why = "that function is defined inside the check cell: define it in your own cell above"
    else:
        why = _judge_cases(answer, expected, list(cases), names, refused, refuse, rtol)
    print(f"✅ {title}: correct" if why is None else f"❌ {title}: not yet: {why}")


DRAWN = 3            # cases drawn at random at check time, besides the visible ones
WORKER_TIMEOUT_S = 60.0


def draw_cases(cases, n: int = DRAWN, rng=None) -> list:
    """``n`` cases drawn at random from the visible ``cases``: each parameter is that parameter of a
    visible case chosen at random, so every value is one the question allows, in combinations the
    learner has not seen (a combination equal to a visible case is drawn again, a few times at most).

    >>> cs = [(1000, 256), (1, 128), (5000, 1024)]
    >>> all(len(c) == 2 and c[0] in (1000, 1, 5000) and c[1] in (256, 128, 1024) for c in draw_cases(cs, 5))
    True
    """
    rng = rng or random.Random(int.from_bytes(os.urandom(8), "little"))
    cases = [tuple(c) for c in cases]
    if not cases or len({len(c) for c in cases}) != 1:
        return []
    seen, out = {repr(c) for c in cases}, []
    for _ in range(20 * n):
        if len(out) >= n:
            break
        c = tuple(rng.choice(cases)[i] for i in range(len(cases[0])))
        if repr(c) not in seen:
            seen.add(repr(c))
            out.append(c)
    return out


def _two_answers(expected, cases) -> None:
    """ValueError unless ``cases`` has at least two cases with different expected values."""
    if len(cases) < 2 or len({repr(expected(*c)) for c in cases}) < 2:
        raise ValueError("formula_exercise needs at least two cases with different answers")


def _judge_cases(answer, expected, cases, names, refused, refuse, rtol) -> str | None:
    """Why the answer is wrong on the visible ``cases`` or on cases drawn at random now, or None; the
    answer's results come from a worker process (or, where one cannot run it, from this one), and the
    expected values are computed only afterwards."""
    drawn = draw_cases(cases)
    every = cases + drawn
    results = _results_elsewhere(answer, every, refused, [expected, *refuse])
    expect = [expected(*c) for c in cases]
    drawn_expect, drawn_names = [], []
    for c in drawn:   # computed only now, after the worker was forked
        try:
            e = expected(*copy.deepcopy(c))
        except Exception:  # noqa: BLE001  a combination the reference does not take
            e = _SKIP
        drawn_expect.append(e)
        drawn_names.append(_describe_case(c))
    for (ok, got, called), e, name in zip(results, list(expect) + drawn_expect, list(names) + drawn_names):
        if e is _SKIP:
            continue
        if not ok:
            return f"for {name} it raised {got}"
        if called:
            return f"for {name} it calls {called}, which computes the answer: work it out yourself"
        try:
            if not rtol:
                good = guard.same(got, e)
            else:
                g, ee = guard.plain(got), guard.plain(e)
                good = (type(g) in (int, float) and type(ee) in (int, float)
                        and (g == ee if math.isinf(g) or math.isinf(ee) else abs(g - ee) <= rtol * abs(ee)))
        except Exception:  # noqa: BLE001  e.g. a tensor, or a type that does not compare
            good = False
        if not good:
            return f"for {name} it gives {got!r}, expected {e!r}"
    return None


_SKIP = object()


def _describe_case(case) -> str:
    def one(v):
        if callable(v):
            return name_of(v)
        shape = getattr(v, "shape", None)
        if shape is not None and hasattr(v, "dtype"):
            return f"a {'×'.join(map(str, shape)) or 'scalar'} {str(v.dtype).replace('torch.', '')} tensor"
        return repr(v)
    return ", ".join(one(v) for v in case)


def _results_here(answer, cases, refused) -> list:
    out = []
    for c in cases:
        try:
            got, called = _call_watching(answer, copy.deepcopy(c), refused)
            out.append((True, copy.deepcopy(got), called))
        except Exception as err:  # noqa: BLE001
            out.append((False, first_line(err), None))
            break
    return out


def _in_process_only(cases) -> bool:
    """Where the worker cannot run the answer: no fork, or a case that runs code (a callable among the
    arguments: what it runs, a profiler's threads say, may wait forever in a forked process) or needs the
    GPU (a CUDA tensor: a forked process cannot use it). There the answer still runs before any expected
    value is computed."""
    if not hasattr(os, "fork"):
        return True
    return any(callable(v) or getattr(getattr(v, "device", None), "type", None) == "cuda"
               for c in cases for v in c)


def _results_elsewhere(answer, cases, refused, reported) -> list:
    """``[(ok, result or the error's first line, refused function called or None)]`` of ``answer`` on each
    case, computed in a forked worker process (one per check) before the check computes any expected
    value; the worker's ``reported`` functions (the reference, the refused helpers) are replaced by
    functions that raise, so calling them, or a copy of their code made there, is reported."""
    if _in_process_only(cases):
        return _results_here(answer, cases, refused)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns
        code = 0
        try:
            os.close(read)
            import io
            sys.stdout = sys.stderr = io.StringIO()   # the learner's prints go nowhere (not to the notebook)
            for f in reported:
                _replace_with_report(f, refused)
            out = _results_here(answer, cases, refused)
            try:
                data = pickle.dumps(out)
            except Exception:  # noqa: BLE001  a result pickle cannot carry
                data = pickle.dumps([(ok, got if not ok else _Unreadable(repr(got)), called)
                                     for ok, got, called in out])
            with os.fdopen(write, "wb") as w:
                w.write(data)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([read], [], [], WORKER_TIMEOUT_S)
            if not ready:
                os.kill(pid, 9)
                return [(False, f"TimeoutError: no result within {WORKER_TIMEOUT_S:.0f} s", None)]
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    try:
        return pickle.loads(b"".join(chunks))
    except Exception as e:  # noqa: BLE001
        return [(False, f"the worker that ran it stopped ({first_line(e)})", None)]


class _Unreadable:
    """A result the worker could not send back: only its repr came (it equals no expected value)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _replace_with_report(f, refused: dict) -> None:
    """In the worker: refused function ``f`` gets code that only raises (its own copy of
    :func:`_report_stub`'s, named after ``f``), added to ``refused``: a call, or a call of a copy of that
    code, is reported by the watch."""
    fn = py_function(f)
    code = getattr(fn, "__code__", None)
    if code is None or code.co_freevars:
        return
    name = refused.get(code) or guard.copied_from(code, refused) or name_of(f)
    stub = _report_stub.__code__.replace(co_name=f"{code.co_name}_refused_{len(refused)}")
    try:
        fn.__code__ = stub
    except Exception:  # noqa: BLE001  a code object that cannot be swapped: the watch still sees its calls
        return
    fn.__globals__.setdefault("_Refused", _Refused)
    refused[stub] = _STUBS[stub.co_name] = name


_STUBS: dict = {}   # in the worker: a stub's name -> the refused function it replaced


class _Refused(Exception):
    """Raised by a refused function in the worker (the watch has reported the call)."""


def _report_stub(*args, **kwargs):
    raise _Refused()


def _call_watching(fn, args, refused: dict):
    """``fn(*args)``, and the name of the first function of ``refused`` ({code: name}) it called
    (directly or not), or None."""
    if not refused:
        return fn(*args), None
    seen = []

    keys: dict = {}

    own = getattr(py_function(fn), "__code__", None)

    def profiler(frame, event, arg):
        if event == "call" and not seen:
            code = frame.f_code
            if code in refused:
                seen.append(refused[code])
                return
            if code is own:
                return
            if code not in keys:
                keys[code] = guard.copied_from(code, refused)
            if keys[code] is not None:
                seen.append(keys[code])
    old = sys.getprofile()
    sys.setprofile(profiler)
    try:
        got = fn(*args)
    except (_Refused, NameError) as e:
        if not seen and not isinstance(e, _Refused):
            raise
        if not seen:   # a stub's code, copied and changed: its frame says whose it was
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            seen.append(_STUBS.get(tb.tb_frame.f_code.co_name, "the function the check compares with"))
        got = None
    finally:
        sys.setprofile(old)
    return got, (seen[0] if seen else None)


def _args(case) -> str:
    return ", ".join(repr(v) for v in case)
