"""Notebook 15's FP8 GEMM in Triton: ``out = (a @ b) * scales`` with ``a`` (h x k) and ``b`` (k x w) in
float8 (e4m3fn or e5m2), accumulated in fp32 by the tensor cores, written in bf16 (fp16 where a GPU has no
bf16, and in the interpreter).

One kernel, :func:`fp8_matmul_kernel`, switched by the ``constexpr`` ``SCALING``:

* ``"tensor"``: one fp32 scale for ``a`` and one for ``b``; the product of the two is applied once, in the
  epilogue, to the fp32 tile (the scales commute with the sum over k);
* ``"block"``: DeepSeek-V3's fine-grained scaling (arXiv 2412.19437, sec. 3.3.2): ``a`` has one scale per
  row and 128 columns of k (``sa``: h x k/128, "1 x 128 tiles"), ``b`` one per 128 x 128 block
  (``sb``: w/128 x k/128). A scale now changes along k, so it cannot wait for the epilogue: each k-block's
  product is computed into a fresh fp32 tile and added to the accumulator times ``sa[r] * sb[c]``, inside
  the loop (BLOCK_K must be 128, one scale block).

``b`` may be given K-major (``b = w.t()`` for ``w`` of shape w x k, contiguous: stride along k is 1, the
"TN" layout that Hopper's FP8 wgmma reads from shared memory) or row-major (stride along w is 1); the
kernel takes any strides, and Triton transposes a row-major ``b`` itself where wgmma needs it.

:func:`fp8_matmul_desc_kernel` is the per-tensor kernel reading ``a`` and K-major ``b`` through tensor
descriptors (on Hopper: one TMA bulk copy per block), on a persistent grid; GPU only.

>>> SCALE_BLOCK
128
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..launch import cdiv
from ..mode import ON_GPU, by_mode
from ..triton_launch import direct
from .triton_matmul import tile_of_jit   # notebook 07's grouped tile order

SCALE_BLOCK = 128          # the side of a scale block along k (and along w for b), as in DeepSeek-V3
SCALINGS = ("tensor", "block")


@triton.jit
def fp8_matmul_kernel(a_ptr, b_ptr, out_ptr, sa_ptr, sb_ptr, h, w, k,
                      a_stride_r, a_stride_k, b_stride_k, b_stride_c, out_stride_r, out_stride_c,
                      sa_stride_r, sb_stride_c,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, SCALING: tl.constexpr):
    pid_m, pid_n = tile_of_jit(tl.program_id(0), tl.cdiv(h, BLOCK_M), tl.cdiv(w, BLOCK_N), GROUP_M)
    r = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % h        # wrapped: rows past h repeat (never stored)
    c = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % w
    kk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + r[:, None] * a_stride_r + kk[None, :] * a_stride_k
    b_ptrs = b_ptr + kk[:, None] * b_stride_k + c[None, :] * b_stride_c
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        a = tl.load(a_ptrs, mask=kk[None, :] < k - k0, other=0.0)
        b = tl.load(b_ptrs, mask=kk[:, None] < k - k0, other=0.0)
        if SCALING == "block":       # a scale per k-block: applied inside the loop, to this block's product
            kb = k0 // BLOCK_K
            sa = tl.load(sa_ptr + r * sa_stride_r + kb)                  # (BLOCK_M,) one per row
            sb = tl.load(sb_ptr + (c // BLOCK_K) * sb_stride_c + kb)     # (BLOCK_N,) one per 128 columns
            acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])
        else:                        # one scale per tensor: the tensor cores accumulate in place
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * a_stride_k
        b_ptrs += BLOCK_K * b_stride_k
    if SCALING == "tensor":          # the epilogue: both scales at once, on the fp32 tile
        acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out_ptrs = out_ptr + r[:, None] * out_stride_r + c[None, :] * out_stride_c
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(r[:, None] < h) & (c[None, :] < w))


@triton.jit
def fp8_matmul_desc_kernel(a_desc, b_desc, out_ptr, sa_ptr, sb_ptr, h, w, k, out_stride_r,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           GROUP_M: tl.constexpr, SCALING: tl.constexpr, NUM_SMS: tl.constexpr):
    """The same product on a persistent grid (NUM_SMS programs, each taking every NUM_SMS-th tile), ``a``
    (h x k) and K-major ``b`` (stored w x k) read through tensor descriptors: one TMA copy per block."""
    tiles = tl.cdiv(h, BLOCK_M) * tl.cdiv(w, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = tile_of_jit(tile, tl.cdiv(h, BLOCK_M), tl.cdiv(w, BLOCK_N), GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, k, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k0])
            b = b_desc.load([pid_n * BLOCK_N, k0])
            if SCALING == "block":
                kb = k0 // BLOCK_K
                r = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % h
                c = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % w
                sa = tl.load(sa_ptr + r * tl.cdiv(k, BLOCK_K) + kb)
                sb = tl.load(sb_ptr + (c // BLOCK_K) * tl.cdiv(k, BLOCK_K) + kb)
                acc += tl.dot(a, b.T) * (sa[:, None] * sb[None, :])
            else:
                acc = tl.dot(a, b.T, acc)
        if SCALING == "tensor":
            acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
        r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(out_ptr + r[:, None] * out_stride_r + c[None, :], acc.to(out_ptr.dtype.element_ty),
                 mask=(r[:, None] < h) & (c[None, :] < w))


def out_dtype() -> torch.dtype:
    """The product's dtype: bf16 on a GPU that has it, fp16 elsewhere (the interpreter's bf16 is wrong:
    a trap the course measured, see notebook 06)."""
    if not ON_GPU:
        return torch.float16
    from ..hardware import gpu_has
    return torch.bfloat16 if gpu_has("bf16") else torch.float16


# BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages: the best of an H200's sweeps at 4096³ and 8192³ (the
# pointer kernel per tensor 873 and 1155 TFLOP/s, block-scaled 550 and 659; the descriptor kernel 819 and 1171);
# the CPU's tile is small so that the interpreter runs few programs.
GPU_DEFAULT_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=4, num_stages=4)
DEFAULT_CONFIG = by_mode(gpu=GPU_DEFAULT_CONFIG,
                         cpu=dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, num_warps=4, num_stages=1))
GPU_BLOCK_CONFIG = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=4, num_stages=4)
BLOCK_CONFIG = by_mode(gpu=GPU_BLOCK_CONFIG,
                       cpu=dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=128, GROUP_M=2, num_warps=4, num_stages=1))
DESC_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=3)


def _check(a, b, sa, sb, scaling):
    assert scaling in SCALINGS, f"fp8_matmul: scaling must be one of {SCALINGS}, got {scaling!r}"
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0], \
        f"fp8_matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not match (a is h x k, b is k x w)"
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    assert a.dtype in fp8 and b.dtype in fp8, f"fp8_matmul: a and b must be float8, got {a.dtype} and {b.dtype}"
    h, k = a.shape
    w = b.shape[1]
    if scaling == "tensor":
        assert sa.numel() == 1 and sb.numel() == 1, "fp8_matmul: per-tensor scaling takes one scale for a and one for b"
    else:
        kb, wb = cdiv(k, SCALE_BLOCK), cdiv(w, SCALE_BLOCK)
        assert sa.shape == (h, kb) and sa.stride(1) == 1, \
            f"fp8_matmul: block scaling wants sa of shape ({h}, {kb}) (a row x 128 of k), got {tuple(sa.shape)}"
        assert sb.shape == (wb, kb) and sb.stride(1) == 1, \
            f"fp8_matmul: block scaling wants sb of shape ({wb}, {kb}) (128 x 128 blocks of b), got {tuple(sb.shape)}"
    assert sa.dtype == torch.float32 and sb.dtype == torch.float32, "fp8_matmul: scales are fp32"
    return h, w, k


def fp8_matmul(a, b, sa, sb, scaling="tensor", cfg=None, alloc=torch.empty):
    """``(a @ b)`` dequantised by the scales (see the module's docstring), in :func:`out_dtype`; ``cfg`` a
    dict of BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages (default :data:`DEFAULT_CONFIG`,
    :data:`BLOCK_CONFIG` for block scaling)."""
    h, w, k = _check(a, b, sa, sb, scaling)
    cfg = dict(cfg or (BLOCK_CONFIG if scaling == "block" else DEFAULT_CONFIG))
    if scaling == "block":
        assert cfg["BLOCK_K"] == SCALE_BLOCK, f"fp8_matmul: block scaling needs BLOCK_K = {SCALE_BLOCK}"
    out = alloc(h, w, dtype=out_dtype(), device=a.device)
    grid = (cdiv(h, cfg["BLOCK_M"]) * cdiv(w, cfg["BLOCK_N"]),)
    direct(fp8_matmul_kernel)[grid](a, b, out, sa, sb, h, w, k, *a.stride(), *b.stride(), *out.stride(),
                                    sa.stride(0) if sa.ndim == 2 else 0, sb.stride(0) if sb.ndim == 2 else 0,
                                    SCALING=scaling, **cfg)
    return out


def fp8_matmul_desc(a, b, sa, sb, scaling="tensor", cfg=None, sms=None):
    """:func:`fp8_matmul` through :func:`fp8_matmul_desc_kernel` (GPU only): ``b`` must be K-major (a view
    ``w.t()`` of a contiguous w x k tensor), k a multiple of 16 (TMA's 16-byte rows)."""
    if not ON_GPU:
        raise RuntimeError("fp8_matmul_desc needs a GPU: tensor descriptors are copied by Hopper's TMA")
    from triton.tools.tensor_descriptor import TensorDescriptor

    from ..hardware import sm_count
    h, w, k = _check(a, b, sa, sb, scaling)
    assert b.stride(0) == 1, "fp8_matmul_desc: b must be K-major (b = w.t() of a contiguous w x k tensor)"
    cfg = dict(cfg or (BLOCK_CONFIG if scaling == "block" else DESC_CONFIG))
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    out = torch.empty(h, w, dtype=out_dtype(), device=a.device)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b.t(), [bn, bk])
    n_sms = sms or sm_count()
    grid = (min(n_sms, cdiv(h, bm) * cdiv(w, bn)),)
    fp8_matmul_desc_kernel[grid](a_desc, b_desc, out, sa, sb, h, w, k, out.stride(0), SCALING=scaling,
                                 NUM_SMS=grid[0], **cfg)
    return out
