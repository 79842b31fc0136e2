"""Claims that check themselves: a sentence of the prose about a measurement, stated in code
beside the measurement, so that a GPU re-run of the notebook fails where the words stopped being
true.

Two kinds: :func:`claim` for a sentence about the GPU's run (checked on a GPU, printed unchecked in
cpu mode) and :func:`claim_everywhere` for one that holds in every mode (about a tool, an error, a
count), checked wherever it runs.

>>> claim_everywhere("2 + 2 is 4", 2 + 2 == 4)
✓ 2 + 2 is 4
"""
from __future__ import annotations

import os

from . import session
from .hardware import CC_ENV, PROFILE_ENV
from .mode import ON_GPU, device_name

# Where a false GPU claim fails the cell: on the exact GPU this notebook's stored outputs come from
# (its metadata's ``outputs_from``, which the prose discusses), and while ``course.py execute`` makes
# new stored outputs. Elsewhere (a T4, an H100 PCIe beside an SXM's outputs) it is reported with ✗
# and the notebook goes on: another GPU's numbers may rightly differ. COURSE_STRICT_CLAIMS=1 fails on
# any GPU, =0 on none.
STRICT_ENV = "COURSE_STRICT_CLAIMS"
SAVE_ENV = "COURSE_SAVE_RESULTS"   # set by `course.py execute` (see results.saving_results)


def strict(env=None, device: str | None = None, stored: str | None = None) -> bool:
    """Whether a false GPU claim raises here. ``device`` is this GPU's name, ``stored`` the one the
    running notebook's stored outputs record (:func:`session.stored_device`); both default to the
    running ones. Never while the GPU acts as another (``COURSE_GPU_PROFILE``, ``COURSE_FAKE_CC``): the
    prose's figures are this GPU's, the guards then another's.

    >>> strict({}, "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    True
    >>> strict({}, "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3")   # same chip name, another GPU
    False
    >>> strict({"COURSE_SAVE_RESULTS": "1"}, "NVIDIA H200", "NVIDIA H100 80GB HBM3")  # storing anew
    True
    >>> strict({"COURSE_STRICT_CLAIMS": "0"}, "NVIDIA H200", "NVIDIA H200")
    False
    >>> strict({"COURSE_GPU_PROFILE": "t4", "COURSE_SAVE_RESULTS": "1"}, "NVIDIA H200", "NVIDIA H200")
    False
    """
    env = os.environ if env is None else env
    if env.get(STRICT_ENV, "") in ("0", "1"):
        return env[STRICT_ENV] == "1"
    if env.get(PROFILE_ENV) or env.get(CC_ENV):   # acting as another GPU: its figures are not this one's
        return False
    if env.get(SAVE_ENV) == "1":
        return True
    if device is None:
        if not ON_GPU:
            return False
        device = device_name()
    if stored is None:
        stored = session.stored_device(session.current_notebook())
    return bool(stored) and device == stored


class ClaimFailed(AssertionError):
    """A claim the notebook's prose makes about a measurement is false on this run."""


def _check_statement(statement) -> None:
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError("claim: the statement must be a sentence (a non-empty string)")


def claim(statement: str, holds, *, evidence: str = "") -> None:
    """Check ``statement`` (a sentence the prose relies on, about the GPU's run) with ``holds`` and
    print one line.

    On a GPU: prints ``✓ statement`` when ``holds`` is true. When it is false it raises
    :class:`ClaimFailed` where :func:`strict` says so (the GPU the notebook's stored outputs come
    from), so that the cell fails and a GPU re-run with nbval or ``course.py execute`` shows which
    claim drifted; on another GPU it prints ``✗`` and goes on. ``evidence`` (e.g. the two numbers
    compared) is shown with the line. In cpu mode the claim is printed as such and not checked.
    Returns nothing, so that a claim ending a cell prints only its line.

    >>> claim("flushed runs are slower", True, evidence="28.2 µs vs 12.7 µs")  # doctest: +SKIP
    ✓ flushed runs are slower (28.2 µs vs 12.7 µs)
    """
    _check_statement(statement)
    if not ON_GPU:
        print(f"(on a GPU: {statement}. Not checked in cpu mode: it is about the GPU's run.)")
        return
    detail = f" ({evidence})" if evidence else ""
    if bool(holds):
        print(f"✓ {statement}{detail}")
        return
    if strict():
        raise ClaimFailed(f"claim does not hold on this run: {statement}{detail}")
    stored = session.stored_device(session.current_notebook())
    written = f"the run on {stored} stored in this notebook" if stored else "the run stored in this notebook"
    print(f"✗ not on this GPU ({device_name()}): {statement}{detail}. The text was written for {written}.")


def claim_everywhere(statement: str, holds, *, evidence: str = "") -> None:
    """Check ``statement``, a sentence that holds in every mode (about a tool, an error, a count, an
    exact result), and print ``✓ statement``; raise :class:`ClaimFailed` where it is false, on any
    machine.

    >>> claim_everywhere("one is more than two", 1 > 2)
    Traceback (most recent call last):
    ...
    gpu_course.claims.ClaimFailed: claim does not hold on this run: one is more than two
    """
    _check_statement(statement)
    detail = f" ({evidence})" if evidence else ""
    if not bool(holds):
        raise ClaimFailed(f"claim does not hold on this run: {statement}{detail}")
    print(f"✓ {statement}{detail}")
