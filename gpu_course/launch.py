"""What a kernel launch needs, with the same names in Python, CUDA C, Numba and Triton:
``dim3``, ``cdiv``, and ``to_numba`` (a tensor as an array a Numba kernel can take).

>>> from gpu_course.launch import dim3, cdiv
>>> dim3(16, 16), cdiv(1000, 256)
(dim3(x=16, y=16, z=1), 4)
"""
from __future__ import annotations

from collections import namedtuple

import torch

from .mode import DEVICE, ON_GPU  # noqa: F401  (DEVICE: used by the doctests)

dim3 = namedtuple("dim3", ["x", "y", "z"], defaults=(1, 1))
dim3.__doc__ = """A CUDA ``dim3``: ``dim3(16, 16)`` is ``dim3(x=16, y=16, z=1)``."""


def cdiv(a: int, b: int) -> int:
    """Ceiling division: how many blocks of size ``b`` cover ``a`` items.

    >>> cdiv(10, 4), cdiv(8, 4), cdiv(0, 4)
    (3, 2, 0)
    """
    if isinstance(a, bool) or isinstance(b, bool) or not (
            isinstance(a, int) and isinstance(b, int)):
        raise TypeError(f"cdiv needs integers, got {a!r} and {b!r}")
    if b <= 0:
        raise ValueError(f"cdiv: the divisor must be positive, got {b}")
    return -(-a // b)


def rect_tiles_smem_bytes(th: int, tw: int, itemsize: int = 4) -> int:
    """Bytes of dynamic shared memory (the 4th launch value) for a tiling with blocks of ``th`` rows
    × ``tw`` columns of threads whose phases cover ``tw`` values of k: an ``th × tw`` tile of ``m``
    and a ``tw × tw`` tile of ``n``, of ``itemsize``-byte values, in one buffer.

    >>> rect_tiles_smem_bytes(16, 16), rect_tiles_smem_bytes(8, 16)
    (2048, 1536)
    """
    return (th * tw + tw * tw) * itemsize


def to_numba(t: torch.Tensor):
    """An array view of tensor ``t`` that a Numba CUDA kernel can read and write, sharing memory
    with ``t`` (so what the kernel writes lands in ``t``): a CUDA device array on a GPU, a NumPy
    array in the simulator (which has no ``cuda.as_cuda_array``).

    >>> t = torch.zeros(3, device=DEVICE); to_numba(t).shape
    (3,)
    """
    if ON_GPU:
        from numba import cuda
        return cuda.as_cuda_array(t.detach())
    if t.device.type != "cpu":
        raise ValueError(f"to_numba: in cpu mode the tensor must be on the CPU, not {t.device}")
    return t.detach().numpy()
