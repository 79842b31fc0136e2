"""Benchmark notebook 07's Triton matmul against cuBLAS, for tuning its configurations on a GPU.

    python bench/triton_matmul.py                  # fp16 sweep 1024..8192, fp32 / TF32 at 4096, fused epilogue
    python bench/triton_matmul.py --sizes 4096     # only some sizes
    python bench/triton_matmul.py --record         # also record the rows in results/ (as notebook 07 does)

Prints a table: size, dtype, Triton TFLOP/s, cuBLAS TFLOP/s, ratio (cuBLAS time / Triton time: >= 1 is as fast
as cuBLAS), and the autotuner's chosen configuration; then matmul + bias + GeLU fused vs unfused. Target on an
H100: fp16 >= 0.90x cuBLAS at 4096^3. Edit GPU_CONFIGS here and in the notebook together (a script cannot import
a notebook; the kernel is a copy of the notebook's matmul_kernel / matmul_bias_gelu_kernel, fused in one kernel
with an EPILOGUE switch). In cpu mode it runs tiny sizes in the interpreter: that checks the script only.
"""
import argparse

import utils  # first: chooses the mode before triton is imported
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

NB = "07_triton_matmul"


@triton.jit
def matmul_kernel(a_ptr, b_ptr, bias_ptr, out_ptr, h, w, k,
                  a_stride_r, a_stride_k, b_stride_k, b_stride_c, out_stride_r, out_stride_c,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, DOT_PRECISION: tl.constexpr, EPILOGUE: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(h, BLOCK_M), tl.cdiv(w, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    r = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % h
    c = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % w
    kk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + r[:, None] * a_stride_r + kk[None, :] * a_stride_k
    b_ptrs = b_ptr + kk[:, None] * b_stride_k + c[None, :] * b_stride_c
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        a = tl.load(a_ptrs, mask=kk[None, :] < k - k0, other=0.0)
        b = tl.load(b_ptrs, mask=kk[:, None] < k - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * a_stride_k
        b_ptrs += BLOCK_K * b_stride_k
    if EPILOGUE:  # bias + GeLU (erf), as matmul_bias_gelu_kernel
        acc += tl.load(bias_ptr + c)[None, :].to(tl.float32)
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out_ptrs = out_ptr + r[:, None] * out_stride_r + c[None, :] * out_stride_c
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(r[:, None] < h) & (c[None, :] < w))


def config(BM, BN, BK, stages, warps, group=8):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=group),
                         num_stages=stages, num_warps=warps)


GPU_CONFIGS = [  # keep in step with notebook 07
    config(128, 256, 64, 3, 8), config(256, 128, 64, 3, 8), config(128, 256, 64, 4, 8),
    config(128, 128, 64, 4, 8), config(128, 128, 64, 3, 4), config(64, 256, 64, 4, 4),
    config(128, 128, 32, 4, 8), config(64, 128, 32, 4, 4), config(128, 64, 32, 4, 4),
]
CPU_CONFIG = config(32, 32, 32, 1, 4, group=2)
tuned = triton.autotune(configs=GPU_CONFIGS if utils.ON_GPU else [CPU_CONFIG],
                        key=["h", "w", "k", "DOT_PRECISION", "EPILOGUE"])(matmul_kernel)


def matmul(a, b, bias=None, tf32=False):
    h, k = a.shape
    w = b.shape[1]
    out = torch.empty(h, w, dtype=a.dtype, device=a.device)
    prec = "tf32" if a.dtype != torch.float32 or tf32 else "ieee"
    grid = lambda meta: (utils.cdiv(h, meta["BLOCK_M"]) * utils.cdiv(w, meta["BLOCK_N"]),)  # noqa: E731
    tuned[grid](a, b, out if bias is None else bias, out, h, w, k, *a.stride(), *b.stride(), *out.stride(),
                DOT_PRECISION=prec, EPILOGUE=bias is not None)
    return out


def short(cfg):
    if cfg is None:
        return ""
    kw = cfg.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} G{kw['GROUP_M']} "
            f"w{cfg.num_warps} s{cfg.num_stages}")


def timed(fn, *args, **kw):
    return utils.bench(fn, *args, reps=utils.by_mode(gpu=None, cpu=2), **kw)


def row(n, label, t, t_ref, record, kernel, kind, baseline_name):
    fl, size = 2 * n**3, f"{n}³"
    tri, ref = fl / t.median / 1e9, fl / t_ref.median / 1e9
    print(f"{size:>22} {label:>10} {tri:>10,.1f} {ref:>10,.1f} {t_ref.median / t.median:>7.2f}x  "
          f"{short(tuned.best_config) if utils.ON_GPU else ''}")
    if record:
        utils.record(NB, kernel, size, t, utils.rate(t, flops=fl, kind=kind), baseline=t_ref,
                     baseline_name=baseline_name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*")
    ap.add_argument("--record", action="store_true", help="record rows in results/ (GPU only)")
    args = ap.parse_args()
    print(utils.banner())
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    sizes = args.sizes or utils.by_mode(gpu=[1024, 2048, 3072, 4096, 6144, 8192], cpu=[64, 96])
    print(f"\n{'size':>22} {'dtype':>10} {'Triton':>10} {'cuBLAS':>10} {'ratio':>8}  config   (TFLOP/s)")
    for n in sizes:
        a = torch.randn(n, n, device=utils.DEVICE, dtype=torch.float16)
        b = torch.randn(n, n, device=utils.DEVICE, dtype=torch.float16)
        utils.check(matmul(a, b), a.float() @ b.float(), atol=0.05, rtol=1e-2, name=f"fp16 {n}")
        t_ref, t = timed(torch.matmul, a, b), timed(matmul, a, b)
        row(n, "fp16", t, t_ref, args.record, "triton matmul fp16 (autotuned)", "fp16", "cuBLAS")
    n = utils.by_mode(gpu=4096, cpu=64)
    a = torch.randn(n, n, device=utils.DEVICE)
    b = torch.randn(n, n, device=utils.DEVICE)
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for tf32, kind in ((False, "fp32"), (True, "tf32")):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            # TF32 rounds inputs to 10-bit mantissas: errors grow like sqrt(k) (see the notebook)
            tol = 1e-2 * n**0.5 if tf32 else 5e-2
            utils.check(matmul(a, b, tf32=tf32), a @ b, atol=tol, rtol=1e-2, name=kind)
            t_ref, t = timed(torch.matmul, a, b), timed(matmul, a, b, tf32=tf32)
            if not utils.ON_GPU and kind == "tf32":
                continue  # no TF32 ceiling on the CPU
            row(n, kind, t, t_ref, args.record, f"triton matmul {kind} (autotuned)", kind, f"cuBLAS {kind}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    h, k, w = utils.by_mode(gpu=(8192, 1024, 4096), cpu=(96, 72, 80))
    a = torch.randn(h, k, device=utils.DEVICE, dtype=torch.float16)
    b = torch.randn(k, w, device=utils.DEVICE, dtype=torch.float16) / k**0.5
    bias = torch.randn(w, device=utils.DEVICE, dtype=torch.float16)
    utils.check(matmul(a, b, bias), F.gelu(a.float() @ b.float() + bias.float()), atol=1e-2, rtol=1e-2,
                name="fused")
    t_eager = timed(lambda: F.gelu(a @ b + bias))
    t_unfused = timed(lambda: F.gelu(matmul(a, b) + bias))
    t_fused = timed(matmul, a, b, bias)
    print(f"\nmatmul + bias + GeLU, {h}x{k} @ {k}x{w} fp16:  eager {utils.fmt_ms(t_eager.median)}, "
          f"Triton unfused {utils.fmt_ms(t_unfused.median)}, fused {utils.fmt_ms(t_fused.median)}  "
          f"(fused: {t_eager.median / t_fused.median:.2f}x eager, {t_unfused.median / t_fused.median:.2f}x unfused)")


if __name__ == "__main__":
    main()
