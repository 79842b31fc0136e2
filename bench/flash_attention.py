"""Benchmark the FlashAttention of gpu_course.kernels.triton_attention (Triton) against every SDPA backend that runs here.

    python bench/flash_attention.py                # batch 4, heads 16, N 4096, d 64 and 128, fp16; memory vs N
    python bench/flash_attention.py --n 2048 --dims 64 --no-memory --backends "SDPA flash"
    python bench/flash_attention.py --no-record    # print only

For each head dimension, causal and not: checks the output and dQ, dK, dV of ours and of SDPA (its flash
backend, or the memory-efficient one on a GPU without flash) against an fp32 reference (ours may err at
most twice as much as SDPA, plus a small floor); tries each SDPA backend (cuDNN, flash, memory-efficient)
once, forward and backward, and skips it with a one-line reason where the GPU lacks it or it raises; then
times forward and backward of ours and of each backend that ran (utils.bench_user: GPU time with the
launch hidden, time per step in a back-to-back loop, CPU time per call) and prints TFLOP/s (4·B·H·N²·d
for the forward, halved when causal, 2.5 times that for the backward) with the % of the spec-sheet fp16
peak, and a line for ours against each of SDPA flash and SDPA cuDNN that ran; after all shapes, a table of
each library's time over ours (above 1.00x ours is faster), GPU time and loop. On a GPU these timings are
appended to results/<device>.csv under notebook "bench/flash_attention", named as notebook 11 names them
(lessons.attention.record_speed: each SDPA backend's row, and ours against SDPA flash and against SDPA
cuDNN, each with its loop and CPU figures); --no-record leaves the results alone.
Then the peak memory (torch.cuda.max_memory_allocated above the inputs) of the forward, naive vs ours,
for N up to 16384: the naive one writes N x N scores and runs out of memory first. Last, the tensor-core
instructions in the PTX of our kernels (wgmma.mma_async on Hopper). The kernels, launchers, autotuner
configurations and the comparison itself are notebook 11's own, from
gpu_course/kernels/triton_attention/ (the kernels) and gpu_course/lessons/attention/ (the comparison). In cpu mode it runs tiny sizes in the interpreter (SDPA's
default CPU kernel as the baseline): that checks the script only; the timings mean nothing, and nothing
is recorded.
"""
import argparse
import math

import utils  # first: chooses the mode before triton is imported
import torch
import triton

from gpu_course.kernels import triton_attention as ta
from gpu_course.lessons import attention as lesson
from gpu_course.results import bench_recording, record_flag

NB = "bench/flash_attention"   # the results rows' notebook


def gib(x):
    if x is None:
        return f"{'(cpu: n/a)':>13}"
    return f"{'out of memory':>13}" if math.isinf(x) else f"{x / 2**30:>9.3f} GiB"


def memory_rows(B, H, d, sizes, cfg):
    """Peak memory of the forward (no autograd) above its inputs, naive vs ours; naive may run out."""
    print(f"\nPeak memory of the forward, batch {B}, heads {H}, d {d}, fp16, non-causal (above the inputs):")
    print(f"{'N':>7} {'N x N scores':>13} {'naive':>13} {'ours':>13}")
    for row in lesson.forward_memory(B, H, d, sizes, cfg):
        print(f"{row['n']:>7} {row['scores'] / 2**30:>9.2f} GiB {gib(row['naive'])} {gib(row['ours'])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=utils.by_mode(gpu=4096, cpu=40), help="sequence length")
    ap.add_argument("--dims", type=int, nargs="*", default=utils.by_mode(gpu=[64, 128], cpu=[16]))
    ap.add_argument("--backends", nargs="*", default=list(lesson.SDPA_BACKENDS), choices=list(lesson.SDPA_BACKENDS),
                    help="the SDPA backends to time against")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory table")
    args = record_flag(ap).parse_args()
    print(utils.banner())
    print(bench_recording(args.record))
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    if not utils.ON_GPU:
        print("cpu mode: tiny sizes in the interpreter; these timings and ratios mean nothing.")
    B, H, N = utils.by_mode(gpu=(4, 16), cpu=(1, 2)) + (args.n,)
    size = f"B{B} H{H} N{N} fp16"
    print(f"\nbatch {B}, heads {H}, N {N}, fp16")
    speed, skipped, fwd_cfg = {}, {}, None
    for d in args.dims:
        for causal in (False, True):
            q, k, v, do = (torch.randn(B, H, N, d, device=utils.DEVICE, dtype=torch.float16) for _ in range(4))
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            errors = lesson.errors_like_sdpa(q, k, v, do, causal)
            baselines, why = lesson.sdpa_baselines(q, k, v, do, causal, names=args.backends)
            skipped.update(why)
            times = speed[d, causal] = lesson.time_attention(q, k, v, do, causal, baselines)
            print(f"\n--- {lesson.shape_tag(d, causal)}; configs (fwd; dkdv; dq): {'; '.join(lesson.tuned_configs().values())}")
            print("max errors vs fp32: " + ", ".join(f"{what} {ours:.1e} (sdpa {theirs:.1e})"
                                                    for what, (ours, theirs) in errors.items()))
            for phase in ("forward", "backward"):
                flops = ta.attention_flops(B, H, N, d, causal, backward=phase == "backward")
                print(lesson.speed_table(times, phase, flops))
                lesson.record_speed(NB, lesson.shape_tag(d, causal), size, times, phase, flops)  # prints ours vs each
            if d == 64 and not causal and not ta.uses_descriptors(q) and ta.attention_fwd_tuned.best_config:
                best = ta.attention_fwd_tuned.best_config   # the pointer kernel's (the descriptor forward tunes per N)
                fwd_cfg = dict(best.kwargs, num_warps=best.num_warps, num_stages=best.num_stages)
            del q, k, v, do
    print()
    for line in skipped.values():
        print(line)
    print(lesson.ratio_table(speed, baselines=[b for b in args.backends]))
    if not args.no_memory:
        # the pointer kernel: its autotuner's choice at d 64, fixed (no re-tuning for each N); with descriptors, tuned per N
        sizes = utils.by_mode(gpu=[1024, 2048, 4096, 8192, 16384], cpu=[16, 33])
        memory_rows(B, H, 64 if utils.ON_GPU else 16, sizes, fwd_cfg)
    if utils.ON_GPU:
        d = args.dims[0]
        q, k, v, do = (torch.randn(B, H, N, d, device=utils.DEVICE, dtype=torch.float16) for _ in range(4))
        print(f"\nTensor-core instructions in the PTX of our kernels (d={d}):")
        for kernel, ops in lesson.tensor_core_instructions(q, k, v, do).items():
            print(f"{kernel:>8}: {', '.join(ops) or 'none'}")


if __name__ == "__main__":
    main()
