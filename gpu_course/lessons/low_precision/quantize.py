"""Notebook 15's number formats and quantisers: scales by block (a whole tensor, a row, 1 x 128, 128 x 128),
fp8 / int8 / int4 quantisation and back, int4 packing (two a byte), and the test data (a weight-like matrix,
activations with outlier channels).

A scale here is a *dequantisation* scale: ``x ≈ q * scale``, so ``scale = amax / qmax`` for the block's largest
magnitude ``amax`` and the format's largest value ``qmax`` (448 for e4m3fn, 57344 for e5m2, 127 for int8, 7 for
int4); quantising divides by it, a GEMM's epilogue multiplies by it.

>>> x = torch.tensor([[1.0, -2.0], [4.0, 0.5]])
>>> q, s = quantize(x, "int8", (1, 2))          # one scale per row
>>> s.flatten().tolist(), q.tolist()
([0.015748031437397003, 0.031496062874794006], [[64, -127], [127, 16]])
"""
from __future__ import annotations

import torch

from ...launch import cdiv

FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
QMAX = {"e4m3": 448.0, "e5m2": 57344.0, "int8": 127.0, "int4": 7.0}
FORMATS = tuple(QMAX)


def _blocks(x: torch.Tensor, block) -> tuple:
    """``x`` (2-D) seen as ``(R/br, br, C/bc, bc)`` for ``block = (br, bc)`` (-1: the whole dimension); the
    edges are padded with zeros to whole blocks. Returns the view and ``(R, C)``."""
    R, C = x.shape
    br, bc = (R if block[0] == -1 else block[0]), (C if block[1] == -1 else block[1])
    pr, pc = cdiv(R, br) * br - R, cdiv(C, bc) * bc - C
    if pr or pc:
        x = torch.nn.functional.pad(x, (0, pc, 0, pr))
    return x.reshape(x.shape[0] // br, br, x.shape[1] // bc, bc), (R, C)


def block_scales(x: torch.Tensor, fmt: str, block) -> torch.Tensor:
    """One fp32 dequantisation scale per ``block`` of ``x``: ``amax / QMAX[fmt]`` (an all-zero block gets 1),
    of shape ``(cdiv(R, br), cdiv(C, bc))``.

    >>> block_scales(torch.ones(4, 256), "e4m3", (1, 128)).shape
    torch.Size([4, 2])
    """
    xb, _ = _blocks(x.float(), block)
    amax = xb.abs().amax(dim=(1, 3))
    return torch.where(amax > 0, amax / QMAX[fmt], torch.ones_like(amax))


def expand(scales: torch.Tensor, block, shape) -> torch.Tensor:
    """The per-block ``scales`` repeated to one per element of a tensor of ``shape``."""
    R, C = shape
    br, bc = (R if block[0] == -1 else block[0]), (C if block[1] == -1 else block[1])
    return scales.repeat_interleave(br, 0)[:R].repeat_interleave(bc, 1)[:, :C]


def to_format(y: torch.Tensor, fmt: str) -> torch.Tensor:
    """``y`` (already divided by its scale) in ``fmt``: fp8 after clamping to ±QMAX (a cast alone may not
    saturate: it depends on the format and the torch version), int8/int4 rounded to nearest and clamped
    (int4 stays in an int8 tensor, values -8 .. 7)."""
    if fmt in FP8:
        return y.float().clamp(-QMAX[fmt], QMAX[fmt]).to(FP8[fmt])
    lo = -8.0 if fmt == "int4" else -127.0
    return y.float().round().clamp(lo, QMAX[fmt]).to(torch.int8)


def quantize(x: torch.Tensor, fmt: str, block=(-1, -1)) -> tuple:
    """``(q, scales)`` of ``x`` in ``fmt`` ("e4m3", "e5m2", "int8", "int4") with one scale per ``block``
    (rows, columns; -1 a whole dimension: ``(-1, -1)`` per tensor, ``(1, -1)`` per row, ``(1, 128)``,
    ``(128, 128)``)."""
    if fmt not in QMAX:
        raise ValueError(f"quantize: fmt must be one of {FORMATS}, got {fmt!r}")
    s = block_scales(x, fmt, block)
    return to_format(x.float() / expand(s, block, x.shape), fmt), s


def dequantize(q: torch.Tensor, scales: torch.Tensor, block, dtype=torch.float64) -> torch.Tensor:
    """``q * scales`` (each scale over its block), in ``dtype``."""
    return q.to(dtype) * expand(scales, block, q.shape).to(dtype)


def roundtrip(x: torch.Tensor, fmt: str, block=(-1, -1)) -> torch.Tensor:
    """``x`` quantised and dequantised, in float64."""
    return dequantize(*quantize(x, fmt, block), block)


# ------------------------------------------------------------------------------------- int4, two a byte
def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack int4 values ``q`` (n x k, int8 in -8 .. 7, k even) two a byte: byte j of a row holds ``q + 8`` of
    column 2j in its low nibble and of column 2j + 1 in its high nibble.

    >>> pack_int4(torch.tensor([[-8, 7, 0, 1]], dtype=torch.int8)).tolist()
    [[240, 152]]
    """
    assert q.ndim == 2 and q.shape[1] % 2 == 0, f"pack_int4: q must be n x k with k even, got {tuple(q.shape)}"
    u = (q.to(torch.int16) + 8).to(torch.uint8)
    return (u[:, 0::2] | (u[:, 1::2] << 4)).contiguous()


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`pack_int4`: int8 values -8 .. 7, n x 2·(k/2)."""
    lo, hi = (packed & 0xF).to(torch.int8) - 8, (packed >> 4).to(torch.int8) - 8
    return torch.stack([lo, hi], dim=-1).reshape(packed.shape[0], -1)


def quantize_int4_groups(w: torch.Tensor, group: int = 128, dtype=None) -> tuple:
    """Weight-only int4 of ``w`` (n x k, nn.Linear's layout): ``(packed, scales)`` with ``packed`` (n x k/2
    uint8, :func:`pack_int4`) and ``scales`` (k/group x n, in ``dtype``, default w's): one symmetric scale per
    ``group`` columns of a row. The scales are rounded to ``dtype`` before quantising, so the dequantised
    weights are exactly ``q * scales`` in that dtype."""
    dtype = dtype or w.dtype
    s = block_scales(w, "int4", (1, group)).to(dtype)                 # n x k/group
    q = to_format(w.float() / expand(s.float(), (1, group), w.shape), "int4")
    return pack_int4(q), s.t().contiguous()


def dequantize_int4_groups(packed, scales, group: int = 128, dtype=torch.float64) -> torch.Tensor:
    """The weights (n x k) that ``(packed, scales)`` of :func:`quantize_int4_groups` stand for."""
    q = unpack_int4(packed)
    return q.to(dtype) * scales.t().to(dtype).repeat_interleave(group, 1)[:, :q.shape[1]]


Q4_0_BLOCK = 32   # columns per block in llama.cpp's Q4_0 layout


def quantize_q4_0(w: torch.Tensor) -> tuple:
    """Int4 of ``w`` (n x k, k a multiple of 32) with its 4-bit values ordered as llama.cpp's Q4_0 orders them (ggml's
    ``block_q4_0`` keeps one fp16 scale ``d`` and 16 bytes per block of 32 weights together, 18 bytes; here they are
    two tensors): ``(qs, d)`` with ``d`` (n x k/32, fp16), one scale per row and block, and ``qs`` (n x k/2, uint8),
    each block's 16 bytes in turn: byte j of a block holds ``q + 8`` (q in -8 .. 7) of the block's column j in its
    low nibble and of its column j + 16 in its high nibble (section 4's format interleaves instead: columns 2j and
    2j + 1). Weights are ``(nibble - 8) * d`` either way; the scale is ``amax / 7`` as everywhere in this notebook
    (llama.cpp's own quantiser maps the largest magnitude to -8, so its d may be negative).

    >>> qs, d = quantize_q4_0(torch.cat([torch.full((1, 16), 7.0), torch.full((1, 16), -7.0)], 1))
    >>> d.tolist(), qs[0, :3].tolist()      # low nibble 7 + 8 = 15 (column j), high nibble -7 + 8 = 1 (column j + 16)
    ([[1.0]], [31, 31, 31])
    """
    n, k = w.shape
    assert k % Q4_0_BLOCK == 0, f"quantize_q4_0: k must be a multiple of {Q4_0_BLOCK}, got {k}"
    d = block_scales(w, "int4", (1, Q4_0_BLOCK)).to(torch.float16)                     # n x k/32
    q = to_format(w.float() / expand(d.float(), (1, Q4_0_BLOCK), w.shape), "int4")
    u = (q.to(torch.int16) + 8).to(torch.uint8).reshape(n, k // Q4_0_BLOCK, 2, Q4_0_BLOCK // 2)  # (block, half, j)
    return (u[:, :, 0] | (u[:, :, 1] << 4)).reshape(n, k // 2).contiguous(), d


def dequantize_q4_0(qs: torch.Tensor, d: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """The weights (n x k) that ``(qs, d)`` of :func:`quantize_q4_0` stand for."""
    b = qs.reshape(qs.shape[0], -1, Q4_0_BLOCK // 2)
    q = torch.stack([b & 0xF, b >> 4], dim=2).to(dtype) - 8                       # (n, blocks, half, j)
    return (q * d.to(dtype)[:, :, None, None]).reshape(qs.shape[0], -1)


def quantize_int8_rows(w: torch.Tensor, dtype=None) -> tuple:
    """Weight-only int8 of ``w`` (n x k): ``(q, scales)``, one scale per row (output channel), in ``dtype``."""
    dtype = dtype or w.dtype
    s = block_scales(w, "int8", (1, -1)).to(dtype)                    # n x 1
    return to_format(w.float() / s.float(), "int8"), s.flatten()


# -------------------------------------------------------------------------------------------- test data
def weight_like(n: int, k: int, seed: int = 0, device="cpu") -> torch.Tensor:
    """A weight-like matrix (n x k, fp32): Gaussian entries of std 0.02 (a common initialisation), rows whose
    scale varies by a factor of about e^±0.5 (as trained layers' output channels do)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) * 0.02 * torch.exp(0.5 * torch.randn(n, 1, generator=g))
    return w.to(device)


def outlier_activations(m: int, k: int, seed: int = 0, channels: int = 8, factor: float = 20.0,
                        massive: float = 100.0, device="cpu") -> tuple:
    """Activations (m x k, fp32) with outliers as LLMs show them: ``channels`` columns ``factor`` times larger
    in every row (outlier features: Dettmers et al., "LLM.int8()", 2022, sec. 4), and in the first two rows
    (tokens) two of those columns ``massive`` times larger still ("massive activations": Sun et al., 2024).
    Returns ``(x, outlier_columns)``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g)
    cols = torch.randperm(k, generator=g)[:channels]
    x[:, cols] *= factor
    x[: min(2, m), cols[:2]] *= massive
    return x.to(device), cols.to(device)


def row_errors(y: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Relative error of each row (token) of ``y`` against ``ref``: ``|y_i - ref_i| / |ref_i|`` (2-norms)."""
    ref = ref.double()
    return (y.double() - ref).norm(dim=1) / ref.norm(dim=1)
