"""Attention for inference (notebook 16): one step of decoding, a few new query tokens against a long KV cache.

Shapes: the queries ``q`` are (batch, query heads, T, d) with T = 1 for plain decoding, or a few for speculative
decoding (the T new tokens are the last T rows of the cache: token t sees keys 0 ... L - T + t). The cache is
either contiguous, ``k, v`` of shape (batch, KV heads, capacity, d), or paged as vLLM stores it: ``k_pages,
v_pages`` of shape (pages, page size, KV heads, d), one ``block_table`` row per sequence listing its pages in order
(int32, (batch, pages per sequence at most)). ``seq_lens`` (int32, (batch,)) holds each sequence's length L. With
grouped-query attention (GQA) ``query heads = group * KV heads`` and query head h reads KV head ``h // group``.

* :func:`decode_kernel`: one program per (split of the keys, batch x block of query heads). ``HEADS`` query heads
  (the whole group, or 1) share the program, so their K and V are loaded once: the group's ``HEADS * T`` query rows
  are the M dimension of ``tl.dot``, padded to ``BLOCK_M >= 16``. With ``SPLITS == 1`` the program writes the
  output itself; otherwise it writes a partial output (normalised by its own sum) and its log-sum-exp.
* :func:`decode_combine_kernel`: one program per query row: the partials weighted by ``exp(lse_s - max)``. Or,
  with ``last_combines=True``, no second kernel: the last of a column's split programs to finish combines
  (:func:`_combine_if_last`, a count per column in an int32 buffer that each launch leaves zero).
* :func:`decode_attention`, :func:`paged_decode_attention`: the launchers; :func:`choose_splits` the number
  of splits from the SM count and the length; :func:`paged_cache` a paged copy of a contiguous cache.
* :func:`decode_reference`: float64 attention by torch, the check of every kernel here.

Exponentials are base 2 inside the kernels, as notebook 11's (``exp2(x * log2(e)) == exp(x)``); the LSE of the
partials is the natural log.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..hardware import sm_count
from ..mode import ON_GPU, by_mode
from .triton_attention.configs import small_shared_memory

LN2 = 0.6931471805599453


# ------------------------------------------------------------------------------------------- the kernels
@triton.jit
def _page_and_row(table_ptr, start, cols, hi, BLOCK_N: tl.constexpr, PAGE: tl.constexpr, MASK: tl.constexpr):
    """Where keys ``cols`` (the block from ``start``) live: ``(page, row)``. ``PAGE == 0``: a contiguous cache,
    key j in row j (an int64: the offsets of a long cache pass 2^31) of page 0; else row ``j % PAGE`` of physical
    page ``table[j // PAGE]`` (an int64)."""
    if PAGE == 0:
        page = 0
        row = cols.to(tl.int64)
    else:
        row = cols % PAGE
        if PAGE % BLOCK_N == 0:      # the block lies in one page: one entry of the table
            page = tl.load(table_ptr + start // PAGE).to(tl.int64)
        elif MASK:                   # the block spans BLOCK_N // PAGE pages: an entry per key
            page = tl.load(table_ptr + cols // PAGE, mask=cols < hi, other=0).to(tl.int64)
        else:
            page = tl.load(table_ptr + cols // PAGE).to(tl.int64)
    return page, row


@triton.jit
def _decode_blocks(acc, m_i, l_i, q, k_base, v_base, table_ptr, last, lo, hi, qk_scale,
                   stride_kb, stride_kn, stride_vb, stride_vn,
                   HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, PAGE: tl.constexpr, MASK: tl.constexpr,
                   DOT_PRECISION: tl.constexpr):
    """Keys [lo, hi) of one sequence and KV head: the online-softmax update of notebook 11, one block of
    BLOCK_N keys at a time, each key found where :func:`_page_and_row` says (``PAGE``, ``table_ptr``).
    ``last``: per query row, the last key it may see. Without MASK every key of every block is visible to
    every row."""
    dims = tl.arange(0, HEAD_DIM)
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        page, row = _page_and_row(table_ptr, start, cols, hi, BLOCK_N, PAGE, MASK)   # (0, j) in a contiguous cache
        k_rows = page * stride_kb + row * stride_kn
        v_rows = page * stride_vb + row * stride_vn
        if MASK:
            k = tl.load(k_base + k_rows[:, None] + dims[None, :], mask=cols[:, None] < hi, other=0.0)
            v = tl.load(v_base + v_rows[:, None] + dims[None, :], mask=cols[:, None] < hi, other=0.0)
        else:
            k = tl.load(k_base + k_rows[:, None] + dims[None, :])                 # (BLOCK_N, HEAD_DIM)
            v = tl.load(v_base + v_rows[:, None] + dims[None, :])
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale      # (BLOCK_M, BLOCK_N), log2 units
        if MASK:
            s = tl.where((cols[None, :] < hi) & (cols[None, :] <= last[:, None]), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)    # a row that has seen no key yet
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def decode_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, lse_ptr, out_ptr, count_ptr, scale,
                  stride_qb, stride_qh, stride_qt, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn,
                  stride_tb, KV_HEADS, GROUP: tl.constexpr, T: tl.constexpr, HEADS: tl.constexpr,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PAGE: tl.constexpr,
                  SPLITS: tl.constexpr, DOT_PRECISION: tl.constexpr, LAST_COMBINES: tl.constexpr = False,
                  BLOCK_S: tl.constexpr = 1):
    """Program (split, batch x block of HEADS query heads). Contiguous cache (PAGE == 0): k[b, kv head, j]
    at ``b * stride_kb + h * stride_kh + j * stride_kn``; paged: row r of page p at ``p * stride_kb +
    h * stride_kh + r * stride_kn``. Output: SPLITS == 1, o (batch, query heads, T, d) in q's dtype;
    else the fp32 partials o (batch, query heads, T, SPLITS, d) and lse (batch, query heads, T, SPLITS), and
    with LAST_COMBINES the last of a column's programs to finish also combines them into ``out_ptr`` (q's
    dtype), counting the finished programs in ``count_ptr`` (one int32 per column, zero before and after)."""
    split = tl.program_id(0)
    blocks = KV_HEADS * (GROUP // HEADS)              # blocks of HEADS query heads per sequence
    b = tl.program_id(1) // blocks
    qh0 = (tl.program_id(1) % blocks) * HEADS         # this program's first query head
    kvh = qh0 // GROUP
    L = tl.load(lens_ptr + b)
    per_split = tl.cdiv(tl.cdiv(L, SPLITS), BLOCK_N) * BLOCK_N
    lo = split * per_split
    hi = tl.minimum(lo + per_split, L)
    rows = tl.arange(0, BLOCK_M)                      # row r: query head qh0 + r // T, token r % T
    head, tok = qh0 + rows // T, rows % T
    row_ok = rows < HEADS * T
    dims = tl.arange(0, HEAD_DIM)
    q_off = b.to(tl.int64) * stride_qb + head * stride_qh + tok * stride_qt
    q = tl.load(q_ptr + q_off[:, None] + dims[None, :], mask=row_ok[:, None], other=0.0)
    last = L - T + tok                                # token t sees keys 0 ... L - T + t
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    qk_scale = scale * 1.4426950408889634
    if PAGE == 0:
        k_base = k_ptr + b.to(tl.int64) * stride_kb + kvh * stride_kh
        v_base = v_ptr + b.to(tl.int64) * stride_vb + kvh * stride_vh
    else:
        k_base = k_ptr + kvh * stride_kh
        v_base = v_ptr + kvh * stride_vh
    table = table_ptr + b.to(tl.int64) * stride_tb
    # whole blocks that every row sees first, without masks; then the ragged end, masked
    full_end = lo + tl.maximum(tl.minimum(hi, L - T + 1) - lo, 0) // BLOCK_N * BLOCK_N
    acc, m_i, l_i = _decode_blocks(acc, m_i, l_i, q, k_base, v_base, table, last, lo, full_end, qk_scale,
                                   stride_kb, stride_kn, stride_vb, stride_vn,
                                   HEAD_DIM, BLOCK_N, PAGE, False, DOT_PRECISION)
    acc, m_i, l_i = _decode_blocks(acc, m_i, l_i, q, k_base, v_base, table, last, full_end, hi, qk_scale,
                                   stride_kb, stride_kn, stride_vb, stride_vn,
                                   HEAD_DIM, BLOCK_N, PAGE, True, DOT_PRECISION)
    empty = l_i == 0.0                                # an empty split (or a row that saw no key in it)
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    row = (b * KV_HEADS * GROUP + head) * T + tok     # the row of (batch, query head, token)
    if SPLITS == 1:
        tl.store(o_ptr + row.to(tl.int64)[:, None] * HEAD_DIM + dims[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=row_ok[:, None])
    else:
        lse = tl.where(empty, float("-inf"), (m_i + tl.math.log2(tl.where(empty, 1.0, l_i))) * 0.6931471805599453)
        part = row.to(tl.int64) * SPLITS + split
        tl.store(o_ptr + part[:, None] * HEAD_DIM + dims[None, :], out, mask=row_ok[:, None])
        tl.store(lse_ptr + part, lse, mask=row_ok)
        if LAST_COMBINES:
            _combine_if_last(o_ptr, lse_ptr, out_ptr, count_ptr + tl.program_id(1), row, row_ok, SPLITS, HEAD_DIM,
                             BLOCK_M, BLOCK_S)


@triton.jit
def _combine_if_last(o_part_ptr, lse_part_ptr, out_ptr, count_ptr, row, row_ok, SPLITS: tl.constexpr,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr):
    """Called by each of a column's SPLITS programs once its partials are stored: the one that finishes last
    combines the column's rows as :func:`decode_combine_kernel` does, so a step is one launch. The count in
    ``count_ptr`` says which program is last: the barrier puts every thread's stores before the atomic, whose
    release makes them visible to the program that reads them after its own (acquire); that program reads the
    partials from L2 (``.cg``: not from an L1 that may hold none of them) and sets the count back to 0. Its reads
    are independent of one another (every row's lse at once, then each split's lse and outputs, in a loop unrolled
    8 times), so that they can be in flight together: this combine runs at the end of the step, in one program per
    column. Unrolled over every split, the kernel spilled at 32 and 33 splits (255 registers; Triton 3.9 for
    sm_90a), and 33 splits cost an H100 (Triton 3.6) 11 us a step more than two launches; unrolled 8 times,
    79-128 registers at 16-128 splits, no spill."""
    tl.debug_barrier()
    finished = tl.atomic_add(count_ptr, 1, sem="acq_rel")
    if finished == SPLITS - 1:
        dims = tl.arange(0, HEAD_DIM)
        s = tl.arange(0, BLOCK_S)
        first = row.to(tl.int64) * SPLITS
        lse = tl.load(lse_part_ptr + first[:, None] + s[None, :], mask=row_ok[:, None] & (s[None, :] < SPLITS),
                      other=float("-inf"), cache_modifier=".cg")                       # (BLOCK_M, BLOCK_S)
        m = tl.max(lse, 1)
        m = tl.where(m == float("-inf"), 0.0, m)                             # a row without keys: weights 0
        den = tl.sum(tl.exp(lse - m[:, None]), 1)
        num = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        for i in tl.range(0, SPLITS, loop_unroll_factor=8):   # 8 splits' loads in flight; all of them would spill
            lse_i = tl.load(lse_part_ptr + first + i, mask=row_ok, other=float("-inf"), cache_modifier=".cg")
            o = tl.load(o_part_ptr + (first + i)[:, None] * HEAD_DIM + dims[None, :], mask=row_ok[:, None],
                        other=0.0, cache_modifier=".cg")
            num += tl.exp(lse_i - m)[:, None] * o
        out = num / tl.where(den == 0.0, 1.0, den)[:, None]
        tl.store(out_ptr + row.to(tl.int64)[:, None] * HEAD_DIM + dims[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=row_ok[:, None])
        tl.atomic_xchg(count_ptr, 0)


@triton.jit
def decode_combine_kernel(o_part_ptr, lse_part_ptr, o_ptr, SPLITS, HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr):
    """One program per query row: ``o = sum_s w_s o_s / sum_s w_s`` with ``w_s = exp(lse_s - max_s lse_s)``, from
    the partials (each normalised by its own sum) of :func:`decode_kernel`; a split with ``lse = -inf`` (no key)
    weighs 0."""
    row = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    lse = tl.load(lse_part_ptr + row * SPLITS + s, mask=s < SPLITS, other=float("-inf"))
    m = tl.max(lse, 0)
    w = tl.exp(lse - m)
    o = tl.load(o_part_ptr + (row * SPLITS + s)[:, None] * HEAD_DIM + dims[None, :], mask=(s < SPLITS)[:, None],
                other=0.0)
    out = tl.sum(w[:, None] * o, 0) / tl.sum(w, 0)
    tl.store(o_ptr + row * HEAD_DIM + dims, out.to(o_ptr.dtype.element_ty))


# ------------------------------------------------------------------------------------------- configurations
HEAD_DIMS = (16, 32, 64, 128, 256)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def default_config(page: int = 0, row_bytes: int = 256) -> dict:
    """The tile a launch uses unless told: ``dict(block_n, num_warps, num_stages)``. GPU: 64 keys a block, 4 warps,
    3 stages (notebook 16's probe on an H200); a paged cache (``page`` > 0) with K and V rows of at most 256
    bytes (``row_bytes``: d = 128 in fp16): 128 keys a block and 2 stages, which that probe found within 4 %
    of the contiguous step at page 16 where 64 keys and 3 stages lost 9-16 % (on an H100 the two tiles are 1-2 %
    apart: 1.010x and 1.022x of the contiguous step in notebook 16's stored run); a GPU with little shared memory (a T4: 64 KB a
    block) 32 keys and 2 stages. CPU (the interpreter): 16 keys, the smallest ``tl.dot`` takes."""
    if not ON_GPU:
        return dict(block_n=16, num_warps=4, num_stages=1)
    if small_shared_memory():
        return dict(block_n=32, num_warps=4, num_stages=2)
    if page and row_bytes <= 256:     # 2 stages of 128 rows of K and V: at most 128 KB of shared memory at 256 B a row
        return dict(block_n=128, num_warps=4, num_stages=2)
    return dict(block_n=64, num_warps=4, num_stages=3)


REF_SMS = 132   # an H100 SXM's SMs, and an H200's


def device_sms() -> int:
    """The SMs the split rule fills: this GPU's (asked of the driver once); in cpu mode an H100 SXM's 132 (an H200 has
    as many), so that the rule chooses there what it would on the GPUs the notebook's outputs come from."""
    return sm_count() if ON_GPU else REF_SMS


# The split rule's two constants (notebook 16, section 3): PER_SM programs an SM holds at once with the default tile
# (3 stages of a 64-key block of K and of V at d = 128 in fp16: 96 KB of shared memory, two in a Hopper SM's 228 KB),
# and no split of fewer than MIN_KEYS keys (two blocks of 64).
PER_SM = 2
MIN_KEYS = 128


def choose_splits(batch: int, kv_heads: int, length: int, sms: int | None = None, *, per_sm: int = PER_SM,
                  min_keys: int = MIN_KEYS) -> int:
    """The number of splits of the keys: the most that still run in one round, every program resident at once
    (``batch * kv_heads * splits <= per_sm * sms``: no second, partial round of programs), but none that leaves a
    split fewer than ``min_keys`` keys; at least 1.

    >>> choose_splits(8, 8, 32768, 132), choose_splits(1, 8, 4096, 132), choose_splits(1, 8, 131072, 132)
    (4, 32, 33)
    >>> choose_splits(64, 8, 32768, 132)       # 512 programs: the batch alone fills the GPU
    1
    """
    sms = device_sms() if sms is None else sms
    programs = max(1, batch * kv_heads)
    return max(1, min(per_sm * sms // programs, length // min_keys))


# ------------------------------------------------------------------------------------------- the launchers
_LENS_CACHE: dict = {}


def full_lengths(batch: int, length: int, device) -> torch.Tensor:
    """An int32 tensor of ``batch`` lengths, all ``length`` (made once per (batch, length, device): a decode step's
    launcher must not pay a fill kernel each call)."""
    key = (batch, length, str(device))
    t = _LENS_CACHE.get(key)
    if t is None:
        t = _LENS_CACHE[key] = torch.full((batch,), length, dtype=torch.int32, device=device)
    return t


def _check_q(q, name):
    if not isinstance(q, torch.Tensor) or q.ndim != 4:
        raise ValueError(f"{name}: q must be a tensor of shape (batch, query heads, T, d), got "
                         f"{tuple(q.shape) if isinstance(q, torch.Tensor) else type(q).__name__}")
    if q.dtype not in DTYPES:
        raise TypeError(f"{name}: dtype must be one of {', '.join(map(str, DTYPES))}, got {q.dtype}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"{name}: the head dimension d must be one of {HEAD_DIMS}, got {q.shape[-1]}")


def _check_kv(q, k, v, kv_heads, name):
    if k.shape != v.shape or k.dtype != q.dtype or v.dtype != q.dtype or k.device != q.device:
        raise ValueError(f"{name}: k and v must have one shape, q's dtype and device; got k {tuple(k.shape)} "
                         f"{k.dtype}, v {tuple(v.shape)} {v.dtype}, q {q.dtype} on {q.device}")
    if k.shape[-1] != q.shape[-1] or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError(f"{name}: k and v need q's head dimension ({q.shape[-1]}), contiguous in it")
    if q.shape[1] % kv_heads:
        raise ValueError(f"{name}: the query heads ({q.shape[1]}) must be a multiple of the KV heads ({kv_heads})")


_COUNTS: dict = {}


def _zero_counts(n: int, device) -> torch.Tensor:
    """``n`` int32 zeros on ``device``, made once and shared by every launch that needs at most ``n``: the
    programs of a launch whose last program combines set their counts back to 0 before it ends (so launches on
    one stream, or replayed in a CUDA graph, may share them; launches on two streams at once may not)."""
    key = str(device)
    t = _COUNTS.get(key)
    if t is None or t.numel() < n:
        t = _COUNTS[key] = torch.zeros(max(n, 1024), dtype=torch.int32, device=device)
    return t


def _launch(q, k, v, table, lens, page, kv_heads, splits, block_n, num_warps, num_stages, group_heads, stride_t,
            poison=False, last_combines=False):
    B, HQ, T, D = q.shape
    group = HQ // kv_heads
    heads = group if group_heads else 1
    block_m = max(16, triton.next_power_of_2(heads * T))
    dot = "ieee" if q.dtype == torch.float32 else "tf32"
    args = (q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1 if page == 0 else 2),
            k.stride(2 if page == 0 else 1), v.stride(0), v.stride(1 if page == 0 else 2),
            v.stride(2 if page == 0 else 1), stride_t, kv_heads)
    meta = dict(GROUP=group, T=T, HEADS=heads, HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, PAGE=page,
                SPLITS=splits, DOT_PRECISION=dot, num_warps=num_warps, num_stages=num_stages)
    grid = (splits, B * kv_heads * (group // heads))
    scale = D ** -0.5
    new = (lambda *a, **kw: torch.full(*a, float("nan"), **kw)) if poison else torch.empty  # noqa: E731
    out = new(q.shape, dtype=q.dtype, device=q.device)
    if splits == 1:
        decode_kernel[grid](q, k, v, table, lens, out, out, out, lens, scale, *args, **meta)
        return out
    o_part = new((B, HQ, T, splits, D), dtype=torch.float32, device=q.device)
    lse_part = new((B, HQ, T, splits), dtype=torch.float32, device=q.device)
    if last_combines:
        counts = _zero_counts(grid[1], q.device)
        decode_kernel[grid](q, k, v, table, lens, o_part, lse_part, out, counts, scale, *args, LAST_COMBINES=True,
                            BLOCK_S=triton.next_power_of_2(splits), **meta)
        return out
    decode_kernel[grid](q, k, v, table, lens, o_part, lse_part, out, lens, scale, *args, **meta)
    decode_combine_kernel[(B * HQ * T,)](o_part, lse_part, out, splits, HEAD_DIM=D,
                                         BLOCK_S=triton.next_power_of_2(splits), num_warps=4 if ON_GPU else 1)
    return out


def _tile(block_n, num_warps, num_stages, page=0, row_bytes=256):
    cfg = default_config(page, row_bytes)
    return (block_n or cfg["block_n"], num_warps or cfg["num_warps"], num_stages or cfg["num_stages"])


def decode_attention(q, k, v, seq_lens=None, *, splits=None, block_n=None, num_warps=None, num_stages=None,
                     group_heads=True, poison=False, last_combines=False):
    """Attention of the T new tokens ``q`` (batch, query heads, T, d) against a contiguous cache ``k, v``
    (batch, KV heads, capacity, d), each sequence's length in ``seq_lens`` (int32 (batch,) tensor; None: the
    whole capacity). ``splits``: programs per (sequence, KV head) along the keys (None: :func:`choose_splits`;
    1: no combine). ``group_heads``: the query heads of a group share one program (their K/V loaded once);
    False: one program per query head. ``poison``: the output and the partials start as NaN (a check's run: an
    element no program writes stays NaN). ``last_combines``: with several splits, the last program of each
    column to finish combines the partials (one launch a step) instead of a second kernel. Returns (batch, query
    heads, T, d) in q's dtype.

    >>> q, k, v = torch.randn(1, 4, 1, 16), torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16)
    >>> torch.allclose(decode_attention(q, k, v, splits=3), decode_reference(q, k, v).float(), atol=1e-5)
    True
    >>> torch.allclose(decode_attention(q, k, v, splits=3, last_combines=True), decode_reference(q, k, v).float(),
    ...                atol=1e-5)
    True
    """
    _check_q(q, "decode_attention")
    if not isinstance(k, torch.Tensor) or k.ndim != 4:
        raise ValueError("decode_attention: k and v must be tensors of shape (batch, KV heads, capacity, d)")
    _check_kv(q, k, v, k.shape[1], "decode_attention")
    B, HQ, T, D = q.shape
    if k.shape[0] != B:
        raise ValueError(f"decode_attention: k has batch {k.shape[0]}, q {B}")
    lens = full_lengths(B, k.shape[2], q.device) if seq_lens is None else seq_lens
    length = k.shape[2]
    programs = k.shape[1] if group_heads else HQ          # programs per sequence before the split
    splits = splits or choose_splits(B, programs, length)
    bn, nw, ns = _tile(block_n, num_warps, num_stages)
    return _launch(q, k, v, lens, lens, 0, k.shape[1], splits, bn, nw, ns, group_heads, 0, poison, last_combines)


def paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens, *, splits=None, block_n=None,
                           num_warps=None, num_stages=None, group_heads=True, max_len=None, poison=False,
                           last_combines=False):
    """:func:`decode_attention` over a paged cache: ``k_pages, v_pages`` (pages, page size, KV heads, d),
    ``block_table`` (batch, pages per sequence at most; int32: sequence b's key j is row ``j % page`` of page
    ``block_table[b, j // page]``), ``seq_lens`` (int32, (batch,)). ``max_len``: the longest sequence, for
    :func:`choose_splits` (default: what the table can hold).

    >>> k, v = torch.randn(2, 2, 50, 16), torch.randn(2, 2, 50, 16)
    >>> kp, vp, table = paged_cache(k, v, page=16, generator=torch.Generator().manual_seed(0))
    >>> lens, q = torch.tensor([50, 33], dtype=torch.int32), torch.randn(2, 4, 1, 16)
    >>> ref = decode_reference(q, k, v, lens).float()
    >>> torch.allclose(paged_decode_attention(q, kp, vp, table, lens, splits=2), ref, atol=1e-5)
    True
    """
    _check_q(q, "paged_decode_attention")
    if not isinstance(k_pages, torch.Tensor) or k_pages.ndim != 4:
        raise ValueError("paged_decode_attention: k_pages and v_pages must be tensors of shape "
                         "(pages, page size, KV heads, d)")
    _check_kv(q, k_pages, v_pages, k_pages.shape[2], "paged_decode_attention")
    B = q.shape[0]
    if block_table.dtype != torch.int32 or block_table.ndim != 2 or block_table.shape[0] != B:
        raise ValueError(f"paged_decode_attention: block_table must be int32 of shape (batch={B}, pages), got "
                         f"{block_table.dtype} {tuple(block_table.shape)}")
    if seq_lens is None or seq_lens.dtype != torch.int32 or tuple(seq_lens.shape) != (B,):
        raise ValueError(f"paged_decode_attention: seq_lens must be an int32 tensor of shape ({B},)")
    page = k_pages.shape[1]
    length = max_len or block_table.shape[1] * page
    splits = splits or choose_splits(B, k_pages.shape[2] if group_heads else q.shape[1], length)
    bn, nw, ns = _tile(block_n, num_warps, num_stages, page, q.shape[-1] * q.element_size())
    return _launch(q, k_pages, v_pages, block_table, seq_lens, page, k_pages.shape[2], splits, bn, nw, ns,
                   group_heads, block_table.stride(0), poison, last_combines)


# ------------------------------------------------------------------------------------------- torch helpers
def decode_reference(q, k, v, seq_lens=None):
    """Float64 attention of the T new tokens ``q`` (batch, query heads, T, d) against ``k, v`` (batch, KV heads,
    capacity, d): sequence b sees its first ``seq_lens[b]`` keys (all where None), token t of T the keys
    ``0 ... L - T + t``; KV head ``h // group`` for query head h (GQA). Plain torch, one sequence at a time."""
    B, HQ, T, D = q.shape
    group = HQ // k.shape[1]
    outs = []
    for b in range(B):
        L = k.shape[2] if seq_lens is None else int(seq_lens[b])
        kb = k[b, :, :L].double().repeat_interleave(group, 0)            # (HQ, L, D)
        vb = v[b, :, :L].double().repeat_interleave(group, 0)
        s = q[b].double() @ kb.transpose(-2, -1) * D ** -0.5             # (HQ, T, L)
        future = torch.arange(L, device=q.device)[None, :] > (L - T + torch.arange(T, device=q.device))[:, None]
        s = s.masked_fill(future, float("-inf"))
        outs.append(torch.softmax(s, -1) @ vb)
    return torch.stack(outs)


def paged_cache(k, v, page: int, seq_lens=None, generator=None, spare: int = 0, poison: bool = True):
    """A paged copy of the contiguous cache ``k, v`` (batch, KV heads, capacity, d): ``(k_pages, v_pages,
    block_table)`` with pages of ``page`` rows, (pages, page, KV heads, d), as vLLM stores them. Each sequence
    gets ``cdiv(L, page)`` pages (its length from ``seq_lens``, else the capacity), placed at physical pages
    drawn in a random order (``generator``), ``spare`` more pages are allocated and left unused. With
    ``poison`` every row no sequence owns (unused pages, the rows past a sequence's end in its last page) is
    NaN, and table entries past a sequence's pages are -1, so a kernel that reads them shows it."""
    B, H, cap, D = k.shape
    lens = [cap] * B if seq_lens is None else [int(x) for x in seq_lens]
    need = [-(-L // page) for L in lens]
    total = sum(need) + spare
    order = torch.randperm(total, generator=generator).to(k.device)
    kp = torch.full((total, page, H, D), float("nan") if poison else 0.0, dtype=k.dtype, device=k.device)
    vp = torch.full_like(kp, float("nan") if poison else 0.0)
    table = torch.full((B, max(need)), -1 if poison else 0, dtype=torch.int32, device=k.device)
    at = 0
    for b, (L, n) in enumerate(zip(lens, need)):
        phys = order[at:at + n]
        at += n
        table[b, :n] = phys.to(torch.int32)
        for i in range(n):
            rows = min(page, L - i * page)
            kp[phys[i], :rows] = k[b, :, i * page:i * page + rows].transpose(0, 1)
            vp[phys[i], :rows] = v[b, :, i * page:i * page + rows].transpose(0, 1)
    return kp, vp, table


def paged_cache_fast(k, v, page: int, generator=None):
    """:func:`paged_cache` for a large cache whose sequences all fill the capacity (a multiple of ``page``):
    one permuted copy, no loop over pages (the timing's setup on a GPU); no poison."""
    B, H, cap, D = k.shape
    if cap % page:
        raise ValueError(f"paged_cache_fast: the capacity {cap} must be a multiple of the page size {page}")
    n = cap // page
    order = torch.randperm(B * n, generator=generator).to(k.device)
    kp, vp = (torch.empty((B * n, page, H, D), dtype=k.dtype, device=k.device) for _ in range(2))
    for src, dst in ((k, kp), (v, vp)):
        dst[order] = src.reshape(B, H, n, page, D).permute(0, 2, 3, 1, 4).reshape(B * n, page, H, D)
    return kp, vp, order.reshape(B, n).to(torch.int32)


def kv_bytes(batch: int, kv_heads: int, length: int, d: int, itemsize: int) -> int:
    """Bytes of K and V one decode step reads: every key and value of every sequence and KV head, once.

    >>> kv_bytes(8, 8, 32768, 128, 2) / 2**30
    1.0
    """
    return 2 * batch * kv_heads * length * d * itemsize


def decode_flops(batch: int, q_heads: int, tokens: int, length: int, d: int) -> int:
    """FLOPs of one decode step's attention: two matmuls (q kᵀ and p v) of 2 FLOPs per multiply-add, each query
    row against every key (the speculative tokens' causal mask ignored).

    >>> decode_flops(8, 32, 1, 32768, 128) / 1e9
    4.294967296
    """
    return 4 * batch * q_heads * tokens * length * d
