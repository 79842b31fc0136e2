"""Numbers worked out by hand, asked as formulas: :func:`formula_exercise` tries the learner's
function of the question's parameters on several cases, so a number copied from a stored output
cannot pass, and refuses an answer that calls the function that computes it."""
from __future__ import annotations

import copy
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
        expect = [expected(*c) for c in cases]
        if len(cases) < 2 or len({repr(e) for e in expect}) < 2:
            raise ValueError("formula_exercise needs at least two cases with different answers")
        if labels is not None and len(labels) != len(cases):
            raise ValueError(f"{len(labels)} labels for {len(cases)} cases")
    except Exception as e:  # noqa: BLE001
        print(f"❌ {title}: the check is set up wrongly ({first_line(e)})")
        return
    names = list(labels) if labels is not None else [_args(c) for c in cases]
    # the check's function is refused as itself; the notebook's helpers also as copies of their code
    refused = {c: name_of(f) for f in (expected,) for c in [getattr(py_function(f), "__code__", None)]
               if c is not None}
    refused.update({guard.code_key(c): name_of(f) for f in refuse
                    for c in [getattr(py_function(f), "__code__", None)] if c is not None})
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
    elif any(s.holds(answer) for s in scopes):
        why = "that function is defined inside the check cell: define it in your own cell above"
    else:
        why = None
        for c, e, name in zip(cases, expect, names):
            try:
                got, called = _call_watching(answer, copy.deepcopy(c), refused)
                got = copy.deepcopy(got)  # judged as returned, whatever happens to it later
            except Exception as err:  # noqa: BLE001
                why = f"for {name} it raised {first_line(err)}"
                break
            if called:
                why = f"for {name} it calls {called}, which computes the answer: work it out yourself"
                break
            try:
                if not rtol:
                    good = guard.same(got, e)
                else:
                    g, ee = guard.plain(got), guard.plain(e)
                    good = (type(g) in (int, float) and type(ee) in (int, float)
                            and abs(g - ee) <= rtol * abs(ee))
            except Exception:  # noqa: BLE001  e.g. a tensor, or a type that does not compare
                good = False
            if not good:
                why = f"for {name} it gives {got!r}, expected {e!r}"
                break
    print(f"✅ {title}: correct" if why is None else f"❌ {title}: not yet: {why}")


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
            key = keys.get(code)
            if key is None:
                key = keys[code] = guard.code_key(code)
            if key in refused:
                seen.append(refused[key])
    old = sys.getprofile()
    sys.setprofile(profiler)
    try:
        got = fn(*args)
    finally:
        sys.setprofile(old)
    return got, (seen[0] if seen else None)


def _args(case) -> str:
    return ", ".join(repr(v) for v in case)
