"""Benchmark the FlashAttention of gpu_course.kernels.triton_attention (Triton) against PyTorch's own (SDPA's flash backend).

    python bench/flash_attention.py                # batch 4, heads 16, N 4096, d 64 and 128, fp16; memory vs N
    python bench/flash_attention.py --n 2048 --dims 64 --no-memory

For each head dimension, causal and not: checks the output and dQ, dK, dV of ours and of SDPA-flash
against an fp32 reference (ours may err at most twice as much as SDPA-flash, plus a small floor),
then times forward and backward (utils.bench, medians) and prints TFLOP/s (4·B·H·N²·d for the
forward, halved when causal, 2.5 times that for the backward) and the ratio of SDPA's time to ours
(>= 1: as fast as PyTorch). Targets on an H100: forward >= 0.80x, backward >= 0.6x. Then the peak
memory (torch.cuda.max_memory_allocated above the inputs) of the forward, naive vs ours, for N up to
16384: the naive one writes N x N scores and runs out of memory first. The kernels, launchers and
autotuner configurations are the notebook's own, from gpu_course/kernels/triton_attention.py. In cpu
mode it runs tiny sizes in the interpreter (SDPA's default CPU kernel as the baseline): that checks the
script only; the timings mean nothing.
"""
import argparse
import contextlib

import utils  # first: chooses the mode before triton is imported
import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu_course.kernels import triton_attention as ta

REPS = utils.by_mode(gpu=None, cpu=2)  # the interpreter's times mean nothing: two runs check the script
TARGETS = {"forward": 0.80, "backward": 0.6}


def flash_backend():
    """SDPA restricted to its FlashAttention-2 kernel on a GPU; its default CPU kernel in cpu mode."""
    return sdpa_kernel(SDPBackend.FLASH_ATTENTION) if utils.ON_GPU else contextlib.nullcontext()


def sdpa(q, k, v, causal):
    with flash_backend():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def short(cfg):
    if cfg is None:
        return "-"
    return f"{cfg.kwargs['BLOCK_M']}x{cfg.kwargs['BLOCK_N']} w{cfg.num_warps} s{cfg.num_stages}"


def max_err(a, b):
    return (a.detach().double() - b.detach().double()).abs().max().item()


def check_like_sdpa(q, k, v, do, causal):
    """Ours and SDPA-flash against an fp32 reference (SDPA's math kernel): ours must not err more
    than twice as much as SDPA-flash does, plus a floor (fp16 outputs round at ~5e-4)."""
    ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal)
    ref_grads = torch.autograd.grad(ref, ref_in, do.float())
    results = {}
    for name, fn in (("ours", ta.flash_attention), ("sdpa", sdpa)):
        out = fn(q, k, v, causal)
        results[name] = (out, *torch.autograd.grad(out, (q, k, v), do))
    report = []
    for i, (what, floor) in enumerate((("out", 2e-3), ("dq", 1e-2), ("dk", 1e-2), ("dv", 1e-2))):
        ref_i = ref if i == 0 else ref_grads[i - 1]
        ours, theirs = max_err(results["ours"][i], ref_i), max_err(results["sdpa"][i], ref_i)
        report.append(f"{what} {ours:.1e} (sdpa {theirs:.1e})")
        if not ours <= 2 * theirs + floor:
            raise utils.CheckFailed(f"flash_attention, causal={causal}: {what} errs by {ours:.2e}, "
                                    f"SDPA-flash by {theirs:.2e} (allowed: 2x + {floor})")
    return "max errors vs fp32: " + ", ".join(report)


def timed(B, H, N, d, causal):
    """Forward and backward times of ours and SDPA-flash, fp16, after the correctness check."""
    q, k, v, do = (torch.randn(B, H, N, d, device=utils.DEVICE, dtype=torch.float16) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    errors = check_like_sdpa(q, k, v, do, causal)
    times = {}
    for name, fn in (("ours", ta.flash_attention), ("sdpa", sdpa)):
        times[name, "forward"] = utils.bench(fn, q, k, v, causal, reps=REPS)
        out = fn(q, k, v, causal)
        times[name, "backward"] = utils.bench(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True),
                                              reps=REPS)
    return times, errors


def memory_rows(B, H, d, sizes, cfg):
    """Peak memory of the forward (no autograd) above its inputs, naive vs ours; naive may run out."""
    print(f"\nPeak memory of the forward, batch {B}, heads {H}, d {d}, fp16, non-causal (above the inputs):")
    print(f"{'N':>7} {'N x N scores':>13} {'naive':>13} {'ours':>13}")
    for n in sizes:
        q, k, v = (torch.randn(B, H, n, d, device=utils.DEVICE, dtype=torch.float16) for _ in range(3))
        row = [f"{n:>7}", f"{B * H * n * n * 2 / 2**30:>9.2f} GiB"]
        for fn in (lambda: ta.naive_attention(q, k, v), lambda: ta.attention_forward(q, k, v, cfg=cfg)):
            if not utils.ON_GPU:
                fn()
                row.append(f"{'(cpu: n/a)':>13}")
                continue
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            try:
                with torch.no_grad():
                    res = fn()
                torch.cuda.synchronize()
                row.append(f"{(torch.cuda.max_memory_allocated() - base) / 2**30:>9.3f} GiB")
                del res
            except torch.cuda.OutOfMemoryError:
                row.append(f"{'out of memory':>13}")
            torch.cuda.empty_cache()
        print(" ".join(row))
        del q, k, v


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
          f"(targets: forward >= {TARGETS['forward']}x, backward >= {TARGETS['backward']}x)")
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
                mark = "" if not utils.ON_GPU else (" " if ratio >= TARGETS[phase] else "!")
                cells.append(f"{fl / ours / 1e9:>9.1f} {fl / theirs / 1e9:>9.1f} {ratio:>5.2f}x{mark}")
            configs = "; ".join(short(getattr(kernel, "best_config", None)) for kernel in
                                (ta.attention_fwd_tuned, ta.attention_bwd_dkdv_tuned, ta.attention_bwd_dq_tuned))
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
