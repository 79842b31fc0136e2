"""Notebook 04's timings: this run's ceilings, lecture 5's kernels, and the fp32 ladder against cuBLAS in one run,
with the variants that test the notebook's explanations (rung 5 asked for two blocks per SM, rung 9's cfg 4 fed a
pre-transposed ``m``), and the claims the prose relies on. The notebook shows the calls and their printed lines."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ...checking import check, dot_tol, poisoned
from ...claims import claim
from ...device_ceilings import ceilings
from ...mode import DEVICE, ON_GPU, device_name
from ...results import report
from ...roofline import reference_ceilings
from ...rounds import interleaved_rounds
from ...timing import bench, fmt_ms

CUBLAS = "cuBLAS fp32 (TF32 off)"


def flops(h: int, w: int, k: int) -> int:
    """FLOP of ``out = m @ n`` for m h x k, n k x w: one multiply and one add per term.

    >>> flops(5120, 5120, 256)
    13421772800
    """
    return 2 * h * w * k


def run_ceilings() -> tuple:
    """``(ceilings, where)``: on a GPU measured now, in this run (copy bandwidth in GB/s, cuBLAS's matmul rates in
    TFLOP/s at 8192³; ``report`` then gives its "% of" lines against these); in cpu mode the stored ones of the
    first GPU in ``results/ceilings.json`` (None if there are none), labelled as such."""
    if ON_GPU:
        return ceilings(refresh=True), f"{device_name()}, measured in this run"
    return reference_ceilings(), "a stored GPU run, not this machine"


def round_medians(fns: dict, *args, rounds: int = 5, budget_ms: float | None = None, timer=bench) -> dict:
    """The median time (ms) of each of ``fns`` (name -> function of ``args``) in each of ``rounds`` rounds, the
    order reversed every other round (A B, B A, ...), so that a drift over the run falls on all alike: ``{name:
    [ms of round 1, ...]}``. ``budget_ms``: run time of all rounds together (None: ``timer``'s default per call).

    >>> r = round_medians({"ones": torch.ones, "zeros": torch.zeros}, 64, rounds=2, budget_ms=4)
    >>> sorted(r), len(r["ones"])
    (['ones', 'zeros'], 2)
    """
    per_function = None if budget_ms is None else budget_ms / len(fns)
    calls = {name: (lambda f=f: f(*args)) for name, f in fns.items()} if args else fns
    taken = interleaved_rounds(calls, rounds=rounds,
                               budget_ms=per_function, timer=timer)
    return {name: [t.median for t in ts] for name, ts in taken.items()}


def ratio_rounds(rounds: dict, num: str, den: str) -> list:
    """Per round, ``rounds[num] / rounds[den]`` (e.g. cuBLAS's time over a kernel's: the kernel's speed as a
    fraction of cuBLAS's).

    >>> ratio_rounds({"a": [2.0, 3.0], "b": [1.0, 2.0]}, "a", "b")
    [2.0, 1.5]
    """
    return [a / b for a, b in zip(rounds[num], rounds[den])]


def time_kernels(kernels: dict, size: str, shape: tuple, notebook: str, baseline) -> dict:
    """Time each of ``kernels`` (report name -> function of no arguments) with ``bench`` and print its line with
    ``report`` (rate, ratio to ``baseline``, a Timing of cuBLAS on the same shape ``(h, w, k)``): ``{name: Timing}``."""
    out = {}
    for name, fn in kernels.items():
        out[name] = t = bench(fn)
        report(notebook, name, size, t, baseline=baseline, flops=flops(*shape), baseline_name="cuBLAS fp32")
    return out


@dataclass
class LadderRun:
    """One run of the ladder: ``rows`` (kernel, size, TFLOP/s, ratio to cuBLAS) for the table and plots; ``ms``:
    ``(size, key) -> median ms``, key a rung number or one of the variants (``"5 two blocks"``, ``"9 cfg 4"``,
    ``"9 mt"``, ``"10 two stages"``, ``"transpose"``, ``"10 row order"``, ``"cuBLAS"``); ``rounds``: size ->
    ``{"last rung": [ms...], "cuBLAS": [ms...]}``, the two timed in alternating rounds."""
    rows: list = field(default_factory=list)
    ms: dict = field(default_factory=dict)
    rounds: dict = field(default_factory=dict)


def time_ladder(mod, sizes: dict, rungs: dict, tuned: dict, notebook: str, rounds: int = 5) -> LadderRun:
    """Time cuBLAS, every rung of ``rungs`` (rung 9 in the cfg ``tuned[size]``) and the variants on each of
    ``sizes`` (name -> (h, w, k)), printing a ``report`` line each; then the last rung and cuBLAS again in
    ``rounds`` alternating rounds. Rung 8 and the variants are checked against ``m @ n`` first (the autotuner
    checked rung 9's shapes). Needs a GPU (the emulation's times say nothing about one)."""
    run, last = LadderRun(), max(rungs)
    for size, (h, w, k) in sizes.items():
        m, n = torch.randn(h, k, device=DEVICE), torch.randn(k, w, device=DEVICE)
        o, ref, fl = torch.empty(h, w, device=DEVICE), m @ n, flops(h, w, k)
        variants = {"5 two blocks": (f"{rungs[5]}, __launch_bounds__(256, 2)", mod.matmul_rung_cfg, (5, 1)),
                    "9 cfg 4": ("rung 9 cfg 4 (256x128 blocks)", mod.matmul_rung_cfg, (9, 4)),
                    "9 mt": ("rung 9 cfg 4 fed m transposed first", mod.matmul_rung9_mt, ())}
        check(mod.matmul_rung(m, n, poisoned(h, w), 8), ref, **dot_tol(k), name=f"rung 8 at {size}")
        for key, (name, fn, extra) in variants.items():
            check(fn(m, n, poisoned(h, w), *extra), ref, **dot_tol(k), name=f"{name} at {size}")
        t_cublas = bench(torch.matmul, m, n, out=o)
        run.ms[size, "cuBLAS"] = t_cublas.median
        report(notebook, CUBLAS, size, t_cublas, flops=fl)
        for rung, name in rungs.items():
            args = (m, n, o, 9, tuned[size]) if rung == 9 else (m, n, o, rung)
            t = bench(mod.matmul_rung_cfg if rung == 9 else mod.matmul_rung, *args)
            run.ms[size, rung] = t.median
            report(notebook, name, size, t, baseline=t_cublas, flops=fl, baseline_name="cuBLAS fp32")
            run.rows.append(dict(kernel=name, size=size, tflops=fl / t.median / 1e9, vs=t_cublas.median / t.median))
        run.rows.append(dict(kernel=CUBLAS, size=size, tflops=fl / t_cublas.median / 1e9, vs=1.0))
        for key, (name, fn, extra) in variants.items():
            t = bench(fn, m, n, o, *extra)
            run.ms[size, key] = t.median
            report(notebook, name, size, t, baseline=t_cublas, flops=fl, baseline_name="cuBLAS fp32")
        if 10 in rungs:   # rung 10 with two stages, its transposition alone, in row order
            run.ms[size, "10 two stages"] = bench(mod.matmul_rung_cfg, m, n, o, 10, 1).median
            run.ms[size, "transpose"] = bench(mod.transposed_padded, m).median
            run.ms[size, "10 row order"] = bench(mod.matmul_rung10_order, m, n, o, 0).median
        run.rounds[size] = round_medians({"last rung": lambda: mod.matmul_rung(m, n, o, last),
                                          "cuBLAS": lambda: torch.matmul(m, n, out=o)}, rounds=rounds, budget_ms=3000)
        vs = ratio_rounds(run.rounds[size], "cuBLAS", "last rung")
        print(f"{size}: {rungs[last]} against cuBLAS in {rounds} alternating rounds: "
              f"{sorted(vs)[len(vs) // 2]:.3f}× (rounds {min(vs):.3f} to {max(vs):.3f}×)")
    return run


def ladder_claims(run: LadderRun, rungs: dict) -> None:
    """The claims the ladder's prose relies on, per size, and a printed line each for what the variants found
    (rung 5 with two blocks per SM; rung 9's cfg 4 fed m transposed, the control for rung 10; rung 10's depth)."""
    for size in dict.fromkeys(s for s, _ in run.ms):
        ms = {r: run.ms[size, r] for r in rungs}
        claim(f"{size}: rungs 2, 3 and 4 each beat the rung before by over 10 %",
              all(ms[r] < ms[r - 1] / 1.1 for r in (2, 3, 4)), evidence=", ".join(fmt_ms(ms[r]) for r in (1, 2, 3, 4)))
        claim(f"{size}: rung 5 (2D blocking) is no faster than rung 4 (3 % margin)", ms[5] >= 0.97 * ms[4],
              evidence=f"{fmt_ms(ms[5])} vs {fmt_ms(ms[4])}")
        claim(f"{size}: rung 6 beats rungs 4 and 5 by over 10 %", ms[6] < min(ms[4], ms[5]) / 1.1, evidence=fmt_ms(ms[6]))
        claim(f"{size}: rung 7 beats rung 6 by over 10 %", ms[7] < ms[6] / 1.1,
              evidence=f"{fmt_ms(ms[7])} vs {fmt_ms(ms[6])}")
        claim(f"{size}: rung 8 (warptiling) is within 3 % of rung 7 or faster", ms[8] < 1.03 * ms[7],
              evidence=f"{fmt_ms(ms[8])} vs {fmt_ms(ms[7])}: {ms[7] / ms[8]:.3f}×")
        two = run.ms[size, "5 two blocks"]
        print(f"{size}: rung 5 with __launch_bounds__(256, 2) takes {fmt_ms(two)}: {ms[5] / two:.2f}× as fast as rung 5, "
              f"{ms[4] / two:.2f}× as fast as rung 4; rung 6 is {ms[5] / ms[6]:.2f}× as fast as rung 5, "
              f"{two / ms[6]:.2f}× as fast as rung 5 with two blocks")
        _occupancy_claims(size, ms, two)
        if 10 in rungs:
            _rung10_claims(run, size, ms)


def _occupancy_claims(size: str, ms: dict, two: float) -> None:
    """What the text concludes from rung 5 compiled for two blocks per SM (``two``, its time): that occupancy is what
    held rung 5 back, that the step's gain over rung 4 stays below the worklog's 1.9×, and that a good part of rung 6's
    gain over rung 5 (at least a third of it, in log terms) is the same occupancy."""
    claim(f"{size}: with two blocks per SM rung 5 takes at least 1.2× less time", ms[5] >= 1.2 * two,
          evidence=f"{ms[5] / two:.2f}×")
    claim(f"{size}: and beats rung 4 by over 5 %, but by less than the worklog's 1.9×", 1.05 * two <= ms[4] < 1.9 * two,
          evidence=f"{ms[4] / two:.2f}×")
    share = math.log(ms[5] / two) / math.log(ms[5] / ms[6]) if ms[5] > ms[6] else 0.0
    claim(f"{size}: two blocks per SM give at least a third of rung 6's gain over rung 5 (in log terms)", share >= 1 / 3,
          evidence=f"{ms[5] / two:.2f}× of {ms[5] / ms[6]:.2f}×: {share:.2f} of it")


def _rung10_claims(run: LadderRun, size: str, ms: dict) -> None:
    """Rung 10 against rung 9, its transposition, its launch order, its depth, and the control (cfg 4 fed mt)."""
    if size == "4096³":
        claim(f"{size}: rung 10 (cp.async pipeline) beats rung 9 (autotuned) by over 3 %", ms[10] < ms[9] / 1.03,
              evidence=f"{fmt_ms(ms[10])} vs {fmt_ms(ms[9])}")
    else:   # k = 256: 16 phases, the pipeline barely fills before the block is done
        claim(f"{size}: rung 10 is at least as fast as rung 9 (autotuned)", ms[10] <= ms[9],
              evidence=f"{fmt_ms(ms[10])} vs {fmt_ms(ms[9])}")
    tr = run.ms[size, "transpose"]
    claim(f"{size}: transposing m costs under 3 % of rung 10's time", tr < 0.03 * ms[10],
          evidence=f"{fmt_ms(tr)} of {fmt_ms(ms[10])}")
    order = run.ms[size, "10 row order"] / ms[10]
    claim(f"{size}: rung 10's launch order changes its time by under 3 % (row order / grouped)", abs(order - 1) < 0.03,
          evidence=f"{order:.3f}")
    deep, cfg4, mt = run.ms[size, "10 two stages"] / ms[10], run.ms[size, "9 cfg 4"], run.ms[size, "9 mt"]
    print(f"{size}: rung 10 with 5 stages is {deep:.2f}× as fast as with 2; against rung 9's cfg 4 ({fmt_ms(cfg4)}) "
          f"rung 10 is {cfg4 / ms[10]:.2f}× as fast, cfg 4 fed m transposed first ({fmt_ms(mt)}) {cfg4 / mt:.2f}×")
    claim(f"{size}: five stages are no faster than two (within 3 %)", deep < 1.03, evidence=f"{deep:.2f}×")
    gain10, gain_mt = cfg4 / ms[10] - 1, cfg4 / mt - 1    # each over cfg 4 fed m as it is
    claim(f"{size}: the control (cfg 4 fed m transposed) gains at least half of what rung 10 gains over cfg 4",
          gain10 > 0 and gain_mt >= 0.5 * gain10, evidence=f"{100 * gain_mt:.0f} % against {100 * gain10:.0f} %")
