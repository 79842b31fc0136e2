"""What torch did inside a CUDA C module's host functions (:class:`HostTorch`): a host function
allocates, checks and launches; it does not compute, and it does not write the output, except to
zero it. Used by the CUDA C kind (:mod:`.kinds.cuda`).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["HostTorch", "HOST_OPS_ALLOWED"]


# aten operators a host function may run: allocation, views, copies and conversions, zeroing
HOST_OPS_ALLOWED = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "zero_", "fill_", "clone", "contiguous", "copy_", "_to_copy", "to", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "t", "transpose", "permute", "select", "slice", "as_strided", "alias",
    "detach", "expand", "unsqueeze", "squeeze", "flatten", "narrow", "lift_fresh", "resize_", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "_local_scalar_dense", "set_",
    "record_stream", "view_as", "unflatten", "split", "chunk", "unbind", "item",
}


class HostTorch:
    """What torch did inside a CUDA C module's host functions (aten operators, seen through a
    TorchDispatchMode, which sees the operators C++ code calls too): a host function allocates,
    checks and launches; it does not compute, and it does not write the output, except to zero it."""

    def __init__(self):
        self.ops: list[tuple[str, str, list, object]] = []  # (host function, op, storages written, fill value)
        self.given: list[tuple[str, int, torch.Tensor, torch.Tensor]] = []  # (host function, argument, tensor, its value then)

    @contextmanager
    def watching(self, mod):
        if mod is None:
            yield
            return
        from torch.utils._python_dispatch import TorchDispatchMode
        log = self

        class Mode(TorchDispatchMode):
            host = ""

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                written = []
                for i, a in enumerate(func._schema.arguments):
                    if a.alias_info is not None and a.alias_info.is_write:
                        v = args[i] if i < len(args) else kwargs.get(a.name)
                        if isinstance(v, torch.Tensor):
                            written.append(v.untyped_storage().data_ptr())
                name = func._overloadpacket.__name__
                value = args[1] if name == "fill_" and len(args) > 1 else None
                log.ops.append((self.host, name, written, value))
                return func(*args, **kwargs)

        wrapped = []
        for attr in dir(mod):
            f = getattr(mod, attr)
            if attr.startswith("_") or not callable(f) or isinstance(f, type):
                continue

            def host_call(*args, _f=f, _attr=attr, **kwargs):
                for i, v in enumerate(list(args) + list(kwargs.values())):
                    if isinstance(v, torch.Tensor) and not any(v is t for _, _, t, _ in log.given):
                        log.given.append((_attr, i, v, v.detach().clone()))
                mode = Mode()
                mode.host = _attr
                with mode:
                    return _f(*args, **kwargs)
            wrapped.append((attr, attr in getattr(mod, "__dict__", {}), f))
            setattr(mod, attr, host_call)
        try:
            yield
        finally:
            for attr, had_own, f in reversed(wrapped):
                if had_own:
                    setattr(mod, attr, f)
                else:
                    delattr(mod, attr)

    def zeroed(self, out: torch.Tensor) -> bool:
        """Whether a host function zeroed the output's memory (``out.zero_()``, ``fill_(0)``): the
        course's own launch of the kernel then starts from zeros too (a kernel that adds into it)."""
        ptr = out.untyped_storage().data_ptr()
        return any(ptr in written and (name == "zero_" or (name == "fill_" and type(value) in (int, float)
                                                             and value == 0))
                   for _, name, written, value in self.ops)

    def changed_input(self, out: torch.Tensor) -> str | None:
        """Why a tensor given to a host function, other than the output, now holds other values than when it
        was given (a kernel or torch wrote into an input, whichever kernel it was), or None."""
        from .judging import same_bytes
        ptr = out.untyped_storage().data_ptr()
        for host, i, t, was in self.given:
            if t.untyped_storage().data_ptr() == ptr:
                continue
            if not same_bytes(t, was):
                n = int((t.detach().reshape(-1) != was.reshape(-1)).sum()) if t.shape == was.shape else t.numel()
                return (f"argument {i + 1} of your host function {host} (a {'×'.join(map(str, t.shape)) or 'scalar'} "
                        f"{str(t.dtype).replace('torch.', '')} tensor, an input) changed while it ran ({n:,} elements): "
                        f"a kernel, whatever its name, reads the inputs and writes only the output")
        return None

    def problem(self, out: torch.Tensor) -> str | None:
        """Why the host functions' use of torch is not allowed, or None."""
        ptr = out.untyped_storage().data_ptr()
        for host, name, written, value in self.ops:
            zeroing = name == "zero_" or (name == "fill_" and type(value) in (int, float) and value == 0)
            if ptr in written and not zeroing:
                return (f"your host function {host} writes the output with torch (aten.{name}): the "
                        f"result must be what your kernel wrote (a host function may only zero it first)")
            if name not in HOST_OPS_ALLOWED:
                return (f"your host function {host} computes with torch (aten.{name}): the kernel must do "
                        f"the work; a host function checks, allocates, zeroes and launches")
        return None
