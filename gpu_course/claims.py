"""Claims that check themselves: a sentence of the prose about a measurement, stated in code
beside the measurement, so that a GPU re-run of the notebook fails where the words stopped being
true.

>>> claim("2 + 2 is 4", 2 + 2 == 4, gpu_only=False)
✓ 2 + 2 is 4
"""
from __future__ import annotations

import os

from .mode import ON_GPU, device_name

# The GPU the notebooks' prose was written against (their stored outputs come from it). There a
# false claim fails the cell; on another GPU it is reported and the notebook goes on, since a T4's
# numbers may rightly differ. COURSE_STRICT_CLAIMS=1 fails on any GPU, =0 on none.
REFERENCE_GPU = "H100"
STRICT_ENV = "COURSE_STRICT_CLAIMS"


def strict(reference: str = REFERENCE_GPU) -> bool:
    """Whether a false GPU claim raises here: on the ``reference`` GPU (the one the prose was written
    against), unless COURSE_STRICT_CLAIMS says otherwise."""
    env = os.environ.get(STRICT_ENV, "")
    if env in ("0", "1"):
        return env == "1"
    return ON_GPU and reference in device_name()


class ClaimFailed(AssertionError):
    """A claim the notebook's prose makes about a measurement is false on this run."""


def claim(statement: str, holds, *, gpu_only: bool = True, evidence: str = "",
          reference: str = REFERENCE_GPU) -> None:
    """Check ``statement`` (a sentence the prose relies on) with ``holds`` and print one line.

    On a GPU, or anywhere when ``gpu_only=False``: prints ``✓ statement`` when ``holds`` is true.
    When it is false it raises :class:`ClaimFailed` on the reference GPU (the H100 the prose was
    written against; see :func:`strict`), so that the cell fails and a GPU re-run with nbval or
    ``course.py execute`` shows which claim drifted; on another GPU it prints ``✗`` and goes on.
    ``evidence`` (e.g. the two numbers compared) is shown with the line. In cpu mode a GPU claim is
    printed as such and not checked. ``reference`` names the GPU of a notebook whose stored outputs
    come from another (notebook 13: two H200s). Returns nothing, so that a claim ending a cell prints
    only its line.

    >>> claim("flushed runs are slower", True, evidence="28.2 µs vs 12.7 µs")  # doctest: +SKIP
    ✓ flushed runs are slower (28.2 µs vs 12.7 µs)
    >>> claim("one is more than two", 1 > 2, gpu_only=False)
    Traceback (most recent call last):
    ...
    gpu_course.claims.ClaimFailed: claim does not hold on this run: one is more than two
    """
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError("claim: the statement must be a sentence (a non-empty string)")
    ok = bool(holds)
    detail = f" ({evidence})" if evidence else ""
    if gpu_only and not ON_GPU:
        print(f"(on a GPU: {statement}. Not checked in cpu mode: it is about the GPU's run.)")
        return
    if not ok:
        if not gpu_only or strict(reference):
            raise ClaimFailed(f"claim does not hold on this run: {statement}{detail}")
        print(f"✗ not on this GPU ({device_name()}): {statement}{detail}. The text was written "
              f"for the {reference} run stored in this notebook.")
        return
    print(f"✓ {statement}{detail}")
