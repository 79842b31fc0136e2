"""Elementwise kernels of notebook 03 (square, GeLU) against torch, for tuning on a GPU.

Builds the notebook's own kernels once (gpu_course/kernels/cuda/elementwise/, the files notebook 03 prints
and builds) and prints one row per variant: variant, GPU time (launch hidden), time per step of a
back-to-back loop, CPU time per call (utils.bench_user), GB/s, % of the copy ceiling, and torch's time over
this one's for the GPU time and for the loop (>= 1: as fast as torch or faster). Sweeps the grid-stride
variants over blocks per SM, threads per block and loads in flight per thread (unroll) on GPU time alone
(loop and CPU columns blank), then times the fastest of them as the others. Last, GeLU as called
(utils.compare) at n and at 4,096 floats.

    python3 bench/elementwise.py              # GPU: n = 1e8 floats; CPU: tiny n (emulation, not a GPU figure)
    python3 bench/elementwise.py 50000000     # another n
    python3 bench/elementwise.py --no-record  # print only

On a GPU every row timed three ways (not the sweep's) is appended to results/<device>.csv under
notebook "bench/elementwise", with its loop and CPU figures and torch's (gpu_course.results.record_comparison);
--no-record leaves the results alone. In cpu mode nothing is recorded.
"""
import argparse

import torch
import torch.nn.functional as F

import utils
from gpu_course.kernels import elementwise
from gpu_course.results import bench_recording, compare_and_record, record_comparison, record_flag
from gpu_course.user_timing import user_cells, user_header, user_ratios

NB = "bench/elementwise"   # the results rows' notebook


def main():
    ap = record_flag(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("n", nargs="?", type=float, help="floats per tensor (default 1e8 on a GPU)")
    args = ap.parse_args()
    n = int(args.n) if args.n else utils.by_mode(gpu=100_000_000, cpu=100_003)
    mod = elementwise.build()
    sms = utils.gpu_properties()["SMs"] if utils.ON_GPU else 2
    x = torch.randn(n, device=utils.DEVICE)
    out = torch.empty_like(x)
    nbytes = 2 * x.nbytes
    reps = None if utils.ON_GPU else 3
    print(f"{utils.device_name()}, n = {n:,} fp32, copy ceiling {utils.ceilings()['copy']:,.0f} GB/s"
          + ("" if utils.ON_GPU else "  (CPU emulation: these times say nothing about a GPU)"))
    print(bench_recording(args.record))
    size = f"{n:.6g} fp32"
    print(f"{'variant':<46}{user_header()}{'GB/s':>9}{'% copy':>8}  × torch (GPU, loop)"
          "   (% of the copy rate measured here)")
    for op, ref in (("square", torch.square), ("gelu", lambda t: F.gelu(t, approximate="tanh"))):
        t_ref = utils.bench_user(ref, x)
        compared = {}  # name -> UserTiming: the rows recorded

        def row(name, t):
            r = utils.throughput(t, nbytes=nbytes)
            print(f"{name:<46}{user_cells(t)}{r.value:9.0f}{r.pct:8.1f}  {user_ratios(t, t_ref)}")
            if isinstance(t, utils.UserTiming):
                compared[name] = t

        row(f"{op} torch", t_ref)
        fn = getattr(mod, f"{op}_fast")
        for name, f, extra in ((f"{op} v0 naive", getattr(mod, f"{op}_naive"), ()),
                               (f"{op} v1 float4", getattr(mod, f"{op}_vec"), ())):
            utils.check(f(x[:4099].clone(), o := utils.poisoned(4099), *extra) or o, ref(x[:4099]), 1e-6, 1e-5)
            row(name, utils.bench_user(f, x, out, *extra))
        grid = (2, 4, 8, 16, 32) if utils.ON_GPU else (1,)
        best = None  # (GPU time, (blocks per SM, threads, unroll)) of the fastest grid-stride variant
        for bps in grid:
            for threads in ((128, 256, 512) if utils.ON_GPU else (256,)):
                for unroll in (1, 2, 4, 8):
                    extra = (sms * bps, threads, unroll)
                    o = utils.poisoned(4099)
                    fn(x[:4099].clone(), o, *extra)
                    utils.check(o, ref(x[:4099]), 1e-6, 1e-5)
                    t = utils.bench(fn, x, out, *extra, reps=reps)
                    row(f"{op} fast bps={bps} threads={threads} unroll={unroll}", t)
                    best = min(best or (t.median, (bps, threads, unroll)), (t.median, (bps, threads, unroll)))
        bps, threads, unroll = best[1]
        row(f"{op} fastest bps={bps} threads={threads} unroll={unroll}",
            utils.bench_user(fn, x, out, sms * bps, threads, unroll))
        record_comparison(NB, size, compared, f"{op} torch", nbytes=nbytes, baseline_name="torch")
    print("\nGeLU as called: GPU time (launch hidden), time per step of a back-to-back loop, CPU time per call")
    for label, xx in ((f"{n:,}", x), ("4,096", x[:4096].clone())):
        oo = torch.empty_like(xx)
        print(f"n = {label}:")
        compare_and_record(NB, f"{xx.numel():.6g} fp32", {"F.gelu(tanh)": lambda: F.gelu(xx, approximate="tanh"),
                                                         "v1 float4": lambda: mod.gelu_vec(xx, oo)},
                           baseline="F.gelu(tanh)", nbytes=2 * xx.nbytes, prefix="gelu as called: ")


if __name__ == "__main__":
    main()
