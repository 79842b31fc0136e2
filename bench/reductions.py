"""The sum ladder of notebook 09 against torch.sum, and its scans and histograms, in one short run.

    python bench/reductions.py              # check every rung, time rungs 1-8 (rung 1: 3 runs) at 10^8 fp32
    python bench/reductions.py --no-record  # the same, without recording the rows

Builds gpu_course/kernels/cuda/{reduce,scan,histogram,image}/ once, the source notebook 09 builds, checks
every rung against a float64 sum at sizes no block divides (poisoned out), then prints torch.sum's and each
rung's GPU time (launch hidden), time per step of a back-to-back loop and CPU time per call
(utils.bench_user), torch.sum's time over the rung's for the GPU time and for the loop, the rung's GPU time
over the rung before's, and the per-block figures notebook 09's text is made from.
On a GPU each row of the table (torch.sum's and every rung's) is appended to results/<device>.csv under
notebook "bench/reductions", with its loop and CPU figures and torch.sum's (--no-record: not).
On the CPU it runs the checks through the emulation on small sizes, then the table at a small size: that
checks the script; the emulation's times say nothing about a GPU, and nothing is recorded.
"""
import argparse
import time

import torch
import utils
from gpu_course.kernels import reductions
from gpu_course.results import bench_recording, record_comparison, record_flag
from gpu_course.user_timing import cpu_ms_per_call, loop_ms, user_cells, user_header, user_ratios

NB = "bench/reductions"   # the results rows' notebook


def time_rung(mod, x, out, rung, blocks):
    """utils.bench_user of one rung; rung 1 (one atomic per element, ~0.2 s a call on an H100) with three
    runs of each kind instead of a budget's worth."""
    args = (x, out, rung, blocks)
    if rung != 1 or not utils.ON_GPU:
        return utils.bench_user(mod.sum_rung, *args)
    return utils.UserTiming(utils.bench(mod.sum_rung, *args, warmup=1, reps=3),
                            loop_ms(mod.sum_rung, *args, steps=3, rounds=1), cpu_ms_per_call(mod.sum_rung, *args, n=3))


def main():
    args = record_flag(argparse.ArgumentParser(description=__doc__.splitlines()[0])).parse_args()
    print(bench_recording(args.record))
    t0 = time.perf_counter()
    mod = reductions.build()
    print(f"build: {time.perf_counter() - t0:.1f} s")
    sms = utils.gpu_properties()["SMs"] if utils.ON_GPU else 2
    blocks = 8 * sms if utils.ON_GPU else 3
    for n in utils.by_mode(gpu=(1, 3, 1000, 65_537, 10_000_019), cpu=(1, 3, 1000, 70_001)):
        xs = torch.randn(n, device=utils.DEVICE)
        for rung, name in reductions.RUNGS.items():
            o = utils.poisoned(1)
            mod.sum_rung(xs, o, rung, blocks)
            utils.check(o, xs.double().sum().reshape(1), atol=1e-6 * n, rtol=1e-6, name=f"{name}, n={n}")
    print("every rung: OK against float64")
    if not utils.ON_GPU:
        print("cpu mode: the table at a small size through the emulation; its times say nothing about a GPU")
    n = utils.by_mode(gpu=100_000_000, cpu=70_001)
    x, out = torch.randn(n, device=utils.DEVICE), torch.empty(1, device=utils.DEVICE)
    t_sum = utils.bench_user(torch.sum, x)
    print(f"\n{f'sum of {n:,} fp32':>38}{user_header()}  × torch.sum (GPU, loop)  GPU time / rung before's")
    print(f"{'torch.sum':>38}{user_cells(t_sum)}  {user_ratios(t_sum, t_sum):>22}")
    times = {}
    for rung, name in reductions.RUNGS.items():
        times[rung] = t = time_rung(mod, x, out, rung, blocks)
        before = (f"{t.median / times[rung - 1].median:.2f}x rung {rung - 1}'s" if rung > 1
                  else f"{t.median / n * 1e6:.2f} ns an atomic")
        print(f"{name:>38}{user_cells(t)}  {user_ratios(t, t_sum):>22}  {before}")
    record_comparison(NB, f"{n:.6g} fp32", {"torch.sum": t_sum, **{reductions.RUNGS[r]: t for r, t in times.items()}},
                      "torch.sum", nbytes=x.nbytes)
    if utils.ON_GPU:
        blocks4 = sum(reductions.tree_grids(n))
        copy = utils.ceilings()["copy"]
        print(f"rung 4: {blocks4:,} blocks, one every {times[4].median * 1e6 * sms / blocks4:.0f} ns per SM; "
              f"1 KB at an SM's share of {copy:.0f} GB/s: {1024 / (copy / sms):.0f} ns")


if __name__ == "__main__":
    main()
