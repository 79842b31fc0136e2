"""Notebook 03's section 6, measured: the elementwise ladder timed in interleaved rounds (:func:`time_ladder`),
the grid-stride kernel on grids of 1x to 16x the resident blocks (:func:`grid_sweep`) and a pointer chase that
measures the latency of one load (:func:`chase_latency`). The notebook shows the calls and keeps the claims.

Rounds: each function is timed in ``rounds`` rounds, the order reversed every other round (A B C, C B A, ...),
so a drift over the run falls on every row alike; a row's figure is the median of all its runs, and a ratio's
range is the lowest and highest of its per-round ratios (what a claim on "the worst round" reads).

>>> r = interleaved({"ones": lambda: torch.ones(64), "zeros": lambda: torch.zeros(64)}, rounds=2, budget_ms=4)
>>> sorted(r), len(r["ones"].rounds), r["ones"].median > 0
(['ones', 'zeros'], 2, True)
>>> lo, hi = ratio_range(r["ones"], r["ones"]); (lo, hi)
(1.0, 1.0)
"""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

import torch

from ..device_ceilings import throughput
from ..mode import DEVICE, ON_GPU
from ..results import save_result
from ..rounds import interleaved_rounds
from ..timing import Timing, bench, fmt_ms

__all__ = ["Rounds", "interleaved", "ratio_range", "time_ladder", "grid_sweep", "chase_latency", "Latency",
           "random_cycle"]


@dataclass(frozen=True)
class Rounds:
    """One function's timings, one :class:`Timing` per round."""
    rounds: tuple

    @property
    def pooled(self) -> Timing:
        """All rounds' runs as one Timing (its median is the row's figure)."""
        t = self.rounds[0]
        return dataclasses.replace(t, times_ms=tuple(x for r in self.rounds for x in r.times_ms),
                                   method=f"{t.method}; {len(self.rounds)} interleaved rounds")

    @property
    def median(self) -> float:
        return self.pooled.median

    @property
    def medians(self) -> list:
        """Each round's median, ms."""
        return [r.median for r in self.rounds]


def interleaved(fns: dict, rounds: int = 4, budget_ms: float | None = None) -> dict:
    """``{name: Rounds}``: :func:`bench` of each zero-argument function of ``fns`` in ``rounds`` rounds, the
    order reversed every other round, each run with ``budget_ms / rounds`` of run time (300 ms in all on a
    GPU by default; in cpu mode one run a round)."""
    taken = interleaved_rounds(fns, rounds=rounds, budget_ms=budget_ms if budget_ms is not None else 300.0,
                               reps=None if ON_GPU else 1)
    return {name: Rounds(tuple(ts)) for name, ts in taken.items()}


def ratio_range(a: Rounds, b: Rounds) -> tuple:
    """Lowest and highest of ``a``'s time over ``b``'s, round by round (the two timed in the same rounds)."""
    ratios = [x / y for x, y in zip(a.medians, b.medians)]
    return min(ratios), max(ratios)


def _rate(t: Timing, nbytes: int) -> str:
    if not t.on_gpu:
        return ""
    return f"{throughput(t, nbytes=nbytes).pct:4.0f} %"


def time_ladder(notebook: str, size: str, x, out, ops: dict, steps: dict, rounds: int = 4,
                budget_ms: float | None = None) -> dict:
    """Time each step of ``steps`` (``{step: make}``, ``make(op) -> (fn, extra args)``, called as
    ``fn(x, out, *extra)``) and each op's baseline (``ops``: ``{op: (base_name, base_fn)}``, called as
    ``base_fn(x)``), all of one op in the same interleaved rounds; record each row (:func:`save_result`; the
    baseline as ``"<op> <base_name> (ladder)"``) and print one table per op: the time (median of all rounds),
    the useful bytes (a read and a write of ``x``) as a % of the copy rate measured on this GPU, the speed
    against the baseline, and the per-round range of that ratio. Returns ``{(op, step): Rounds}`` with the
    baseline under ``(op, "base")``."""
    nbytes = 2 * x.nbytes
    res = {}
    for op, (base_name, base_fn) in ops.items():
        fns = {"base": lambda f=base_fn: f(x)}
        for step, make in steps.items():
            fn, extra = make(op)
            fns[step] = lambda f=fn, e=extra: f(x, out, *e)
        got = interleaved(fns, rounds=rounds, budget_ms=budget_ms)
        base = got["base"]
        print(f"{op} ({size}, {rounds} interleaved rounds){'' if ON_GPU else '  (CPU: not GPU figures)'}")
        print(f"   {'':<48} {'time':>9} {'% copy':>6}  × {base_name} (rounds' range)")
        for step, r in got.items():
            res[op, step] = r
            name = f"{base_name} (ladder)" if step == "base" else step
            lo, hi = ratio_range(base, r)
            save_result(notebook, f"{op} {name}", size, r.pooled, throughput(r.pooled, nbytes=nbytes) if ON_GPU else None,
                        None if step == "base" else base.pooled, base_name)
            print(f"   {name:<48} {fmt_ms(r.median):>9} {_rate(r.pooled, nbytes):>6}  "
                  f"{base.median / r.median:.2f}× ({lo:.2f}-{hi:.2f})")
    return res


def grid_sweep(notebook: str, size: str, fn, x, out, resident: int, threads: int, factors=(1, 2, 4, 16),
               one_per_float4: int | None = None, rounds: int = 4, budget_ms: float | None = None) -> dict:
    """The grid-stride kernel ``fn(x, out, blocks, threads, 1)`` on grids of ``factor x resident`` blocks (and
    on one thread per float4, ``one_per_float4`` blocks, the reference), in interleaved rounds; one line a
    grid: blocks, float4s per thread, time, and speed against one thread per float4 with its rounds' range.
    Returns ``{label: Rounds}``, the labels ``"1x"``, ``"2x"``, ... and ``"one per float4"``."""
    n4 = x.numel() // 4
    grids = {f"{k}x": k * resident for k in factors}
    if one_per_float4:
        grids["one per float4"] = one_per_float4
    got = interleaved({g: (lambda b=b: fn(x, out, b, threads, 1)) for g, b in grids.items()},
                      rounds=rounds, budget_ms=budget_ms)
    ref = got.get("one per float4")
    print(f"grid-stride kernel, {size}, {threads} threads a block, {resident:,} blocks resident at once"
          f"{'' if ON_GPU else '  (CPU: not GPU figures)'}")
    for g, r in got.items():
        blocks = grids[g]
        vs = ""
        if ref is not None:
            lo, hi = ratio_range(ref, r)
            vs = f"  {ref.median / r.median:.2f}× one thread per float4 ({lo:.2f}-{hi:.2f})"
        label = "one thread per float4" if g == "one per float4" else f"{g} resident"
        save_result(notebook, f"grid-stride {label}", size, r.pooled, throughput(r.pooled, nbytes=2 * x.nbytes)
                    if ON_GPU else None, None if r is ref else (ref.pooled if ref else None), "one thread per float4")
        print(f"   {label:<22} {blocks:>9,} blocks, {n4 / (blocks * threads):6.1f} float4 a thread: "
              f"{fmt_ms(r.median):>9}{vs}")
    return got


def random_cycle(n: int, seed: int = 0, device=DEVICE):
    """``(next, order)``: int32 ``next`` of ``n`` elements holding one cycle through all of them in a random
    order (``next[order[k]] = order[k + 1]``), so following ``next`` from ``order[0]`` for ``s`` steps ends at
    ``order[s % n]``.

    >>> nxt, order = random_cycle(10)
    >>> j = int(order[0])
    >>> for _ in range(13): j = int(nxt[j])
    >>> j == int(order[13 % 10])
    True
    """
    g = torch.Generator(device="cpu").manual_seed(seed)
    order = torch.randperm(n, generator=g).to(device)
    nxt = torch.empty(n, dtype=torch.int32, device=device)
    nxt[order] = order.roll(-1).to(torch.int32)
    return nxt, order


@dataclass(frozen=True)
class Latency:
    """Time per dependent load of a pointer chase over ``nbytes`` of ``next``."""
    ns: float
    nbytes: int
    steps: int
    timing: Timing

    def __str__(self):
        where = f"{self.nbytes / 2**20:,.0f} MiB"
        note = "" if self.timing.on_gpu else "  (CPU emulation: says nothing about a GPU)"
        return f"pointer chase over {where}: {self.ns:,.0f} ns a load ({self.steps:,} loads, one after another){note}"


def chase_latency(chase, nbytes: int, steps: int, reps: int | None = 5, seed: int = 0,
                  l2_flush: bool = False) -> Latency:
    """Run ``chase(next, end, start, steps)`` (notebook 03's ``pointer_chase``: one thread, each load's address
    the value of the one before) over a random cycle of ``nbytes`` of int32, check where it ends, and time it:
    the time per step is the latency of one load from wherever ``nbytes`` of data lives (L2 if it fits, else
    DRAM), with nothing else in flight. Every call starts on a fresh stretch of the cycle (call k at
    ``order[k * steps]``), so a timed run never finds in L2 the lines an earlier run brought there; with
    ``l2_flush`` the L2 is also emptied before each timed run (for a chase meant to miss it)."""
    n = nbytes // 4
    nxt, order = random_cycle(n, seed)
    end = torch.zeros(1, dtype=torch.int32, device=nxt.device)
    chase(nxt, end, int(order[0]), steps)
    if int(end.item()) != int(order[steps % n]):
        raise AssertionError(f"pointer chase: ended at {int(end.item())}, expected {int(order[steps % n])}")
    stretches = max(1, n // steps)
    starts = [int(order[(k % stretches) * steps]) for k in range(1, 1 + min(stretches, 64))]
    calls = iter(range(10 ** 9))

    def fresh_stretch():
        chase(nxt, end, starts[next(calls) % len(starts)], steps)

    t = bench(fresh_stretch, reps=reps, warmup=1, l2_flush=l2_flush)
    return Latency(t.median * 1e6 / steps, nbytes, steps, t)
