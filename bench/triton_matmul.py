"""Benchmark notebook 07's Triton matmul against cuBLAS, for tuning its configurations on a GPU.

    python bench/triton_matmul.py                  # fp16 sweep 1024..8192, fp32 / TF32 at 4096, fused epilogue
    python bench/triton_matmul.py --sizes 4096     # only some sizes
    python bench/triton_matmul.py --no-record      # print only

Prints a table with two rows per size and dtype, cuBLAS and Triton: GPU time (launch hidden), time per step of
a back-to-back loop, CPU time per call (utils.bench_user), TFLOP/s (over the GPU time), cuBLAS's time over
Triton's for the GPU time and for the loop (>= 1 is as fast as cuBLAS), and the autotuner's chosen
configuration; then, at 2048^3 and 4096^3, the same figures with and without a CUDA graph (utils.compare);
then matmul + bias + GeLU fused vs unfused vs eager torch. Target on an H100: fp16 >= 0.90x cuBLAS at 4096^3
(GPU time). On a GPU every row of these tables is appended to results/<device>.csv under notebook
"bench/triton_matmul" (Triton's and the others' against cuBLAS or eager torch, each with its loop and CPU
figures and the baseline's); --no-record leaves the results alone. The kernel, its launcher and the
autotuner's configurations are the notebook's own, from gpu_course/kernels/triton_matmul.py (edit
matmul_configs there). In cpu mode it runs tiny sizes in the interpreter: that checks the script only, and
records nothing.
"""
import argparse

import utils  # first: chooses the mode before triton is imported
import torch
import torch.nn.functional as F
import triton

from gpu_course.kernels.triton_matmul import matmul, matmul_tuned
from gpu_course.results import bench_recording, compare_and_record, record_comparison, record_flag
from gpu_course.user_timing import user_cells, user_header, user_ratios

NB = "bench/triton_matmul"   # the results rows' notebook


def short(cfg):
    if cfg is None:
        return ""
    kw = cfg.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} G{kw['GROUP_M']} "
            f"w{cfg.num_warps} s{cfg.num_stages}")


HEADER = f"{'size':>8} {'dtype':>6} {'kernel':<8}{user_header()}{'TFLOP/s':>9}  × cuBLAS (GPU, loop)  config"


def rows(n, label, t, t_ref, kernel, kind, baseline_name):
    """Print cuBLAS's row and Triton's (both UserTimings) and record them (``record_comparison``:
    cuBLAS's as ``cuBLAS <kind>``, Triton's as ``kernel`` against it, under ``baseline_name``)."""
    fl, size = 2 * n**3, f"{n}³"
    for name, tt in (("cuBLAS", t_ref), ("Triton", t)):
        cfg = short(matmul_tuned.best_config) if utils.ON_GPU and tt is t else ""
        print(f"{size:>8} {label:>6} {name:<8}{user_cells(tt)}{fl / tt.median / 1e9:>9,.1f}  "
              f"{user_ratios(tt, t_ref):>19}  {cfg}")
    record_comparison(NB, size, {f"cuBLAS {kind}": t_ref, kernel: t}, f"cuBLAS {kind}", flops=fl, kind=kind,
                      baseline_name=baseline_name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*")
    args = record_flag(ap).parse_args()
    print(utils.banner())
    print(bench_recording(args.record))
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    sizes = args.sizes or utils.by_mode(gpu=[1024, 2048, 3072, 4096, 6144, 8192], cpu=[64, 96])
    print(f"\n{HEADER}")
    for n in sizes:
        a = torch.randn(n, n, device=utils.DEVICE, dtype=torch.float16)
        b = torch.randn(n, n, device=utils.DEVICE, dtype=torch.float16)
        utils.check(matmul(a, b), a.float() @ b.float(), atol=0.05, rtol=1e-2, name=f"fp16 {n}")
        t_ref, t = utils.bench_user(torch.matmul, a, b), utils.bench_user(matmul, a, b)
        rows(n, "fp16", t, t_ref, "triton matmul fp16 (autotuned)", "fp16", "cuBLAS")
    n = utils.by_mode(gpu=4096, cpu=64)
    a = torch.randn(n, n, device=utils.DEVICE)
    b = torch.randn(n, n, device=utils.DEVICE)
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for tf32, kind in ((False, "fp32"), (True, "tf32")):
            if tf32 and not utils.gpu_has("tf32"):   # before Ampere it would time fp32 again
                continue
            torch.backends.cuda.matmul.allow_tf32 = tf32
            # TF32 rounds inputs to 10-bit mantissas: errors grow like sqrt(k) (see the notebook)
            tol = 1e-2 * n**0.5 if tf32 else 5e-2
            utils.check(matmul(a, b, tf32=tf32), a @ b, atol=tol, rtol=1e-2, name=kind)
            if not utils.ON_GPU and kind == "tf32":
                continue  # checked; no TF32 on the CPU to time against
            t_ref = utils.bench_user(torch.matmul, a, b)
            t = utils.bench_user(matmul, a, b, tf32=tf32)
            rows(n, kind, t, t_ref, f"triton matmul {kind} (autotuned)", kind, f"cuBLAS {kind}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    if not utils.ON_GPU:
        print("(cpu mode: the interpreter's and the CPU's wall clock; these figures say nothing about a GPU)")
    print("\nWith and without a CUDA graph: a Triton launch goes through Python, cuBLAS's through torch's C++ "
          "dispatcher; a CUDA graph replays it")
    for n in [s for s in sizes if s in (2048, 4096)] or sizes[:1]:
        a = torch.randn(n, n, device=utils.DEVICE, dtype=torch.float16)
        b = torch.randn(n, n, device=utils.DEVICE, dtype=torch.float16)
        print(f"fp16 {n}³:")
        compare_and_record(NB, f"{n}³", {"cuBLAS": lambda: torch.matmul(a, b), "ours": lambda: matmul(a, b),
                                         "cuBLAS, CUDA graph": utils.cuda_graph(torch.matmul, a, b),
                                         "ours, CUDA graph": utils.cuda_graph(matmul, a, b)},
                           baseline="cuBLAS", flops=2 * n**3, kind="fp16", prefix="fp16 as called: ")
    h, k, w = utils.by_mode(gpu=(8192, 1024, 4096), cpu=(48, 40, 36))
    a = torch.randn(h, k, device=utils.DEVICE, dtype=torch.float16)
    b = torch.randn(k, w, device=utils.DEVICE, dtype=torch.float16) / k**0.5
    bias = torch.randn(w, device=utils.DEVICE, dtype=torch.float16)
    utils.check(matmul(a, b, bias, activation="gelu"), F.gelu(a.float() @ b.float() + bias.float()),
                atol=1e-2, rtol=1e-2, name="fused")
    print(f"\nmatmul + bias + GeLU, {h}x{k} @ {k}x{w} fp16:")
    t = compare_and_record(NB, f"{h}x{k} @ {k}x{w}", {"eager torch": lambda: F.gelu(a @ b + bias),
                                                      "Triton unfused": lambda: F.gelu(matmul(a, b) + bias),
                                                      "Triton fused": lambda: matmul(a, b, bias, "gelu")},
                           baseline="eager torch", flops=2 * h * k * w, kind="fp16",
                           prefix="matmul + bias + GeLU: ")
    print(f"fused vs unfused (unfused time / fused): {user_ratios(t['Triton fused'], t['Triton unfused']).strip()}"
          " (GPU, loop)")


if __name__ == "__main__":
    main()
