"""Notebook 12's tensor-core ladder (fp16 in, fp32 sums, fp16 out) against cuBLAS fp16 (torch.matmul), in one run.

    python bench/tensor_cores.py              # check every rung and shape at odd sizes, then time at 4096³, 8192³
                                              # and 5120×256×5120
    python bench/tensor_cores.py --sweep      # also time every shape of rungs 4 and 5
    python bench/tensor_cores.py --sizes 4096 # one size (h = w = k), or h,w,k
    python bench/tensor_cores.py --no-record  # print only

Builds gpu_course/kernels/cuda/tensor_cores/ (one file per rung, the same source notebook 12 builds). Each row: GPU
time (launch hidden), time per step of a back-to-back loop, CPU time per call (utils.bench_user), TFLOP/s, % of the
spec-sheet fp16 peak, and cuBLAS's time over the rung's for the GPU time and for the loop. Rungs 4 and 5 are timed
in the shape tensor_cores.autotune finds fastest at each size. On a GPU cuBLAS's row and each rung's (not the
--sweep rows) are appended to results/<device>.csv under notebook "bench/tensor_cores", with their loop and CPU
figures and cuBLAS's (--no-record: not). On the CPU it checks rungs 1 and 2 through the emulation (rungs 3 to 5
are inline PTX, GPU only) and prints the table at a tiny size with torch's CPU matmul as the baseline: that checks
the script; emulation times say nothing about a GPU, and nothing is recorded.
"""
import argparse
import time

import torch
import utils
from gpu_course.kernels import tensor_cores as tc
from gpu_course.results import bench_recording, matmul_size, record_comparison, record_flag
from gpu_course.user_timing import user_cells, user_header, user_ratios

BASE = utils.by_mode(gpu="cuBLAS fp16", cpu="torch (CPU)")
NB = "bench/tensor_cores"   # the results rows' notebook


def check_all(mod, rungs):
    """Every rung of ``rungs`` in every shape against float64, at sizes no tile divides (rung 1: multiples of 16)."""
    for h, w, k in utils.by_mode(gpu=[(1000, 552, 776), (257, 136, 72)], cpu=[(40, 24, 40)]):
        m = torch.randn(h, k, device=utils.DEVICE).half()
        n = torch.randn(k, w, device=utils.DEVICE).half()
        ref = m.double() @ n.double()
        for r, name in rungs.items():
            if r == 1:
                continue
            for cfg in range(len(tc.CONFIGS.get(r, [None]))):
                out = tc.run(mod, r, m, n, utils.poisoned(h, w, dtype=torch.float16), cfg)
                utils.check(out, ref, **tc.tol(k), name=f"{name} cfg {cfg} at {h}x{w}x{k}")
    if 1 in rungs:
        h, w, k = utils.by_mode(gpu=(1024, 512, 768), cpu=(32, 48, 32))
        m, n = torch.randn(h, k, device=utils.DEVICE).half(), torch.randn(k, w, device=utils.DEVICE).half()
        utils.check(tc.run(mod, 1, m, n, utils.poisoned(h, w, dtype=torch.float16)), m.double() @ n.double(),
                    **tc.tol(k), name=tc.RUNGS[1])
    print("every rung and shape checked against float64 (rung 1 at multiples of 16)")


def main(sizes, sweep=False, record=True):
    print(bench_recording(record))
    rungs = tc.rungs_here()   # says why it leaves a rung out
    t0 = time.perf_counter()
    mod = tc.build(rungs)
    print(f"build: {time.perf_counter() - t0:.1f} s")
    check_all(mod, rungs)
    spec = utils.spec_peak("fp16")
    print(utils.device_name() + ("" if utils.ON_GPU else
          " (cpu mode: a tiny size through the emulation; these times say nothing about a GPU)"))
    ratio_head = f"× {BASE.split()[0]} (GPU, loop)"
    print(f"{'size':>15s} {'kernel':44s}{user_header()} {'TFLOP/s':>8s} {'% spec':>7s}  {ratio_head:>20s}")
    for h, w, k in sizes:
        m = torch.randn(h, k, device=utils.DEVICE).half()
        n = torch.randn(k, w, device=utils.DEVICE).half()
        o = torch.empty(h, w, device=utils.DEVICE, dtype=torch.float16)
        fl = tc.flops(h, w, k)
        size = matmul_size(h, k, w)

        def row(name, t):
            rate = fl / t.median / 1e9
            pct = f"{100 * rate / spec:6.1f}%" if spec and t.on_gpu else f"{'':>7s}"
            print(f"{size:>15s} {name:44s}{user_cells(t)} {rate:8.1f} {pct}  {user_ratios(t, t_base):>20s}")

        t_base = utils.bench_user(torch.matmul, m, n, out=o)
        row(BASE, t_base)
        compared = {BASE: t_base}   # the rows recorded, by the rung's name
        tuned = {r: tc.autotune(mod, r, m, n) for r in rungs if r in tc.CONFIGS}
        for r, name in rungs.items():
            if r == 1 and (h % 16 or w % 16 or k % 16):
                continue
            cfg = tuned[r].best if r in tuned else 0
            compared[name] = t = utils.bench_user(tc.run, mod, r, m, n, o, cfg)
            row(name + (f" (cfg {cfg})" if r in tuned else ""), t)
        record_comparison(NB, size, compared, BASE, flops=fl, kind="fp16")
        if sweep:
            for r, t in tuned.items():
                for cfg, shape, timing in t.table:
                    row(f"rung {r} cfg {cfg} {shape}"[:44], timing)


def parse_sizes(text):
    out = []
    for item in text.split():
        dims = [int(x) for x in item.split(",")]
        out.append(tuple(dims) if len(dims) == 3 else (dims[0],) * 3)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweep", action="store_true", help="also time every shape of rungs 4 and 5")
    p.add_argument("--sizes", default=None, help="sizes as 'n' or 'h,w,k', space-separated "
                                                 "(default: 4096 8192 5120,5120,256; on the CPU 64)")
    args = record_flag(p).parse_args()
    default = utils.by_mode(gpu=[(4096,) * 3, (8192,) * 3, (5120, 5120, 256)], cpu=[(64, 64, 64)])
    main(parse_sizes(args.sizes) if args.sizes else default, sweep=args.sweep, record=args.record)
