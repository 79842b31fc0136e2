"""The fp32 matmul ladder of notebook 04, against cuBLAS fp32 (TF32 off), in one run.

    python bench/matmul_ladder.py             # check every rung at odd sizes, time at 4096³ and 5120×256×5120
    python bench/matmul_ladder.py --sweep     # also time every rung's other tile shapes (matmul_rung_cfg)
    python bench/matmul_ladder.py --sweep 9   # ... only rung 9's: every tile shape the autotuner tries
    python bench/matmul_ladder.py --no-record # print only

Builds gpu_course/kernels/cuda/matmul/ (one file per rung, and the dispatcher) once, the same source notebook 04
builds. Each row: GPU time (launch hidden), time per step of a back-to-back loop, CPU time per call
(utils.bench_user), TFLOP/s, and cuBLAS's time over the rung's for the GPU time and for the loop. Rung 9 is
timed in the shape that matmul_ladder.autotune_rung9 finds fastest at each size (it times every rung-9 shape
on the same operands, on GPU time, so its sweep costs nothing more); the --sweep rows are GPU time alone.
On a GPU cuBLAS's row and each rung's (not the --sweep rows) are appended to results/<device>.csv under
notebook "bench/matmul_ladder", with their loop and CPU figures and cuBLAS's (--no-record: not).
On the CPU it runs the checks through the emulation on small sizes, then the table at a tiny size with torch's
CPU matmul as the baseline: that checks the script; emulation times say nothing about a GPU, and nothing is
recorded.
"""
import argparse
import time

import torch
import utils
from gpu_course.kernels import matmul_ladder
from gpu_course.results import bench_recording, matmul_size, record_comparison, record_flag
from gpu_course.user_timing import user_cells, user_header, user_ratios

BASE = utils.by_mode(gpu="cuBLAS fp32", cpu="torch (CPU)")  # the baseline row's name
NB = "bench/matmul_ladder"   # the results rows' notebook


def build():
    t0 = time.perf_counter()
    mod = matmul_ladder.build()
    print(f"build: {time.perf_counter() - t0:.1f} s")
    return mod


def shapes(sweep):
    """(rung, cfg, shape name) of the other tile shapes to time: every rung's (sweep == 0) or one rung's
    (rung 9's cfg 0 too: the autotuner's table starts there); those this GPU cannot run are left out
    (matmul_ladder.runs_here)."""
    return [(r, c, shape) for r, names in matmul_ladder.RUNG_CONFIGS.items() for c, shape in enumerate(names)
            if (c or r == 9) and sweep is not None and sweep in (0, r) and matmul_ladder.runs_here(r, c)[0]]


def check_all(mod, rungs=matmul_ladder.RUNGS):
    """Every rung of ``rungs`` in every compiled tile shape against float64, at sizes no tile divides."""
    for h, k, w in utils.by_mode(gpu=[(1000, 777, 555), (1000, 776, 556)], cpu=[(100, 70, 90), (100, 68, 92)]):
        m, n = torch.randn(h, k, device=utils.DEVICE), torch.randn(k, w, device=utils.DEVICE)
        ref = m.double() @ n.double()
        for r, name in rungs.items():
            utils.check(mod.matmul_rung(m, n, utils.poisoned(h, w), r), ref, **utils.dot_tol(k), name=name)
        for r, c, shape in shapes(0):
            utils.check(mod.matmul_rung_cfg(m, n, utils.poisoned(h, w), r, c), ref, **utils.dot_tol(k),
                        name=f"rung {r} {shape}")
    print("all rungs and tile shapes checked at odd sizes")


def main(sweep=None, record=True):
    print(bench_recording(record))
    rungs = matmul_ladder.rungs_here()   # says why it leaves a rung out (an older GPU: rung 10)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        mod = build()
        check_all(mod, rungs)
        print(utils.device_name() + ("" if utils.ON_GPU else
              " (cpu mode: a tiny size through the emulation; these times say nothing about a GPU)"))
        ratio_head = f"× {BASE.split()[0]} (GPU, loop)"
        print(f"{'size':>14s} {'kernel':44s}{user_header()} {'TFLOP/s':>8s}  {ratio_head:>20s}")
        for h, w, k in utils.by_mode(gpu=[(4096, 4096, 4096), (5120, 5120, 256)], cpu=[(64, 64, 64)]):
            m, n = torch.randn(h, k, device=utils.DEVICE), torch.randn(k, w, device=utils.DEVICE)
            o = torch.empty(h, w, device=utils.DEVICE)
            fl = 2 * h * w * k  # a multiply and an add per term of every dot product
            size = matmul_size(h, k, w)

            def row(name, t):
                print(f"{size:>14s} {name:44s}{user_cells(t)} {fl / t.median / 1e9:8.1f}  "
                      f"{user_ratios(t, t_cublas):>20s}")

            t_cublas = utils.bench_user(torch.matmul, m, n, out=o)
            row(BASE, t_cublas)
            compared = {BASE: t_cublas}   # the rows recorded, by the rung's name
            tuned = matmul_ladder.autotune_rung9(m, n, o, mod=mod)   # checks and times every rung-9 shape
            for r, name in rungs.items():
                if r == 9:  # the shape the autotuner chose, timed as the other rungs
                    t = utils.bench_user(mod.matmul_rung_cfg, m, n, o, 9, tuned.best)
                    row(f"{name} = cfg {tuned.best}", t)
                else:
                    t = utils.bench_user(mod.matmul_rung, m, n, o, r)
                    row(name, t)
                compared[name] = t
            record_comparison(NB, size, compared, BASE, flops=fl, kind="fp32")
            for r, c, shape in shapes(sweep):  # GPU time alone
                t = (tuned.table[c][2] if r == 9 else
                     utils.bench(mod.matmul_rung_cfg, m, n, o, r, c, reps=utils.by_mode(gpu=None, cpu=2)))
                row(f"rung {r} cfg {c} {shape}", t)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweep", nargs="?", type=int, const=0, default=None, metavar="RUNG",
                   help="also time the other tile shapes of every rung, or of RUNG only")
    args = record_flag(p).parse_args()
    if args.sweep not in (None, 0, *matmul_ladder.RUNGS):
        p.error(f"--sweep: no rung {args.sweep}; the ladder has rungs {sorted(matmul_ladder.RUNGS)}")
    main(sweep=args.sweep, record=args.record)
