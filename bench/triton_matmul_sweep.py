"""Sweep fixed configurations of notebook 07's Triton matmul on a GPU, to choose the autotuner's list.

    python bench/triton_matmul_sweep.py fp16 1024      # dtype (fp16 | tf32 | fp32) and n (an n x n x n matmul)
    python bench/triton_matmul_sweep.py tf32 4096 --budget 200

Times every configuration of a grid (tiles, BLOCK_K, stages, warps) that fits in shared memory with
gpu_course.kernels.triton_matmul.matmul(cfg=...), checks each against torch first, and prints the best
ones as a ratio to cuBLAS in the same run (GPU time, launch hidden, see utils.bench: that is what picks a
configuration). Configurations that do not compile (out of shared memory or registers) are skipped. Then
cuBLAS and the best configuration as a caller gets them (utils.compare: GPU time, time per step of a
back-to-back loop, CPU time per call, and cuBLAS's time over each for the GPU time and the loop).
In cpu mode it sweeps a few small tiles in the interpreter (give a small n, e.g. 64): that checks the
script only; its times say nothing about a GPU.
It records nothing in results/: its rows are candidate configurations, chosen on GPU time to edit the
autotuner's list, not the course's kernel; bench/triton_matmul.py records the autotuned kernel against
cuBLAS with all three figures.
"""
import argparse
import itertools
import time

import utils  # first: chooses the mode before triton is imported
import torch

from gpu_course.kernels.triton_matmul import matmul

SMEM_BYTES = 227 * 1024  # per block on an H100 (sm_90)


def grid(dtype_bytes):
    if not utils.ON_GPU:  # the interpreter: a few small tiles (tl.dot needs blocks of at least 16)
        for bm, bn in ((32, 32), (16, 32)):
            yield dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32, GROUP_M=2, num_warps=4, num_stages=1)
        return
    for bm, bn, bk, stages, warps in itertools.product((64, 128, 256), (64, 128, 256), (32, 64, 128),
                                                       (3, 4, 5), (4, 8)):
        if (bm * bk + bk * bn) * dtype_bytes * stages > SMEM_BYTES or bm * bn > 256 * 128:
            continue
        if bm * bn // (32 * warps) > 256:  # more than 256 accumulator values per thread: spills
            continue
        yield dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)


def short(cfg):
    return f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dtype", choices=["fp16", "tf32", "fp32"])
    ap.add_argument("n", type=int)
    ap.add_argument("--budget", type=float, default=240.0, help="seconds to spend at most")
    ap.add_argument("--b-layout", choices=["row", "col"], default="row",
                    help="col: b is stored k-contiguous (as nn.Linear's weight, used as w.T)")
    args = ap.parse_args()
    if not utils.ON_GPU:
        print("cpu mode: a few small tiles in the interpreter; these times say nothing about a GPU.")
    dt = torch.float16 if args.dtype == "fp16" else torch.float32
    tf32 = args.dtype == "tf32"
    if tf32 and not utils.gpu_has("tf32"):   # before Ampere it would sweep fp32 under another name
        return
    n = args.n
    a, b = torch.randn(n, n, device=utils.DEVICE, dtype=dt), torch.randn(n, n, device=utils.DEVICE, dtype=dt)
    if args.b_layout == "col":
        b = b.t().contiguous().t()  # the same values, each column contiguous (k-major)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        ref = a.float() @ b.float() if dt == torch.float16 else a @ b
        t_ref = utils.bench(torch.matmul, a, b, reps=utils.by_mode(gpu=None, cpu=2))
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
            t = utils.bench(matmul, a, b, tf32=tf32, cfg=cfg, budget_ms=100, reps=utils.by_mode(gpu=None, cpu=2))
            rows.append((t_ref.median / t.median, cfg))
        rows.sort(key=lambda r: -r[0])
        for ratio, cfg in rows[:8]:
            print(f"{ratio:5.2f}x cuBLAS  {short(cfg)}")
        print(f"{len(rows)} configurations timed in {time.time() - t0:.0f} s")
        if rows:
            best = rows[0][1]
            print(f"\ncuBLAS and the best configuration as called ({args.dtype} {n}³):")
            utils.compare({"cuBLAS": lambda: torch.matmul(a, b),
                           f"Triton {short(best)}": lambda: matmul(a, b, tf32=tf32, cfg=best)}, baseline="cuBLAS")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


if __name__ == "__main__":
    main()
