"""The fp32 matmul ladder of notebook 04, against cuBLAS fp32 (TF32 off), in one run.

    python bench/matmul_ladder.py            # check every rung at odd sizes, time at 4096³ and 5120×256×5120
    python bench/matmul_ladder.py --sweep    # also time rung 6's tile shapes (matmul_vec_cfg 0..4)

Builds notebooks/kernels/matmul_tiled.cu + matmul_ladder.cu once. On the CPU it runs the checks through the
emulation on small sizes and times nothing (emulation times say nothing about a GPU).
"""
import sys
import time
from pathlib import Path

import torch
import utils

KERNELS = Path(__file__).resolve().parent.parent / "notebooks" / "kernels"
RUNGS = {1: "naive, x->row", 2: "coalesced", 3: "smem tiles 32x32", 4: "1D blocktiling",
         5: "2D blocktiling", 6: "float4 loads", 7: "conflict-free + prefetch"}
CFGS = ["128x128x8 8x8", "128x128x16 8x8", "64x128x8 8x8", "128x64x8 8x8", "64x64x16 4x4"]


def build():
    src = utils.cuda_begin + (KERNELS / "matmul_tiled.cu").read_text() + (KERNELS / "matmul_ladder.cu").read_text()
    funcs = ["matmul_tiled", "matmul_rung", "matmul_vec_cfg"]
    t0 = time.perf_counter()
    mod = utils.load_cuda(src, "\n".join(utils.get_sig(f, src) for f in funcs), funcs)
    print(f"build: {time.perf_counter() - t0:.1f} s")
    return mod


def main(sweep=False):
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        mod = build()
        for h, k, w in utils.by_mode(gpu=[(1000, 777, 555), (1000, 776, 556)], cpu=[(100, 70, 90), (100, 68, 92)]):
            m, n = torch.randn(h, k, device=utils.DEVICE), torch.randn(k, w, device=utils.DEVICE)
            ref = m @ n
            for r in RUNGS:
                utils.check(mod.matmul_rung(m, n, utils.poisoned(h, w), r), ref, atol=1e-6 * k + 1e-5, rtol=1e-5,
                            name=f"rung {r}")
            for c in range(len(CFGS)):
                utils.check(mod.matmul_vec_cfg(m, n, utils.poisoned(h, w), c), ref, atol=1e-6 * k + 1e-5,
                            rtol=1e-5, name=f"cfg {c}")
        print("all rungs checked at odd sizes")
        if not utils.ON_GPU:
            print("cpu mode: nothing timed (emulation timings say nothing about a GPU)")
            return
        print(utils.device_name())
        print(f"{'size':>14s} {'kernel':22s} {'ms':>9s} {'TFLOP/s':>8s} {'x cuBLAS':>9s}")
        for h, w, k in [(4096, 4096, 4096), (5120, 5120, 256)]:
            m, n = torch.randn(h, k, device=utils.DEVICE), torch.randn(k, w, device=utils.DEVICE)
            o = torch.empty(h, w, device=utils.DEVICE)
            fl = 2 * h * w * k
            size = f"{h}x{k}x{w}"
            tc = utils.bench(torch.matmul, m, n, out=o)
            print(f"{size:>14s} {'cuBLAS fp32':22s} {tc.median:9.3f} {fl / tc.median / 1e9:8.1f} {1.0:9.2f}")
            todo = [(f"rung {r} {nm}", lambda r=r: mod.matmul_rung(m, n, o, r)) for r, nm in RUNGS.items()]
            if sweep:
                todo += [(f"r6 {nm}", lambda c=c: mod.matmul_vec_cfg(m, n, o, c)) for c, nm in enumerate(CFGS)]
            for name, fn in todo:
                t = utils.bench(fn)
                print(f"{size:>14s} {name:22s} {t.median:9.3f} {fl / t.median / 1e9:8.1f} {tc.median / t.median:9.2f}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


if __name__ == "__main__":
    main(sweep="--sweep" in sys.argv)
