"""FlashAttention's forward reading q, k and v through tensor descriptors (on Hopper, TMA bulk copies):
:func:`attention_fwd_desc_kernel` and the helpers it calls, optionally warp-specialised
(``WS``), hand-pipelined (``PIPE``, :func:`_fwd_inner_pipelined`) or on a persistent grid (``PERSIST``); its
autotuner, and the launcher :func:`attention_forward_desc`. Notebook 11's forward ladder steps 3 to 7.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...hardware import gpu_supports, sm_count
from ...launch import cdiv
from ...mode import DEVICE, ON_GPU
from .configs import _prune_desc, desc_config, desc_forward_configs
from .forward import _LAST_FORWARD, _forward_buffers, _key_bounds, _store_rows
from .reference import default_scale


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
