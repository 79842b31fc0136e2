"""Benchmark the FlashAttention of gpu_course.kernels.triton_attention (Triton) against PyTorch's own (SDPA's flash backend).

    python bench/flash_attention.py                # batch 4, heads 16, N 4096, d 64 and 128, fp16; memory vs N
    python bench/flash_attention.py --n 2048 --dims 64 --no-memory

For each head dimension, causal and not: checks the output and dQ, dK, dV of ours and of SDPA-flash
against an fp32 reference (ours may err at most twice as much as SDPA-flash, plus a small floor),
then times forward and backward (utils.bench, medians) and prints TFLOP/s (4·B·H·N²·d for the
forward, halved when causal, 2.5 times that for the backward) and the ratio of SDPA's time to ours
(>= 1: as fast as PyTorch). Targets on an H100: forward >= 0.80x, backward >= 0.6x. Then the peak
memory (torch.cuda.max_memory_allocated above the inputs) of the forward, naive vs ours, for N up to
16384: the naive one writes N x N scores and runs out of memory first. The kernels, launchers,
autotuner configurations and the comparison itself (errors_like_sdpa, time_attention, forward_memory)
are notebook 11's own, from gpu_course/kernels/triton_attention.py. In cpu
mode it runs tiny sizes in the interpreter (SDPA's default CPU kernel as the baseline): that checks the
script only; the timings mean nothing.
"""
import argparse
import math

import utils  # first: chooses the mode before triton is imported
import torch
import triton

from gpu_course.kernels import triton_attention as ta

REPS = utils.by_mode(gpu=None, cpu=2)  # the interpreter's times mean nothing: two runs check the script


def timed(B, H, N, d, causal):
    """Forward and backward times of ours and SDPA-flash, fp16, after the correctness check."""
    q, k, v, do = (torch.randn(B, H, N, d, device=utils.DEVICE, dtype=torch.float16) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    errors = ta.errors_like_sdpa(q, k, v, do, causal)
    report = ", ".join(f"{what} {ours:.1e} (sdpa {theirs:.1e})" for what, (ours, theirs) in errors.items())
    return ta.time_attention(q, k, v, do, causal, reps=REPS), "max errors vs fp32: " + report


def gib(x):
    if x is None:
        return f"{'(cpu: n/a)':>13}"
    return f"{'out of memory':>13}" if math.isinf(x) else f"{x / 2**30:>9.3f} GiB"


def memory_rows(B, H, d, sizes, cfg):
    """Peak memory of the forward (no autograd) above its inputs, naive vs ours; naive may run out."""
    print(f"\nPeak memory of the forward, batch {B}, heads {H}, d {d}, fp16, non-causal (above the inputs):")
    print(f"{'N':>7} {'N x N scores':>13} {'naive':>13} {'ours':>13}")
    for row in ta.forward_memory(B, H, d, sizes, cfg):
        print(f"{row['n']:>7} {row['scores'] / 2**30:>9.2f} GiB {gib(row['naive'])} {gib(row['ours'])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=utils.by_mode(gpu=4096, cpu=40), help="sequence length")
    ap.add_argument("--dims", type=int, nargs="*", default=utils.by_mode(gpu=[64, 128], cpu=[16]))
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory table")
    args = ap.parse_args()
    print(utils.banner())
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    if not utils.ON_GPU:
        print("cpu mode: tiny sizes in the interpreter; these timings and ratios mean nothing.")
    B, H, N = utils.by_mode(gpu=(4, 16), cpu=(1, 2)) + (args.n,)
    print(f"\nbatch {B}, heads {H}, N {N}, fp16. TFLOP/s; ratio = SDPA-flash time / ours "
          f"(targets: forward >= {ta.TARGETS['forward']}x, backward >= {ta.TARGETS['backward']}x)")
    print(f"{'d':>4} {'causal':>6} | {'fwd ours':>9} {'fwd sdpa':>9} {'ratio':>6} | {'bwd ours':>9} "
          f"{'bwd sdpa':>9} {'ratio':>6} | configs (fwd; dkdv; dq)")
    fwd_cfg = None
    for d in args.dims:
        for causal in (False, True):
            times, errors = timed(B, H, N, d, causal)
            cells = []
            for phase in ("forward", "backward"):
                fl = ta.attention_flops(B, H, N, d, causal, backward=phase == "backward")
                ours, theirs = times["ours", phase].median, times["sdpa", phase].median
                ratio = theirs / ours
                mark = "" if not utils.ON_GPU else (" " if ratio >= ta.TARGETS[phase] else "!")
                cells.append(f"{fl / ours / 1e9:>9.1f} {fl / theirs / 1e9:>9.1f} {ratio:>5.2f}x{mark}")
            configs = "; ".join(ta.tuned_configs().values())
            print(f"{d:>4} {str(causal):>6} | {cells[0]} | {cells[1]} | {configs}")
            print(f"{'':>13} {errors}")
            if d == 64 and not causal and ta.attention_fwd_tuned.best_config is not None:
                best = ta.attention_fwd_tuned.best_config
                fwd_cfg = dict(best.kwargs, num_warps=best.num_warps, num_stages=best.num_stages)
    if utils.ON_GPU:
        print("(! marks a ratio below its target)")
    if not args.no_memory:
        # a fixed configuration (the autotuner's choice at d 64): no re-tuning for each N
        sizes = utils.by_mode(gpu=[1024, 2048, 4096, 8192, 16384], cpu=[16, 33])
        memory_rows(B, H, 64 if utils.ON_GPU else 16, sizes, fwd_cfg)


if __name__ == "__main__":
    main()
