"""The sum ladder of notebook 09 against torch.sum, and its scans and histograms, in one short run.

    python bench/reductions.py            # check every rung, time rungs 1-8 (rung 1: 3 runs) at 10^8 fp32

Builds gpu_course/kernels/cuda/{reduce,scan,histogram,image}/ once, the source notebook 09 builds, checks
every rung against a float64 sum at sizes no block divides (poisoned out), then prints each rung's GPU time,
its ratio to the rung before and to torch.sum, and the per-block figures notebook 09's text is made from.
On the CPU it runs the checks through the emulation on small sizes and times nothing.
"""
import time

import torch
import utils
from gpu_course.kernels import reductions


def main():
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
        print("cpu mode: no timings (the emulation's times say nothing about a GPU)")
        return
    n = 100_000_000
    x, out = torch.randn(n, device=utils.DEVICE), torch.empty(1, device=utils.DEVICE)
    t_sum = utils.bench(torch.sum, x).median
    print(f"torch.sum: {utils.fmt_ms(t_sum)}")
    times = {}
    for rung, name in reductions.RUNGS.items():
        kw = dict(warmup=1, reps=3) if rung == 1 else {}
        times[rung] = t = utils.bench(mod.sum_rung, x, out, rung, blocks, **kw).median
        before = f", {t / times[rung - 1]:.2f}x rung {rung - 1}'s time" if rung > 1 else f", {t / n * 1e6:.2f} ns an atomic"
        print(f"{name:>38}: {utils.fmt_ms(t):>10}, {t_sum / t:.2f}x torch.sum's speed{before}")
    blocks4 = sum(reductions.tree_grids(n))
    copy = utils.ceilings()["copy"]
    print(f"rung 4: {blocks4:,} blocks, one every {times[4] * 1e6 * sms / blocks4:.0f} ns per SM; "
          f"1 KB at an SM's share of {copy:.0f} GB/s: {1024 / (copy / sms):.0f} ns")


if __name__ == "__main__":
    main()
