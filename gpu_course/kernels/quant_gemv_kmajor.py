"""An int4 GEMV for batch 1 on weights stored k-major, split over k into many small programs: ``out = x @ W.T`` for
one row of ``x``, W (n x k) given as notebook 15's ``packed`` bytes and group-wise ``scales`` (:mod:`.quant_gemv`),
laid out once by :func:`repack_kmajor`. It is the batch-1 kernel of notebook 15 that takes less GPU time than
torch's int4 kernel: on an NVIDIA H100 (L2 flushed, batch 1) 23.1 against 26.5 µs at 8192 x 8192 and 22.5 against
23.7 µs at 4096 x 14336, where the strided kernel (:mod:`.quant_gemv_strided`) takes 33 and 37 µs.

Three choices, each aimed at keeping more bytes of W in flight than the strided kernel does:

* **k-major words.** ``words[w, r]`` (an int32) holds columns ``8 w .. 8 w + 7`` of W's row r, so a row of words
  (one word of every row of W) is contiguous: a program loads ``BLOCK_N`` consecutive words, one per output, and
  the 8 columns of x they meet are the same 8 for all of them (a broadcast, no shared-memory layout).
* **Split over k, many programs.** Each program takes ``BLOCK_N`` outputs over ``STEPS`` rows of words (128
  columns of k at the default 16): 512 programs at 8192 x 8192, each 1024 outputs over 128 columns, a short loop,
  where the strided kernel's 512 each take 32 rows over half of k, a long one. Their partial sums meet in an fp32
  workspace through atomics; the program that finishes a block of outputs last (a ticket counter, also an atomic)
  converts the sums to x's dtype, stores them, and sets the workspace back to zero for the next call: one launch,
  no second kernel, no ``torch.zeros`` per call. The atomics add in an order that varies from run to run, so the
  last bits of an output may too.
* **Two nibbles a shift.** With the word shifted so that nibble 2a lands in bits 15-18 and nibble 2a + 1 in bits
  19-22, ``(t & 0x00078000) | ONE`` and ``(t & 0x00780000) | ONE`` (ONE = 0x3F800000, the bits of 1.0, passed as
  an argument so that the compiler makes each one ``lop3``) read as fp32 are exactly ``1 + q'/256`` and
  ``1 + q'/16`` (q' = q + 8); multiplied by ``256 x`` and ``16 x`` they give ``(256 + q') x`` and ``(16 + q') x``,
  and the word's ``264 x_lo + 24 x_hi`` taken away leaves ``q x``.

A call spends longer on the CPU than the kernel on the GPU (the workspace's look-up, the grid, the launcher's
arguments), so :func:`build_route` puts a C++ route in front of it (:mod:`gpu_course.triton_route`, as notebook 07's
matmul has): from a kind of call's second time on, one look-up in Python and one call into C++, which keeps its own
workspace per stream.

>>> w = repack_kmajor(torch.tensor([[0x10, 0x32, 0x54, 0x76] * 16] * 2, dtype=torch.uint8))   # 2 rows, k = 128
>>> tuple(w.shape), hex(int(w[0, 0]) & 0xFFFFFFFF)           # nibble i of word 0: column i (q' = i)
((16, 2), '0x76543210')
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import triton_route
from ..launch import cdiv
from ..mode import by_mode
from ..triton_launch import direct
from .quant_gemv import GROUP

ONE_BITS = 0x3F800000     # 1.0 as fp32 bits: the decode's OR


def repack_kmajor(packed: torch.Tensor) -> torch.Tensor:
    """Notebook 15's ``packed`` (n x k/2 uint8: column 2j in byte j's low nibble, 2j + 1 in its high one) as the
    kernel's int32 words, k-major: (k/8) x n, ``words[w, r]`` holding columns ``8 w + i`` of row r in nibble i.
    The bytes within a word keep their order (little-endian: byte j of the word is byte 4 w + j of the row), so
    this is a transpose of the rows' words. k must be a multiple of 128."""
    if packed.dtype != torch.uint8 or packed.dim() != 2 or (2 * packed.shape[1]) % GROUP:
        raise ValueError(f"repack_kmajor: packed must be (n, k/2) uint8 with k a multiple of {GROUP}, got "
                         f"{packed.dtype} {tuple(packed.shape)}")
    return packed.contiguous().view(torch.int32).t().contiguous()


@triton.jit
def int4_gemv_kmajor_kernel(x_ptr, w_ptr, s_ptr, out_ptr, sum_ptr, ticket_ptr, N, K, s_stride_g, ONE,
                            BLOCK_N: tl.constexpr, STEPS: tl.constexpr):
    """Outputs ``BLOCK_N * pid_n ..`` over word rows ``STEPS * pid_k ..``: partial sums into ``sum_ptr`` (fp32,
    zero on entry); the last program of a block of outputs stores them and zeroes the sums and its ticket."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ok_n = n < N
    kw = K // 8
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    w0 = pid_k * STEPS
    for w in range(w0, tl.minimum(w0 + STEPS, kw)):        # one row of words (8 columns of k) a step
        wq = tl.load(w_ptr + w * N + n, mask=ok_n, other=0, eviction_policy="evict_first").to(tl.uint32, bitcast=True)
        s = tl.load(s_ptr + (w // 16) * s_stride_g + n, mask=ok_n, other=0.0).to(tl.float32)
        fx = tl.zeros((BLOCK_N,), dtype=tl.float32)
        c = 0.0
        for a in tl.static_range(4):                       # nibbles 2a, 2a + 1: one shift puts them at bits 15, 19
            if 15 - 8 * a >= 0:
                t = wq << (15 - 8 * a)
            else:
                t = wq >> (8 * a - 15)
            x_lo = tl.load(x_ptr + 8 * w + 2 * a).to(tl.float32)
            x_hi = tl.load(x_ptr + 8 * w + 2 * a + 1).to(tl.float32)
            fx += ((t & 0x00078000) | ONE).to(tl.float32, bitcast=True) * (256.0 * x_lo)   # (256 + q') x_lo
            fx += ((t & 0x00780000) | ONE).to(tl.float32, bitcast=True) * (16.0 * x_hi)    # (16 + q') x_hi
            c += 264.0 * x_lo + 24.0 * x_hi
        acc += (fx - c) * s
    _add_and_finish(acc, n, ok_n, out_ptr, sum_ptr, ticket_ptr + pid_n)


@triton.jit
def _add_and_finish(acc, n, ok_n, out_ptr, sum_ptr, ticket_ptr):
    """A program's partial sums into the fp32 workspace; the last program of a block of outputs (the ticket it
    draws) stores the block's sums in out's dtype and sets the sums and its ticket back to zero."""
    tl.atomic_add(sum_ptr + n, acc, mask=ok_n, sem="relaxed")
    tl.debug_barrier()                                     # every thread's adds issued before the ticket
    ticket = tl.atomic_add(ticket_ptr, 1, sem="acq_rel")
    if ticket == tl.num_programs(1) - 1:                   # the last program of this block of outputs
        total = tl.load(sum_ptr + n, mask=ok_n, other=0.0, volatile=True)
        tl.store(out_ptr + n, total.to(out_ptr.dtype.element_ty), mask=ok_n)
        tl.store(sum_ptr + n, tl.zeros_like(total), mask=ok_n)
        tl.store(ticket_ptr, 0)


@triton.jit
def int4_gemv_kmajor_tile_kernel(x_ptr, w_ptr, s_ptr, out_ptr, sum_ptr, ticket_ptr, N, K, s_stride_g, ONE,
                                 BLOCK_N: tl.constexpr, STEPS: tl.constexpr):
    """:func:`int4_gemv_kmajor_kernel`'s product with a program's ``STEPS`` rows of words loaded as one
    (STEPS, BLOCK_N) tile, all in flight at once, instead of one row a step after the last (the row kernel's
    loop issues a row's loads only when it reaches that row). STEPS divides 16, so the rows share one group and
    one row of scales, applied once to their sum; each pair of nibbles is summed over the rows as it is decoded,
    so that only the words stay in registers."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ok_n = n < N
    w = pid_k * STEPS + tl.arange(0, STEPS)                # this program's rows of words (K // 8 of them in all)
    ok_w = w < K // 8
    wq = tl.load(w_ptr + w[:, None] * N + n[None, :], mask=ok_w[:, None] & ok_n[None, :], other=0,
                 eviction_policy="evict_first").to(tl.uint32, bitcast=True)       # (STEPS, BLOCK_N)
    s = tl.load(s_ptr + (pid_k * STEPS // 16) * s_stride_g + n, mask=ok_n, other=0.0).to(tl.float32)
    fx = tl.zeros((BLOCK_N,), dtype=tl.float32)
    c = 0.0
    for a in tl.static_range(4):                           # as the row kernel: nibbles 2a, 2a + 1 at bits 15, 19
        if 15 - 8 * a >= 0:
            t = wq << (15 - 8 * a)
        else:
            t = wq >> (8 * a - 15)
        x_lo = tl.load(x_ptr + 8 * w + 2 * a, mask=ok_w, other=0.0).to(tl.float32)          # (STEPS,)
        x_hi = tl.load(x_ptr + 8 * w + 2 * a + 1, mask=ok_w, other=0.0).to(tl.float32)
        fx += tl.sum(((t & 0x00078000) | ONE).to(tl.float32, bitcast=True) * (256.0 * x_lo)[:, None]
                     + ((t & 0x00780000) | ONE).to(tl.float32, bitcast=True) * (16.0 * x_hi)[:, None], 0)
        c += tl.sum(264.0 * x_lo + 24.0 * x_hi, 0)         # a row past k: x = 0, so it adds nothing
    _add_and_finish((fx - c) * s, n, ok_n, out_ptr, sum_ptr, ticket_ptr + pid_n)


# BLOCK_N, STEPS, num_warps, num_stages: the best of an H100's sweep (8192 x 8192 and 4096 x 14336, batch 1); the
# interpreter's keeps its programs few.
CONFIG = by_mode(gpu=dict(BLOCK_N=1024, STEPS=16, num_warps=8, num_stages=3),
                 cpu=dict(BLOCK_N=64, STEPS=16, num_warps=4, num_stages=1))

_WORKSPACE = {}


def workspace(device, n: int, blocks: int, stream: int) -> tuple:
    """The fp32 sums (n) and tickets (blocks) of one stream's calls, zero, made on first use and kept: each call
    leaves them zero again. One per stream, so that calls on two streams never share them."""
    key = (str(device), stream, n, blocks)
    if key not in _WORKSPACE:
        _WORKSPACE[key] = (torch.zeros(n, dtype=torch.float32, device=device),
                           torch.zeros(blocks, dtype=torch.int32, device=device))
    return _WORKSPACE[key]


def int4_gemv_kmajor(x, words, scales, out=None, cfg=None):
    """``x @ W.T`` for one row of ``x`` (1 x k) and W given as :func:`repack_kmajor` ``words`` ((k/8) x n int32) and
    ``scales`` (k/128 x n), in x's dtype, into ``out`` (1 x n) if given. ``cfg``: BLOCK_N, STEPS, num_warps,
    num_stages (default :data:`CONFIG`), and TILE: True for :func:`int4_gemv_kmajor_tile_kernel` (STEPS dividing
    16). Capturing it in a CUDA graph: call it once first (the workspace is made
    then)."""
    if x.dim() != 2 or x.shape[0] != 1 or x.stride(1) != 1:
        raise ValueError(f"int4_gemv_kmajor: x must be one row (1, k) with contiguous columns, got {tuple(x.shape)}")
    K = x.shape[1]
    if K % GROUP or words.dtype != torch.int32 or words.dim() != 2 or words.shape[0] != K // 8 \
            or not words.is_contiguous():
        raise ValueError(f"int4_gemv_kmajor: words must be repack_kmajor's contiguous (k/8, n) int32 tensor with k "
                         f"a multiple of {GROUP}: k = {K}, got {tuple(words.shape)} {words.dtype}")
    N = words.shape[1]
    if scales.shape != (K // GROUP, N) or scales.stride(1) != 1:
        raise ValueError(f"int4_gemv_kmajor: scales must be ({K // GROUP}, {N}), got {tuple(scales.shape)}")
    if out is None:
        out = torch.empty(1, N, dtype=x.dtype, device=x.device)
    elif out.shape != (1, N) or not out.is_contiguous():
        raise ValueError(f"int4_gemv_kmajor: out must be a contiguous (1, {N}), got {tuple(out.shape)}")
    cfg = dict(cfg or CONFIG)
    kernel = int4_gemv_kmajor_tile_kernel if cfg.pop("TILE", False) else int4_gemv_kmajor_kernel
    if kernel is int4_gemv_kmajor_tile_kernel and 16 % cfg["STEPS"]:
        raise ValueError(f"int4_gemv_kmajor: the tile kernel's STEPS must divide 16 (one group), got {cfg['STEPS']}")
    grid = (cdiv(N, cfg["BLOCK_N"]), cdiv(K // 8, cfg["STEPS"]))
    stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
    sums, tickets = workspace(x.device, N, grid[0], stream)
    direct(kernel)[grid](x, words, scales, out, sums, tickets, N, K, scales.stride(0), ONE_BITS, **cfg)
    return out


# ------------------------------------------------- the C++ route (gpu_course/triton_route.py, cuda/triton_route/)
ROUTE = triton_route.route("quant_gemv_route", triton_route.ROUTE_DIR / "quant_gemv.cpp")   # entries: (id, BLOCK_N, STEPS)


def build_route(verbose=False) -> bool:
    """Build the GEMV's C++ route (``cuda/triton_route/quant_gemv.cpp``; about a minute the first time) and turn it
    on for :func:`int4_gemv_kmajor`: True when it is ready, else False and :func:`route_status` says why."""
    return ROUTE.build(verbose)


def route_status():
    """None when :func:`int4_gemv_kmajor`'s later calls go through the C++ route, else why they do not."""
    return ROUTE.why


def without_route():
    """``with without_route():`` :func:`int4_gemv_kmajor` takes the Python launch path even where the route is
    built: what a call costs without it, for comparisons."""
    return ROUTE.off()


def _route_key(x, words, scales, out=None, cfg=None):
    """Everything the compiled kernel's specialisation depends on, for a call with the default configuration and
    a plain output (else None: the Python path): dtypes, shapes and strides, each pointer's 16-byte alignment, the
    devices (the tensors' and the current one, where Triton compiled)."""
    if out is not None or cfg is not None or not all(isinstance(t, torch.Tensor) for t in (x, words, scales)):
        return None
    return (x.dtype, x.shape, x.stride(), words.dtype, words.shape, words.stride(), scales.dtype, scales.shape,
            scales.stride(), x.data_ptr() % 16, words.data_ptr() % 16, scales.data_ptr() % 16, x.device,
            words.device, scales.device, torch._C._cuda_getDevice() if x.is_cuda else None)


def _route_call(mod, hit, x, words, scales, *_, **__):
    """The call through the extension with the key's entry ``hit`` (kernel id, BLOCK_N, STEPS)."""
    return mod.int4_gemv_kmajor(x, words, scales, *hit, ONE_BITS)


def _route_entry(*_, **__):
    """The route's arguments for calls like the one the launcher just made: the kernel it launched (10 runtime
    arguments) and its block, or None where the route cannot launch it."""
    ids = ROUTE.register((direct(int4_gemv_kmajor_kernel).last, 10))
    return None if ids is None else (ids[0], CONFIG["BLOCK_N"], CONFIG["STEPS"])


# the route in front of the launcher (int4_gemv_kmajor's source above is the launcher's)
int4_gemv_kmajor = ROUTE.front(int4_gemv_kmajor, _route_key, _route_call, _route_entry)
