"""Timings taken in alternating rounds, kept round by round: for a claim on the worst round, and for the
rounds' range printed beside a figure (timings one after another drift over a run; interleaved, the drift
falls on every function alike)."""
from __future__ import annotations

from .timing import bench


def bench_rounds(fns: dict, *args, rounds: int = 4, budget_ms: float | None = None) -> dict:
    """:func:`bench` of each of ``fns`` (name -> function) in ``rounds`` rounds, the order reversed every
    other round (A B, B A, ...), ``budget_ms / rounds`` of run time each: ``{name: [Timing of each round]}``.

    >>> import torch
    >>> t = bench_rounds({"ones": torch.ones, "zeros": torch.zeros}, 64, rounds=2, budget_ms=4)
    >>> sorted(t), len(t["ones"])
    (['ones', 'zeros'], 2)
    """
    if rounds < 1:
        raise ValueError(f"bench_rounds: rounds must be >= 1, got {rounds}")
    per_round = None if budget_ms is None else budget_ms / rounds
    taken = {name: [] for name in fns}
    for r in range(rounds):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            taken[name].append(bench(fns[name], *args, budget_ms=per_round))
    return taken


def round_ratios(slow: list, fast: list) -> list:
    """Round by round, the median time of ``slow`` over that of ``fast`` (lists from :func:`bench_rounds`).

    >>> from gpu_course.timing import Timing
    >>> t = lambda ms: Timing((ms,), "t", "cpu", False)
    >>> round_ratios([t(2.0), t(3.0)], [t(1.0), t(2.0)])
    [2.0, 1.5]
    """
    return [a.median / b.median for a, b in zip(slow, fast)]


def fmt_range(values: list, fmt: str = "{:.2f}") -> str:
    """``"1.02 (rounds 0.99-1.05)"``: the median of ``values`` and their range.

    >>> fmt_range([1.0, 1.2, 1.1])
    '1.10× (rounds 1.00-1.20×)'
    """
    s = sorted(values)
    mid = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    return f"{fmt.format(mid)}× (rounds {fmt.format(s[0])}-{fmt.format(s[-1])}×)"
