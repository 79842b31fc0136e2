"""Streams and events (notebook 14): stand-ins that make the same code run in cpu mode, a chunked
host-to-device copy overlapped with compute on two streams, and the check of the exercise that copies
results back on a side stream.

In cpu mode there is no stream: :func:`Stream`, :func:`Event` and :func:`stream` are stand-ins that run
everything in program order (on a GPU they are ``torch.cuda.Stream``, ``torch.cuda.Event`` and
``torch.cuda.stream``). The code runs and its results are checked the same way; its timings say
nothing about a GPU.

>>> s, e = Stream(), Event()
>>> with stream(s):
...     y = torch.ones(4) * 2
>>> e.record(s); current_stream().wait_event(e); float(y.sum())
8.0
"""
from __future__ import annotations

import contextlib
import statistics
import time

import torch

from .data_movement import host_buffer, time_copy_ms
from .mode import DEVICE, ON_GPU, synchronize


# ------------------------------------------------------------------ streams and events in both modes
class CpuStream:
    """A stand-in for ``torch.cuda.Stream`` in cpu mode: work runs in program order, so every wait is
    already satisfied; it counts the waits so a check can see that the ordering was asked for."""
    def __init__(self):
        self.waits = 0

    def wait_event(self, event):
        self.waits += 1
        _note("wait", self)

    def wait_stream(self, other):
        self.waits += 1
        _note("wait", self)

    def record_event(self, event=None):
        event = event or CpuEvent()
        event.record(self)
        return event

    def synchronize(self):
        pass

    def query(self):
        return True


class CpuEvent:
    """A stand-in for ``torch.cuda.Event`` in cpu mode (everything before it has already run)."""
    def __init__(self, **_):
        self.recorded = False

    def record(self, stream=None):
        self.recorded = True

    def wait(self, stream=None):
        (stream or current_stream()).wait_event(self)

    def synchronize(self):
        pass

    def query(self):
        return True


_CPU_DEFAULT = CpuStream()
_CPU_CURRENT = [_CPU_DEFAULT]
_CPU_WATCH: list | None = None     # while a check watches: ("wait" | "enter", stream), in program order


def _note(what: str, s) -> None:
    if _CPU_WATCH is not None:
        _CPU_WATCH.append((what, s))


def Stream():  # noqa: N802  (named as the class it gives)
    """A new stream: ``torch.cuda.Stream()`` on a GPU, a :class:`CpuStream` in cpu mode."""
    return torch.cuda.Stream() if ON_GPU else CpuStream()


def Event(**kwargs):  # noqa: N802
    """A new event: ``torch.cuda.Event(**kwargs)`` on a GPU, a :class:`CpuEvent` in cpu mode."""
    return torch.cuda.Event(**kwargs) if ON_GPU else CpuEvent()


def current_stream():
    """The stream work is queued on now (``torch.cuda.current_stream()`` on a GPU)."""
    return torch.cuda.current_stream() if ON_GPU else _CPU_CURRENT[-1]


@contextlib.contextmanager
def stream(s):
    """``with stream(s):`` queues the block's GPU work on ``s`` (``torch.cuda.stream(s)``)."""
    if ON_GPU:
        with torch.cuda.stream(s):
            yield s
        return
    _note("enter", s)
    _CPU_CURRENT.append(s)
    try:
        yield s
    finally:
        _CPU_CURRENT.pop()


def record_stream(t: torch.Tensor, s) -> None:
    """Tell the caching allocator that ``t`` (allocated on another stream) is used on ``s``, so its
    memory is not reused before ``s``'s work on it is done (``Tensor.record_stream``; nothing on the CPU)."""
    if ON_GPU:
        t.record_stream(s)



# ---------------------------------------------------------------------- a copy overlapped with compute
def compute(x: torch.Tensor, w: torch.Tensor, reps: int) -> torch.Tensor:
    """The work done on each chunk: ``reps`` times ``x = tanh(x @ w)``; returns the chunk's sum."""
    x = x.view(-1, w.shape[0])
    for _ in range(reps):
        x = torch.tanh(x @ w)
    return x.sum()


def device_buffers(chunks: list) -> list:
    """One device buffer per host chunk (same shape and dtype), allocated on the current stream."""
    return [torch.empty(h.shape, dtype=h.dtype, device=DEVICE) for h in chunks]


def serial(chunks: list, w: torch.Tensor, reps: int, bufs: list | None = None) -> torch.Tensor:
    """Copy each host chunk into its device buffer and compute on it, all on one stream: the copy
    engine and the SMs take turns. Returns the chunks' sums."""
    bufs = bufs or device_buffers(chunks)
    sums = []
    for h, d in zip(chunks, bufs):
        d.copy_(h, non_blocking=True)
        sums.append(compute(d, w, reps))
    return torch.stack(sums)


_SIDE = []


def side_stream():
    """The side stream the copies go on: made once and kept (see :func:`overlapped`)."""
    if not _SIDE:
        _SIDE.append(Stream())
    return _SIDE[0]


def overlapped(chunks: list, w: torch.Tensor, reps: int, bufs: list | None = None) -> torch.Tensor:
    """The same work with the copies queued on a side stream: chunk i's compute waits (an event) for
    chunk i's copy only, so the copy of chunk i+1 runs while chunk i is computed. The device buffers
    are allocated before, on the main stream, which reads them last (so they need no
    ``record_stream``). Same result as :func:`serial`.

    >>> w = torch.eye(8); chunks = [torch.ones(16) for _ in range(3)]
    >>> bool((overlapped(chunks, w, 1) == serial(chunks, w, 1)).all())
    True
    """
    main, side = current_stream(), side_stream()
    bufs = bufs or device_buffers(chunks)
    side.wait_stream(main)                       # w and the buffers are ready
    arrived = []
    with stream(side):
        for h, d in zip(chunks, bufs):
            d.copy_(h, non_blocking=True)        # pinned h: an asynchronous copy on the side stream
            e = Event()
            e.record(side)
            arrived.append(e)
    sums = []
    for d, e in zip(bufs, arrived):
        main.wait_event(e)                       # compute on chunk i starts after its copy only
        sums.append(compute(d, w, reps))
    return torch.stack(sums)


def overlapped_fresh(chunks: list, w: torch.Tensor, reps: int) -> torch.Tensor:
    """:func:`overlapped` as first written: a new side stream on every call, and each device buffer
    allocated on it by ``h.to(device, non_blocking=True)``. The caching allocator keeps a freed block
    for the stream that allocated it, so a new stream finds no cached block: every chunk costs a
    ``cudaMalloc`` on the CPU while the copies are queued. (``torch.cuda.Stream()`` hands out one of a
    pool of 32 streams per device in turn, so "a new stream" is one of the pool not used here yet.)"""
    main, side = current_stream(), Stream()
    side.wait_stream(main)
    arrived = []
    with stream(side):
        for h in chunks:
            d = h.to(DEVICE, non_blocking=True)
            e = Event()
            e.record(side)
            arrived.append((d, e))
    sums = []
    for d, e in arrived:
        main.wait_event(e)
        record_stream(d, main)                   # d was allocated on the side stream, used on main
        sums.append(compute(d, w, reps))
    return torch.stack(sums)


def queue_ms(fn, *args, rounds: int = 5) -> float:
    """The CPU's time to queue ``fn(*args)`` (from an idle GPU until ``fn`` returns, before the GPU is
    done), ms: the median of ``rounds`` calls (1 in cpu mode)."""
    out = []
    for _ in range(rounds if ON_GPU else 1):
        synchronize()
        t0 = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - t0) * 1e3)
        synchronize()
    return statistics.median(out)


def new_segments(fn, *args) -> int:
    """How many new segments (``cudaMalloc`` calls) the caching allocator made during one call of
    ``fn(*args)`` (``memory_stats()["segment.all.allocated"]``); 0 in cpu mode (no caching allocator).
    On a GPU the cache is emptied and ``fn`` called once before the counted call, so the count is the
    same however often it is taken: what ``fn`` reuses from its own warm-up is not counted, and a
    stream that held cached blocks from an earlier cell has none left (the 32 pooled streams come round).

    >>> new_segments(lambda: torch.ones(4))
    0
    """
    if not ON_GPU:
        fn(*args)
        return 0
    synchronize()
    torch.cuda.empty_cache()
    fn(*args)                                   # the warm-up call: what fn keeps reusing is cached now
    synchronize()
    before = torch.cuda.memory_stats().get("segment.all.allocated", 0)
    fn(*args)
    synchronize()
    return torch.cuda.memory_stats().get("segment.all.allocated", 0) - before


def overlap_fixture(n_chunks: int, chunk_bytes: int, width: int = 1024, seed: int = 0) -> tuple:
    """``(chunks, w)``: ``n_chunks`` pinned host chunks of ``chunk_bytes`` fp32 (rows of ``width``) and
    a ``width``² weight on the device, scaled so ``tanh(x @ w)`` stays in range."""
    g = torch.Generator().manual_seed(seed)
    rows = chunk_bytes // 4 // width
    chunks = [torch.randn(rows, width, generator=g) for _ in range(n_chunks)]
    chunks = [c.pin_memory() if ON_GPU else c for c in chunks]
    w = (torch.randn(width, width, generator=g) / width ** 0.5).to(DEVICE)
    return chunks, w


def balance_reps(chunks: list, w: torch.Tensor) -> dict:
    """Time one chunk's copy and one ``tanh(x @ w)`` on it, each alone; ``reps`` makes the compute about
    as long as the copy. ``{"copy_ms", "one_ms", "reps"}`` (medians of 5)."""
    d = chunks[0].to(DEVICE)
    copy_ms = statistics.median(time_copy_ms(torch.empty_like(d), chunks[0], reps=5))
    if ON_GPU:
        from .timing import bench
        one = bench(compute, d, w, 1, reps=5).median
    else:
        t0 = time.perf_counter()
        compute(d, w, 1)
        one = (time.perf_counter() - t0) * 1e3
    return {"copy_ms": copy_ms, "one_ms": one, "reps": max(1, round(copy_ms / one))}


def wall_ms(fn, *args, rounds: int = 5) -> float:
    """Median wall time of ``fn(*args)`` from an idle GPU until the GPU is done, ms (1 round in cpu
    mode)."""
    fn(*args)
    synchronize()
    out = []
    for _ in range(rounds if ON_GPU else 1):
        synchronize()
        t0 = time.perf_counter()
        fn(*args)
        synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


# ---------------------------------------------------------- the exercise: results copied back, overlapped
def transform(x: torch.Tensor, w: torch.Tensor, reps: int) -> torch.Tensor:
    """``reps`` times ``x = tanh(x @ w)`` on a chunk, returning the whole result (same shape as x)."""
    y = x.view(-1, w.shape[0])
    for _ in range(reps):
        y = torch.tanh(y @ w)
    return y.view(x.shape)


def back_serial(chunks: list, w: torch.Tensor, reps: int, outs: list) -> None:
    """Transform each device chunk and copy the result into the host buffer ``outs[i]``, on one stream."""
    for d, h in zip(chunks, outs):
        h.copy_(transform(d, w, reps), non_blocking=True)
    synchronize()


def host_outputs(chunks: list) -> list:
    """Host buffers (pinned on a GPU) shaped as ``chunks``, filled with NaN."""
    return [host_buffer(c.numel() * 4, pinned=True).view(torch.float32).view(c.shape).fill_(float("nan"))
            for c in chunks]


def check_back_overlap(fn, chunks: list, w: torch.Tensor, reps: int, tries: int = 3) -> None:
    """The check of the streams exercise: ``fn(chunks, w, reps, outs)`` must leave in each host buffer
    ``outs[i]`` the transform of ``chunks[i]``, readable as soon as ``fn`` returns (a result read before
    its copy is done is a race: NaN or stale values), in ``tries`` runs; in cpu mode it must have
    queued work on a side stream (made there or before) and ordered it with a wait; on a GPU it must take at
    most 0.8 of the one-stream time.
    Raises AssertionError saying what is wrong."""
    want = host_outputs(chunks)
    back_serial(chunks, w, reps, want)
    global _CPU_WATCH
    main, seen = current_stream(), []
    _CPU_WATCH = seen                # cpu mode: which streams fn switches to and waits on, however made
    try:
        for _ in range(tries):
            outs = host_outputs(chunks)
            synchronize()
            fn(chunks, w, reps, outs)
            for i, (o, e) in enumerate(zip(outs, want)):   # read at once, as the caller would
                assert torch.allclose(o, e, rtol=1e-4, atol=1e-5, equal_nan=False), \
                    f"chunk {i}: the host buffer does not hold the result when the function returns"
            synchronize()
    finally:
        _CPU_WATCH = None
    if not ON_GPU:                   # on a GPU the timing below shows whether a side stream was used
        assert any(what == "enter" and s is not main for what, s in seen), \
            "no side stream: queue the copies back inside `with streams.stream(side):` on a stream of your own"
        assert any(what == "wait" for what, _ in seen), \
            "no wait between the streams: each copy back must wait for its chunk's compute (an event)"
        return
    outs = host_outputs(chunks)
    t_serial, t_fn = wall_ms(back_serial, chunks, w, reps, outs), wall_ms(fn, chunks, w, reps, outs)
    assert t_fn <= 0.8 * t_serial, (f"correct, but {t_fn:.2f} ms against {t_serial:.2f} ms on one stream: "
                                    f"the copies back do not overlap the compute")
