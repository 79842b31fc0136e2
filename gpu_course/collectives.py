"""Collectives and their cost as ``nccl-tests`` defines it, run on :class:`gpu_course.distributed.Ranks`:
:data:`COLLECTIVES`, :func:`bus_factor`, :func:`time_collective` (on every rank), :func:`sweep` (algorithm
and bus bandwidth by size) and its table, beside the link's spec-sheet bandwidth (:func:`link_spec_gbps`).

>>> bus_factor("all_reduce", 2), bus_factor("all_gather", 4), bus_factor("broadcast", 8)
(1.0, 0.75, 1.0)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from . import hardware, mode
from .distributed import Ranks, rank_device, sync_device
from .timing import fmt_ms
from .user_timing import loop_ms

def link_spec_gbps(name: str | None = None) -> float | None:
    """The spec sheet's NVLink bandwidth in one direction (GB/s) of GPU ``name`` (default: this one; from
    :mod:`gpu_course.hardware`), or None where it is not known (the CPU, a GPU without NVLink or not in the table).

    >>> link_spec_gbps("NVIDIA H100 80GB HBM3"), link_spec_gbps("cpu")
    (450.0, None)
    """
    return hardware.link_gbps(name if name is not None else mode.device_name())



COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def bus_factor(op: str, n: int) -> float:
    """Bus bandwidth over algorithm bandwidth, as ``nccl-tests`` defines them: the share of the data
    each rank must send (and receive) for the collective, whatever the algorithm. ``algbw`` is the
    size over the time; ``busbw = algbw * bus_factor`` is comparable with a link's bandwidth.

    >>> [bus_factor(op, 2) for op in COLLECTIVES]
    [1.0, 0.5, 0.5, 1.0]
    """
    if op not in COLLECTIVES:
        raise ValueError(f"bus_factor: op is one of {COLLECTIVES}, got {op!r}")
    if n < 1:
        raise ValueError(f"bus_factor: n is the number of ranks, at least 1; got {n}")
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "broadcast": 1.0}[op]


def _gather_fn():
    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor   # renamed in torch 2.13


def _scatter_fn():
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def all_gather_into(out: torch.Tensor, inp: torch.Tensor) -> None:
    """Every rank's ``inp`` side by side in ``out`` (``n`` times its size), on every rank."""
    _gather_fn()(out, inp)


def reduce_scatter_into(out: torch.Tensor, inp: torch.Tensor) -> None:
    """The sum over ranks of ``inp``, cut in ``n`` parts: part ``rank`` into ``out``."""
    _scatter_fn()(out, inp)


def _operation(op: str, nbytes: int, device):
    """The call that ``time_collective`` repeats, on buffers as ``nccl-tests`` sizes them: ``nbytes``
    is the whole buffer of all_reduce and broadcast, the output of all_gather, the input of
    reduce_scatter (float32 elements, a multiple of the world's size)."""
    n = dist.get_world_size()
    count = max(n, nbytes // 4 // n * n)
    big = torch.ones(count, device=device)
    part = torch.ones(count // n, device=device)
    return {"all_reduce": lambda: dist.all_reduce(big),
            "all_gather": lambda: all_gather_into(big, part),
            "reduce_scatter": lambda: reduce_scatter_into(part, big),
            "broadcast": lambda: dist.broadcast(big, 0)}[op], count * 4


def time_collective(op: str, nbytes: int, iters: int = 20, warmup: int = 5) -> tuple:
    """On every rank: ``(seconds per call, bytes)`` of ``iters`` back-to-back calls of collective ``op``
    on a buffer of about ``nbytes``, after ``warmup`` calls and a barrier; the calls are queued
    without waiting, as a training step queues them, and the time ends when the last has finished
    on this rank."""
    device = rank_device()
    call, size = _operation(op, nbytes, device)
    return loop_seconds(call, iters, warmup, device), size



def loop_seconds(call, iters: int, warmup: int, device) -> float:
    """On every rank: seconds per call of ``call()`` made ``iters`` times back to back (queued without
    waiting, as a training step queues them), after ``warmup`` calls and a barrier; the time ends when
    the last call has finished on this rank: :func:`gpu_course.user_timing.loop_ms`, one round, every rank's
    clock started after a barrier."""
    return loop_ms(call, steps=iters, rounds=1, warmup=warmup, wait=lambda: sync_device(device),
                   barrier=dist.barrier) / 1e3



@dataclass(frozen=True)
class CollectiveTime:
    """One collective at one size: the slowest rank's time per call, and the bandwidths."""
    op: str
    nbytes: int
    seconds: float
    world: int

    @property
    def algbw(self) -> float:
        """Algorithm bandwidth, GB/s: the size over the time."""
        return self.nbytes / self.seconds / 1e9

    @property
    def busbw(self) -> float:
        """Bus bandwidth, GB/s: comparable with a link's bandwidth in one direction."""
        return self.algbw * bus_factor(self.op, self.world)


def sweep(ranks: Ranks, op: str, sizes, iters: int = 20, warmup: int = 5) -> list:
    """:func:`time_collective` of ``op`` at each size on ``ranks``: :class:`CollectiveTime` rows (the
    time of the slowest rank, which is when the collective is done for everyone)."""
    rows = []
    for nbytes in sizes:
        per_rank = ranks.run(time_collective, op, int(nbytes), iters, warmup)
        rows.append(CollectiveTime(op, per_rank[0][1], max(t for t, _ in per_rank), ranks.world))
    return rows


def sizes(lo: int, hi: int, factor: int = 4) -> list:
    """Sizes in bytes from ``lo`` to ``hi``, each ``factor`` times the last.

    >>> sizes(4096, 65536)
    [4096, 16384, 65536]
    """
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def fmt_bytes(n: float) -> str:
    """Bytes in binary units.

    >>> fmt_bytes(4096), fmt_bytes(2**30), fmt_bytes(100)
    ('4 KB', '1 GB', '100 B')
    """
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


def half_bandwidth_size(rows) -> int:
    """The first size of a sweep whose bus bandwidth reaches half the sweep's best: below it the
    latency dominates, above it the bandwidth."""
    best = max(r.busbw for r in rows)
    return next(r.nbytes for r in rows if r.busbw >= best / 2)


def sweep_table(sweeps: dict, spec_gbps: float | None = None) -> str:
    """A table of :func:`sweep` results by size: each collective's time per call and bus bandwidth
    (and its % of ``spec_gbps``, the link's spec-sheet bandwidth in one direction, if given)."""
    ops = list(sweeps)
    head = f"{'size':>8}" + "".join(f" {op + ' time, busbw':>30}" for op in ops)
    lines = [head]
    for i, r0 in enumerate(sweeps[ops[0]]):
        cells = []
        for op in ops:
            r = sweeps[op][i]
            pct = f" {100 * r.busbw / spec_gbps:3.0f}%" if spec_gbps else ""
            cells.append(f"{fmt_ms(r.seconds * 1e3):>11}, {r.busbw:8.2f} GB/s{pct}")
        lines.append(f"{fmt_bytes(r0.nbytes):>8}" + "".join(f" {c:>30}" for c in cells))
    if spec_gbps:
        lines.append(f"(% of the link's {spec_gbps:g} GB/s in one direction, spec sheet)")
    return "\n".join(lines)
