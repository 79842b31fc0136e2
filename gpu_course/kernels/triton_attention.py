"""Attention for notebook 11 (FlashAttention in Triton), timed by
``bench/flash_attention.py``: three ways to compute ``softmax(scale * q @ k^T) @ v`` over tensors of
shape (batch, heads, N, d).

* :func:`naive_attention`: plain torch, the N x N scores and probabilities written to memory (the
  baseline whose memory grows like N²).
* :func:`online_softmax_attention`: plain torch, one block of keys at a time with a running row
  maximum and row sum (the online softmax): the same result without ever holding N x N.
* :func:`flash_attention`: the online softmax in Triton, one program per (query block, batch x head),
  its tiles of scores living in registers only (FlashAttention's forward), and FlashAttention-2's
  backward split into three kernels: ``delta = rowsum(dO * O)``, then dK/dV (one program per key
  block, looping over query blocks) and dQ (one program per query block, looping over key blocks).
  The forward saves one number per query row, the log-sum-exp (LSE) of its scores, from which the
  backward rebuilds the probabilities instead of storing them.
* :func:`attention_forward_desc`: the same forward reading q, k and v through tensor descriptors (on
  Hopper, TMA bulk copies), optionally warp-specialised or hand-pipelined, or on a persistent grid.

This module holds the kernels, their configurations and their thin wrappers. What notebook 11 and
``bench/flash_attention.py`` measure them with (PyTorch's own attentions, the speed and memory tables, the
forward and backward ladders, PTX and profiler readings, Nsight Compute's counters) is in
:mod:`gpu_course.lessons.attention`.

Inside the Triton kernels exponentials are base 2 (``exp2(x * log2(e)) == exp(x)``, one instruction
cheaper); the LSE handed out is in natural log. Scores and running statistics are fp32 whatever
the input dtype (fp16, bf16; fp32 for the interpreter's tests). Launches are autotuned over
:func:`forward_configs` and :func:`backward_configs` (one configuration on the CPU).

>>> q, k, v = (torch.randn(1, 2, 37, 16, dtype=torch.float64) for _ in range(3))
>>> torch.allclose(online_softmax_attention(q, k, v, causal=True, block=8),
...                naive_attention(q, k, v, causal=True))
True
>>> attention_flops(4, 16, 4096, 64) / 1e12, attention_flops(4, 16, 4096, 64, causal=True, backward=True) / 1e12
(0.274877906944, 0.34359738368)
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..launch import cdiv
from ..hardware import gpu_supports, shared_memory_per_block, sm_count
from ..mode import DEVICE, ON_GPU, by_mode
from .triton_matmul import dot_precision

HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E)


# ------------------------------------------------------------------------------- plain torch (teaching)
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


def fwd_config(BM, BN, stages, warps):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN), num_stages=stages, num_warps=warps)


# A GPU whose blocks get less shared memory than this (Colab's T4: 64 KB) also tries the smaller tiles of
# SMALL_SMEM_CONFIGS: compiled for sm_75 at d = 128 in fp16, every tile of the lists below needs 64 KB or more
# of it in one kernel or another (the backward's 80 to 160 KB), these 48 KB.
SMALL_SMEM = 96 * 1024


def small_shared_memory() -> bool:
    """Whether this GPU gives a block less than :data:`SMALL_SMEM` of shared memory (a T4, or
    ``COURSE_FAKE_CC=7.5``); False in cpu mode.

    >>> from gpu_course.hardware import acting_as
    >>> with acting_as("7.5"):       # a T4's 64 KB a block: small on a GPU; cpu mode limits nothing
    ...     small_shared_memory() == ON_GPU
    True
    """
    limit = shared_memory_per_block()
    return ON_GPU and limit is not None and limit < SMALL_SMEM


def forward_configs():
    """What the forward's autotuner tries. GPU: query blocks of 64 or 128 rows (BLOCK_M a multiple
    of BLOCK_N, which the causal split needs), key blocks of 64 or 128. On the H100 (bench/flash_attention.py,
    fp16, B4 H16 N4096) 128x64 with 8 warps and 4 stages won at d = 64 and 128, causal or not; the
    list keeps it, two neighbours, and 64x64 for small shared memory (configs that overflow it are
    skipped by the autotuner); with :func:`small_shared_memory` also 64x32. CPU: one small block,
    never timed (tl.dot in the interpreter needs blocks of at least 16)."""
    small = [fwd_config(64, 32, 1, 4)] if small_shared_memory() else []
    return by_mode(gpu=[fwd_config(128, 64, 4, 8), fwd_config(128, 64, 3, 4), fwd_config(128, 128, 3, 8),
                        fwd_config(64, 64, 4, 4)] + small,
                   cpu=[fwd_config(16, 16, 1, 4)])


attention_fwd_tuned = triton.autotune(configs=forward_configs(),
                                      key=["N", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"])(attention_fwd_kernel)


def small_configs():
    """``(forward cfg, (dkdv cfg, dq cfg))``: one small tile shape, for correctness checks at small N and
    in fp32. The autotuners' lists are meant for fp16/bf16 at large N; in fp32 (an ``ieee`` dot) their
    large tiles overflow shared memory or take minutes to compile, once per tuning key."""
    cfg = by_mode(gpu=dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=2),
                  cpu=dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1))
    return cfg, (cfg, cfg)


def check_flash_inputs(q, k, v, name):
    check_inputs(q, k, v, name)
    if q.dtype not in DTYPES:
        raise TypeError(f"{name}: dtype must be one of {', '.join(map(str, DTYPES))}, got {q.dtype}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"{name}: the head dimension d must be one of {HEAD_DIMS}, got {q.shape[-1]}")


def attention_forward(q, k, v, causal=False, scale=None, cfg=None, alloc=torch.empty, descriptors=None):
    """FlashAttention's forward: ``(out, lse)``, ``out`` as q, ``lse`` fp32 of shape (B, H, N), the
    natural-log log-sum-exp of each row's scaled scores. Autotuned, or with ``cfg`` (BLOCK_M,
    BLOCK_N, num_warps, num_stages; BLOCK_M a multiple of BLOCK_N) fixed. Non-contiguous inputs are
    copied to contiguous ones first. Autotuned where :func:`uses_descriptors` (``descriptors=None``), it runs
    the descriptor kernel's autotuner (:func:`attention_forward_desc` with ``cfg="tuned"``); ``descriptors=False``
    or a ``cfg`` keeps the pointer kernel :func:`attention_fwd_kernel`."""
    if cfg is None and descriptors is not False and (descriptors or uses_descriptors(q)):
        _FORWARD_TUNER[0] = attention_fwd_desc_tuned
        return attention_forward_desc(q, k, v, causal, scale, cfg="tuned", alloc=alloc)
    if cfg is None:
        _FORWARD_TUNER[0] = attention_fwd_tuned
    q, k, v, out, lse = _forward_buffers(q, k, v, "flash_attention", alloc)
    B, H, N, D = q.shape
    args = (q, k, v, out, lse, default_scale(D, scale), N)
    switches = dict(HEAD_DIM=D, CAUSAL=bool(causal), DOT_PRECISION=dot_precision(q.dtype))
    if cfg is None:
        ck = attention_fwd_tuned[lambda meta: (cdiv(N, meta["BLOCK_M"]), B * H)](*args, **switches)
    else:
        if cfg["BLOCK_M"] % cfg["BLOCK_N"]:
            raise ValueError(f"flash_attention: BLOCK_M must be a multiple of BLOCK_N, got {cfg}")
        ck = attention_fwd_kernel[(cdiv(N, cfg["BLOCK_M"]), B * H)](*args, **switches, **cfg)
    _LAST_FORWARD[0] = ck
    return out, lse


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
    from ..occupancy import blocks_per_sm, sm_limits
    ck = _LAST_FORWARD[0] if ck is None else ck
    if getattr(ck, "n_regs", None) is None:
        return None
    meta = ck.metadata
    return blocks_per_sm(32 * meta.num_warps, ck.n_regs, meta.shared, sm_limits()).blocks


# ----------------------------------------------------- the forward with tensor descriptors (Hopper's TMA)
@triton.jit
def _fwd_inner_desc(acc, m_i, l_i, q, desc_k, desc_v, row0, rows, lo, hi, N, qk_scale,
                    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
                    WS: tl.constexpr):
    """:func:`_fwd_inner` with k and v blocks loaded through tensor descriptors (row ``row0 + start`` of
    the (B·H·N, HEAD_DIM) matrix), the scale folded into the exponent's argument, and the loop
    optionally warp-specialised (``WS``). A block that runs past N holds the next head's keys (or
    zeros past the tensor's end, which the copy engine fills in): MASK sets their scores to -inf."""
    for start in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        k = desc_k.load([row0 + start, 0])                                    # (BLOCK_N, HEAD_DIM)
        s = tl.dot(q, k.T)                                                     # raw scores, fp32
        if MASK:
            cols = start + tl.arange(0, BLOCK_N)
            ok = cols[None, :] < N
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            s = tl.where(ok, s, float("-inf"))
        v = desc_v.load([row0 + start, 0])                                     # (BLOCK_N, HEAD_DIM)
        acc, m_i, l_i = _online_update(acc, m_i, l_i, s, v, qk_scale)
    return acc, m_i, l_i


@triton.jit
def _online_update(acc, m_i, l_i, s, v, qk_scale):
    """One key block's online-softmax step from its raw scores ``s`` (fp32, not yet scaled) and values ``v``:
    the new running maximum (log2 units), the rescaled sum and the output accumulated with ``P v``."""
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)                          # log2 units
    p = tl.math.exp2(s * qk_scale - m_new[:, None])                            # one FMA per score, then exp2
    alpha = tl.math.exp2(m_i - m_new)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    return acc, m_new, l_i


@triton.jit
def _fwd_inner_pipelined(acc, m_i, l_i, q, desc_k, desc_v, row0, lo, hi, qk_scale, BLOCK_N: tl.constexpr):
    """:func:`_fwd_inner_desc` for unmasked key blocks [lo, hi) (at least one, ``hi - lo`` a multiple of
    BLOCK_N), software-pipelined by hand: each iteration issues the *next* block's ``q kᵀ`` before this
    block's softmax, so that the tensor cores may compute it while the other units do the softmax
    (FlashAttention-3's overlap inside a warp group, asked of the compiler by the order of the code)."""
    s = tl.dot(q, desc_k.load([row0 + lo, 0]).T)
    for start in range(lo + BLOCK_N, hi, BLOCK_N):
        s_next = tl.dot(q, desc_k.load([row0 + start, 0]).T)                  # the next block's scores first
        v = desc_v.load([row0 + start - BLOCK_N, 0])
        acc, m_i, l_i = _online_update(acc, m_i, l_i, s, v, qk_scale)         # then this block's softmax
        s = s_next
    v = desc_v.load([row0 + hi - BLOCK_N, 0])
    acc, m_i, l_i = _online_update(acc, m_i, l_i, s, v, qk_scale)
    return acc, m_i, l_i


@triton.jit
def _desc_query_block(desc_q, desc_k, desc_v, o_ptr, lse_ptr, pid_m, bh, N, qk_scale,
                      HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      WS: tl.constexpr, PIPE: tl.constexpr):
    """Query block ``pid_m`` of (batch x head) ``bh``, start to end: load its q, run the key loops (the
    unmasked blocks, then the diagonal and ragged ones) and store its rows of the output and the LSE."""
    row0 = bh * N                                                              # this head's first row
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([row0 + pid_m * BLOCK_M, 0])
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    full_end, hi = _key_bounds(pid_m, N, BLOCK_M, BLOCK_N, CAUSAL)
    if PIPE:
        if full_end > 0:
            acc, m_i, l_i = _fwd_inner_pipelined(acc, m_i, l_i, q, desc_k, desc_v, row0, 0, full_end, qk_scale,
                                                 BLOCK_N)
    else:
        acc, m_i, l_i = _fwd_inner_desc(acc, m_i, l_i, q, desc_k, desc_v, row0, rows, 0, full_end, N, qk_scale,
                                        HEAD_DIM, BLOCK_N, CAUSAL, False, WS)
    acc, m_i, l_i = _fwd_inner_desc(acc, m_i, l_i, q, desc_k, desc_v, row0, rows, full_end, hi, N, qk_scale,
                                    HEAD_DIM, BLOCK_N, CAUSAL, True, WS)
    _store_rows(acc, m_i, l_i, o_ptr, lse_ptr, bh, rows, N, HEAD_DIM)


@triton.jit
def attention_fwd_desc_kernel(desc_q, desc_k, desc_v, o_ptr, lse_ptr, scale, N, BH,
                              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, WS: tl.constexpr, PIPE: tl.constexpr, PERSIST: tl.constexpr):
    """:func:`attention_fwd_kernel` with q, k and v read through tensor descriptors of the (B·H·N,
    HEAD_DIM) matrices: on Hopper each block is one TMA bulk copy into shared memory, issued by one
    thread, instead of every thread computing addresses and loading its part. The output is stored
    through pointers with a row mask (a block of the last query rows would run into the next head).
    ``WS``: the unmasked loop warp-specialised; ``PIPE``: it is :func:`_fwd_inner_pipelined` instead.
    ``PERSIST`` (programs per SM; 0: one program per query block, grid (query blocks, BH)): a persistent
    grid of at most SMs x PERSIST programs, each looping over units of work, a unit being the query blocks
    j and n_m - 1 - j of one head: causal, every unit then visits the same number of key blocks (n_m + 1
    of BLOCK_M = BLOCK_N), so that equal shares of units are equal shares of work."""
    qk_scale = scale * 1.4426950408889634
    if PERSIST:
        n_m = tl.cdiv(N, BLOCK_M)
        pairs = (n_m + 1) // 2
        for unit in range(tl.program_id(0), BH * pairs, tl.num_programs(0)):
            bh = unit // pairs
            j = unit % pairs
            for half in range(0, tl.where(2 * j + 1 == n_m, 1, 2)):            # the middle block (odd n_m) is alone
                pid_m = tl.where(half == 0, n_m - 1 - j, j)                      # the heavier block first
                _desc_query_block(desc_q, desc_k, desc_v, o_ptr, lse_ptr, pid_m, bh, N, qk_scale,
                                  HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N, WS, PIPE)
    else:
        pid_m = tl.program_id(0)
        if CAUSAL:  # the last query blocks have the most keys to visit: start them first (a shorter tail)
            pid_m = tl.num_programs(0) - 1 - pid_m
        _desc_query_block(desc_q, desc_k, desc_v, o_ptr, lse_ptr, pid_m, tl.program_id(1), N, qk_scale,
                          HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N, WS, PIPE)


def _desc_block_shapes(nargs):
    """The autotuner's pre-hook: give the descriptors the block shape of the configuration being run."""
    bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    nargs["desc_q"].block_shape = [bm, d]
    nargs["desc_k"].block_shape = nargs["desc_v"].block_shape = [bn, d]


def desc_fwd_config(BM, BN, stages, warps, pipe=False, persist=0):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN, PIPE=pipe, PERSIST=persist), num_stages=stages,
                         num_warps=warps, pre_hook=_desc_block_shapes)


def desc_forward_configs():
    """What the descriptor forward's autotuner tries (the forward of :func:`flash_attention` where
    :func:`uses_descriptors`). On the H100 (fp16, B4 H16 N4096, 3 stages) it kept 128x128 with 4 warps at
    d = 64, 128x128 with 8 warps at d = 128, and 128x64 (or 128x128 at d = 128) with 8 warps where causal.
    The two hand-pipelined tiles (``PIPE``) won no shape there; one led the causal d = 64 case in an earlier
    sweep by a few %. The persistent 128x128 tile of 4 warps (two programs per SM) was 3 % faster than the best grid
    of query blocks causal at d = 64 on an H200 (5 % than the same tile's grid), and equal elsewhere; persistent tiles of 8 warps were not faster
    in any case. A 128x128 tile of 4 warps is skipped at d = 128 (it spills: see the pruning)."""
    return by_mode(gpu=[desc_fwd_config(128, 128, 3, 4), desc_fwd_config(128, 128, 3, 8),
                        desc_fwd_config(128, 64, 3, 8), desc_fwd_config(128, 64, 3, 4),
                        desc_fwd_config(128, 64, 4, 8, pipe=True),
                        desc_fwd_config(128, 128, 2, 8, pipe=True),
                        desc_fwd_config(128, 128, 3, 4, persist=2)],
                   cpu=[desc_fwd_config(16, 16, 1, 4)])


def _prune_desc(configs, named_args, **kwargs):
    """At d > 64 a 128x128 tile of 4 warps holds 128 x 128 fp32 scores and as many accumulators in 128 threads'
    registers: more than 255 a thread, it spills. Not worth compiling."""
    d = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM"))
    return [c for c in configs if not (d > 64 and c.num_warps == 4 and c.kwargs["BLOCK_N"] == 128)] or configs


attention_fwd_desc_tuned = triton.autotune(configs=desc_forward_configs(), key=["N", "HEAD_DIM", "CAUSAL"],
                                           prune_configs_by=dict(early_config_prune=_prune_desc)
                                           )(attention_fwd_desc_kernel)


def uses_descriptors(q) -> bool:
    """Whether :func:`flash_attention`'s forward reads through tensor descriptors here: on a GPU with TMA
    (compute capability 9.0 or newer) in fp16 or bf16. Elsewhere (older GPUs, fp32, cpu mode) it runs the
    pointer kernel of :func:`attention_forward`."""
    return ON_GPU and q.dtype in (torch.float16, torch.bfloat16) and gpu_supports("wgmma")[0]


def _descriptors(q2, k2, v2, bm, bn, d):
    from triton.tools.tensor_descriptor import TensorDescriptor
    return (TensorDescriptor.from_tensor(q2, [bm, d]), TensorDescriptor.from_tensor(k2, [bn, d]),
            TensorDescriptor.from_tensor(v2, [bn, d]))


def _desc_grid(N, BH, meta):
    """The descriptor forward's grid for a configuration ``meta``: (query blocks, BH), or with ``PERSIST``
    programs per SM at most that many per SM, and never more than there are units of work (pairs of query
    blocks of a head); in cpu mode, where programs run one after another, at most 4."""
    if not meta.get("PERSIST"):
        return cdiv(N, meta["BLOCK_M"]), BH
    units = BH * cdiv(cdiv(N, meta["BLOCK_M"]), 2)
    return min(units, sm_count(DEVICE) * meta["PERSIST"] if ON_GPU else 4), 1


def attention_forward_desc(q, k, v, causal=False, scale=None, cfg=None, warp_specialize=False, pipeline=False,
                           alloc=torch.empty):
    """:func:`attention_forward` through :func:`attention_fwd_desc_kernel`: ``(out, lse)``. ``cfg``: BLOCK_M,
    BLOCK_N, num_warps, num_stages (default :func:`desc_config`), or ``"tuned"``: the autotuner over
    :func:`desc_forward_configs` (which chooses ``pipeline`` too); ``warp_specialize`` asks Triton to split the
    key loop's warps into producers (the copies) and consumers (the math); ``pipeline`` runs the unmasked key
    blocks through :func:`_fwd_inner_pipelined`; a ``cfg`` with ``PERSIST`` (programs per SM, e.g.
    :func:`persist_config`) runs the persistent grid. fp16 and bf16 only (the interpreter takes fp32 too); tensor
    descriptors need rows of at least 16 bytes, 16-byte aligned."""
    q, k, v, out, lse = _forward_buffers(q, k, v, "attention_forward_desc", alloc)
    if q.dtype == torch.float32 and ON_GPU:
        raise TypeError("attention_forward_desc: fp16 or bf16 on a GPU (its dots have no fp32 variant here)")
    if warp_specialize and pipeline:
        raise ValueError("attention_forward_desc: warp_specialize or pipeline, not both")
    B, H, N, D = q.shape
    q2, k2, v2 = (t.view(B * H * N, D) for t in (q, k, v))
    args = (out, lse, default_scale(D, scale), N, B * H)
    if cfg == "tuned":
        descs = _descriptors(q2, k2, v2, 16, 16, D)   # block shapes set per configuration by the pre-hook
        _LAST_FORWARD[0] = attention_fwd_desc_tuned[lambda meta: _desc_grid(N, B * H, meta)](
            *descs, *args, HEAD_DIM=D, CAUSAL=bool(causal), WS=False)
        return out, lse
    cfg = dict(cfg or desc_config(D))
    cfg.setdefault("PERSIST", 0)
    if not isinstance(cfg["PERSIST"], int) or cfg["PERSIST"] < 0:
        raise ValueError(f"attention_forward_desc: PERSIST is programs per SM, an int >= 0, got {cfg['PERSIST']!r}")
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    if bm % bn:
        raise ValueError(f"attention_forward_desc: BLOCK_M must be a multiple of BLOCK_N, got {bm}, {bn}")
    _LAST_FORWARD[0] = attention_fwd_desc_kernel[_desc_grid(N, B * H, cfg)](
        *_descriptors(q2, k2, v2, bm, bn, D), *args, HEAD_DIM=D, CAUSAL=bool(causal),
        WS=bool(warp_specialize), PIPE=bool(pipeline), **cfg)
    return out, lse


def desc_config(d):
    """The tile of :func:`attention_forward_desc` by head dimension: on the H100 (fp16, B4 H16 N4096, not
    causal) 128 x 128 with 3 stages was fastest, with 4 warps at d = 64 and 8 at d = 128 (4 stages of
    128 x 128 need more shared memory than a block gets at d = 128); blocks of 16 on the CPU."""
    if not ON_GPU:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    return dict(BLOCK_M=128, BLOCK_N=128, num_warps=4 if d <= 64 else 8, num_stages=3)


def persist_config(d):
    """The configuration of ladder step 6 (the persistent grid): :func:`desc_config`'s tile, with as many
    programs per SM as that kernel has resident blocks on Hopper: 2 at d <= 64 (4 warps of at most 255
    registers and 113 KB of shared memory each), 1 at d = 128 (8 warps, 225 KB). Fewer would leave an SM
    half empty, more would queue. Blocks of 16 on the CPU."""
    return dict(desc_config(d), PERSIST=2 if d <= 64 else 1)


def pipe_config(d):
    """The tile of ladder step 5 (:func:`_fwd_inner_pipelined`), which holds two blocks of scores at once: on the
    H100 (fp16, B4 H16 N4096) 128 x 64 with 8 warps and 4 stages at d <= 64, 128 x 128 with 8 warps and 2 stages
    at d = 128 (3 stages of it overflow shared memory); blocks of 16 on the CPU."""
    if not ON_GPU:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    if d <= 64:
        return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)
    return dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)


# ------------------------------------------------------------------------------------ Triton backward
@triton.jit
def attention_bwd_delta_kernel(o_ptr, do_ptr, delta_ptr, N, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta = rowsum(dO * O), fp32: the ``sum_j P_ij dP_ij`` of the softmax's backward, per row."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    bh = tl.program_id(1).to(tl.int64)
    offs = bh * N * HEAD_DIM + rows[:, None] * HEAD_DIM + dims[None, :]
    o = tl.load(o_ptr + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    tl.store(delta_ptr + bh * N + rows, tl.sum(o * do, 1), mask=rows < N)


@triton.jit
def _dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, keys, lo, hi, N, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
                DOT_PRECISION: tl.constexpr):
    """Query blocks [lo, hi) for one key block, everything transposed (keys along rows):
    P^T = exp(S^T - LSE), dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - delta), dK += dS^T Q."""
    dims = tl.arange(0, HEAD_DIM)
    for start in range(lo, hi, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        if MASK:
            qt = tl.load(q_base + rows[None, :] * HEAD_DIM + dims[:, None], mask=rows[None, :] < N, other=0.0)
            do = tl.load(do_base + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < N, other=0.0)
            lse = tl.load(lse_base + rows, mask=rows < N, other=0.0)
            delta = tl.load(delta_base + rows, mask=rows < N, other=0.0)
        else:
            qt = tl.load(q_base + rows[None, :] * HEAD_DIM + dims[:, None])     # (HEAD_DIM, BLOCK_M)
            do = tl.load(do_base + rows[:, None] * HEAD_DIM + dims[None, :])    # (BLOCK_M, HEAD_DIM)
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        st = tl.dot(k, qt, input_precision=DOT_PRECISION) * qk_scale            # (BLOCK_N, BLOCK_M), log2 units
        pt = tl.math.exp2(st - lse[None, :] * 1.4426950408889634)
        if MASK:
            ok = rows[None, :] < N
            if CAUSAL:
                ok = ok & (rows[None, :] >= keys[:, None])
            pt = tl.where(ok, pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
        dpt = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(qt.dtype), tl.trans(qt), dk, input_precision=DOT_PRECISION)
    return dk, dv


@triton.jit
def _key_block(k_ptr, v_ptr, scale, N, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """What both backward kernels that hold a key block start with: the (batch x head) index ``bh``, its offset
    ``base``, the program's ``keys``, their elements' offsets ``offs``, their k and v tiles, zeroed fp32 dK and dV,
    the scale in log2 units, and the three ranges of query blocks they loop over, ``[lo, diag_end)``,
    ``[diag_end, full_end)``, ``[full_end, N)``: (causal) the diagonal ones, masked; those wholly inside N and in
    the keys' future, unmasked; the ragged end, masked. Each starts at a multiple of BLOCK_M."""
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    base = bh * N * HEAD_DIM
    keys = start_n + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    offs = base + keys[:, None] * HEAD_DIM + dims[None, :]
    k = tl.load(k_ptr + offs, mask=keys[:, None] < N, other=0.0)
    v = tl.load(v_ptr + offs, mask=keys[:, None] < N, other=0.0)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    qk_scale = scale * 1.4426950408889634
    if CAUSAL:
        lo = (start_n // BLOCK_M) * BLOCK_M
        diag_end = tl.minimum(tl.cdiv(start_n + BLOCK_N, BLOCK_M), tl.cdiv(N, BLOCK_M)) * BLOCK_M
    else:
        lo = 0
        diag_end = 0
    full_end = tl.maximum((N // BLOCK_M) * BLOCK_M, diag_end)
    return bh, base, keys, offs, k, v, dk, dv, qk_scale, lo, diag_end, full_end


@triton.jit
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, scale, N,
                              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per (block of BLOCK_N keys, batch x head), looping over query blocks: dK and dV of its keys."""
    bh, base, keys, offs, k, v, dk, dv, qk_scale, lo, diag_end, full_end = _key_block(
        k_ptr, v_ptr, scale, N, HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N)
    qb, dob, lseb, deltab = q_ptr + base, do_ptr + base, lse_ptr + bh * N, delta_ptr + bh * N
    dk, dv = _dkdv_inner(dk, dv, k, v, qb, dob, lseb, deltab, keys, lo, diag_end, N, qk_scale,
                         HEAD_DIM, BLOCK_M, CAUSAL, True, DOT_PRECISION)
    dk, dv = _dkdv_inner(dk, dv, k, v, qb, dob, lseb, deltab, keys, diag_end, full_end, N, qk_scale,
                         HEAD_DIM, BLOCK_M, CAUSAL, False, DOT_PRECISION)
    dk, dv = _dkdv_inner(dk, dv, k, v, qb, dob, lseb, deltab, keys, full_end, N, N, qk_scale,
                         HEAD_DIM, BLOCK_M, CAUSAL, True, DOT_PRECISION)
    tl.store(dk_ptr + offs, (dk * scale).to(dk_ptr.dtype.element_ty), mask=keys[:, None] < N)
    tl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=keys[:, None] < N)


@triton.jit
def _dq_inner(dq, q, do, lse, delta, k_base, v_base, rows, lo, hi, N, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
              DOT_PRECISION: tl.constexpr):
    """Key blocks [lo, hi) for one query block: P = exp(S - LSE), dP = dO V^T, dS = P (dP - delta), dQ += dS K."""
    dims = tl.arange(0, HEAD_DIM)
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        if MASK:
            kt = tl.load(k_base + cols[None, :] * HEAD_DIM + dims[:, None], mask=cols[None, :] < N, other=0.0)
            vt = tl.load(v_base + cols[None, :] * HEAD_DIM + dims[:, None], mask=cols[None, :] < N, other=0.0)
        else:
            kt = tl.load(k_base + cols[None, :] * HEAD_DIM + dims[:, None])      # (HEAD_DIM, BLOCK_N)
            vt = tl.load(v_base + cols[None, :] * HEAD_DIM + dims[:, None])
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * qk_scale
        p = tl.math.exp2(s - lse[:, None])
        if MASK:
            ok = cols[None, :] < N
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            p = tl.where(ok, p, 0.0)
        dp = tl.dot(do, vt, input_precision=DOT_PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(kt.dtype), tl.trans(kt), dq, input_precision=DOT_PRECISION)
    return dq


@triton.jit
def attention_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, scale, N,
                            HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per (block of BLOCK_M queries, batch x head), looping over key blocks: dQ of its rows."""
    pid_m = tl.program_id(0)
    if CAUSAL:  # heaviest blocks first, as in the forward
        pid_m = tl.num_programs(0) - 1 - pid_m
    bh = tl.program_id(1).to(tl.int64)
    base = bh * N * HEAD_DIM
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    offs = base + rows[:, None] * HEAD_DIM + dims[None, :]
    row_ok = rows < N
    q = tl.load(q_ptr + offs, mask=row_ok[:, None], other=0.0)
    do = tl.load(do_ptr + offs, mask=row_ok[:, None], other=0.0)
    lse = tl.load(lse_ptr + bh * N + rows, mask=row_ok, other=0.0) * 1.4426950408889634  # log2 units
    delta = tl.load(delta_ptr + bh * N + rows, mask=row_ok, other=0.0)
    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    qk_scale = scale * 1.4426950408889634
    full_end, hi = _key_bounds(pid_m, N, BLOCK_M, BLOCK_N, CAUSAL)
    dq = _dq_inner(dq, q, do, lse, delta, k_ptr + base, v_ptr + base, rows, 0, full_end, N, qk_scale,
                   HEAD_DIM, BLOCK_N, CAUSAL, False, DOT_PRECISION)
    dq = _dq_inner(dq, q, do, lse, delta, k_ptr + base, v_ptr + base, rows, full_end, hi, N, qk_scale,
                   HEAD_DIM, BLOCK_N, CAUSAL, True, DOT_PRECISION)
    tl.store(dq_ptr + offs, (dq * scale).to(dq_ptr.dtype.element_ty), mask=row_ok[:, None])


# The two deterministic backward kernels' loops over the other side's blocks (notebook 11 shows them and counts their
# matmuls).
BACKWARD_LOOPS = (_dkdv_inner, _dq_inner)


@triton.jit
def _dkdv_dq_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, dq_base, keys, lo, hi, N, qk_scale,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
                   DOT_PRECISION: tl.constexpr):
    """:func:`_dkdv_inner` that also adds this key block's share of dQ, ``dS K`` (here ``tl.trans(dSᵀ)`` times
    k; unscaled, fp32), into ``dq_base`` with atomic adds: five matmuls per pair of blocks instead of the two
    kernels' seven, but the order in which the key blocks' shares arrive, and so the rounding of the sum, changes
    from run to run."""
    dims = tl.arange(0, HEAD_DIM)
    for start in range(lo, hi, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        offs = rows[:, None] * HEAD_DIM + dims[None, :]
        if MASK:
            q = tl.load(q_base + offs, mask=rows[:, None] < N, other=0.0)
            do = tl.load(do_base + offs, mask=rows[:, None] < N, other=0.0)
            lse = tl.load(lse_base + rows, mask=rows < N, other=0.0)
            delta = tl.load(delta_base + rows, mask=rows < N, other=0.0)
        else:
            q = tl.load(q_base + offs)                                          # (BLOCK_M, HEAD_DIM)
            do = tl.load(do_base + offs)
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        st = tl.dot(k, tl.trans(q), input_precision=DOT_PRECISION) * qk_scale   # (BLOCK_N, BLOCK_M), log2 units
        pt = tl.math.exp2(st - lse[None, :] * 1.4426950408889634)
        if MASK:
            ok = rows[None, :] < N
            if CAUSAL:
                ok = ok & (rows[None, :] >= keys[:, None])
            pt = tl.where(ok, pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
        dpt = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)
        dst = (pt * (dpt - delta[None, :])).to(q.dtype)
        dk = tl.dot(dst, q, dk, input_precision=DOT_PRECISION)
        dq = tl.dot(tl.trans(dst), k, input_precision=DOT_PRECISION)           # (BLOCK_M, HEAD_DIM), fp32
        if MASK:
            tl.atomic_add(dq_base + offs, dq, mask=rows[:, None] < N, sem="relaxed")
        else:
            tl.atomic_add(dq_base + offs, dq, sem="relaxed")
    return dk, dv


@triton.jit
def attention_bwd_atomic_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, dq_acc_ptr, scale, N,
                                HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """:func:`attention_bwd_dkdv_kernel` with :func:`_dkdv_dq_inner`: dK and dV of its keys, and their share of
    dQ added into the fp32 ``dq_acc`` (zeroed before; :func:`attention_bwd_dq_convert_kernel` scales it)."""
    bh, base, keys, offs, k, v, dk, dv, qk_scale, lo, diag_end, full_end = _key_block(
        k_ptr, v_ptr, scale, N, HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N)
    qb, dob, dqb = q_ptr + base, do_ptr + base, dq_acc_ptr + base
    lseb, deltab = lse_ptr + bh * N, delta_ptr + bh * N
    dk, dv = _dkdv_dq_inner(dk, dv, k, v, qb, dob, lseb, deltab, dqb, keys, lo, diag_end, N, qk_scale,
                            HEAD_DIM, BLOCK_M, CAUSAL, True, DOT_PRECISION)
    dk, dv = _dkdv_dq_inner(dk, dv, k, v, qb, dob, lseb, deltab, dqb, keys, diag_end, full_end, N, qk_scale,
                            HEAD_DIM, BLOCK_M, CAUSAL, False, DOT_PRECISION)
    dk, dv = _dkdv_dq_inner(dk, dv, k, v, qb, dob, lseb, deltab, dqb, keys, full_end, N, N, qk_scale,
                            HEAD_DIM, BLOCK_M, CAUSAL, True, DOT_PRECISION)
    tl.store(dk_ptr + offs, (dk * scale).to(dk_ptr.dtype.element_ty), mask=keys[:, None] < N)
    tl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=keys[:, None] < N)


@triton.jit
def attention_bwd_dq_convert_kernel(dq_acc_ptr, dq_ptr, scale, n, BLOCK: tl.constexpr):
    """dQ = scale · dq_acc, in dQ's dtype: the last step of the atomic backward."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(dq_acc_ptr + i, mask=i < n)
    tl.store(dq_ptr + i, (x * scale).to(dq_ptr.dtype.element_ty), mask=i < n)


def bwd_config(BM, BN, stages, warps):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN), num_stages=stages, num_warps=warps)


def backward_configs():
    """What the backward's autotuners try: ``(dkdv, dq)``, lists of one length. The dK/dV kernel
    holds a key block and streams query blocks (wide BLOCK_N, narrow BLOCK_M); the dQ kernel the
    reverse. On the H100 (bench/flash_attention.py, fp16, B4 H16 N4096) dK/dV won with 32x64, 4 warps,
    4 stages at d = 64 and 64x128, 8 warps, 3 stages at d = 128, dQ with 128x64, 8 warps, 3 stages at
    both; each list keeps its winners and one smaller tile, and with :func:`small_shared_memory` a 32x32
    tile (on a T4 none of the others fits at d = 128). The causal split needs BLOCK_M a multiple
    of BLOCK_N in the dQ kernel (as in the forward). CPU: one small block each."""
    small = [bwd_config(32, 32, 1, 4)] if small_shared_memory() else []
    dkdv = by_mode(gpu=[bwd_config(32, 64, 4, 4), bwd_config(64, 128, 3, 8), bwd_config(32, 128, 3, 4)] + small,
                   cpu=[bwd_config(16, 16, 1, 4)])
    dq = by_mode(gpu=[bwd_config(128, 64, 3, 8), bwd_config(128, 32, 3, 4), bwd_config(64, 32, 4, 4)] + small,
                 cpu=[bwd_config(16, 16, 1, 4)])
    return dkdv, dq


def atomic_configs():
    """What the atomic backward's autotuner tries: on the H100 (fp16, B4 H16 N4096) 64x128 with 8 warps led at
    d = 64 and 128, 64x64 with 4 warps where causal at d = 64; 32x64 with small shared memory. CPU: one small
    block."""
    small = [bwd_config(32, 64, 2, 4)] if small_shared_memory() else []
    return by_mode(gpu=[bwd_config(64, 128, 3, 8), bwd_config(64, 64, 3, 4), bwd_config(32, 128, 3, 4)] + small,
                   cpu=[bwd_config(16, 16, 1, 4)])


DKDV_CONFIGS, DQ_CONFIGS = backward_configs()
_BWD_KEY = ["N", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"]
attention_bwd_dkdv_tuned = triton.autotune(configs=DKDV_CONFIGS, key=_BWD_KEY)(attention_bwd_dkdv_kernel)
attention_bwd_dq_tuned = triton.autotune(configs=DQ_CONFIGS, key=_BWD_KEY)(attention_bwd_dq_kernel)
attention_bwd_atomic_tuned = triton.autotune(configs=atomic_configs(), key=_BWD_KEY,
                                             reset_to_zero=["dq_acc_ptr"])(attention_bwd_atomic_kernel)
DELTA_BLOCK = by_mode(gpu=128, cpu=16)


def _backward_inputs(q, k, v, out, lse, dout, alloc):
    """What both backwards do before their kernels: check the inputs and the shapes of ``out``, ``lse`` and
    ``dout``, make them contiguous (``dout`` in q's dtype), and launch the delta kernel: ``(q, k, v, out, lse,
    dout, delta)`` with ``delta = rowsum(dout * out)`` in fp32, allocated with ``alloc``."""
    check_flash_inputs(q, k, v, "flash_attention backward")
    if out.shape != q.shape or dout.shape != q.shape or lse.shape != q.shape[:3]:
        raise ValueError(f"flash_attention backward: out and dout must have q's shape {tuple(q.shape)} and lse "
                         f"{tuple(q.shape[:3])}, got {tuple(out.shape)}, {tuple(dout.shape)}, {tuple(lse.shape)}")
    q, k, v, out, dout = (t.contiguous() for t in (q, k, v, out, dout.to(q.dtype)))
    lse = lse.contiguous()
    B, H, N, D = q.shape
    delta = alloc((B, H, N), dtype=torch.float32, device=q.device)
    attention_bwd_delta_kernel[(cdiv(N, DELTA_BLOCK), B * H)](out, dout, delta, N, HEAD_DIM=D, BLOCK_M=DELTA_BLOCK)
    return q, k, v, out, lse, dout, delta


def attention_backward(q, k, v, out, lse, dout, causal=False, scale=None, cfg=None, alloc=torch.empty,
                       deterministic=True):
    """FlashAttention-2's backward: ``(dq, dk, dv)`` from the forward's inputs, ``out`` and ``lse``
    and the output's gradient ``dout``; three launches (delta, dK/dV, dQ), autotuned, or with
    ``cfg = (dkdv_cfg, dq_cfg)`` fixed (each BLOCK_M, BLOCK_N, num_warps, num_stages; the dQ kernel's
    BLOCK_M a multiple of its BLOCK_N). ``deterministic=False``: :func:`attention_backward_atomic` instead."""
    if not deterministic:
        return attention_backward_atomic(q, k, v, out, lse, dout, causal, scale, cfg=cfg, alloc=alloc)
    q, k, v, out, lse, dout, delta = _backward_inputs(q, k, v, out, lse, dout, alloc)
    B, H, N, D = q.shape
    dq, dk, dv = (alloc(q.shape, dtype=q.dtype, device=q.device) for _ in range(3))
    sc = default_scale(D, scale)
    switches = dict(HEAD_DIM=D, CAUSAL=bool(causal), DOT_PRECISION=dot_precision(q.dtype))
    if cfg is None:
        attention_bwd_dkdv_tuned[lambda meta: (cdiv(N, meta["BLOCK_N"]), B * H)](
            q, k, v, dout, lse, delta, dk, dv, sc, N, **switches)
        attention_bwd_dq_tuned[lambda meta: (cdiv(N, meta["BLOCK_M"]), B * H)](
            q, k, v, dout, lse, delta, dq, sc, N, **switches)
    else:
        dkdv_cfg, dq_cfg = cfg
        if dq_cfg["BLOCK_M"] % dq_cfg["BLOCK_N"]:
            raise ValueError(f"flash_attention backward: the dQ kernel's BLOCK_M must be a multiple of its "
                             f"BLOCK_N, got {dq_cfg}")
        attention_bwd_dkdv_kernel[(cdiv(N, dkdv_cfg["BLOCK_N"]), B * H)](
            q, k, v, dout, lse, delta, dk, dv, sc, N, **switches, **dkdv_cfg)
        attention_bwd_dq_kernel[(cdiv(N, dq_cfg["BLOCK_M"]), B * H)](
            q, k, v, dout, lse, delta, dq, sc, N, **switches, **dq_cfg)
    return dq, dk, dv


def attention_backward_atomic(q, k, v, out, lse, dout, causal=False, scale=None, cfg=None, alloc=torch.empty):
    """:func:`attention_backward` with one kernel for dK, dV and dQ (:func:`attention_bwd_atomic_kernel`,
    autotuned, or ``cfg``: its BLOCK_M, BLOCK_N, num_warps, num_stages): dQ is summed in fp32 with atomic adds,
    as FlashAttention-2 does, then scaled and cast by :func:`attention_bwd_dq_convert_kernel`. Five matmuls per
    pair of blocks instead of seven; not deterministic (the adds arrive in a different order each run)."""
    q, k, v, out, lse, dout, delta = _backward_inputs(q, k, v, out, lse, dout, alloc)
    B, H, N, D = q.shape
    dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dq, dk, dv = (alloc(q.shape, dtype=q.dtype, device=q.device) for _ in range(3))
    sc = default_scale(D, scale)
    args = (q, k, v, dout, lse, delta, dk, dv, dq_acc, sc, N)
    switches = dict(HEAD_DIM=D, CAUSAL=bool(causal), DOT_PRECISION=dot_precision(q.dtype))
    if cfg is None:
        attention_bwd_atomic_tuned[lambda meta: (cdiv(N, meta["BLOCK_N"]), B * H)](*args, **switches)
    else:
        attention_bwd_atomic_kernel[(cdiv(N, cfg["BLOCK_N"]), B * H)](*args, **switches, **cfg)
    n = dq_acc.numel()
    attention_bwd_dq_convert_kernel[(cdiv(n, 1024),)](dq_acc, dq, sc, n, BLOCK=1024)
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    """``flash_attention`` for autograd: the forward saves q, k, v, the output and the LSE (O(N)
    extra memory, not the N x N probabilities); the backward runs :func:`attention_backward`."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, scale=None, deterministic=True):
        out, lse = attention_forward(q, k, v, causal, scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, out, lse, dout, ctx.causal, ctx.scale,
                                        deterministic=ctx.deterministic)
        return dq, dk, dv, None, None, None


def flash_attention(q, k, v, causal=False, scale=None, deterministic=True):
    """``softmax(scale * q @ k^T) @ v`` (scale ``1/sqrt(d)`` unless given; ``causal``: query i sees
    keys <= i) with FlashAttention's Triton kernels, differentiable. q, k, v: (batch, heads, N, d),
    one shape, d in 16, 32, 64, 128, fp16 or bf16 (fp32 too: exact dots, slower). ``deterministic=False``:
    the backward sums dQ with atomic adds (:func:`attention_backward_atomic`)."""
    check_flash_inputs(q, k, v, "flash_attention")
    return FlashAttention.apply(q, k, v, causal, scale, deterministic)


