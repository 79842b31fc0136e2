"""Attention in plain torch, for teaching and as the reference (notebook 11's first sections): the input
checks and softmax scale every attention here shares, :func:`naive_attention` (the N x N scores in memory),
:func:`online_softmax_attention` (one block of keys at a time, with a running maximum and sum), and the FLOP
counts the tables divide by (:func:`attention_flops`, :func:`tile_flops`).
"""
from __future__ import annotations

import math

import torch


def check_inputs(q, k, v, name="attention"):
    """Raise a clear error unless q, k, v are (batch, heads, N, d) tensors of one shape, dtype and device."""
    for t, label in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: {label} must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != 4:
            raise ValueError(f"{name}: {label} must have shape (batch, heads, N, d), got {tuple(t.shape)}")
    if not q.shape == k.shape == v.shape:
        raise ValueError(f"{name}: q, k, v must have one shape (self-attention), got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{name}: q, k, v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"{name}: q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if q.shape[2] < 1:
        raise ValueError(f"{name}: the sequence length N must be at least 1, got shape {tuple(q.shape)}")


def default_scale(d, scale=None):
    """The softmax scale: ``1 / sqrt(d)`` unless given (as torch's scaled_dot_product_attention)."""
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def naive_attention(q, k, v, causal=False, scale=None):
    """``softmax(scale * q @ k^T) @ v`` in plain torch, in the inputs' dtype: the N x N scores and
    probabilities are written to memory (the notebook's baseline). ``causal``: query i sees keys <= i."""
    check_inputs(q, k, v, "naive_attention")
    s = (q @ k.transpose(-2, -1)) * default_scale(q.shape[-1], scale)  # (B, H, N, N)
    if causal:
        n = q.shape[2]
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def online_softmax_attention(q, k, v, causal=False, block=64, scale=None):
    """The same as :func:`naive_attention`, one block of ``block`` keys at a time (plain torch, for
    teaching): each query row keeps a running maximum ``m``, a running sum ``l`` of ``exp(s - m)``
    and an unnormalized output ``acc``; when a new block raises the maximum to ``m_new``, the old
    sum and output are rescaled by ``exp(m - m_new)``. Statistics in fp32 (float64 inputs stay float64);
    at most N x ``block`` scores exist at a time."""
    check_inputs(q, k, v, "online_softmax_attention")
    if block < 1:
        raise ValueError(f"online_softmax_attention: block must be at least 1, got {block}")
    acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    n = q.shape[2]
    qs = q.to(acc_dtype) * default_scale(q.shape[-1], scale)
    m = torch.full(q.shape[:3], float("-inf"), dtype=acc_dtype, device=q.device)  # running max
    l = torch.zeros(q.shape[:3], dtype=acc_dtype, device=q.device)                # running sum  # noqa: E741
    acc = torch.zeros(q.shape, dtype=acc_dtype, device=q.device)                  # running output
    rows = torch.arange(n, device=q.device)
    for start in range(0, n, block):
        cols = torch.arange(start, min(start + block, n), device=q.device)
        s = qs @ k[:, :, cols].to(acc_dtype).transpose(-2, -1)                  # (B, H, N, block)
        if causal:
            s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        # a row that has seen only -inf so far (causal, keys all in its future) keeps m_new = -inf: use 0
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe[..., None])
        alpha = torch.exp(m - safe)                                             # rescales the old sum
        l = l * alpha + p.sum(dim=-1)  # noqa: E741
        acc = acc * alpha[..., None] + p @ v[:, :, cols].to(acc_dtype)
        m = m_new
    return (acc / l[..., None]).to(q.dtype)


def attention_flops(batch, heads, n, d, causal=False, backward=False):
    """Floating-point operations counted for attention (the usual convention): two N x N x d
    matmuls of 2 flops per multiply-add, ``4 * batch * heads * N² * d``, halved when causal (half
    the scores are skipped); the backward 2.5 times the forward's: five matmuls' worth (S recomputed,
    dV, dP, dQ, dK), although our two backward kernels execute seven (:data:`BACKWARD_MATMULS`)."""
    f = 4 * batch * heads * n * n * d
    if causal:
        f //= 2
    return f * 5 // 2 if backward else f


def tile_flops(batch, heads, n, d, causal, block_m, block_n):
    """The FLOPs the two ``tl.dot`` s of :func:`attention_fwd_kernel` execute (notebook 11's exercise 1):
    query block i visits the key blocks up to ``hi`` (:func:`_key_bounds`: N, or causal the end of
    its own rows), each one whole, ``2 * block_m * block_n * d`` multiply-adds, masked scores and rows
    past N included.

    >>> tile_flops(1, 1, 256, 64, True, 128, 128) == 3 * 4 * 128 * 128 * 64   # 1 + 2 key blocks
    True
    """
    visits = sum(-(-min((i + 1) * block_m, n) // block_n) if causal else -(-n // block_n)
                 for i in range(-(-n // block_m)))
    return batch * heads * visits * 4 * block_m * block_n * d
