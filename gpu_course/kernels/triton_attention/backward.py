"""FlashAttention-2's backward in Triton: the kernels (``delta = rowsum(dO * O)``, then dK/dV, one program per
key block looping over query blocks, and dQ, one program per query block looping over key blocks; or dK, dV and
dQ in one kernel, dQ summed with atomic adds), their autotuners, and the launchers :func:`attention_backward` and
:func:`attention_backward_atomic`. The probabilities are rebuilt from the forward's LSE, not stored.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...launch import cdiv
from ...mode import by_mode
from ..triton_matmul import dot_precision
from .configs import atomic_configs, backward_configs
from .forward import _key_bounds, check_flash_inputs
from .reference import default_scale


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
