"""What a recorded launch is made of: :class:`Launch` (one launch of a kernel of any kind),
:class:`Buffer` (memory it was given, with a copy taken after it), :class:`KernelCall` (one CUDA C
launch as a module's launch log spells it), and the memory of arguments: which bytes a tensor or an
array interface object occupies (:func:`tensor_extent`, :func:`buffers_of`) and a copy of raw bytes
(:func:`read_bytes`). Read by :mod:`gpu_course.launches`, which records them.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Buffer", "KernelCall", "Launch", "dims3", "short_dims", "extent", "tensor_extent", "array_buffer",
           "buffers_of", "read_bytes"]


@dataclass(eq=False)
class Buffer:
    """Memory a launch was given: bytes ``[ptr, ptr + nbytes)`` on ``device`` (a tensor argument
    counts with its whole storage, so views of it are inside), and a copy of those bytes taken
    right after the launch when snapshots are on."""
    name: str
    ptr: int
    nbytes: int
    device: str  # "cpu" or "cuda"
    snapshot: torch.Tensor | None = None  # uint8, the bytes after the launch

    def contains(self, lo: int, hi: int, device: str) -> bool:
        return device == self.device and self.ptr <= lo and hi <= self.ptr + self.nbytes


@dataclass(frozen=True)
class KernelCall:
    """One CUDA C launch as the host code made it, from a module's launch log: the kernel's name,
    grid and block (3 numbers each), dynamic shared bytes, and its arguments as ``(kind, value)``:
    kind ``"p"`` (a pointer; value its address), ``"i"`` / ``"u"`` (an integer), ``"f"`` (a
    floating-point number), ``"b"`` (a bool), ``"?"`` (anything else; value None)."""
    name: str
    grid: tuple
    block: tuple
    smem: int
    args: tuple

    @staticmethod
    def from_log(entry) -> "KernelCall":
        """From one entry of :func:`gpu_course.cuda.launch_log`:
        ``(seq, name, grid, block, smem, ((kind, size, bits), ...))``.

        >>> import struct
        >>> bits = struct.unpack("<Q", struct.pack("<d", 2.5))[0]
        >>> KernelCall.from_log((0, "k", (2, 1, 1), (256, 1, 1), 0, (("p", 8, 4096), ("i", 4, 2**64 - 1),
        ...                                                           ("f", 4, bits)))).args
        (('p', 4096), ('i', -1), ('f', 2.5))
        """
        import struct
        _, name, grid, block, smem, raw = entry
        args = []
        for kind, _size, bits in raw:
            bits = int(bits) & (2 ** 64 - 1)
            if kind == "i":
                value = bits - 2 ** 64 if bits >= 2 ** 63 else bits
            elif kind == "f":
                value = struct.unpack("<d", struct.pack("<Q", bits))[0]
            elif kind == "b":
                value = bool(bits)
            elif kind in ("p", "u"):
                value = bits
            else:
                value = None
            args.append((str(kind), value))
        return KernelCall(str(name), tuple(int(v) for v in grid), tuple(int(v) for v in block), int(smem),
                          tuple(args))


@dataclass(eq=False)
class Launch:
    """One recorded launch (a CUDA C host call that launched a kernel ``count`` times is one).

    ``kind`` is "triton", "numba" or "cuda"; ``kernel`` the launched object (a Triton
    ``JITFunction`` / ``InterpretedFunction``, a Numba dispatcher / simulator kernel, a CUDA C
    module); ``fn`` the kernel's Python function (None for CUDA C); ``grid`` the programs
    (Triton) or blocks (Numba), ``block`` the threads per block (Numba), each as 3 numbers.
    """
    kind: str
    kernel: Any
    fn: Any
    name: str | None
    module: str
    grid: tuple | None = None
    block: tuple | None = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    buffers: list = field(default_factory=list)
    count: int | None = 1
    host_function: str | None = None  # CUDA C: the module function whose call launched it
    finished: bool = False
    error: str | None = None
    result: Any = None  # CUDA C: what the host function returned
    calls: list = field(default_factory=list)  # CUDA C: its KernelCall of each launch, when logged
    arg_names: tuple = ()  # Triton, Numba: the kernel's parameter names, in order (where known)

    def __repr__(self):
        where = f"{self.module}.{self.name}" if self.module else str(self.name)
        cfg = []
        if self.grid is not None:
            cfg.append(f"grid={short_dims(self.grid)}")
        if self.block is not None:
            cfg.append(f"block={short_dims(self.block)}")
        if self.kind == "cuda":
            cfg.append(f"via {self.host_function}()" if self.host_function else "outside a host call")
            cfg.append(f"{self.count}x" if self.count is not None else "count unknown")
        state = "" if self.finished else (f", raised {self.error}" if self.error else ", unfinished")
        return f"<{self.kind} launch of {where}{' ' if cfg else ''}{', '.join(cfg)}{state}>"


def short_dims(dims: tuple) -> tuple:
    """``(40, 1, 1)`` -> ``(40,)``: trailing ones dropped, as a learner writes a grid."""
    dims = tuple(dims)
    while len(dims) > 1 and dims[-1] == 1:
        dims = dims[:-1]
    return dims


def dims3(d) -> tuple:
    """A grid or block as 3 ints, as CUDA counts it.

    >>> dims3(40), dims3((2, 3)), dims3([1, 2, 3])
    ((40, 1, 1), (2, 3, 1), (1, 2, 3))
    """
    if hasattr(d, "x") and hasattr(d, "y"):  # utils.dim3 or a numba Dim3
        d = (d.x, d.y, getattr(d, "z", 1))
    if not isinstance(d, (tuple, list)):
        d = (d,)
    d = tuple(int(v) for v in d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"a grid or block has 1 to 3 dimensions, not {len(d)}: {d}")
    return d + (1,) * (3 - len(d))


# ----------------------------------------------------------------------------------------------
# Memory of arguments

def extent(ptr: int, shape, strides, itemsize: int) -> tuple[int, int]:
    """Bytes ``[lo, hi)`` an array with ``strides`` in bytes touches from ``ptr``."""
    lo = hi = 0
    for n, s in zip(shape, strides):
        if n == 0:
            return ptr, ptr
        lo += min(0, (n - 1) * s)
        hi += max(0, (n - 1) * s)
    return ptr + lo, ptr + hi + itemsize


def tensor_extent(t: torch.Tensor) -> tuple[int, int]:
    """Bytes ``[lo, hi)`` tensor ``t``'s elements occupy."""
    item = t.element_size()
    return extent(t.data_ptr(), t.shape, [s * item for s in t.stride()], item)


def array_buffer(obj, name: str) -> Buffer | None:
    """The memory of a NumPy / CUDA array interface object (a Numba argument)."""
    sim = getattr(obj, "_ary", None)  # the simulator's device array wraps a NumPy array
    if sim is not None and hasattr(sim, "__array_interface__"):
        obj = sim
    for attr, device in (("__cuda_array_interface__", "cuda"), ("__array_interface__", "cpu")):
        try:
            iface = getattr(obj, attr, None)
        except Exception:  # noqa: BLE001  some objects raise instead of lacking it
            iface = None
        if not iface:
            continue
        ptr = int(iface["data"][0] or 0)
        shape = tuple(iface["shape"])
        itemsize = int(iface["typestr"][2:])
        strides = iface.get("strides")
        if strides is None:  # C-contiguous
            strides, acc = [], itemsize
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= n
        lo, hi = extent(ptr, shape, strides, itemsize)
        return Buffer(name, lo, hi - lo, device)
    return None


def buffers_of(value, name: str, out: list) -> None:
    """Append the memory of every array inside ``value`` (tensors, arrays, tuples of them)."""
    if isinstance(value, torch.Tensor):
        st = value.untyped_storage()
        out.append(Buffer(name, st.data_ptr(), st.nbytes(), value.device.type))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            buffers_of(v, f"{name}[{i}]", out)
    elif isinstance(getattr(value, "base", None), torch.Tensor) and not hasattr(value, "__array_interface__"):
        buffers_of(value.base, f"{name}.base", out)  # a Triton TensorDescriptor
    else:
        b = array_buffer(value, name)
        if b is not None:
            out.append(b)


class RawMemory:
    """An array interface over raw bytes, for copying memory of any origin into a tensor."""

    def __init__(self, ptr: int, nbytes: int, device: str):
        iface = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}
        setattr(self, "__cuda_array_interface__" if device == "cuda" else "__array_interface__", iface)


def read_bytes(ptr: int, nbytes: int, device: str) -> torch.Tensor:
    """A copy of bytes ``[ptr, ptr + nbytes)`` as a uint8 tensor on ``device``."""
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8, device=device)
    if device == "cuda":
        return torch.as_tensor(RawMemory(ptr, nbytes, device), device="cuda").clone()
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
    return torch.frombuffer(raw, dtype=torch.uint8).clone()
