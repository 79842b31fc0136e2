"""What a CUDA C module (from ``load_cuda``) says about its launches, and the recorder of its host
calls: its counters (``{kernel: launches}`` so far) are :func:`gpu_course.cuda.launch_counts`'s;
:func:`module_launch_log` gives the grid, block, shared bytes and arguments of each launch, as
:class:`~.launch_records.KernelCall`, from :func:`gpu_course.cuda.launch_log`, in both modes; and
:func:`host_call_recorder`, a module function wrapped to record, for :mod:`gpu_course.launches`, the
kernels each call launched.
"""
from __future__ import annotations

import torch

from .cuda.counters import launch_counts, launch_log
from .launch_records import Buffer, KernelCall, Launch, buffers_of

__all__ = ["module_launch_log", "by_kernel", "cxx_base_name", "module_name",
           "host_call_recorder"]


def module_launch_log(mod, since: int = 0):
    """A CUDA C module's launch log: ``(launches so far, [KernelCall of each logged launch numbered
    since ``since`` or later])``, or None when the module keeps none (only the latest launches are
    kept: 256).

    >>> import types
    >>> m = types.SimpleNamespace(_course_launches=lambda: {"k": 1},
    ...                           _course_launch_log=lambda since: (1, [(0, "k", (1, 1, 1), (32, 1, 1), 0, ())]))
    >>> module_launch_log(m)
    (1, [KernelCall(name='k', grid=(1, 1, 1), block=(32, 1, 1), smem=0, args=())])
    """
    got = launch_log(mod, since)
    return None if got is None else (got[0], [KernelCall.from_log(e) for e in got[1]])


def by_kernel(counts: dict[str, int]) -> dict[str, int]:
    """Counts by kernel name: a templated kernel's instantiations (``matmul_k<16>``), counted
    also under the plain name, are dropped where the plain name is there.

    >>> by_kernel({"matmul_k": 2, "matmul_k<16>": 1, "matmul_k<32>": 1, "other<8>": 1})
    {'matmul_k': 2, 'other<8>': 1}
    """
    return {k: n for k, n in counts.items() if "<" not in k or k.split("<")[0] not in counts}


def cxx_base_name(name: str) -> str:
    """``ns::k<16>`` -> ``k``: a kernel's name as the launch counts spell it."""
    return name.split("<")[0].split("::")[-1].strip()


def module_name(mod) -> str:
    return getattr(mod, "__name__", None) or f"module@{id(mod):x}"


def host_call_recorder(log, mod, modname: str, attr: str, f, counted: bool):
    """``f`` (a CUDA C module's function), recording the kernels each call launches."""
    def host_call(*args, **kwargs):
        before = launch_counts(mod) if counted else None
        logged = module_launch_log(mod, 1 << 62) if counted else None  # (launches so far, [])
        result = f(*args, **kwargs)
        buffers: list[Buffer] = []
        for i, a in enumerate(args):
            buffers_of(a, f"{attr} argument {i}", buffers)
        for k, a in kwargs.items():
            buffers_of(a, f"{attr} argument {k}", buffers)
        buffers_of(result, f"{attr} result", buffers)
        if counted:
            after = launch_counts(mod)
            fired = by_kernel({k: n - before.get(k, 0) for k, n in after.items()
                                if n - before.get(k, 0) > 0})
        else:
            fired = {None: None}
        if fired and log.snapshot:
            if any(b.device == "cuda" for b in buffers):
                torch.cuda.synchronize()  # the module may launch on a stream torch does not order
            log.take_snapshot(buffers)
        calls = module_launch_log(mod, logged[0])[1] if logged is not None else []
        last = {cxx_base_name(c.name): i for i, c in enumerate(calls)}   # recorded in the order they were launched
        for k, n in sorted(fired.items(), key=lambda kn: last.get(kn[0], -1)):
            mine = [c for c in calls if k is not None and cxx_base_name(c.name) == k]
            L = Launch("cuda", mod, None, k, modname, args=args, kwargs=kwargs, buffers=buffers, count=n,
                       host_function=attr, finished=True, result=result, calls=mine)
            if mine:
                L.grid, L.block = mine[-1].grid, mine[-1].block
            log.record(L)
        return result
    host_call.__name__ = attr
    host_call.__wrapped__ = f
    return host_call
