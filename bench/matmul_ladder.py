"""The fp32 matmul ladder of notebook 04, against cuBLAS fp32 (TF32 off), in one run.

    python bench/matmul_ladder.py            # check every rung at odd sizes, time at 4096³ and 5120×256×5120
    python bench/matmul_ladder.py --sweep    # also time every rung's other tile shapes (matmul_rung_cfg)

Builds gpu_course/kernels/cuda/matmul/ (one file per rung, and the dispatcher) once, the same source notebook 04
builds. On the CPU it runs the checks through the emulation on small sizes and times nothing (emulation
times say nothing about a GPU).
"""
import sys
import time

import torch
import utils
from gpu_course.kernels import matmul_ladder


def build():
    t0 = time.perf_counter()
    mod = matmul_ladder.build()
    print(f"build: {time.perf_counter() - t0:.1f} s")
    return mod


def variants(mod, m, n, o, sweep):
    """(name, callable) for every rung in its default shape, and with --sweep its other shapes."""
    todo = [(name, lambda r=r: mod.matmul_rung(m, n, o, r)) for r, name in matmul_ladder.RUNGS.items()]
    if sweep:
        todo += [(f"rung {r} {shape}", lambda r=r, c=c: mod.matmul_rung_cfg(m, n, o, r, c))
                 for r, shapes in matmul_ladder.RUNG_CONFIGS.items() for c, shape in enumerate(shapes) if c]
    return todo


def main(sweep=False):
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        mod = build()
        for h, k, w in utils.by_mode(gpu=[(1000, 777, 555), (1000, 776, 556)], cpu=[(100, 70, 90), (100, 68, 92)]):
            m, n = torch.randn(h, k, device=utils.DEVICE), torch.randn(k, w, device=utils.DEVICE)
            ref = m @ n
            o = utils.poisoned(h, w)
            for name, fn in variants(mod, m, n, o, sweep=True):
                utils.check(fn(), ref, **utils.dot_tol(k), name=name)
                utils.poison_(o)
        print("all rungs and tile shapes checked at odd sizes")
        if not utils.ON_GPU:
            print("cpu mode: nothing timed (emulation timings say nothing about a GPU)")
            return
        print(utils.device_name())
        print(f"{'size':>14s} {'kernel':34s} {'ms':>9s} {'TFLOP/s':>8s} {'x cuBLAS':>9s}")
        for h, w, k in [(4096, 4096, 4096), (5120, 5120, 256)]:
            m, n = torch.randn(h, k, device=utils.DEVICE), torch.randn(k, w, device=utils.DEVICE)
            o = torch.empty(h, w, device=utils.DEVICE)
            fl = 2 * h * w * k  # a multiply and an add per term of every dot product
            size = f"{h}x{k}x{w}"
            tc = utils.bench(torch.matmul, m, n, out=o)
            print(f"{size:>14s} {'cuBLAS fp32':34s} {tc.median:9.3f} {fl / tc.median / 1e9:8.1f} {1.0:9.2f}")
            for name, fn in variants(mod, m, n, o, sweep):
                t = utils.bench(fn)
                print(f"{size:>14s} {name:34s} {t.median:9.3f} {fl / t.median / 1e9:8.1f} {tc.median / t.median:9.2f}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


if __name__ == "__main__":
    main(sweep="--sweep" in sys.argv)
