"""FlashAttention's forward with pointer loads (notebook 11's Triton forward): the kernel
:func:`attention_fwd_kernel` (one program per query block and batch x head) and the helpers it calls, its autotuner,
and what both forwards share: the input checks, the output buffers, and the record of the last launch
(:func:`last_forward_kernel`, :func:`registers`, :func:`resident_blocks`).

Exponentials are base 2 inside the kernels (``exp2(x * log2(e)) == exp(x)``, one instruction cheaper); the LSE
handed out is in natural log.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .configs import forward_configs
from .reference import check_inputs

HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E)


# ------------------------------------------------------------------------------------- Triton forward
@triton.jit
def _fwd_inner(acc, m_i, l_i, q, k_base, v_base, rows, lo, hi, N, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
               DOT_PRECISION: tl.constexpr):
    """Key blocks [lo, hi) for one query block: the online-softmax update. Without MASK the blocks
    are wholly inside N and (causal) wholly in every row's past: no per-element test."""
    dims = tl.arange(0, HEAD_DIM)
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        if MASK:
            kt = tl.load(k_base + cols[None, :] * HEAD_DIM + dims[:, None], mask=cols[None, :] < N, other=0.0)
            vb = tl.load(v_base + cols[:, None] * HEAD_DIM + dims[None, :], mask=cols[:, None] < N, other=0.0)
        else:
            kt = tl.load(k_base + cols[None, :] * HEAD_DIM + dims[:, None])      # k^T block: (HEAD_DIM, BLOCK_N)
            vb = tl.load(v_base + cols[:, None] * HEAD_DIM + dims[None, :])      # v block: (BLOCK_N, HEAD_DIM)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * qk_scale             # log2 units, fp32
        if MASK:
            ok = cols[None, :] < N
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)                                       # rescales the old sum, output
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(vb.dtype), vb, acc * alpha[:, None], input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _key_bounds(pid_m, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """``(full_end, hi)`` for query block ``pid_m``: the key blocks in [0, full_end) are wholly inside N
    (and, causal, wholly left of this query block), so they need no mask; [full_end, hi) are the diagonal
    block(s) and the ragged end."""
    if CAUSAL:
        full_end = (tl.minimum(pid_m * BLOCK_M, N) // BLOCK_N) * BLOCK_N
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)
    else:
        full_end = (N // BLOCK_N) * BLOCK_N
        hi = N
    return full_end, hi


@triton.jit
def _store_rows(acc, m_i, l_i, o_ptr, lse_ptr, bh, rows, N, HEAD_DIM: tl.constexpr):
    """The forward's epilogue for query ``rows`` of (batch x head) ``bh``: the output ``acc / l`` and the
    natural-log LSE of the scores (``m + log2(l)`` is in log2 units), stored for the rows inside N."""
    out = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows < N
    base = bh.to(tl.int64) * N * HEAD_DIM
    tl.store(o_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None])
    tl.store(lse_ptr + bh.to(tl.int64) * N + rows, lse, mask=row_ok)


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, scale, N,
                         HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per (block of BLOCK_M query rows, batch x head); q, k, v, o contiguous (B, H, N, HEAD_DIM)."""
    pid_m = tl.program_id(0)
    if CAUSAL:  # the last query blocks have the most keys to visit: start them first (a shorter tail)
        pid_m = tl.num_programs(0) - 1 - pid_m
    base = tl.program_id(1).to(tl.int64) * N * HEAD_DIM                         # this (batch, head)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows < N
    q = tl.load(q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], mask=row_ok[:, None], other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    qk_scale = scale * 1.4426950408889634                                       # exp2 instead of exp
    # blocks wholly in range (and, causal, wholly left of this query block) first, without masks ...
    full_end, hi = _key_bounds(pid_m, N, BLOCK_M, BLOCK_N, CAUSAL)
    acc, m_i, l_i = _fwd_inner(acc, m_i, l_i, q, k_ptr + base, v_ptr + base, rows, 0, full_end, N, qk_scale,
                               HEAD_DIM, BLOCK_N, CAUSAL, False, DOT_PRECISION)
    # ... then the diagonal block(s) and the ragged end, masked
    acc, m_i, l_i = _fwd_inner(acc, m_i, l_i, q, k_ptr + base, v_ptr + base, rows, full_end, hi, N, qk_scale,
                               HEAD_DIM, BLOCK_N, CAUSAL, True, DOT_PRECISION)
    _store_rows(acc, m_i, l_i, o_ptr, lse_ptr, tl.program_id(1), rows, N, HEAD_DIM)


attention_fwd_tuned = triton.autotune(configs=forward_configs(),
                                      key=["N", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"])(attention_fwd_kernel)


def check_flash_inputs(q, k, v, name):
    check_inputs(q, k, v, name)
    if q.dtype not in DTYPES:
        raise TypeError(f"{name}: dtype must be one of {', '.join(map(str, DTYPES))}, got {q.dtype}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"{name}: the head dimension d must be one of {HEAD_DIMS}, got {q.shape[-1]}")


def _forward_buffers(q, k, v, name, alloc):
    """What both forwards do before their launch: check the inputs (``name`` in the errors), make them
    contiguous, and allocate the output (as q) and the fp32 LSE (B, H, N) with ``alloc``."""
    check_flash_inputs(q, k, v, name)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = alloc(q.shape, dtype=q.dtype, device=q.device)
    lse = alloc(q.shape[:3], dtype=torch.float32, device=q.device)
    return q, k, v, out, lse


_LAST_FORWARD = [None]   # the compiled kernel of the last forward launch (for :func:`registers`)
_FORWARD_TUNER = [None]  # the autotuner the last autotuned forward went through (for :func:`tuned_configs`)


def last_forward_kernel():
    """The compiled kernel of the last forward launch (None before any; in the interpreter what the launch returned)."""
    return _LAST_FORWARD[0]


def last_forward_tuner():
    """The autotuner the last autotuned forward went through (pointer or descriptor kernel's; None before any)."""
    return _FORWARD_TUNER[0]


def registers(ck=None):
    """``(registers per thread, spilled registers)`` of a compiled Triton kernel (default: the last
    forward's), as its cubin records them; ``(None, None)`` in the interpreter, which compiles nothing."""
    ck = _LAST_FORWARD[0] if ck is None else ck
    return getattr(ck, "n_regs", None), getattr(ck, "n_spills", None)


def resident_blocks(ck=None):
    """How many blocks of a compiled Triton kernel (default: the last forward's) one SM of this GPU holds at
    once, from its warps, registers and shared memory (:func:`gpu_course.occupancy.blocks_per_sm`); None in
    the interpreter, which compiles nothing."""
    from ...occupancy import blocks_per_sm, sm_limits
    ck = _LAST_FORWARD[0] if ck is None else ck
    if getattr(ck, "n_regs", None) is None:
        return None
    meta = ck.metadata
    return blocks_per_sm(32 * meta.num_warps, ck.n_regs, meta.shared, sm_limits()).blocks
