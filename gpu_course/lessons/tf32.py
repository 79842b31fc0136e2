"""Notebook 07's TF32 inputs, emulated on the CPU: fp32 values cut to TF32's 10 mantissa bits, by truncation (what
the tensor cores do with an fp32 value they are handed as it is) or by rounding to the nearest TF32 value (what
cuBLAS's TF32 path hands them), and the largest error each leaves in a matrix product against float64."""
from __future__ import annotations

import torch

LOW_BITS = 0x1FFF          # the 13 mantissa bits of fp32 that TF32 drops (23 - 10)


def to_tf32(x: torch.Tensor, rounding: str) -> torch.Tensor:
    """``x`` (fp32) as TF32 values, still stored as fp32: ``"truncate"`` clears the 13 low mantissa bits (toward
    zero); ``"nearest"`` rounds to the nearest TF32 value, ties away from zero (PTX's ``cvt.rna.tf32.f32``).

    >>> x = torch.tensor([1 + 2**-11, 1 + 3 * 2**-12, -(1 + 3 * 2**-12), 1 + 2**-12])
    >>> to_tf32(x, "truncate").tolist(), to_tf32(x, "nearest").tolist()   # a TF32 ulp at 1 is 2**-10
    ([1.0, 1.0, -1.0, 1.0], [1.0009765625, 1.0009765625, -1.0009765625, 1.0])
    """
    if x.dtype != torch.float32:
        raise ValueError(f"to_tf32: x must be float32, got {x.dtype}")
    if rounding not in ("truncate", "nearest"):
        raise ValueError(f"to_tf32: rounding must be 'truncate' or 'nearest', got {rounding!r}")
    bits = x.contiguous().view(torch.int32)
    if rounding == "nearest":
        bits = bits + (LOW_BITS + 1) // 2      # half a TF32 ulp onto the magnitude (the sign bit is apart)
    return (bits & ~LOW_BITS).view(torch.float32)


def product_errors(n: int = 2048, seed: int = 0) -> dict:
    """``{"truncate": e, "nearest": e}``: the largest error of ``a @ b`` (n x n, normal values from ``seed``, on the
    CPU) with both inputs cut to TF32 each way, products and sums in float64, as a fraction of the largest |a @ b|."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    ref = a.double() @ b.double()
    return {r: ((to_tf32(a, r).double() @ to_tf32(b, r).double() - ref).abs().max() / ref.abs().max()).item()
            for r in ("truncate", "nearest")}
