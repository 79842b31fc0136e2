"""An int4 GEMV for batch 1 on weights repacked for the kernel, as torch's int4 kernel has its own layout
(``torch._convert_weight_to_int4pack``): ``out = x @ W.T`` for one row of ``x``, W (n x k) given as notebook 15's
``packed`` bytes and group-wise ``scales`` (:mod:`.quant_gemv`), repacked once by :func:`repack_strided`.

Two changes from :func:`~.quant_gemv.int4_gemv_kernel`, each measured on an H200 (L2 flushed, 8192 x 8192,
batch 1): 43.5 µs for the course's kernel, 31.4 µs here, 24.5 µs for torch's int4 kernel.

* **Strided packing.** In the course's bytes, int32 word j of a row holds columns 8j .. 8j + 7, so nibble i of the
  block's words meets the columns 8j + i of x: a load of x with a stride of 8, which Triton lays out through shared
  memory (with barriers) to broadcast it over the rows. :func:`repack_strided` puts column ``16 i + w`` of each
  group of 128 in nibble i of word w of that group: nibble i of the group's 16 words meets 16 *consecutive*
  columns of x, one contiguous vector broadcast over the rows.
* **A nibble as a mantissa.** With the word shifted so that nibble i lands in bits 19-22 (left by ``19 - 4 i``
  for i <= 4, right by ``4 i - 19`` above), ``(t & 0x00780000) | 0x3F800000`` read as an fp32 is exactly
  ``f = 1 + q'/16`` (exponent 0, the nibble q' = q + 8 in the mantissa's top four bits): a shift, an AND, an OR
  and a multiply-add per weight. With ``q = 16 (f - 1) - 8``, ``sum(q x) = 16 sum(f x) - 24 sum(x)``:
  the ``sum(x)`` of a block is one vector for all the block's rows, and the group's scale multiplies once per word.

>>> words = repack_strided(torch.arange(64, dtype=torch.uint8).repeat(2, 1))   # 2 rows, k = 128
>>> tuple(words.shape), int(words[0, 0]) & 0xF, (int(words[0, 0]) >> 4) & 0xF   # columns 0 and 16 of row 0
((2, 16), 0, 8)
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..launch import cdiv
from ..mode import by_mode
from ..triton_launch import direct
from .quant_gemv import GROUP

WORDS = GROUP // 8      # int32 words of one group of 128 columns


def repack_strided(packed: torch.Tensor) -> torch.Tensor:
    """Notebook 15's ``packed`` (n x k/2 uint8: column 2j in byte j's low nibble, 2j + 1 in its high one) as the
    kernel's int32 words (n x k/8): nibble i of word w of each group of 128 columns holds column ``16 i + w`` of
    the group. k must be a multiple of 128."""
    n, half = packed.shape
    assert packed.dtype == torch.uint8 and (2 * half) % GROUP == 0, \
        f"repack_strided: packed must be uint8 with k a multiple of {GROUP}, got {packed.dtype} with k = {2 * half}"
    q = torch.stack([packed & 0xF, packed >> 4], -1).reshape(n, 2 * half).to(torch.int64)   # q + 8, by column
    q = q.view(n, -1, 8, WORDS).transpose(2, 3)                     # [row, group, word w, nibble i]: column 16 i + w
    words = (q << (4 * torch.arange(8, device=q.device))).sum(-1)  # < 2^32
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32).reshape(n, -1).contiguous()


@triton.jit
def int4_gemv_strided_kernel(x_ptr, w_ptr, s_ptr, out_ptr, N, K, w_stride_n, s_stride_g,
                             BLOCK_N: tl.constexpr, BLOCK_KW: tl.constexpr, SPLIT_K: tl.constexpr):
    """BLOCK_N rows of W over this program's share of the k blocks (BLOCK_KW words: BLOCK_KW / 16 groups);
    one fp32 sum per (row, word position), reduced once after the loop; SPLIT_K shares add with atomics."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    wi = tl.arange(0, BLOCK_KW)
    kw = K // 8
    blocks = tl.cdiv(kw, BLOCK_KW)
    per = tl.cdiv(blocks, SPLIT_K)
    ok_n = rows < N
    acc = tl.zeros((BLOCK_N, BLOCK_KW), dtype=tl.float32)
    for blk in range(pid_k * per, tl.minimum((pid_k + 1) * per, blocks)):
        words = blk * BLOCK_KW + wi
        ok = ok_n[:, None] & (words < kw)[None, :]
        wq = tl.load(w_ptr + rows[:, None] * w_stride_n + words[None, :], mask=ok,
                     other=-2004318072).to(tl.uint32, bitcast=True)          # 0x88888888: q = 0 past the edges
        s = tl.load(s_ptr + (words // 16)[None, :] * s_stride_g + rows[:, None], mask=ok, other=0.0).to(tl.float32)
        fx = tl.zeros((BLOCK_N, BLOCK_KW), dtype=tl.float32)
        sx = tl.zeros((BLOCK_KW,), dtype=tl.float32)
        for i in tl.static_range(8):                                        # 16 consecutive columns per group
            xi = tl.load(x_ptr + (words // 16) * 128 + 16 * i + words % 16, mask=words < kw, other=0.0)
            xi = xi.to(tl.float32)
            if 4 * i <= 19:
                t = wq << (19 - 4 * i)
            else:
                t = wq >> (4 * i - 19)
            f = ((t & 0x00780000) | 0x3F800000).to(tl.float32, bitcast=True)   # 1 + q'/16
            fx += f * xi[None, :]
            sx += xi
        acc += (16.0 * fx - 24.0 * sx[None, :]) * s
    out = tl.sum(acc, axis=1)
    if SPLIT_K == 1:
        tl.store(out_ptr + rows, out.to(out_ptr.dtype.element_ty), mask=ok_n)
    else:
        tl.atomic_add(out_ptr + rows, out, mask=ok_n)


# BLOCK_N, BLOCK_KW, SPLIT_K, num_warps, num_stages: the best of an H200's sweep (8192 x 8192 and 4096 x 14336,
# batch 1: 48 configurations); the interpreter's keeps its grid small.
CONFIG = by_mode(gpu=dict(BLOCK_N=32, BLOCK_KW=64, SPLIT_K=2, num_warps=4, num_stages=2),
                 cpu=dict(BLOCK_N=16, BLOCK_KW=16, SPLIT_K=1, num_warps=4, num_stages=1))


def int4_gemv_strided(x, words, scales, cfg=None, alloc=torch.empty):
    """``x @ W.T`` for one row of ``x`` (1 x k) and W given as :func:`repack_strided` ``words`` (n x k/8 int32)
    and ``scales`` (k/128 x n), in x's dtype. ``cfg``: BLOCK_N, BLOCK_KW (a multiple of 16), SPLIT_K, num_warps,
    num_stages (default :data:`CONFIG`); ``alloc`` makes the output where k is not split."""
    M, K = x.shape
    N = words.shape[0]
    assert M == 1 and x.stride(1) == 1, f"int4_gemv_strided: one row of x with contiguous columns, got {tuple(x.shape)}"
    assert K % GROUP == 0 and words.dtype == torch.int32 and words.shape == (N, K // 8) and words.is_contiguous(), \
        f"int4_gemv_strided: words must be repack_strided's contiguous ({N}, {K // 8}) int32 tensor, k a multiple " \
        f"of {GROUP}; got {tuple(words.shape)} {words.dtype} with k = {K}"
    assert scales.shape == (K // GROUP, N) and scales.stride(1) == 1, \
        f"int4_gemv_strided: scales must be ({K // GROUP}, {N}), got {tuple(scales.shape)}"
    cfg = dict(cfg or CONFIG)
    assert cfg["BLOCK_KW"] % WORDS == 0, f"int4_gemv_strided: BLOCK_KW must be a multiple of {WORDS}"
    split = cfg.pop("SPLIT_K")
    out = torch.zeros(1, N, dtype=torch.float32, device=x.device) if split > 1 else \
        alloc(1, N, dtype=x.dtype, device=x.device)
    direct(int4_gemv_strided_kernel)[(cdiv(N, cfg["BLOCK_N"]), split)](
        x, words, scales, out, N, K, K // 8, scales.stride(0), SPLIT_K=split, **cfg)
    return out if split == 1 else out.to(x.dtype)
