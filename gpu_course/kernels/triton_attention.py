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
  Hopper, TMA bulk copies), optionally warp-specialised; :func:`forward_ladder` measures it a step at a
  time against the pointer kernel and SDPA's cuDNN backend (:func:`ladder_table`, :func:`registers`).

Measured against PyTorch's own attentions (``scaled_dot_product_attention`` restricted to one backend:
cuDNN, flash, memory-efficient, :data:`SDPA_BACKENDS`, those that run here from :func:`sdpa_baselines`)
by :func:`errors_like_sdpa`, :func:`time_attention` (GPU time, time per step in a loop, CPU time per
call), :func:`speed_table`, :func:`record_speed` and :func:`forward_memory`, and looked into by
:func:`count_dots`, :func:`tensor_core_instructions` (PTX) and :func:`profiled_kernels`: the code that
notebook 11 and ``bench/flash_attention.py`` share.

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

import contextlib
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..checking import CheckFailed
from ..launch import cdiv
from ..device_ceilings import ceilings, spec_peak, throughput
from ..mode import DEVICE, ON_GPU, by_mode, gpu_supports, shared_memory_per_block, sm_count
from ..results import report, save_result, stored_results
from ..timing import bench_user, fmt_ms
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

    >>> small_shared_memory() in (True, False)
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


@contextlib.contextmanager
def _compiler_dumps_muted():
    """Within: what C++ code writes to the process's standard error (file descriptor 2) is dropped. A
    Triton compile that fails writes a page of MLIR there (a reproducer for Triton's developers), which
    a notebook would show; :func:`forward_ladder` reports the failure in one line instead."""
    import os
    import sys
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def pipe_config(d):
    """The tile of ladder step 5 (:func:`_fwd_inner_pipelined`), which holds two blocks of scores at once: on the
    H100 (fp16, B4 H16 N4096) 128 x 64 with 8 warps and 4 stages at d <= 64, 128 x 128 with 8 warps and 2 stages
    at d = 128 (3 stages of it overflow shared memory); blocks of 16 on the CPU."""
    if not ON_GPU:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    if d <= 64:
        return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)
    return dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)


def _check_steps(steps, small, d, dtype, g, causal=False, backward=False):
    """Run each of ``steps`` (``{name: function(q, k, v, do, alloc) -> tensors}``) once on inputs of ``small``
    (B, H, N) into poisoned outputs and compare with float64 autograd: ``({name: ok}, {name: one-line reason})``;
    a step whose compiler refuses it, or whose largest error exceeds 2e-3 (forward) or 2e-2 (gradients, which
    sum over N), is reported instead."""
    from ..checking import poisoned
    cq, ck, cv, cdo = (torch.randn(*small, d, device=DEVICE, dtype=dtype, generator=g) for _ in range(4))
    ins = [t.double().requires_grad_() for t in (cq, ck, cv)]
    ref = naive_attention(*ins, causal=causal)
    refs = torch.autograd.grad(ref, ins, cdo.double()) if backward else (ref.detach(),)
    tol = 2e-2 if backward else 2e-3
    ok, failed = {}, {}
    for name, fn in steps.items():
        try:
            with _compiler_dumps_muted():
                got = fn(cq, ck, cv, cdo, poisoned)
            err = max((a.double() - r).abs().max().item() for a, r in zip(got, refs))
        except Exception as e:  # noqa: BLE001  a compiler that refuses a step: say why, go on
            failed[name] = f"{name}: did not compile or run here ({_one_line(e)})"
            continue
        if not err <= tol:   # NaN (an unwritten or wrong element) fails too
            failed[name] = f"{name}: wrong result here (largest error {err:.1e} against float64)"
            continue
        ok[name] = True
    return ok, failed


def forward_ladder(shape, d, dtype=torch.float16, seed=0, causal=False):
    """The forward (``causal`` or not) a step at a time toward Hopper's way of feeding the tensor cores
    (:data:`LADDER`), on inputs of ``shape`` (B, H, N) and head dimension ``d``, timed beside SDPA's cuDNN
    and flash backends (``utils.bench_users``, the functions interleaved). Each step is first checked
    against float64 on a ragged length (N = 1000 on a GPU) into a poisoned output. Returns
    ``({name: UserTiming}, {name: one-line reason})``, the second for steps that did not compile, did not
    run or gave a wrong result here. Step 1 is the pointer kernel (autotuned); step 2 the descriptors with
    step 1's tile; step 3 with :func:`desc_config`'s; step 4 adds ``warp_specialize``; step 5 is the
    hand-pipelined loop with :func:`pipe_config`'s tile; step 6 step 3's tile on the persistent grid
    (:func:`persist_config`); step 7 the descriptor kernel's autotuner over :func:`desc_forward_configs`, which
    holds tiles of steps 2, 3, 5 and 6: the forward :func:`flash_attention` runs here.
    The registers (:data:`REGISTERS`) and an instruction census of the PTX (:data:`PTX_CENSUS`, GPU only) of
    the kernel each step ran are kept."""
    from ..timing import bench_users
    REGISTERS.clear()
    PTX_CENSUS.clear()
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q, k, v = (torch.randn(*shape, d, device=DEVICE, dtype=dtype, generator=g) for _ in range(3))
    causal = bool(causal)
    attention_forward(q, k, v, causal, descriptors=False)      # tunes step 1 at this size
    tuned = attention_fwd_tuned.best_config
    same = dict(tuned.kwargs, num_warps=tuned.num_warps, num_stages=tuned.num_stages)
    steps = {LADDER[0]: (attention_forward, dict(descriptors=False)),
             LADDER[1]: (attention_forward_desc, dict(cfg=same)),
             LADDER[2]: (attention_forward_desc, dict(cfg=desc_config(d))),
             LADDER[3]: (attention_forward_desc, dict(cfg=desc_config(d), warp_specialize=True)),
             LADDER[4]: (attention_forward_desc, dict(cfg=pipe_config(d), pipeline=True)),
             LADDER[5]: (attention_forward_desc, dict(cfg=persist_config(d))),
             LADDER[6]: (attention_forward_desc, dict(cfg="tuned"))}
    small = (1, 2, by_mode(gpu=1000, cpu=40))
    checks = {n: (lambda q_, k_, v_, do_, alloc, fwd=fwd, opts=opts: fwd(q_, k_, v_, causal, alloc=alloc, **opts)[:1])
              for n, (fwd, opts) in steps.items()}
    ok, failed = _check_steps(checks, small, d, dtype, g, causal=causal)
    ran = {n: (lambda fwd=fwd, opts=opts: fwd(q, k, v, causal, **opts)[0])
           for n, (fwd, opts) in steps.items() if n in ok}
    libs = {n: (lambda f=sdpa_with(n): f(q, k, v, causal)) for n in ("SDPA cuDNN", "SDPA flash")
            if ON_GPU and gpu_supports(SDPA_BACKENDS[n][1])[0]}
    times = bench_users({**ran, **libs})
    for name, fn in ran.items():   # the compiled kernel each step ran at this size: its registers, its PTX
        fn()
        REGISTERS[name] = registers()
        if ON_GPU:
            PTX_CENSUS[name] = ptx_census(_LAST_FORWARD[0].asm["ptx"])
    return times, failed


REGISTERS = {}     # forward_ladder's step -> (registers per thread, spills) of its last run
PTX_CENSUS = {}    # forward_ladder's step -> ptx_census of the kernel it ran (GPU only)

# What ptx_census counts: (label, the PTX opcodes it counts, what they are).
PTX_OPS = (("wgmma", ("wgmma.mma_async",), "Hopper's asynchronous warp-group matmul"),
           ("wgmma waits", ("wgmma.wait_group",), "waits for wgmmas issued before"),
           ("TMA copies", ("cp.async.bulk.tensor",), "bulk tensor copies (tensor descriptors)"),
           ("cp.async", ("cp.async.cg", "cp.async.ca"), "per-thread asynchronous copies (pointer loads, pipelined)"),
           ("setmaxnreg", ("setmaxnreg",), "register reallocation between warp groups (warp specialisation)"),
           ("mbarrier waits", ("mbarrier.try_wait",), "waits on a shared-memory barrier (TMA arrivals, producers)"))


def ptx_census(ptx):
    """How many times each opcode family of :data:`PTX_OPS` appears in PTX text (static counts: an
    instruction in a loop counts once): ``{label: count}``.

    >>> c = ptx_census("  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 a;\\n  @%p1 cp.async.bulk.tensor.2d x;")
    >>> c["wgmma"], c["TMA copies"]
    (1, 1)
    """
    ops = []
    for line in ptx.splitlines():
        words = line.split()
        if words and words[0].startswith("@"):   # a predicated instruction: "@%p1 cp.async.bulk.tensor..."
            words = words[1:]
        if words:
            ops.append(words[0])
    return {label: sum(op.startswith(prefixes) for op in ops) for label, prefixes, _ in PTX_OPS}


def census_table(census):
    """:data:`PTX_CENSUS` as a table: one row per step, one column per :data:`PTX_OPS` label."""
    labels = [label for label, _, _ in PTX_OPS]
    width = max((len(n) for n in census), default=10) + 2
    lines = [f"{'PTX instructions (static count)':<{width}}" + "".join(f"{lab:>15}" for lab in labels)]
    for name, counts in census.items():
        lines.append(f"{name:<{width}}" + "".join(f"{counts[lab]:>15}" for lab in labels))
    lines.append("; ".join(f"{label}: {what}" for label, _, what in PTX_OPS))
    return "\n".join(lines)


def ladder_table(times, flops, baseline="SDPA cuDNN", phase="forward"):
    """:func:`forward_ladder`'s (or :func:`backward_ladder`'s) timings as a table: GPU time, time per step in a
    loop, CPU time per call, TFLOP/s, its % of :func:`rate_label`'s peak (on a GPU), ``baseline``'s time over
    each, for the GPU time and for the loop (where ``baseline`` ran), and on a GPU each forward step's registers
    per thread and spills (:data:`REGISTERS`)."""
    from ..timing import user_cells, user_header, user_ratios
    label, b = rate_label(), times.get(baseline)
    width = max(len(n) for n in times) + 2
    regs = ON_GPU and phase == "forward" and any(REGISTERS.get(n, (None,))[0] for n in times)
    lines = [f"{phase:<{width}}{user_header()}{'TFLOP/s':>9}" + (f"{'% peak':>8}" if label else "")
             + (f"{'× ' + baseline + ' (GPU, loop)':>28}" if b else "") + (f"{'regs, spills':>14}" if regs else "")]
    for name, t in times.items():
        rate = flops / t.median / 1e9
        r = REGISTERS.get(name, (None, None)) if name in LADDER else (None, None)
        lines.append(f"{name:<{width}}{user_cells(t)}{rate:>9.0f}" + (f"{100 * rate / label[1]:>7.0f}%" if label else "")
                     + (f"{user_ratios(t, b):>28}" if b else "")
                     + (f"{f'{r[0]}, {r[1]}' if r[0] is not None else '':>14}" if regs else ""))
    lines.append(f"(% peak: {label[2]})" if label else
                 "(CPU wall clock of the interpreter: these figures say nothing about a GPU)")
    return "\n".join(lines)


LADDER = ("1. pointer loads, autotuned", "2. tensor descriptors, step 1's tile",
          "3. tensor descriptors, desc_config's tile", "4. step 3 + warp specialisation",
          "5. descriptors + next scores before the softmax", "6. step 3 on a persistent grid, blocks in pairs",
          "7. descriptors autotuned over 2, 3, 5 and 6")
BACKWARD_LADDER = ("1. dK/dV and dQ kernels (7 matmuls)", "2. one kernel, dQ by atomic adds (5 matmuls)")


def distinct_results(fn, runs=5):
    """How many bit-for-bit different results ``runs`` calls of ``fn()`` (a tensor) give, compared where
    they lie (no copy to the host): 1 for a deterministic computation."""
    seen = []
    for _ in range(runs):
        r = fn()
        if not any(torch.equal(r, s) for s in seen):
            seen.append(r)
    return len(seen)


def backward_ladder(shape, d, causal=False, dtype=torch.float16, seed=0):
    """The backward's two ways to get dQ (:data:`BACKWARD_LADDER`) at ``shape`` (B, H, N) and head dimension
    ``d``: the two deterministic kernels, and one kernel summing dQ with atomic adds. Each is first checked
    against float64 autograd on a ragged length into poisoned outputs, then timed with ``utils.bench_users``
    beside SDPA's cuDNN and flash backends (their backward: ``torch.autograd.grad`` of one forward's output).
    Returns ``(times, failed, distinct)``: ``{name: UserTiming}``, ``{name: one-line reason}``, and for each
    of ours that ran the number of different dQ (bit for bit) in five backwards of the same inputs."""
    from ..timing import bench_users
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q, k, v, do = (torch.randn(*shape, d, device=DEVICE, dtype=dtype, generator=g) for _ in range(4))
    out, lse = attention_forward(q, k, v, causal)
    steps = {name: dict(deterministic=det) for name, det in zip(BACKWARD_LADDER, (True, False))}

    def checked(opts):
        def run(q_, k_, v_, do_, alloc):
            o_, l_ = attention_forward(q_, k_, v_, causal)
            return attention_backward(q_, k_, v_, o_, l_, do_, causal, alloc=alloc, **opts)
        return run
    ok, failed = _check_steps({n: checked(o) for n, o in steps.items()}, (1, 2, by_mode(gpu=1000, cpu=40)),
                              d, dtype, g, causal=causal, backward=True)
    ran = {n: (lambda o=o: attention_backward(q, k, v, out, lse, do, causal, **o)[0]) for n, o in steps.items()
           if n in ok}
    libs = {}
    for name in ("SDPA cuDNN", "SDPA flash"):
        if ON_GPU and gpu_supports(SDPA_BACKENDS[name][1])[0]:
            qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
            o_lib = sdpa_with(name)(qg, kg, vg, causal)
            libs[name] = (lambda o_lib=o_lib, ins=(qg, kg, vg): torch.autograd.grad(o_lib, ins, do, retain_graph=True))
    times = bench_users({**ran, **libs})
    distinct = {n: distinct_results(fn) for n, fn in ran.items()}
    return times, failed, distinct


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
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, scale, N,
                              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per (block of BLOCK_N keys, batch x head), looping over query blocks: dK and dV of its keys."""
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
    # query blocks: (causal) the diagonal ones, masked; those wholly inside N and in the keys'
    # future, unmasked; the ragged end, masked. Each starts at a multiple of BLOCK_M.
    if CAUSAL:
        lo = (start_n // BLOCK_M) * BLOCK_M
        diag_end = tl.minimum(tl.cdiv(start_n + BLOCK_N, BLOCK_M), tl.cdiv(N, BLOCK_M)) * BLOCK_M
    else:
        lo = 0
        diag_end = 0
    full_end = tl.maximum((N // BLOCK_M) * BLOCK_M, diag_end)
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
    if CAUSAL:   # the same three ranges of query blocks as attention_bwd_dkdv_kernel
        lo = (start_n // BLOCK_M) * BLOCK_M
        diag_end = tl.minimum(tl.cdiv(start_n + BLOCK_N, BLOCK_M), tl.cdiv(N, BLOCK_M)) * BLOCK_M
    else:
        lo = 0
        diag_end = 0
    full_end = tl.maximum((N // BLOCK_M) * BLOCK_M, diag_end)
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


_DKDV_CONFIGS, _DQ_CONFIGS = backward_configs()
_BWD_KEY = ["N", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"]
attention_bwd_dkdv_tuned = triton.autotune(configs=_DKDV_CONFIGS, key=_BWD_KEY)(attention_bwd_dkdv_kernel)
attention_bwd_dq_tuned = triton.autotune(configs=_DQ_CONFIGS, key=_BWD_KEY)(attention_bwd_dq_kernel)
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


# ------------------------------------------------ against PyTorch's attentions (notebook 11 and the bench)
ERROR_FLOORS = {"out": 2e-3, "dq": 1e-2, "dk": 1e-2, "dv": 1e-2}  # fp16 outputs round at ~5e-4

# SDPA's fused backends, strongest first on an H100: name -> (SDPBackend member, gpu_supports feature).
# "SDPA flash" is FlashAttention-2 (Ampere's mma.sync), "SDPA cuDNN" NVIDIA's cuDNN attention (Hopper
# kernels on sm_90), "SDPA efficient" the memory-efficient kernel (xFormers'; it runs on older GPUs too).
SDPA_BACKENDS = {
    "SDPA cuDNN": ("CUDNN_ATTENTION", "cudnn_sdpa"),
    "SDPA flash": ("FLASH_ATTENTION", "flash_sdpa"),
    "SDPA efficient": ("EFFICIENT_ATTENTION", None),
}


def sdpa_backend(name="SDPA flash"):
    """A context in which ``scaled_dot_product_attention`` may use only the backend ``name`` (a key of
    :data:`SDPA_BACKENDS`) on a GPU; in cpu mode a context that changes nothing (SDPA's default CPU
    kernel stands in for every backend there)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if name not in SDPA_BACKENDS:
        raise ValueError(f"sdpa_backend: unknown backend {name!r}; known: {', '.join(SDPA_BACKENDS)}")
    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[name][0])) if ON_GPU else contextlib.nullcontext()


def sdpa_with(name):
    """A function ``(q, k, v, causal=False) -> out``: SDPA restricted to the backend ``name``."""
    def sdpa(q, k, v, causal=False):
        with sdpa_backend(name):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    sdpa.__name__ = sdpa.__qualname__ = name.replace(" ", "_").lower()
    return sdpa


def sdpa_flash(q, k, v, causal=False):
    """PyTorch's attention restricted to its flash backend (FlashAttention-2)."""
    return sdpa_with("SDPA flash")(q, k, v, causal)


def accuracy_baseline():
    """``(name, function)`` of the SDPA backend ours is held to in :func:`errors_like_sdpa`: the flash
    backend where this GPU has it, else the memory-efficient one (Colab's T4, sm_75, has no flash SDPA).

    >>> accuracy_baseline()[0] in SDPA_BACKENDS
    True
    """
    name = "SDPA flash" if gpu_supports("flash_sdpa")[0] else "SDPA efficient"
    return name, sdpa_with(name)


def half_dtypes():
    """``(dtypes, skipped)``: the half-precision dtypes this GPU computes (fp16 always; bf16 from
    compute capability 8.0) and ``{dtype: one-line reason}`` for the others.

    >>> torch.float16 in half_dtypes()[0]
    True
    """
    ok, why = gpu_supports("bf16")
    return ([torch.float16, torch.bfloat16], {}) if ok else ([torch.float16], {torch.bfloat16: why})


def _one_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:140] if text else ''}"


def sdpa_baselines(q, k, v, dout, causal=False, names=tuple(SDPA_BACKENDS)):
    """The SDPA backends (of ``names``) that run here for these inputs: ``(fns, skipped)`` with
    ``fns = {name: function(q, k, v, causal)}`` and ``skipped = {name: one-line reason}``. A backend
    is skipped where ``utils.gpu_supports`` says this GPU lacks it, in cpu mode (except "SDPA flash",
    for which SDPA's default CPU kernel stands in), or where one forward and backward with it raises
    (the exception's first line is the reason). ``q, k, v`` must require grad."""
    import warnings
    fns, skipped = {}, {}
    for name in names:
        if name not in SDPA_BACKENDS:
            raise ValueError(f"sdpa_baselines: unknown backend {name!r}; known: {', '.join(SDPA_BACKENDS)}")
        feature = SDPA_BACKENDS[name][1]
        ok, why = gpu_supports(feature) if feature else (True, "")
        if not ok:
            skipped[name] = f"{name}: {why}"
            continue
        if not ON_GPU and name != "SDPA flash":
            skipped[name] = f"{name}: skipped in cpu mode (a GPU backend; on the CPU SDPA has its own kernel)"
            continue
        fn = sdpa_with(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns why a backend refuses, then raises
                out = fn(q, k, v, causal)
                torch.autograd.grad(out, (q, k, v), dout)
        except Exception as e:  # noqa: BLE001 - any failure of the library means: not available here
            skipped[name] = f"{name}: skipped, it raised {_one_line(e)}"
            continue
        fns[name] = fn
    return fns, skipped


def _max_err(a, b):
    return (a.detach().double() - b.detach().double()).abs().max().item()


def reference_parts(shape, free_bytes=None) -> int:
    """In how many slices of the batch :func:`fp32_reference` computes attention of ``shape`` (B, H, N, d):
    1 where three fp32 N x N tensors for the whole batch (the most SDPA's math kernel holds at once,
    forward or backward) take at most half of ``free_bytes`` (default: the GPU's free memory; in cpu mode
    always 1), else enough slices for that (at most B). An H100 needs one at B4 H16 N4096, a T4 two.

    >>> reference_parts((4, 16, 4096, 64), free_bytes=75 * 2**30), reference_parts((4, 16, 4096, 64), 14 * 2**30)
    (1, 2)
    """
    if free_bytes is None:
        if not ON_GPU:
            return 1
        free_bytes = torch.cuda.mem_get_info()[0]
    B, H, N = shape[:3]
    need = 3 * B * H * N * N * 4
    return max(1, min(B, math.ceil(need / (free_bytes / 2))))


def fp32_reference(q, k, v, dout, causal=False):
    """``(out, dq, dk, dv)`` of attention by SDPA's math kernel on fp32 copies of ``q, k, v`` (and
    ``dout``): the reference :func:`errors_like_sdpa` holds ours and SDPA to. It holds N x N tensors, so
    where the GPU's free memory is short (:func:`reference_parts`: a T4 at B4 H16 N4096) it runs one
    slice of the batch at a time, each batch element computed alone."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    parts = reference_parts(q.shape)
    outs = []
    for qs, ks, vs, ds in [(q, k, v, dout)] if parts == 1 else zip(*(t.chunk(parts) for t in (q, k, v, dout))):
        ref_in = [t.detach().float().requires_grad_() for t in (qs, ks, vs)]
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal)
        outs.append((ref.detach(), *torch.autograd.grad(ref, ref_in, ds.float())))
        del ref, ref_in
    return outs[0] if parts == 1 else tuple(torch.cat(t) for t in zip(*outs))


def errors_like_sdpa(q, k, v, dout, causal=False, baseline=None):
    """Max abs errors of the output and of dQ, dK, dV, of ours and of an SDPA backend (``baseline``:
    ``(name, function)``, default :func:`accuracy_baseline`), against an fp32 reference (SDPA's math
    kernel on fp32 copies): ``{"out": (ours, sdpa), "dq": ...}``. Raises :class:`CheckFailed` where
    ours errs more than twice as much as the library plus :data:`ERROR_FLOORS`. ``q, k, v`` must
    require grad."""
    name, sdpa = baseline or accuracy_baseline()
    refs = fp32_reference(q, k, v, dout, causal)
    got = {}
    for who, fn in (("ours", flash_attention), ("sdpa", sdpa)):
        out = fn(q, k, v, causal)
        got[who] = (out, *torch.autograd.grad(out, (q, k, v), dout))
    errors = {}
    for i, what in enumerate(ERROR_FLOORS):
        ours, theirs = _max_err(got["ours"][i], refs[i]), _max_err(got["sdpa"][i], refs[i])
        errors[what] = (ours, theirs)
        if not ours <= 2 * theirs + ERROR_FLOORS[what]:
            raise CheckFailed(f"flash_attention, causal={causal}: {what} errs by {ours:.2e}, {name} by "
                              f"{theirs:.2e} (allowed: 2x + {ERROR_FLOORS[what]})")
    return errors


def time_attention(q, k, v, dout, causal=False, baselines=None):
    """What a caller gets from ours and from each baseline (``{name: function(q, k, v, causal)}``,
    default: the flash backend alone), forward and backward: ``{(name, "forward"): UserTiming, ...}``
    with name ``"ours"`` or a baseline's (:func:`~gpu_course.timing.bench_user`: GPU time, time per
    step in a loop, CPU time per call). The backward is ``torch.autograd.grad`` of one forward's output
    (kept between runs). ``q, k, v`` must require grad."""
    baselines = {"SDPA flash": sdpa_flash} if baselines is None else baselines
    times = {}
    for name, fn in {"ours": flash_attention, **baselines}.items():
        times[name, "forward"] = bench_user(fn, q, k, v, causal)
        out = fn(q, k, v, causal)
        times[name, "backward"] = bench_user(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
        del out
    return times


def rate_label():
    """``(kind, peak TFLOP/s, label)`` that attention's fp16 rates are set against: the spec-sheet fp16
    peak where the course has this GPU's spec sheet, else cuBLAS's fp16 rate measured here; ``None`` on
    the CPU (no fp16 ceiling there)."""
    if not ON_GPU:
        return None
    spec = spec_peak("fp16")
    if spec:
        return "spec", spec, f"of the spec-sheet fp16 peak ({spec:.0f} TFLOP/s)"
    best = ceilings()["fp16"]
    return "measured", best, f"of cuBLAS fp16 at 8192³ measured here ({best:.0f} TFLOP/s)"


def shape_tag(d, causal):
    """``"d=64"`` or ``"d=64, causal"``: how the notebook and the results name a shape of the timings."""
    return f"d={d}" + (", causal" if causal else "")


def speed_table(times, phase, flops):
    """One table of :func:`time_attention`'s timings for ``phase``: per name, GPU time, time per step
    in a loop, CPU time per call, TFLOP/s (``flops`` over the GPU time) and, on a GPU, its % of the
    peak of :func:`rate_label`; a last line names any launch-bound call (CPU per call > GPU time)."""
    names = [n for n, ph in times if ph == phase]
    label = rate_label()
    lines = [f"{phase:<16}{'GPU time':>11}{'loop/step':>11}{'CPU/call':>11}{'TFLOP/s':>9}"
             + (f"{'% peak':>8}" if label else "")]
    for name in names:
        t = times[name, phase]
        rate = flops / t.median / 1e9
        lines.append(f"{name:<16}{fmt_ms(t.median):>11}{fmt_ms(t.loop_ms):>11}{fmt_ms(t.cpu_ms):>11}{rate:>9.0f}"
                     + (f"{100 * rate / label[1]:>7.0f}%" if label else ""))
    if label:
        lines.append(f"(% peak: {label[2]})")
    launch_bound = [n for n in names if times[n, phase].launch_bound]
    if launch_bound and ON_GPU:
        lines.append(f"launch-bound (CPU per call > GPU time): {', '.join(launch_bound)}")
    return "\n".join(lines)


def speed_ratios(speed, baseline, phase):
    """``{(d, causal): (gpu, loop)}``: ``baseline``'s time over ours (above 1: ours is faster) by GPU
    time and by time per step in a loop, for each shape of ``speed`` (``{(d, causal): times}`` of
    :func:`time_attention`) where ``baseline`` ran."""
    out = {}
    for key, times in speed.items():
        if (baseline, phase) in times:
            b, o = times[baseline, phase], times["ours", phase]
            out[key] = (b.median / o.median, b.loop_ms / o.loop_ms)
    return out


def ratio_table(speed, baselines=("SDPA flash", "SDPA cuDNN")):
    """A table of :func:`speed_ratios`: per shape, ours against each of ``baselines`` (those that ran),
    forward and backward, GPU time and loop; ``1.00x`` is the library's speed, above is faster."""
    cols = [(b, ph) for ph in ("forward", "backward") for b in baselines
            if any((b, ph) in t for t in speed.values())]
    ratios = {c: speed_ratios(speed, *c) for c in cols}
    lines = ["ours: the library's time over ours (GPU time, loop); above 1.00x ours is faster",
             f"{'shape':<14}" + "".join(f"{dict(forward='fwd', backward='bwd')[ph] + ' vs ' + b[5:]:>19}" for b, ph in cols)]
    for key in speed:
        cells = []
        for c in cols:
            g, lp = ratios[c].get(key, (math.nan, math.nan))
            cells.append(f"{g:>11.2f}x,{lp:>5.2f}x")
        lines.append(f"{shape_tag(*key):<14}" + "".join(cells))
    return "\n".join(lines)


def record_speed(notebook, tag, size, times, phase, flops):
    """Record :func:`time_attention`'s timings of ``phase`` in the results (on a GPU, during
    ``course.py execute``): each SDPA backend's row quietly, and ours with :func:`~gpu_course.results.report`
    once against each of SDPA flash and SDPA cuDNN that ran (kernel ``flash attention {phase}, {tag}``
    and ``... vs cuDNN``), which prints those lines. Returns the printed lines."""
    rate = dict(flops=flops, kind="fp16") if ON_GPU else {}
    for name, ph in times:
        if ph == phase and name != "ours" and ON_GPU:
            save_result(notebook, f"{name} {phase}, {tag}", size, times[name, ph],
                        throughput(times[name, ph], **rate), baseline_name=name)
    lines = []
    for base, suffix in (("SDPA flash", ""), ("SDPA cuDNN", " vs cuDNN")):
        if (base, phase) in times:
            lines.append(report(notebook, f"flash attention {phase}, {tag}{suffix}", size, times["ours", phase],
                                baseline=times[base, phase], baseline_name=base, **rate))
    return lines


def summary_rows(speed, shape):
    """The closing table's rows from this run's ``speed`` (``{(d, causal): times}`` of
    :func:`time_attention`, at ``shape`` = (batch, heads, N)): one dict per shape and phase with
    ``what``, ``ms`` (ours, GPU time), ``tflops``, ``pct_spec`` (% of the spec-sheet fp16 peak, or
    None), ``vs_flash`` and ``vs_cudnn`` (the library's GPU time over ours, None where it did not run)."""
    spec, rows = spec_peak("fp16") if ON_GPU else None, []
    for (d, causal), times in speed.items():
        for phase in ("forward", "backward"):
            ms = times["ours", phase].median
            tflops = attention_flops(*shape, d, causal, backward=phase == "backward") / ms / 1e9
            ratio = {b: times[b, phase].median / ms if (b, phase) in times else None
                     for b in ("SDPA flash", "SDPA cuDNN")}
            rows.append(dict(what=f"flash attention {phase}, {shape_tag(d, causal)}", ms=ms, tflops=tflops,
                             pct_spec=100 * tflops / spec if spec else None,
                             vs_flash=ratio["SDPA flash"], vs_cudnn=ratio["SDPA cuDNN"]))
    return rows


def stored_summary_rows(notebook):
    """:func:`summary_rows` from the results stored by a GPU run of ``notebook`` (for the CPU): ours
    against SDPA flash (kernel ``flash attention ...``) and SDPA cuDNN (``... vs cuDNN``), and the
    device they come from (``None`` without stored results): the device of the newest row, where GPUs of
    more than one kind have stored results (a table of one run, not a mix)."""
    stored = [r for r in stored_results(notebook=notebook) if r["kernel"].startswith("flash attention")]
    if stored:
        newest = max(stored, key=lambda r: r["when"])["device"]
        stored = [r for r in stored if r["device"] == newest]
    vs_cudnn = {r["kernel"][:-len(" vs cuDNN")]: r for r in stored if r["kernel"].endswith(" vs cuDNN")}
    rows = []
    for r in stored:
        if r["kernel"].endswith(" vs cuDNN"):
            continue
        spec = spec_peak("fp16", r["device"])
        c = vs_cudnn.get(r["kernel"])
        rows.append(dict(what=r["kernel"], ms=float(r["ms"]), tflops=float(r["rate"]),
                         pct_spec=100 * float(r["rate"]) / spec if spec else None,
                         vs_flash=float(r["vs_baseline"]) if r["vs_baseline"] else None,
                         vs_cudnn=float(c["vs_baseline"]) if c and c["vs_baseline"] else None))
    return rows, (stored[0]["device"] if stored else None)


def summary_table(rows):
    """The closing table of :func:`summary_rows` as text."""
    def x(v):
        return f"{v:5.2f}x" if v is not None else f"{'-':>6}"
    lines = [f"{'':<40}{'ours':>10}{'TFLOP/s':>9}{'% spec':>8}{'vs flash':>10}{'vs cuDNN':>10}"]
    for r in rows:
        pct = f"{r['pct_spec']:6.0f}%" if r["pct_spec"] is not None else f"{'-':>7}"
        lines.append(f"{r['what']:<40}{fmt_ms(r['ms']):>10}{r['tflops']:>9.0f}{pct:>8}{x(r['vs_flash']):>10}"
                     f"{x(r['vs_cudnn']):>10}")
    lines.append("(% spec: of the spec-sheet fp16 peak; vs: the library's GPU time over ours, above 1.00x ours is "
                 "faster)")
    return "\n".join(lines)


# --------------------------------------------- what the kernels are made of (source, PTX, profiler)
def count_dots(*fns):
    """How many ``tl.dot`` calls the source of each Triton function in ``fns`` makes (in its loop
    body: one per tile pair visited): ``{name: count}``.

    >>> count_dots(_dkdv_inner, _dq_inner)
    {'_dkdv_inner': 4, '_dq_inner': 3}
    """
    import inspect
    import re
    out = {}
    for fn in fns:
        src = inspect.getsource(getattr(fn, "fn", fn))
        out[getattr(fn, "__name__", None) or fn.fn.__name__] = len(re.findall(r"\btl\.dot\(", src))
    return out


BACKWARD_MATMULS = {"counted": 5, "ours": sum(count_dots(_dkdv_inner, _dq_inner).values())}
"""Matmuls of N x N x d per (batch, head) in the backward: as the usual FLOP count has it (S recomputed,
dV, dP, dQ, dK: 2.5 forwards), and as our two kernels execute them (S and dP in both kernels: 7)."""


def mma_instructions(ptx):
    """The tensor-core opcodes in PTX text (``wgmma.mma_async...`` on Hopper, ``mma.sync...`` before),
    sorted and without repeats.

    >>> mma_instructions("  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...};\\n  mma.sync.aligned.m16n8k16 x;")
    ['mma.sync.aligned.m16n8k16', 'wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16']
    """
    ops = set()
    for line in ptx.splitlines():
        op = line.strip().split(" ")[0]
        if op.startswith(("wgmma.mma_async", "mma.sync")):
            ops.add(op)
    return sorted(ops)


def tensor_core_instructions(q, k, v, dout, causal=False):
    """``{"forward": [...], "dK/dV": [...], "dQ": [...]}``: the tensor-core opcodes (:func:`mma_instructions`)
    in the PTX that Triton compiled for each of our kernels, with the configuration its autotuner kept for
    these inputs (run once here). GPU only: the interpreter compiles nothing."""
    if not ON_GPU:
        raise RuntimeError("tensor_core_instructions needs a GPU: in cpu mode Triton interprets and compiles no PTX")
    q, k, v, dout = (t.detach().contiguous() for t in (q, k, v, dout))
    out, lse = attention_forward(q, k, v, causal)          # tunes the forward for these inputs
    attention_backward(q, k, v, out, lse, dout, causal)    # and the backward
    B, H, N, D = q.shape
    sc, sw = default_scale(D), dict(HEAD_DIM=D, CAUSAL=bool(causal), DOT_PRECISION=dot_precision(q.dtype))
    delta = (out.float() * dout.float()).sum(-1)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))

    def cfg(tuned):
        c = tuned.best_config
        return dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)
    kc, qc = cfg(attention_bwd_dkdv_tuned), cfg(attention_bwd_dq_tuned)
    attention_forward(q, k, v, causal)                     # its compiled kernel, tuned above
    compiled = {
        "forward": _LAST_FORWARD[0],
        "dK/dV": attention_bwd_dkdv_kernel[(cdiv(N, kc["BLOCK_N"]), B * H)](
            q, k, v, dout, lse, delta, dk, dv, sc, N, **sw, **kc),
        "dQ": attention_bwd_dq_kernel[(cdiv(N, qc["BLOCK_M"]), B * H)](q, k, v, dout, lse, delta, dq, sc, N, **sw, **qc),
    }
    return {name: mma_instructions(c.asm["ptx"]) for name, c in compiled.items()}


def profiled_kernels(fn, *args, **kwargs):
    """The names of the GPU kernels that ``fn(*args, **kwargs)`` launched, in order of first launch,
    from ``torch.profiler`` (memory copies and fills left out). GPU only."""
    if not ON_GPU:
        raise RuntimeError("profiled_kernels needs a GPU: in cpu mode no GPU kernel runs")
    from ..profiling import gpu_kernels
    return list(dict.fromkeys(gpu_kernels(fn, *args, **kwargs)))  # each name once, in order of first launch


def short_kernel_name(name, width=110):
    """A kernel's name cut to ``width`` characters (C++ template arguments make them long)."""
    return name if len(name) <= width else name[:width - 3] + "..."


def distinct_grads(fn, q, k, v, dout, causal=False, runs=5):
    """How many different dQ (bit for bit) ``runs`` backwards of ``fn`` give for the same inputs: 1 for a
    deterministic backward; more where the gradient is summed with atomics in a run-dependent order."""
    seen = set()
    for _ in range(runs):
        out = fn(q, k, v, causal)
        dq = torch.autograd.grad(out, (q,), dout)[0]
        seen.add(dq.cpu().numpy().tobytes())
    return len(seen)


def config_str(cfg):
    """``128x64 w8 s4`` for a Triton config of these kernels (BLOCK_M x BLOCK_N, warps, stages), followed by
    `` TMA`` for the descriptor forward's (`` TMA pipelined`` with its PIPE, `` persistent k/SM`` with its
    PERSIST); ``-`` for None."""
    if cfg is None:
        return "-"
    kind = "" if "PIPE" not in cfg.kwargs else " TMA pipelined" if cfg.kwargs["PIPE"] else " TMA"
    if cfg.kwargs.get("PERSIST"):
        kind += f" persistent {cfg.kwargs['PERSIST']}/SM"
    return f"{cfg.kwargs['BLOCK_M']}x{cfg.kwargs['BLOCK_N']} w{cfg.num_warps} s{cfg.num_stages}{kind}"


def tuned_configs():
    """The configurations the autotuners kept last: ``{"forward": ..., "dkdv": ..., "dq": ...}`` as
    :func:`config_str` strings (``-`` before any tuning); the forward's from the autotuner the last autotuned
    forward went through (descriptors or pointers)."""
    kernels = {"forward": _FORWARD_TUNER[0] or attention_fwd_tuned, "dkdv": attention_bwd_dkdv_tuned,
               "dq": attention_bwd_dq_tuned}
    return {k: config_str(getattr(kern, "best_config", None)) for k, kern in kernels.items()}


def forward_peak_memory(fn):
    """Bytes that ``fn()`` (run without autograd) allocated at its peak above what was allocated
    before it, on the GPU (``torch.cuda.max_memory_allocated``); ``math.inf`` if it ran out of GPU
    memory. GPU only: CPU torch keeps no such counters (a clear RuntimeError in cpu mode)."""
    if not ON_GPU:
        raise RuntimeError("forward_peak_memory: torch.cuda's memory counters exist on a GPU only (cpu mode)")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    try:
        with torch.no_grad():
            res = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del res
    except torch.cuda.OutOfMemoryError:
        peak = math.inf
    torch.cuda.empty_cache()
    return peak


def gib(x):
    """Bytes as GiB with three decimals, or "out of memory" for ``math.inf`` (:func:`forward_memory`).

    >>> gib(2**30), gib(math.inf)
    ('1.000 GiB', 'out of memory')
    """
    return "out of memory" if math.isinf(x) else f"{x / 2**30:.3f} GiB"


def memory_table(rows, batch, heads, d):
    """The table of :func:`forward_memory`'s ``rows``: N, the naive forward's and ours' peak above the
    inputs, and their ratio."""
    lines = [f"peak memory of the forward above its inputs, batch {batch}, heads {heads}, d {d}, fp16, non-causal:",
             f"{'N':>6} {'naive':>14} {'ours':>10} {'naive / ours':>13}"]
    lines += [f"{r['n']:>6} {gib(r['naive']):>14} {gib(r['ours']):>10} {r['naive'] / r['ours']:>12,.0f}x" for r in rows]
    return "\n".join(lines)


def forward_memory(batch, heads, d, sizes, cfg=None, dtype=torch.float16):
    """The forward's peak memory above its inputs, naive vs ours (non-causal), for each N of
    ``sizes``: a list of ``dict(n=N, scores=bytes of one N x N tensor, naive=bytes, ours=bytes)``,
    ``math.inf`` where it ran out of memory (the naive one, first). Ours runs once before it is
    measured, so that compiling or autotuning is not counted (``cfg``: a fixed configuration, as
    for :func:`attention_forward`). In cpu mode both run (checking that they can) and the
    measurements are None: CPU torch has no peak-memory counter."""
    rows = []
    for n in sizes:
        q, k, v = (torch.randn(batch, heads, n, d, device=DEVICE, dtype=dtype)
                   for _ in range(3))
        row = dict(n=n, scores=batch * heads * n * n * q.element_size())
        ours = lambda: attention_forward(q, k, v, cfg=cfg)  # noqa: E731
        ours()  # compile / autotune outside the measurement
        for name, fn in (("naive", lambda: naive_attention(q, k, v)), ("ours", ours)):
            if ON_GPU:
                row[name] = forward_peak_memory(fn)
            else:
                with torch.no_grad():
                    fn()
                row[name] = None
        rows.append(row)
        del q, k, v
    return rows


# ---- what limits our kernels and cuDNN's: Nsight Compute's counters, measured once on a GPU and stored -------------
NCU_SHAPE = (4, 16, 4096)   # B, H, N, fp16: section 5's size
NCU_KERNELS = "regex:attention_fwd_desc_kernel|attention_bwd_dkdv_kernel|attention_bwd_dq_kernel|flash_fprop|flash_bprop"
NCU_FIELDS = ("what", "kernel", "time_us", "tensor_pct", "issue_pct", "warps_pct", "registers", "blocks_per_sm",
              "stalls")


# What bench/flash_attention_ncu.py launches once each under ncu, in order: (what, a piece of the kernel's name).
NCU_ORDER = (("ours forward d=128, step 3 (descriptors)", "attention_fwd_desc_kernel"),
             ("ours forward d=128, step 5 (pipelined)", "attention_fwd_desc_kernel"),
             ("cuDNN forward d=128", "flash_fprop"),
             ("ours forward d=64, step 3 (descriptors)", "attention_fwd_desc_kernel"),
             ("cuDNN forward d=64", "flash_fprop"),
             ("ours dK/dV d=64", "attention_bwd_dkdv_kernel"),
             ("ours dQ d=64", "attention_bwd_dq_kernel"),
             ("cuDNN backward d=64", "flash_bprop"))


def ncu_launches():
    """The functions bench/flash_attention_ncu.py launches once each under ncu, in the order of :data:`NCU_ORDER`:
    our forward at d = 128 (ladder steps 3 and 5) and cuDNN's, our forward at d = 64 (step 3) and cuDNN's (with
    autograd, for its backward), then our two backward kernels at d = 64 (dQ with the 128x64 tile its autotuner keeps at this
    size; dK/dV with ``_DKDV_CONFIGS[2]``, 32x128 with 4 warps and 3 stages, not the 32x64 with 4 stages that its
    autotuner keeps) and cuDNN's backward. GPU only."""
    def inputs(d):
        g = torch.Generator(device=DEVICE).manual_seed(d)
        return [torch.randn(*NCU_SHAPE, d, device=DEVICE, dtype=torch.float16, generator=g) for _ in range(4)]
    q1, k1, v1, _ = inputs(128)
    q, k, v, do = inputs(64)
    out, lse = attention_forward(q, k, v, descriptors=False)       # Triton's pointer kernel: not profiled
    delta = (out.float() * do.float()).sum(-1)
    dkdv_cfg, dq_cfg = (dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages) for c in
                        (_DKDV_CONFIGS[2], _DQ_CONFIGS[0]))
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    lib = {}
    sc, sw = default_scale(64), dict(HEAD_DIM=64, CAUSAL=False, DOT_PRECISION=dot_precision(q.dtype))
    B, H, N = NCU_SHAPE

    def cudnn_forward_with_grad():
        lib["out"] = sdpa_with("SDPA cuDNN")(qg, kg, vg)
    fns = [lambda: attention_forward_desc(q1, k1, v1, cfg=desc_config(128)),
           lambda: attention_forward_desc(q1, k1, v1, cfg=pipe_config(128), pipeline=True),
           lambda: sdpa_with("SDPA cuDNN")(q1, k1, v1),
           lambda: attention_forward_desc(q, k, v, cfg=desc_config(64)),
           cudnn_forward_with_grad,
           lambda: attention_bwd_dkdv_kernel[(cdiv(N, dkdv_cfg["BLOCK_N"]), B * H)](
               q, k, v, do, lse, delta, torch.empty_like(q), torch.empty_like(q), sc, N, **sw, **dkdv_cfg),
           lambda: attention_bwd_dq_kernel[(cdiv(N, dq_cfg["BLOCK_M"]), B * H)](
               q, k, v, do, lse, delta, torch.empty_like(q), sc, N, **sw, **dq_cfg),
           lambda: torch.autograd.grad(lib["out"], (qg, kg, vg), do)]
    return [(what, piece, fn) for (what, piece), fn in zip(NCU_ORDER, fns)]


def attention_limiter_rows(raw_text, order):
    """One dict per profiled kernel from ``ncu --csv --page raw`` text: ``what`` (from ``order``, the
    ``[(what, name piece)]`` of :func:`ncu_launches`), the kernel's name and ``gpu_course.profiling.limiters``.
    Raises ValueError where ncu profiled other kernels than ``order`` says, or in another order."""
    from ..profiling import limiters, ncu_raw_rows
    kernels = ncu_raw_rows(raw_text)
    names = [r["Kernel Name"] for r in kernels]
    if len(kernels) != len(order) or any(piece not in n for (_, piece), n in zip(order, names)):
        raise ValueError(f"attention_limiter_rows: ncu profiled {len(kernels)} kernels, expected {len(order)} "
                         f"in order {[p for _, p in order]}; got {[n[:50] for n in names]}")
    out = []
    for (what, _), row in zip(order, kernels):
        lim = limiters(row)
        out.append(dict(what=what, kernel=short_kernel_name(row["Kernel Name"], 70),
                        **{f: lim[f] for f in NCU_FIELDS[2:]}))
    return out


def limiters_file(device: str = "nvidia-h100-80gb-hbm3"):
    """Where bench/flash_attention_ncu.py stores what it measured on ``device`` (a results file's stem)."""
    from .. import paths
    return paths.RESULTS_DIR / "profiles" / f"ncu_flash_attention_{device}.csv"


def limiter_table(rows):
    """Rows of :func:`attention_limiter_rows` (or read back with ``profiling.read_limiter_csv``) as a table: the
    time under ncu, how busy the tensor pipe and the schedulers were, warps, registers, blocks per SM and the three
    largest stall reasons."""
    width = max(len(r["what"]) for r in rows) + 2
    lines = [f"{'kernel':<{width}}{'µs':>7} {'tc%':>4} {'iss%':>4} {'wrp%':>4} {'regs':>4} {'blk':>3}  "
             "largest stalls (warps per issued instruction)"]
    for r in rows:
        stalls = ", ".join(f"{n} {v:.1f}" for n, v in r["stalls"])
        lines.append(f"{r['what']:<{width}}{r['time_us']:7.0f} {r['tensor_pct']:4.0f} {r['issue_pct']:4.0f} "
                     f"{r['warps_pct']:4.0f} {r['registers']:4.0f} {r['blocks_per_sm']:3.0f}  {stalls}")
    lines.append("µs: time under ncu (clocks locked at base); tc%: tensor pipe busy, % of cycles; iss%: cycles a "
                 "scheduler issued; wrp%: active warps, % of the SM's 64; regs: registers a thread; blk: blocks an SM "
                 "holds")
    return "\n".join(lines)
