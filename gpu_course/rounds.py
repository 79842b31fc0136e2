"""Timings taken in alternating rounds, kept round by round: :func:`interleaved_rounds` times several
functions A B C, C B A, ... so that a drift over the run (the GPU's clock, its temperature, other work) falls on all
of them alike; :func:`round_ratios` gives one ratio per round, whose range a claim can quote and bound;
:func:`pooled` joins one function's rounds into one :class:`~gpu_course.timing.Timing`. (Notebook 07's
``matmul_sweep.bench_interleaved`` pools its rounds at once.)
"""
from __future__ import annotations

import statistics

from .timing import Timing, bench


def interleaved_rounds(fns: dict, rounds: int = 6, budget_ms: float | None = None, timer=bench,
                       **bench_kwargs) -> dict:
    """:func:`bench` each of ``fns`` (name -> function of no arguments) once per round, the order
    reversed every other round (A B C, C B A, ...), ``budget_ms / rounds`` of run time each time
    (``bench_kwargs``, such as ``l2_flush=True``, go to each :func:`bench`, or to ``timer`` in its place);
    return name -> the list of each round's :class:`Timing`. A drift over the run then falls on
    every function alike, and the rounds' spread is there to read.

    >>> import torch
    >>> r = interleaved_rounds({"ones": lambda: torch.ones(64), "zeros": lambda: torch.zeros(64)}, rounds=2,
    ...                        budget_ms=4)
    >>> sorted(r), len(r["ones"])
    (['ones', 'zeros'], 2)
    """
    if rounds < 1:
        raise ValueError(f"interleaved_rounds: rounds must be >= 1, got {rounds}")
    per_round = None if budget_ms is None else budget_ms / rounds
    taken = {name: [] for name in fns}
    for r in range(rounds):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            taken[name].append(timer(fns[name], budget_ms=per_round, **bench_kwargs))
    return taken


def pooled(timings: list, note: str | None = None) -> Timing:
    """One :class:`Timing` holding all the runs of ``timings`` (the rounds of one function); its CPU time per
    call the median of the rounds'; ``note`` (default ``"N rounds"``) ends its method.

    >>> pooled([Timing((1.0, 2.0), "m", "d", False), Timing((3.0,), "m", "d", False)]).median
    2.0
    """
    first = timings[0]
    cpu = [t.launch_ms for t in timings if t.launch_ms is not None]
    return Timing(tuple(x for t in timings for x in t.times_ms),
                  f"{first.method}; {note or f'{len(timings)} rounds'}",
                  first.device, first.on_gpu, statistics.median(cpu) if cpu else None)


def pooled_user(timings: list):
    """One :class:`~gpu_course.user_timing.UserTiming` of the rounds of one function: the GPU runs
    :func:`pooled`, the loop and CPU figures the medians of the rounds' (a single round as it is)."""
    from .user_timing import UserTiming
    if len(timings) == 1:
        return timings[0]
    return UserTiming(pooled([t.gpu for t in timings]), statistics.median(t.loop_ms for t in timings),
                      statistics.median(t.cpu_ms for t in timings))


def round_ratios(slow: list, fast: list) -> list:
    """Per round, ``slow``'s median time over ``fast``'s (two lists of :class:`Timing`, one per round).

    >>> round_ratios([Timing((2.0,), "m", "d", False)], [Timing((1.0,), "m", "d", False)])
    [2.0]
    """
    return [s.median / f.median for s, f in zip(slow, fast)]


def bench_rounds(fns: dict, *args, rounds: int = 4, budget_ms: float | None = None) -> dict:
    """:func:`interleaved_rounds` of functions that all take the same ``args``.

    >>> import torch
    >>> t = bench_rounds({"ones": torch.ones, "zeros": torch.zeros}, 64, rounds=2, budget_ms=4)
    >>> sorted(t), len(t["ones"])
    (['ones', 'zeros'], 2)
    """
    return interleaved_rounds({name: (lambda f=f: f(*args)) for name, f in fns.items()}, rounds=rounds,
                              budget_ms=budget_ms)


def fmt_range(values: list, fmt: str = "{:.2f}") -> str:
    """``"1.10× (rounds 1.00-1.20×)"``: the median of ``values`` (ratios) and their range.

    >>> fmt_range([1.0, 1.2, 1.1])
    '1.10× (rounds 1.00-1.20×)'
    """
    s = sorted(values)
    mid = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    return f"{fmt.format(mid)}× (rounds {fmt.format(s[0])}-{fmt.format(s[-1])}×)"
