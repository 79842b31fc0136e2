"""Notebook 15's weight-only quantised linear layer for decoding: ``out = x @ W.T`` for a few rows of ``x``
(batch 1 to 16: a memory-bound product), with ``W`` (n x k, nn.Linear's layout) stored as

* **int4**, two per byte, group-wise scales: ``packed`` (n x k/2, uint8) holds ``q + 8`` of column 2j in the
  low nibble of byte j and of column 2j + 1 in the high nibble (q in [-8, 7]); ``scales`` (k/GROUP x n, the
  activations' dtype) hold one scale per GROUP consecutive columns of a row: ``W[r, c] = q[r, c] *
  scales[c // GROUP, r]``;
* **int8**, one scale per row (output channel): ``W[r, c] = q[r, c] * scales[r]``, as
  ``torch._weight_int8pack_mm`` takes it.

The weights are dequantised in registers, never written back: the kernel reads 0.5 (or 1) byte per weight
and the activations' few rows. :func:`int4_gemv_kernel` reads the packed bytes four at a time, as int32
words: word j of a row holds columns 8j .. 8j + 7, column 8j + i in bits 4i .. 4i + 3 (bytes are
little-endian); it takes the nibbles one position i at a time, each against the activations' columns
8j + i. A nibble becomes a float with one integer OR and one subtraction: ``0x4B000000 | q`` read as an
fp32 is 2^23 + q exactly (2^23's exponent, q in the low mantissa bits), so subtracting 2^23 + 8 gives
q - 8 without an int-to-float conversion (a slower instruction). Each program takes BLOCK_N rows of
``W`` over its share of k (``SPLIT_K`` shares add their partial sums with atomics). Below 16 rows of
activations the products go to the CUDA cores: a block of ``BLOCK_K`` columns is seen as (groups, words), one
scale is loaded per (row, group), and the products are summed elementwise over the k loop and reduced once after
it; on a GPU ``triton.autotune`` picks the block (:data:`INT4_TUNE`) on a shape's first call. From 16 rows,
:func:`int4_gemm_dot_kernel` sends them to the tensor cores (``tl.dot``).

>>> GROUP
128
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..launch import cdiv
from ..mode import ON_GPU, by_mode
from ..triton_launch import direct

GROUP = 128          # columns of W per int4 scale


@triton.jit
def _nibble(words, i: tl.constexpr):
    """Nibble ``i`` of each int32 word, as fp32 q - 8 in [-8, 7]: 2^23 + q by its bits, minus 2^23 + 8."""
    q = ((words >> (4 * i)) & 0xF) | 0x4B000000
    return q.to(tl.float32, bitcast=True) - 8388616.0


@triton.jit
def _store_rows(out_ptr, out, m, rows, M, N, out_stride_m, SPLIT_K: tl.constexpr):
    """The epilogue the three kernels share: the (BLOCK_M, BLOCK_N) tile of outputs, stored in the output's
    dtype, or added with atomics to an fp32 buffer when SPLIT_K programs share a row's k."""
    out_ptrs = out_ptr + m[:, None] * out_stride_m + rows[None, :]
    ok = (m[:, None] < M) & (rows[None, :] < N)
    if SPLIT_K == 1:
        tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=ok)
    else:
        tl.atomic_add(out_ptrs, out, mask=ok)


@triton.jit
def int4_gemv_kernel(x_ptr, w_ptr, s_ptr, out_ptr, M, N, K, x_stride_m, w_stride_n, s_stride_g, out_stride_m,
                     GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     SPLIT_K: tl.constexpr):
    """The CUDA-core path (batch below 16): a block of BLOCK_K columns is BLOCK_K / GROUP groups of GROUP / 8
    words; one scale load per (row, group); products summed elementwise over k, reduced once after the loop."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)            # rows of W: outputs
    m = tl.arange(0, BLOCK_M)                                 # rows of x
    g = tl.arange(0, BLOCK_K // GROUP)                        # groups in this block
    j = tl.arange(0, GROUP // 8)                              # int32 words of a group
    word = g[:, None] * (GROUP // 8) + j[None, :]             # (groups, words): word of the block
    span = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K    # this program's share of k
    acc = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K // GROUP, GROUP // 8), dtype=tl.float32)
    for k0 in range(pid_k * span, tl.minimum(K, (pid_k + 1) * span), BLOCK_K):
        cols8 = k0 + 8 * word                                 # the first column of each word
        ok_w = (rows[:, None, None] < N) & (cols8[None, :, :] < K)
        wq = tl.load(w_ptr + rows[:, None, None] * w_stride_n + (k0 // 8 + word)[None, :, :], mask=ok_w,
                     other=-2004318072)                       # 0x88888888: q = 0 past the edges
        s = tl.load(s_ptr + (k0 // GROUP + g)[None, :] * s_stride_g + rows[:, None],   # (BLOCK_N, groups)
                    mask=(rows[:, None] < N) & (k0 + g * GROUP < K)[None, :], other=0.0).to(tl.float32)
        x_ptrs = x_ptr + m[:, None, None] * x_stride_m + cols8[None, :, :]
        ok_x = (m[:, None, None] < M) & (cols8[None, :, :] < K)
        part = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K // GROUP, GROUP // 8), dtype=tl.float32)
        for i in tl.static_range(8):                          # column 8j + i of every word j
            xi = tl.load(x_ptrs + i, mask=ok_x, other=0.0).to(tl.float32)      # (BLOCK_M, groups, words)
            part += xi[:, None, :, :] * _nibble(wq, i)[None, :, :, :]
        acc += part * s[None, :, :, None]                     # the group's scale, once per word
    out = tl.sum(tl.sum(acc, axis=3), axis=2)                 # (BLOCK_M, BLOCK_N): one reduction, at the end
    _store_rows(out_ptr, out, m, rows, M, N, out_stride_m, SPLIT_K)


@triton.jit
def int4_gemm_dot_kernel(x_ptr, w_ptr, s_ptr, out_ptr, M, N, K, x_stride_m, w_stride_n, s_stride_g, out_stride_m,
                         GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         SPLIT_K: tl.constexpr):
    """The tensor-core path (batch 16 and more): each nibble position's (BLOCK_N, BLOCK_K / 8) weights, scaled
    per word, go to ``tl.dot`` against the matching columns of x."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tl.arange(0, BLOCK_M)
    words = tl.arange(0, BLOCK_K // 8)
    span = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(pid_k * span, tl.minimum(K, (pid_k + 1) * span), BLOCK_K):
        cols8 = k0 + 8 * words
        ok_w = (rows[:, None] < N) & (cols8[None, :] < K)
        wq = tl.load(w_ptr + rows[:, None] * w_stride_n + (k0 // 8 + words)[None, :], mask=ok_w, other=-2004318072)
        s = tl.load(s_ptr + (cols8 // GROUP)[None, :] * s_stride_g + rows[:, None], mask=ok_w, other=0.0)
        for i in tl.static_range(8):
            wi = (_nibble(wq, i) * s.to(tl.float32))
            xi = tl.load(x_ptr + m[:, None] * x_stride_m + (cols8 + i)[None, :],
                         mask=(m[:, None] < M) & (cols8[None, :] < K), other=0.0)
            acc = tl.dot(xi, tl.trans(wi.to(xi.dtype)), acc)
    _store_rows(out_ptr, acc, m, rows, M, N, out_stride_m, SPLIT_K)


@triton.jit
def int8_gemv_kernel(x_ptr, w_ptr, s_ptr, out_ptr, M, N, K, x_stride_m, w_stride_n, out_stride_m,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                     USE_DOT: tl.constexpr):
    """int8 weights (one byte each), one scale per row of W, applied once after the sum over k."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tl.arange(0, BLOCK_M)
    kk = tl.arange(0, BLOCK_K)
    span = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(pid_k * span, tl.minimum(K, (pid_k + 1) * span), BLOCK_K):
        cols = k0 + kk
        wq = tl.load(w_ptr + rows[:, None] * w_stride_n + cols[None, :],
                     mask=(rows[:, None] < N) & (cols[None, :] < K), other=0)
        xk = tl.load(x_ptr + m[:, None] * x_stride_m + cols[None, :], mask=(m[:, None] < M) & (cols[None, :] < K),
                     other=0.0)
        if USE_DOT:
            acc = tl.dot(xk, tl.trans(wq.to(xk.dtype)), acc)
        else:
            acc += tl.sum(xk.to(tl.float32)[:, None, :] * wq.to(tl.float32)[None, :, :], axis=2)
    acc = acc * tl.load(s_ptr + rows, mask=rows < N, other=0.0).to(tl.float32)[None, :]
    _store_rows(out_ptr, acc, m, rows, M, N, out_stride_m, SPLIT_K)


# BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages. The int4 CUDA-core path (batch below 16) is autotuned on a GPU
# over INT4_TUNE (the best of an H200's sweep of the former kernel, and blocks of several groups), once per
# (M, N, K); the interpreter takes one config (several would each run in it). The tensor-core paths and int8
# take fixed configs from an H200's sweeps; the CPU's are small so that the interpreter runs few programs.
_T = [(16, 128, 1, 4, 2), (64, 128, 4, 4, 2)] + [(bn, bk, sk, w, st) for bn, bk, sk, w, st in [
    (8, 512, 1, 2, 2), (16, 512, 1, 4, 2), (16, 512, 2, 4, 2), (32, 512, 1, 8, 2), (32, 512, 2, 4, 3),
    (8, 1024, 1, 4, 2), (16, 1024, 1, 4, 3), (16, 1024, 2, 8, 2), (32, 1024, 1, 8, 2), (16, 512, 4, 4, 2),
    (8, 512, 4, 2, 3), (32, 256, 4, 8, 2)]]
INT4_TUNE = [triton.Config(dict(BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=sk), num_warps=w, num_stages=st)
             for bn, bk, sk, w, st in _T]
INT4_CONFIG = by_mode(gpu=None, cpu=dict(BLOCK_N=16, BLOCK_K=256, SPLIT_K=1, num_warps=4, num_stages=1))
INT4_DOT_CONFIG = by_mode(gpu=dict(BLOCK_N=64, BLOCK_K=256, SPLIT_K=1, num_warps=4, num_stages=3),
                          cpu=dict(BLOCK_N=16, BLOCK_K=128, SPLIT_K=1, num_warps=4, num_stages=1))
INT8_CONFIG = by_mode(gpu=dict(BLOCK_N=16, BLOCK_K=512, SPLIT_K=1, num_warps=4, num_stages=2),
                      cpu=dict(BLOCK_N=16, BLOCK_K=64, SPLIT_K=1, num_warps=4, num_stages=1))
INT8_DOT_CONFIG = by_mode(gpu=dict(BLOCK_N=64, BLOCK_K=128, SPLIT_K=1, num_warps=4, num_stages=3),
                          cpu=dict(BLOCK_N=16, BLOCK_K=64, SPLIT_K=1, num_warps=4, num_stages=1))
_int4_tuned = triton.autotune(INT4_TUNE, key=["M", "N", "K"], reset_to_zero=["out_ptr"])(int4_gemv_kernel)
DOT_FROM = 16        # rows of x from which the tensor-core path is taken (tl.dot needs 16)


def _block_m(M: int) -> int:
    return max(16, triton.next_power_of_2(M)) if M >= DOT_FROM else triton.next_power_of_2(M)


def _launch(kernel, x, w, s, N, K, cfg, extra, strides):
    M = x.shape[0]
    split = cfg["SPLIT_K"]
    out = (torch.zeros if split > 1 else torch.empty)(M, N, dtype=torch.float32 if split > 1 else x.dtype,
                                                     device=x.device)
    grid = (cdiv(N, cfg["BLOCK_N"]), split)
    direct(kernel)[grid](x, w, s, out, M, N, K, x.stride(0), *strides, out.stride(0), **extra,
                         BLOCK_M=_block_m(M), **cfg)
    return out if split == 1 else out.to(x.dtype)


def int4_gemv(x, packed, scales, cfg=None):
    """``x @ W.T`` for W given as int4 ``packed`` (n x k/2 uint8) and group-wise ``scales`` (k/GROUP x n),
    in x's dtype; see the module's docstring. ``cfg``: BLOCK_N, BLOCK_K (a multiple of GROUP), SPLIT_K,
    num_warps, num_stages (default: below 16 rows of x, autotuned over :data:`INT4_TUNE` on a GPU and
    :data:`INT4_CONFIG` on the CPU; :data:`INT4_DOT_CONFIG` from 16 rows)."""
    M, K = x.shape
    N = packed.shape[0]
    assert x.stride(1) == 1, "int4_gemv: x must have contiguous rows"
    assert packed.dtype == torch.uint8 and packed.shape == (N, K // 2) and packed.is_contiguous(), \
        f"int4_gemv: packed must be a contiguous ({N}, {K // 2}) uint8 tensor (two weights a byte), got " \
        f"{tuple(packed.shape)} {packed.dtype}"
    assert K % 8 == 0, f"int4_gemv: k must be a multiple of 8 (whole int32 words), got {K}"
    assert scales.shape == (cdiv(K, GROUP), N) and scales.stride(1) == 1, \
        f"int4_gemv: scales must be ({cdiv(K, GROUP)}, {N}) (one per {GROUP} columns of a row), got {tuple(scales.shape)}"
    words, strides = packed.view(torch.int32), (K // 8, scales.stride(0))
    if M >= DOT_FROM:
        return _launch(int4_gemm_dot_kernel, x, words, scales, N, K, dict(cfg or INT4_DOT_CONFIG), dict(GROUP=GROUP),
                       strides)
    cfg = cfg or INT4_CONFIG or _tuned_config(x, words, scales, N, K, strides)
    assert cfg["BLOCK_K"] % GROUP == 0, f"int4_gemv: BLOCK_K must be a multiple of {GROUP}"
    return _launch(int4_gemv_kernel, x, words, scales, N, K, dict(cfg), dict(GROUP=GROUP), strides)


_TUNED: dict = {}     # (M, N, K, dtype, device) -> the autotuner's choice, as a config dict


def _tuned_config(x, words, scales, N, K, strides) -> dict:
    """The autotuner's configuration for this shape, chosen on the first call of a shape (``triton.autotune`` times
    every config of :data:`INT4_TUNE`, zeroing a scratch output before each, since split-K adds into it) and kept:
    later calls launch the chosen config directly, without the autotuner's per-call Python, the zeroing or an
    fp32 buffer where the choice has no split."""
    M = x.shape[0]
    key = (M, N, K, x.dtype, x.device)
    if key not in _TUNED:
        scratch = torch.zeros(M, N, dtype=torch.float32, device=x.device)
        grid = lambda meta: (cdiv(N, meta["BLOCK_N"]), meta["SPLIT_K"])   # noqa: E731
        _int4_tuned[grid](x, words, scales, scratch, M, N, K, x.stride(0), *strides, scratch.stride(0), GROUP=GROUP,
                          BLOCK_M=_block_m(M))
        c = _int4_tuned.best_config
        _TUNED[key] = dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)
    return _TUNED[key]


def tuned_configs() -> dict:
    """``{(M, N, K): cfg}``: the autotuner's choice for every shape the CUDA-core int4 path has run on this
    process's GPU (empty on the CPU, where :data:`INT4_CONFIG` is taken without tuning)."""
    return {key[:3]: dict(cfg) for key, cfg in _TUNED.items()}


def int8_gemv(x, q, scales, cfg=None):
    """``x @ W.T`` for W given as int8 ``q`` (n x k) and one scale per row (``scales``: n), in x's dtype."""
    M, K = x.shape
    N = q.shape[0]
    assert x.stride(1) == 1 and q.dtype == torch.int8 and q.shape == (N, K) and q.stride(1) == 1, \
        f"int8_gemv: q must be an ({N}, {K}) int8 tensor with contiguous rows, got {tuple(q.shape)} {q.dtype}"
    assert scales.shape == (N,), f"int8_gemv: scales must be ({N},), one per row of W, got {tuple(scales.shape)}"
    cfg = dict(cfg or (INT8_DOT_CONFIG if M >= DOT_FROM else INT8_CONFIG))
    return _launch(int8_gemv_kernel, x, q, scales, N, K, cfg, dict(USE_DOT=M >= DOT_FROM), (q.stride(0),))
