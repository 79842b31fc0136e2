"""Checking a kernel's output: compare with a reference (``check``), poison outputs
(``poisoned``) so that elements a kernel never writes fail the check, and the tolerance of an fp32
sum of k products (``dot_tol``)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .mode import DEVICE

class CheckFailed(AssertionError):
    """Raised by :func:`check` when a result does not match its reference."""


@dataclass
class Checked:
    """What :func:`check` found; its printed form is the same on a GPU and on the CPU."""
    name: str
    atol: float
    rtol: float
    max_abs: float
    max_rel: float
    n: int

    def __repr__(self):
        return f"{self.name}: OK (matches the reference within atol={self.atol:g}, rtol={self.rtol:g})"


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` in place with a value no kernel writes by accident (NaN, or the most negative
    integer), so that elements a kernel forgets to write fail :func:`check`."""
    if t.is_floating_point() or t.is_complex():
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        raise TypeError("poison_: a bool tensor has no value to poison with")
    return t.fill_(torch.iinfo(t.dtype).min)


def poisoned(*size, dtype=torch.float32, device=None) -> torch.Tensor:
    """A new tensor filled with poison (see :func:`poison_`), on ``DEVICE`` unless told.

    >>> poisoned(2, 3).isnan().all().item()
    True
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    return poison_(torch.empty(size, dtype=dtype, device=DEVICE if device is None else device))


def dot_tol(k: int) -> dict:
    """Tolerances for comparing fp32 sums of ``k`` products (a matmul's dot products) with a
    reference, as keyword arguments of :func:`check`: ``atol = 1e-6·k + 1e-5``, ``rtol = 1e-5``.

    Each fp32 addition rounds by up to 2⁻²⁴ ≈ 6·10⁻⁸ of the partial sum; over k products of unit-size
    values the roundings add up like a random walk, and two kernels that add in different orders
    differ by about 6·10⁻⁸·k/√2. ``1e-6·k`` leaves a margin of about 10x and still catches a wrong
    element (an error of order 1).

    >>> tol = dot_tol(4096)
    >>> f"atol={tol['atol']:.3g}, rtol={tol['rtol']:g}"
    'atol=0.00411, rtol=1e-05'
    >>> m, n = torch.randn(50, 300), torch.randn(300, 40)
    >>> check(m @ n, m.double() @ n.double(), **dot_tol(300), name="fp32 matmul")
    fp32 matmul: OK (matches the reference within atol=0.00031, rtol=1e-05)
    """
    if k < 1:
        raise ValueError(f"dot_tol: k is the number of products summed, at least 1; got {k}")
    return dict(atol=1e-6 * k + 1e-5, rtol=1e-5)


def check(out, ref, atol: float = 1e-5, rtol: float = 1e-5, name: str = "output", poison=None) -> Checked:
    """Check ``out`` against ``ref`` elementwise: ``|out - ref| <= atol + rtol * |ref|``.

    Both are compared in float64 on the CPU. NaN in ``out`` (a poisoned element never written)
    always fails. ``poison``: for an output that cannot hold NaN (bytes, integers), the value it
    was filled with before the kernel ran, one the kernel never writes: an element still equal to
    it fails even where the tolerance would let it pass (255 against a reference of 254 with
    ``atol=1``). Raises :class:`CheckFailed` with the number of bad elements, the first bad
    index, and the largest absolute and relative errors; returns a :class:`Checked` otherwise.

    >>> check(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]), name="demo")
    demo: OK (matches the reference within atol=1e-05, rtol=1e-05)
    """
    o = torch.as_tensor(out).detach().to("cpu", torch.float64)
    r = torch.as_tensor(ref).detach().to("cpu", torch.float64)
    if o.shape != r.shape:
        raise CheckFailed(f"{name}: shape {tuple(o.shape)} but the reference has "
                          f"{tuple(r.shape)}")
    diff = (o - r).abs()
    bad = ~(diff <= atol + rtol * r.abs())  # NaN anywhere compares False, so it is bad
    bad |= o.isnan() & ~r.isnan()
    bad &= ~(o.isnan() & r.isnan())  # NaN where the reference has NaN is a match
    left = (o == float(poison)) if poison is not None else torch.zeros_like(bad)
    bad |= left
    finite = diff[torch.isfinite(diff)]
    max_abs = finite.max().item() if finite.numel() else 0.0
    rel = diff / r.abs().clamp_min(1e-300)
    rel = rel[torch.isfinite(rel)]
    max_rel = rel.max().item() if rel.numel() else 0.0
    nbad = int(bad.sum())
    if nbad:
        idx = tuple(int(i) for i in bad.nonzero()[0])
        idx_s = idx[0] if len(idx) == 1 else idx
        lines = [f"{name}: {nbad} of {o.numel()} elements differ from the reference "
                 f"(atol={atol:g}, rtol={rtol:g})",
                 f"  first bad index {idx_s}: got {o[idx].item()!r}, expected {r[idx].item()!r}",
                 f"  max abs error {max_abs:.3g}, max rel error {max_rel:.3g} (finite ones)"]
        nnan = int((o.isnan() & ~r.isnan()).sum())
        if nnan:
            lines.append(f"  {nnan} elements are NaN: never written by the kernel? (outputs "
                         f"from utils.poisoned start as NaN)")
        nleft = int(left.sum())
        if nleft:
            lines.append(f"  {nleft} elements still hold the poison {poison!r}, a value the kernel never "
                         f"writes: never written by the kernel?")
        raise CheckFailed("\n".join(lines))
    return Checked(name, atol, rtol, max_abs, max_rel, o.numel())
