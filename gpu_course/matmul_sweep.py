"""Notebook 07's fp16 sweep of its autotuned Triton matmul against cuBLAS (``torch.matmul``), square sizes:
measured on a GPU (:func:`live_sweep`), or read back from the stored GPU run in cpu mode
(:func:`stored_sweep`), and printed as one table (:func:`print_sweep`). The notebook keeps the claims.

>>> print_sweep([])
False
"""
from __future__ import annotations


import torch

from .checking import check
from .launch import cdiv
from .hardware import sm_count
from .mode import DEVICE, ON_GPU
from .results import report, stored_results
from .rounds import interleaved_rounds, pooled
from .timing import bench


def bench_interleaved(fns: dict, *args, rounds: int = 4, budget_ms: float | None = None) -> dict:
    """:func:`bench` of each of ``fns`` (name -> function) in ``rounds`` rounds, the order reversed every other
    round (A B, B A, A B, ...), each round with ``budget_ms / rounds`` of run time; each name's runs pooled
    into one :class:`Timing` (its ``launch_ms``, the CPU's time per call, the median of the rounds'). Timings taken one after another
    drift over a run; interleaved, the drift falls on every function alike instead of on whichever ran last.

    >>> t = bench_interleaved({"ones": torch.ones, "zeros": torch.zeros}, 64, rounds=2, budget_ms=4)
    >>> sorted(t), t["ones"].n >= 2, "interleaved" in t["zeros"].method
    (['ones', 'zeros'], True, True)
    """
    calls = {name: (lambda f=f: f(*args)) for name, f in fns.items()} if args else fns
    taken = interleaved_rounds(calls, rounds=rounds, budget_ms=budget_ms, timer=bench)
    note = f"interleaved with {len(fns) - 1} other(s) over {rounds} rounds"
    return {name: pooled(ts, note) for name, ts in taken.items()}


def live_sweep(sizes, notebook, kernel_name, matmul, tuned) -> list:
    """Time ``matmul`` (autotuned by ``tuned``) and ``torch.matmul`` on ``n x n`` fp16 inputs for each ``n`` of
    ``sizes``, each result checked first, the two timed in alternating rounds (:func:`bench_interleaved`), both
    recorded with ``report`` under ``kernel_name``. One row a size:
    TFLOP/s of each, the GPU time and the CPU's time per call of a back-to-back loop (µs; ``launch_bound`` when
    the CPU's is the larger), the tile the autotuner kept, its programs and waves (programs
    over SMs: rounds of one program per SM)."""
    rows = []
    for n in sizes:
        a = torch.randn(n, n, device=DEVICE, dtype=torch.float16)
        b = torch.randn(n, n, device=DEVICE, dtype=torch.float16)
        check(matmul(a, b), a @ b, atol=0.05, rtol=1e-2, name=f"matmul {n}^3")  # check before timing
        timed = bench_interleaved({"cuBLAS": torch.matmul, "ours": matmul}, a, b)  # A B, B A, ...: drift shared
        t_cublas, t = timed["cuBLAS"], timed["ours"]
        kept = tuned.best_config.kwargs  # the configuration the autotuner chose for this shape
        work = 2 * n**3  # FLOP of an n³ product
        report(notebook, kernel_name, f"{n}³", t, baseline=t_cublas, baseline_name="cuBLAS", flops=work, kind="fp16")
        programs = cdiv(n, kept["BLOCK_M"]) * cdiv(n, kept["BLOCK_N"])
        rows.append(dict(n=n, triton=work / t.median / 1e9, cublas=work / t_cublas.median / 1e9, device=t.device,
                         gpu_us=t.median * 1e3, cpu_us=t.launch_ms * 1e3, launch_bound=t.launch_bound,
                         tile=f"{kept['BLOCK_M']}x{kept['BLOCK_N']}x{kept['BLOCK_K']}",
                         programs=programs, waves=programs / sm_count()))
    return rows


def stored_sweep(notebook, kernel_name) -> list:
    """The rows :func:`live_sweep` recorded in the stored GPU run (an H100's first), without the times and tiles
    the results file does not keep."""
    stored = [r for r in stored_results(notebook=notebook) if r["kernel"] == kernel_name]
    devices = sorted({r["device"] for r in stored}, key=lambda d: ("H100" not in d, d))
    sizes = {int(r["size"].rstrip("³")): r for r in stored if r["device"] == devices[0]}
    rows = [dict(n=n, triton=float(r["rate"]), cublas=2 * n**3 / float(r["baseline_ms"]) / 1e9, device=r["device"])
            for n, r in sizes.items()]
    return sorted(rows, key=lambda row: row["n"])


def sweep_rows(sizes, notebook, kernel_name, matmul, tuned) -> list:
    """:func:`live_sweep` on a GPU, :func:`stored_sweep` in cpu mode."""
    return live_sweep(sizes, notebook, kernel_name, matmul, tuned) if ON_GPU else stored_sweep(notebook, kernel_name)


def print_sweep(sweep) -> bool:
    """Print the table of ``sweep`` (with the GPU-time, CPU-per-call, tile, programs and waves columns where it was
    measured now); return whether it was."""
    if not sweep:
        return False
    source = "measured now" if ON_GPU else "stored from a GPU run"
    live = "gpu_us" in sweep[0]  # the stored results hold no GPU or CPU times
    print(f"\nfp16 matmul on {sweep[0]['device']} ({source}):")
    print(f"{'n':>6} {'Triton TFLOP/s':>15} {'cuBLAS TFLOP/s':>15} {'Triton / cuBLAS':>16}"
          + (f" {'GPU µs':>8} {'CPU µs/call':>12} {'tile kept':>11} {'programs':>9} {'waves':>6}" if live else ""))
    for row in sweep:
        line = f"{row['n']:>6} {row['triton']:>15,.0f} {row['cublas']:>15,.0f} {row['triton'] / row['cublas']:>15.2f}x"
        if live:
            line += (f" {row['gpu_us']:>8,.1f} {row['cpu_us']:>12,.1f} {row['tile']:>11} {row['programs']:>9,}"
                     f" {row['waves']:>6.2f}" + ("  launch-bound" if row["launch_bound"] else ""))
        print(line)
    return live
