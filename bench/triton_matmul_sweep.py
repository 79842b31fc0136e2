"""Sweep fixed configurations of notebook 07's Triton matmul on a GPU, to choose the autotuner's list.

    python bench/triton_matmul_sweep.py fp16 1024      # dtype (fp16 | tf32 | fp32) and n (an n x n x n matmul)
    python bench/triton_matmul_sweep.py tf32 4096 --budget 200

Times every configuration of a grid (tiles, BLOCK_K, stages, warps) that fits in shared memory with
gpu_course.kernels.triton_matmul.matmul(cfg=...), checks each against torch first, and prints the best
ones as a ratio to cuBLAS in the same run (launch hidden, see utils.bench). Configurations that do not
compile (out of shared memory or registers) are skipped. Only for a GPU.
"""
import argparse
import itertools
import time

import utils  # first: chooses the mode before triton is imported
import torch

from gpu_course.kernels.triton_matmul import matmul

SMEM_BYTES = 227 * 1024  # per block on an H100 (sm_90)


def grid(dtype_bytes):
    for bm, bn, bk, stages, warps in itertools.product((64, 128, 256), (64, 128, 256), (32, 64, 128),
                                                       (3, 4, 5), (4, 8)):
        if (bm * bk + bk * bn) * dtype_bytes * stages > SMEM_BYTES or bm * bn > 256 * 128:
            continue
        if bm * bn // (32 * warps) > 256:  # more than 256 accumulator values per thread: spills
            continue
        yield dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dtype", choices=["fp16", "tf32", "fp32"])
    ap.add_argument("n", type=int)
    ap.add_argument("--budget", type=float, default=240.0, help="seconds to spend at most")
    ap.add_argument("--b-layout", choices=["row", "col"], default="row",
                    help="col: b is stored k-contiguous (as nn.Linear's weight, used as w.T)")
    args = ap.parse_args()
    if not utils.ON_GPU:
        print("cpu mode: a configuration sweep needs a GPU.")
        return
    dt = torch.float16 if args.dtype == "fp16" else torch.float32
    tf32 = args.dtype == "tf32"
    n = args.n
    a, b = torch.randn(n, n, device="cuda", dtype=dt), torch.randn(n, n, device="cuda", dtype=dt)
    if args.b_layout == "col":
        b = b.t().contiguous().t()  # the same values, each column contiguous (k-major)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        ref = a.float() @ b.float() if dt == torch.float16 else a @ b
        t_ref = utils.bench(torch.matmul, a, b)
        flops = 2 * n**3
        print(f"{utils.device_name()}: {args.dtype} {n}³ (b {args.b_layout}-major), cuBLAS {flops / t_ref.median / 1e9:.1f} TFLOP/s")
        rows, t0 = [], time.time()
        for cfg in grid(2 if dt == torch.float16 else 4):
            if time.time() - t0 > args.budget:
                print("(budget spent)")
                break
            try:
                out = matmul(a, b, tf32=tf32, cfg=cfg)
            except Exception:  # out of resources, or a config Triton rejects
                continue
            tol = 1e-2 * n**0.5 if args.dtype != "fp32" else 5e-2
            if not torch.allclose(out.float(), ref.float(), atol=tol, rtol=1e-2):
                print("WRONG", cfg)
                continue
            t = utils.bench(matmul, a, b, tf32=tf32, cfg=cfg, budget_ms=100)
            rows.append((t_ref.median / t.median, cfg))
        rows.sort(key=lambda r: -r[0])
        for ratio, cfg in rows[:8]:
            print(f"{ratio:5.2f}x cuBLAS  {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} "
                  f"w{cfg['num_warps']} s{cfg['num_stages']}")
        print(f"{len(rows)} configurations timed in {time.time() - t0:.0f} s")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


if __name__ == "__main__":
    main()
