"""The ring all-reduce written by hand with ``isend``/``irecv`` (a reduce-scatter, then an all-gather, each of
``n - 1`` steps), what it sends and costs, and its timing against the library's ``all_reduce`` on
:class:`gpu_course.distributed.Ranks`: per call in a loop, on the CPU, and on the GPU alone (a CUDA graph).

>>> ring_bytes_per_rank(1000, 4)
1500.0
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .collectives import fmt_bytes, loop_seconds
from .distributed import Ranks, rank_device, sync_device
from .timing import fmt_ms
from .user_timing import cpu_ms_per_call

def ring_bytes_per_rank(nbytes: float, n: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``nbytes``: ``n - 1`` steps of a reduce-scatter,
    then ``n - 1`` of an all-gather, each step one ``nbytes / n`` chunk: ``2 (n - 1) / n * nbytes``."""
    return 2 * (n - 1) / n * nbytes


def ring_seconds(nbytes: float, n: int, alpha: float, bandwidth: float) -> float:
    """Time of the ring all-reduce by hand (:func:`ring_all_reduce`) of ``nbytes`` over ``n`` ranks when each of its
    ``2 (n - 1)`` steps, one after another, costs a latency ``alpha`` (s) plus its ``nbytes / n`` chunk over a link
    of ``bandwidth`` bytes/s: ``2 (n - 1) (alpha + nbytes / (n bandwidth))``.

    >>> ring_seconds(1e9, 2, 50e-6, 1e11) * 1e3
    10.1
    """
    return 2 * (n - 1) * (alpha + nbytes / (n * bandwidth))


def exchange(send: torch.Tensor, recv: torch.Tensor, right: int, left: int) -> None:
    """Send ``send`` to rank ``right`` while receiving ``recv`` from rank ``left`` (both posted
    before either waits: each rank sends first and receives first at once, so none blocks)."""
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]):
        w.wait()


def ring_all_reduce(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over the ranks, in place, by a ring: cut ``t`` in ``n`` chunks; in the reduce-scatter
    each rank sends a chunk to its right neighbour and adds the one from its left, ``n - 1`` times,
    after which rank ``r`` holds the full sum of chunk ``(r + 1) % n``; in the all-gather the summed
    chunks go round the ring ``n - 1`` times, each rank keeping what it receives."""
    n, r = dist.get_world_size(), dist.get_rank()
    if n == 1:
        return t
    if not t.is_contiguous():
        raise ValueError("ring_all_reduce: t must be contiguous (it is sent chunk by chunk, in place)")
    chunks = t.view(-1).tensor_split(n)
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):              # reduce-scatter
        send, recv = (r - s) % n, (r - s - 1) % n
        buf = torch.empty_like(chunks[recv])
        exchange(chunks[send], buf, right, left)
        chunks[recv].add_(buf)
    for s in range(n - 1):              # all-gather
        send, recv = (r - s + 1) % n, (r - s) % n
        exchange(chunks[send], chunks[recv], right, left)
    return t


def time_all_reduce(which: str, nbytes: int, iters: int) -> tuple:
    """On every rank: ``(loop seconds per call, CPU seconds per call)`` of ``which`` ("library":
    ``dist.all_reduce``; "ring": :func:`ring_all_reduce`) on about ``nbytes`` of float32: the loop
    queues ``iters`` calls back to back and waits once; the CPU figure is the median time for one call
    to return, started together on every rank (NCCL's all_reduce returns once its kernel is queued)."""
    device = rank_device()
    g = torch.Generator(device).manual_seed(dist.get_rank())
    work = torch.randn(max(dist.get_world_size(), nbytes // 4), device=device, generator=g)
    call = ring_all_reduce if which == "ring" else dist.all_reduce
    loop = loop_seconds(lambda: call(work), iters, 3, device)
    cpu = cpu_ms_per_call(call, work, n=iters, wait=lambda: sync_device(device), barrier=dist.barrier) / 1e3
    return loop, cpu


def graph_seconds(call, iters: int, device, replays: int = 5) -> float | None:
    """On every rank: seconds per call of ``call()`` with the CPU's cost hidden: ``iters`` calls
    captured once in a CUDA graph (NCCL's collectives can be: the graph holds their kernels) and the
    graph replayed ``replays`` times back to back, after a barrier. What is left is the GPUs' own time:
    NCCL's kernel, the handshake over the link and the data. None where the rank has no GPU."""
    if torch.device(device).type != "cuda":
        return None
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):          # a capture is made after warm-up calls on a side stream
        for _ in range(3):
            call()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: NCCL's watchdog thread may query events while this thread captures
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(iters):
            call()
    graph.replay()
    sync_device(device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    sync_device(device)
    return (time.perf_counter() - t0) / (replays * iters)


def all_reduce_three_ways(nbytes: int, iters: int = 20) -> tuple:
    """On every rank: ``(loop, gpu, cpu)`` seconds per ``dist.all_reduce`` of about ``nbytes`` of
    float32: the loop of back-to-back calls and the CPU's time for one call to return
    (:func:`time_all_reduce`), and the GPU's own time with the launches hidden (:func:`graph_seconds`;
    None on CPU ranks)."""
    loop, cpu = time_all_reduce("library", nbytes, iters)
    device = rank_device()
    work = torch.ones(max(dist.get_world_size(), nbytes // 4), device=device)
    return loop, graph_seconds(lambda: dist.all_reduce(work), iters, device), cpu


def three_ways_table(ranks: "Ranks", sizes_: list, iters: int = 20) -> dict:
    """:func:`all_reduce_three_ways` at each size on ``ranks`` (the slowest rank's figures), printed as
    a table; returns ``{nbytes: (loop, gpu, cpu)}`` in seconds (gpu None on CPU ranks)."""
    out = {}
    for nbytes in sizes_:
        per_rank = ranks.run(all_reduce_three_ways, int(nbytes), iters)
        gpus = [r[1] for r in per_rank]
        out[int(nbytes)] = (max(r[0] for r in per_rank), None if None in gpus else max(gpus),
                            max(r[2] for r in per_rank))
    print(f"{'size':>8} {'loop/call':>11} {'GPU (graph)':>12} {'CPU/call':>11}")
    for nbytes, (loop, gpu, cpu) in out.items():
        g = fmt_ms(gpu * 1e3) if gpu is not None else "-"
        print(f"{fmt_bytes(nbytes):>8} {fmt_ms(loop * 1e3):>11} {g:>12} {fmt_ms(cpu * 1e3):>11}")
    return out


def ring_error(n: int) -> float:
    """On every rank: the largest difference between :func:`ring_all_reduce` and ``dist.all_reduce``
    on ``n`` fresh random float64 numbers per rank, relative to the largest sum."""
    g = torch.Generator().manual_seed(1000 + dist.get_rank())
    x = torch.randn(n, generator=g, dtype=torch.float64).to(rank_device())
    ref = x.clone()
    dist.all_reduce(ref)
    return ((ring_all_reduce(x.clone()) - ref).abs().max() / ref.abs().max()).item()


@dataclass(frozen=True)
class RingRow:
    """One size: the library's and the hand ring's (loop, CPU) seconds per call (the slowest rank's)."""
    nbytes: int
    library: tuple
    ring: tuple


def compare_ring(ranks: Ranks, sizes_: list, iters: int) -> list:
    """:func:`time_all_reduce` of the library and of the ring at each size, interleaved size by size."""
    rows = []
    for nbytes in sizes_:
        got = {w: ranks.run(time_all_reduce, w, int(nbytes), iters) for w in ("library", "ring")}
        rows.append(RingRow(int(nbytes), *(tuple(max(r[i] for r in got[w]) for i in (0, 1))
                                           for w in ("library", "ring"))))
    return rows


def ring_table(rows: list, library: str) -> str:
    """The hand ring against ``library``'s all_reduce: loop and CPU time per call, and the ring's loop
    time over the library's."""
    lines = [f"{'size':>8} {'':>18} {'loop/call':>11} {'CPU/call':>11}  ring / library (loop)"]
    for r in rows:
        for name, (loop, cpu) in ((f"{library} all_reduce", r.library), ("ring by hand", r.ring)):
            lines.append(f"{fmt_bytes(r.nbytes):>8} {name:>18} {fmt_ms(loop * 1e3):>11} {fmt_ms(cpu * 1e3):>11}  "
                         f"{loop / r.library[0]:19.2f}×")
    return "\n".join(lines)
