"""The exercise runner and hints: :func:`exercise` checks any answer with a function and prints
one line (never raising, so a notebook with open exercises runs top to bottom); hints are opt-in,
registered by a check and printed by :func:`hint`."""
from __future__ import annotations

from ..launch import cdiv  # noqa: F401  (used by the doctest)
from .provenance import check_scopes, name_of, rebound


_HINTS: dict[str, str] = {}


def exercise(title: str, answer, check, hint: str = "") -> None:
    """Check a learner's ``answer`` with ``check(answer)`` and print one line about it.

    ``check`` says no by returning False or raising (its message is shown); a check that returns
    None counts as passed, so assert-style checks work. An ``answer`` of ``None`` means
    "not attempted yet". A function defined inside the cell that runs the check is refused (the
    answer goes in its own cell above). Never raises itself, so a notebook with open exercises
    still runs top to bottom. ``hint`` is registered for :func:`hint`, never printed here.

    >>> exercise("blocks for 1000 items", 4, lambda a: a == cdiv(1000, 256))
    ✅ blocks for 1000 items: correct
    >>> exercise("blocks for 1000 items", 3, lambda a: a == cdiv(1000, 256), hint="round up")
    ❌ blocks for 1000 items: not yet (utils.hint('blocks for 1000 items') prints a hint)
    """
    note = hint_note(title, hint)
    if answer is None:
        print(f"⬜ {title}: not answered yet{note}")
        return
    why = rebound()
    if why:
        print(f"❌ {title}: not yet: {why}")
        return
    if callable(answer) and any(s.holds(answer) for s in check_scopes()):
        print(f"❌ {title}: not yet: {name_of(answer)} is defined inside the check cell: define it "
              f"in your own cell above the check and hand that in")
        return
    try:
        ok = check(answer)
        why = ""
    except AssertionError as e:  # an assert of the check: its message says what is wrong
        ok, why = False, (str(e).strip().splitlines() or [""])[0] or first_line(e)
    except Exception as e:  # the learner's answer may fail in any way: report, do not raise
        ok, why = False, first_line(e)
    if ok is None or ok:
        print(f"✅ {title}: correct")
    else:
        print(f"❌ {title}: not yet" + (f": {why}" if why else "") + note)


def hint(title: str) -> None:
    """Print the hint of exercise ``title`` (registered when its check cell ran).

    >>> exercise("demo", None, lambda a: True, hint="mask the tail")
    ⬜ demo: not answered yet (utils.hint('demo') prints a hint)
    >>> hint("demo")
    💡 demo: mask the tail
    """
    if title in _HINTS:
        print(f"💡 {title}: {_HINTS[title]}")
    else:
        known = ", ".join(repr(t) for t in _HINTS) or "none yet"
        print(f"no hint for {title!r}: run its check cell first (hints so far: {known})")


def hint_note(title: str, text: str | None) -> str:
    if not text:  # a hint kept out of the notebook, in the package (hints.py), if there is one
        from .hints import HINTS
        text = HINTS.get(title)
    if not text:
        return ""
    _HINTS[title] = text
    return f" (utils.hint({title!r}) prints a hint)"


def first_line(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}".rstrip(": ")
