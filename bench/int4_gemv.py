"""Batch-1 int4 GEMV: notebook 15's two kernels (gpu_course/kernels/quant_gemv.py, quant_gemv_strided.py),
torch's int4 and int8 kernels and the bf16 (fp16) F.linear, with L2 flushed before each timing.

    python bench/int4_gemv.py                      # 8192 x 8192 and 4096 x 14336 (W is n x k)
    python bench/int4_gemv.py --shapes 8192x8192

For each shape: both Triton int4 kernels checked against float64, then every kernel's GPU time, time per step of a
back-to-back loop and CPU time per call against torch's int4 kernel (utils.compare), and the GB/s of the weights
and scales each reads over its GPU time, with their share of the measured copy ceiling. It records nothing in
results/ (notebook 15 records its own comparison). In cpu mode it runs a small shape in the interpreter: that
checks the script only; its times say nothing about a GPU.
"""
import argparse

import utils  # first: chooses the mode before triton is imported
import torch

from gpu_course.lessons.low_precision import measure as M
from gpu_course.lessons.low_precision import quantize as Q


def shapes(text):
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=shapes, default=utils.by_mode(gpu=[(8192, 8192), (4096, 14336)], cpu=[(32, 256)]))
    args = ap.parse_args()
    copy = utils.ceilings()["copy"] if utils.ON_GPU else None
    for n, k in args.shapes:
        f = M.gemv_fixture(n, k, 1)
        fns, nbytes, notes = M.gemv_functions(f)
        x = f["x"]
        ref = x.double() @ Q.dequantize_int4_groups(f["packed"], f["scales"]).double().T.to(x.device)
        print(f"--- W {n} x {k}, batch 1" + ("" if utils.ON_GPU else " (cpu mode: the times say nothing about a GPU)"))
        for note in notes:
            print(note)
        for name in (M.STRIDED, "Triton int4"):      # both against float64 before timing
            print(utils.check(fns[name](x), ref, atol=2e-2, rtol=1e-2, name=name))
        base = "torch int4" if "torch int4" in fns else "Triton int4"
        times = utils.compare({name: (lambda fn=fn: fn(x)) for name, fn in fns.items()}, baseline=base,
                              l2_flush=True)
        for name, t in times.items():
            b = nbytes.get(name, nbytes["Triton int4"])
            gbs = b / (t.median * 1e-3) / 1e9
            share = f" = {100 * gbs / copy:4.1f} % of the measured copy ceiling ({copy:,.0f} GB/s)" if copy else ""
            print(f"{name:<22} reads {b / 1e6:6.2f} MB: {gbs:7.0f} GB/s{share}")


if __name__ == "__main__":
    main()
