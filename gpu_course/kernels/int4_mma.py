"""Notebook 15's int4 weight-only GEMV on the tensor cores, in CUDA C (``cuda/quant/int4_mma_gemv.cu``): ``out = x @
W.T`` for 1 to 16 rows of x (bf16), W (n x k) as notebook 15's ``packed`` int4 bytes and group-wise ``scales`` (one
bf16 scale per 128 columns of a row, :mod:`.quant_gemv`), the products done by ``mma.sync.m16n8k16`` (bf16 operands,
fp32 sums): the batch is the 16 rows of one tile, the columns of out the 8 of a tile. The weights keep the course's
row-major bytes; :func:`repack` only reorders the nibbles inside each 32-bit word, so that one ``lop3`` turns two of
them into the bf16 pair a tile wants. It needs an NVIDIA GPU of compute capability 8.0 or newer; the CPU emulation
runs CUDA C, not PTX instructions, so in cpu mode :func:`simulate` carries out the same per-lane arithmetic in torch.

>>> FILE, FUNCS, PERM
('quant/int4_mma_gemv.cu', ['int4_mma_gemv'], (0, 2, 4, 6, 1, 3, 5, 7))
"""
from __future__ import annotations

import torch

from ..cuda import cuda_begin
from ..cuda.files import cuda_files, cuda_source
from . import build_source, ptx_runs_here

FILE = "quant/int4_mma_gemv.cu"
FUNCS = ["int4_mma_gemv"]
GROUP = 128
PERM = (0, 2, 4, 6, 1, 3, 5, 7)      # nibble j of a repacked word holds nibble PERM[j] of the course's word
CONFIGS = {0: (2, 4), 1: (2, 8), 2: (1, 8), 3: (1, 4)}   # cfg: (tiles of 8 columns a warp, warps a block)


def repack(packed: torch.Tensor) -> torch.Tensor:
    """Notebook 15's ``packed`` (n x k/2 uint8: column 2j in the low nibble of byte j) as the kernel's int32 words
    (n x k/8): in each word, the nibbles of columns 2p and 2p + 1 (p = 0..3 of its 8) at bits 4p and 4p + 16.

    >>> row = torch.tensor([0x10, 0x32, 0x54, 0x76] * 16, dtype=torch.uint8)   # columns 8j + i hold q' = i
    >>> hex(int(repack(row[None])[0, 0]))
    '0x75316420'
    """
    n, half = packed.shape
    if packed.dtype != torch.uint8 or (2 * half) % GROUP:
        raise ValueError(f"repack: packed must be uint8 (n, k/2) with k a multiple of {GROUP}, got {packed.dtype} "
                         f"{tuple(packed.shape)}")
    q = torch.stack([packed & 0xF, packed >> 4], -1).reshape(n, -1, 8).to(torch.int64)   # [row, word, column 0..7]
    q = q[..., list(PERM)]
    words = (q << (4 * torch.arange(8, device=q.device))).sum(-1)
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32).contiguous()


def _pairs(words: torch.Tensor) -> torch.Tensor:
    """What the kernel's lop3 makes of each word, as numbers: (..., 4 pairs, 2) = 128 + q' of pair p's two columns."""
    u = words.to(torch.int64) & 0xFFFFFFFF
    p = torch.arange(4, device=words.device)
    lo, hi = (u[..., None] >> (4 * p)) & 0xF, (u[..., None] >> (4 * p + 16)) & 0xF
    return 128.0 + torch.stack([lo, hi], -1).to(torch.float64)


def simulate(x: torch.Tensor, words: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The kernel's arithmetic on the CPU (float64), lane by lane as the tiles see it: for each group and each lane
    t = 0..3 of a row of the tile, the 32 columns 32 t .. 32 t + 31 of x against the decoded pairs of W's 4 words,
    summed as the mma does; then scale (sum - 136 sum(x)). Checks :func:`repack`'s order and which columns of x
    and W a lane pairs, without a GPU (not the registers' order inside a fragment, nor the fp32 sums)."""
    M, K = x.shape
    n = words.shape[0]
    G = K // GROUP
    v = _pairs(words.cpu()).reshape(n, G, 4, 4, 4, 2)          # [row, group, lane t, word u, pair p, lo/hi]
    # pair p of word u covers columns 8u + 2p, + 1 of lane t's 32: chunk 2u + p // 2, slots (2t + i) or (2t + 8 + i)
    wcols = v.reshape(n, G, 4, 32)                              # columns 32 t + 8 u + 2 p + i, in that order
    xs = x.cpu().double().reshape(M, G, 4, 32)
    sums = torch.einsum("mgtc,ngtc->mng", xs, wcols)            # what the mma tiles add over a group
    sx = xs.sum((2, 3))                                         # the all-ones mma
    return torch.einsum("mng,gn->mn", sums - 136.0 * sx[:, None, :], scales.cpu().double())


def source() -> str:
    """The CUDA C to build: ``cuda_begin``, then the kernel file."""
    return cuda_begin + cuda_source(*[f for f in cuda_files(FILE) if f != "common.cuh"])


def runs_here() -> tuple:
    """``(True, "")`` where the kernel runs here, else ``(False, reason)``, the reason one line: on a GPU by the
    course's feature gate "bf16", compute capability 8.0 or newer (:data:`gpu_course.hardware.FEATURES`;
    ``COURSE_FAKE_CC`` pretends); never in cpu mode, whose emulation runs CUDA C, not PTX."""
    return ptx_runs_here("bf16", "int4_mma_gemv",
                         "mma.sync on bf16 (inline PTX) needs a GPU of compute capability 8.0 or newer")


def build(**load_cuda_kwargs):
    """Build (or load from the cache) the module with :data:`FUNCS`."""
    return build_source(source(), FUNCS, **load_cuda_kwargs)


def pick_config(n: int, m: int) -> int:
    """The launch shape (a key of :data:`CONFIGS`) that was fastest for n rows of W at batch m, on an NVIDIA H100
    (GPU time, L2 flushed, 8192 x 8192 and 4096 x 14336 at batch 1, 8 and 16): one tile a warp, 4 warps a block at
    batch 1 to 4; from batch 5, two tiles a warp, with 4 warps a block where W has 8192 rows or more and 8 where it
    has fewer (fewer blocks then: more warps in each keep the SMs busy).

    >>> pick_config(8192, 1), pick_config(8192, 8), pick_config(4096, 16)
    (3, 0, 1)
    """
    if m <= 4:
        return 3
    return 0 if n >= 8192 else 1


def int4_mma_gemv(mod, x, words, scales, cfg: int | None = None, out=None):
    """``x @ W.T`` (M x n, bf16) for x (M x k bf16, 1 <= M <= 16), :func:`repack`'s ``words`` and ``scales`` (k/128 x n
    bf16), by the module ``mod`` of :func:`build`; ``cfg``: a key of :data:`CONFIGS` (None: :func:`pick_config`'s)."""
    if cfg is None:
        cfg = pick_config(words.shape[0], x.shape[0])
    if cfg not in CONFIGS:
        raise ValueError(f"int4_mma_gemv: cfg must be one of {sorted(CONFIGS)} ({CONFIGS}), got {cfg!r}")
    out = torch.empty(x.shape[0], words.shape[0], dtype=x.dtype, device=x.device) if out is None else out
    return mod.int4_mma_gemv(x, words, scales, out, cfg)
