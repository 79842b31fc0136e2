"""Timing GPU work: ``bench`` (warm-up, repeats, the median), ``Timing`` and readable units, ``flush_l2``,
``spin_gpu``, ``busy_cpu`` (known CPU work) and ``cuda_graph`` (the cure for launch-bound code). What a caller
in a Python loop gets (time per step, CPU time per call, ``compare``'s table) is :mod:`gpu_course.user_timing`'s.

Why a GPU timer needs care for short kernels: a CUDA event is a timestamp the GPU writes when it
*reaches* the event in its queue. If the queue is empty when Python records the start event, the GPU
writes that timestamp at once and then waits for the CPU to finish launching the kernel (5-80 µs of
Python, torch dispatch or Triton's launcher), so a 5 µs kernel can measure 30 µs. :func:`bench`
therefore keeps the GPU busy before each start event (a short spin kernel, ``torch.cuda._sleep``, or
the L2 flush), so the start timestamp is written only when the kernel is already queued: the events
then time what the GPU does, and the CPU's cost of a call is reported beside it (``Timing.launch_ms``).

The CPU's cost of a call has one definition in the course, :func:`cpu_ms_back_to_back`: the CPU's time per call
of a short back-to-back loop (no synchronize between the calls, none inside the clock), as a Python loop of calls
sees it; ``Timing.launch_ms`` and :func:`gpu_course.user_timing.cpu_ms_per_call` both report it.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from .mode import DEVICE, ON_GPU, device_name


@dataclass(frozen=True)
class Timing:
    """Run times of one callable, in milliseconds. ``str()`` says how they were taken. Frozen, and the
    times kept as a tuple: a measurement is not edited after it is taken."""
    times_ms: tuple
    method: str
    device: str
    on_gpu: bool
    launch_ms: float | None = None  # the CPU's time per call of a back-to-back loop (GPU only)

    def __post_init__(self):
        object.__setattr__(self, "times_ms", tuple(self.times_ms))

    @property
    def median(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times_ms)

    @property
    def min(self) -> float:
        return min(self.times_ms)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.times_ms)

    @property
    def n(self) -> int:
        return len(self.times_ms)

    @property
    def launch_bound(self) -> bool:
        """True when a call costs the CPU more time (``launch_ms``: per call of a back-to-back loop) than the
        GPU spends running it: back-to-back calls then go at the CPU's pace, not the GPU's (see 01_timing)."""
        return self.launch_ms is not None and self.launch_ms > self.median

    def __str__(self):
        note = "" if self.on_gpu else " (CPU wall clock: says nothing about a GPU)"
        return f"{fmt_ms(self.median)} median of {self.n} runs, {self.method}{note}"


def fmt_ms(ms: float) -> str:
    """Milliseconds in a readable unit.

    >>> fmt_ms(0.0123), fmt_ms(2.5), fmt_ms(1500)
    ('12.3 µs', '2.500 ms', '1.50 s')
    """
    if ms < 1:
        return f"{ms * 1e3:.1f} µs"
    if ms < 1000:
        return f"{ms:.3f} ms"
    return f"{ms / 1e3:.2f} s"


def fmt_num(x: float) -> str:
    """A rate with three significant digits and thousands separators.

    >>> fmt_num(2912.4), fmt_num(38.27), fmt_num(0.1234)
    ('2,912', '38.3', '0.123')
    """
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


_l2_flush_buffer = None


def flush_l2() -> None:
    """Evict the GPU's L2 cache by writing a buffer twice its size (a no-op on the CPU)."""
    global _l2_flush_buffer
    if not ON_GPU:
        return
    if _l2_flush_buffer is None:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 2**20
        _l2_flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device=DEVICE)
    _l2_flush_buffer.zero_()


def bench(fn, *args, warmup: int | None = None, reps: int | None = None, budget_ms: float | None = None,
          l2_flush: bool = False, hide_launch: bool = True, max_reps: int = 1000,
          **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``: warm up, repeat, and return all run times (use ``.median``).

    On a GPU each run is bracketed by CUDA events on the current stream, so only device work is
    timed. ``hide_launch=True`` (the default) first queues a short spin on the GPU, so that the
    start event is reached only after the CPU has launched the run: the time is the GPU's, even for
    a kernel of a few µs (``hide_launch=False`` shows the bias this removes: with an idle queue the
    events also count the CPU's launch time). ``Timing.launch_ms`` is the CPU's time per call of a short
    back-to-back loop (:func:`cpu_ms_back_to_back`, run after the warm-up); ``Timing.launch_bound`` says whether
    it exceeds the GPU time. With ``l2_flush=True`` the L2
    cache is emptied before each run (outside the timed region), which is what a kernel sees when
    its input is not already cached. On the CPU runs are timed with ``time.perf_counter``: fine for
    torch on the CPU, meaningless for simulators.

    ``reps=None`` repeats until about ``budget_ms`` of run time (300 ms on a GPU, 200 ms on the
    CPU, as ``timeit``'s autorange) is spent, at least 5 times on a GPU and 3 on the CPU, at most
    ``max_reps``. ``fn`` is called ``warmup`` times first (on a GPU each warm-up call is synchronized;
    with ``warmup=0`` one such call is still made there), then on a GPU up to 10 more back to back for
    ``launch_ms`` (as many as fit in about 20 ms of the warm-up's pace, at least 2).
    The default is 3 warm-up calls on a GPU and 1 on the CPU, where only the first call differs (a
    simulator's or an interpreter's first call compiles or caches; the later ones take as long as
    each other).

    >>> t = bench(torch.ones, 1000, reps=5)
    >>> t.n, t.median > 0
    (5, True)
    """
    if not callable(fn):
        raise TypeError(f"bench needs a callable, got {type(fn).__name__}")
    if reps is not None and (type(reps) is not int or reps < 1):
        raise ValueError(f"bench: reps must be a whole number >= 1 (or None: fill budget_ms), got {reps!r}")
    if budget_ms is None:
        budget_ms = 300.0 if ON_GPU else 200.0
    if warmup is None:
        warmup = 3 if ON_GPU else 1
    warm = []  # on a GPU: each warm-up call on an empty queue, timed to the end of its run
    for _ in range(warmup if warmup > 0 or not ON_GPU else 1):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        if ON_GPU:
            torch.cuda.synchronize()
        warm.append((time.perf_counter() - t0) * 1e3)
    if ON_GPU:
        one = statistics.median(warm[1:] or warm)   # a call and its run: the first may compile or allocate
        calls = int(min(10, max(2, 20.0 / max(one, 1e-3))))
        launch_ms = cpu_ms_back_to_back(fn, args, kwargs, calls=calls, rounds=1)
        return _bench_gpu(fn, args, kwargs, reps, budget_ms, l2_flush, hide_launch, max_reps,
                          launch_ms)
    return _bench_cpu(fn, args, kwargs, reps, budget_ms, max_reps)


def cpu_ms_back_to_back(fn, args=(), kwargs=None, calls: int = 10, rounds: int = 1, wait=None, barrier=None,
                        clock=time.perf_counter, each_round: bool = False):
    """The CPU's time per call of ``fn(*args, **kwargs)`` called ``calls`` times back to back, as a Python loop
    sees it: the clock starts after a wait for the device (``wait``, default :func:`~gpu_course.mode.synchronize`;
    then ``barrier``, where given) and stops when the last call has *returned*, before any wait, so the GPU's run
    does not count unless ``fn`` synchronizes itself. The loop is short so that the launch queue does not fill
    (a full queue would make a call wait for the GPU). The median of ``rounds`` such loops, or with
    ``each_round`` the list of the rounds' figures (their range is the figure's spread). This is the one
    definition of a call's CPU cost in the course: ``Timing.launch_ms`` and ``cpu_ms_per_call`` report it.

    >>> ticks = iter(range(100))
    >>> cpu_ms_back_to_back(lambda: None, calls=4, clock=lambda: next(ticks) / 1e3)   # 1 ms between readings
    0.25
    """
    from .mode import synchronize
    kwargs = kwargs or {}
    wait = wait or synchronize
    per = []
    for _ in range(rounds):
        wait()
        if barrier is not None:
            barrier()
        t0 = clock()
        for _ in range(calls):
            fn(*args, **kwargs)
        per.append((clock() - t0) * 1e3 / calls)
    wait()
    return per if each_round else statistics.median(per)


_spin_cycles_per_ms: float | None = None


def _spin_rate() -> float:
    """GPU clock cycles per millisecond of ``torch.cuda._sleep``, measured once per process."""
    global _spin_cycles_per_ms
    if _spin_cycles_per_ms is None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # load the spin kernel
        cycles = 2_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        _spin_cycles_per_ms = cycles / max(start.elapsed_time(end), 1e-3)
    return _spin_cycles_per_ms


def spin_gpu(ms: float) -> None:
    """Queue about ``ms`` milliseconds of busy work on the GPU (nothing on the CPU) and return at
    once: what keeps the queue non-empty while the CPU launches the work to be timed."""
    if ON_GPU and ms > 0:
        torch.cuda._sleep(int(ms * _spin_rate()))


def _bench_gpu(fn, args, kwargs, reps, budget_ms, l2_flush, hide_launch, max_reps, launch_ms):
    # The spin covers a launch with room to spare: a call right after a wait can cost the CPU more than the
    # back-to-back figure, so 3x it plus 50 µs (in the timed loop below the CPU runs ahead until the launch
    # queue is full, and then each launch waits for the GPU).
    spin_ms = min(3 * launch_ms + 0.05, 20.0) if hide_launch else 0.0
    if reps is None:  # estimate one run from a short burst, then fill the budget
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        spin_gpu(spin_ms * 3)
        start.record()
        for _ in range(3):
            fn(*args, **kwargs)
        end.record()
        torch.cuda.synchronize()
        one = max(start.elapsed_time(end) / 3, 1e-3)
        reps = int(min(max_reps, max(5, budget_ms / (one + spin_ms))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        if l2_flush:
            flush_l2()
        spin_gpu(spin_ms)
        s.record()
        fn(*args, **kwargs)
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    method = ("CUDA events" + (", launch hidden" if hide_launch else ", idle queue (launch included)")
              + (", L2 flushed before each run" if l2_flush else ""))
    return Timing(times, method, device_name(), True, launch_ms=launch_ms)


def _bench_cpu(fn, args, kwargs, reps, budget_ms, max_reps):
    times = []
    deadline = None if reps is not None else time.perf_counter() + budget_ms / 1e3
    while True:
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        times.append((time.perf_counter() - t0) * 1e3)
        if reps is not None:
            if len(times) >= reps:
                break
        elif len(times) >= max_reps or (len(times) >= 3 and time.perf_counter() > deadline):
            break
    return Timing(times, "wall clock", device_name(), False)


def busy_cpu(ms: float) -> None:
    """Keep this thread busy for ``ms`` milliseconds on the CPU's clock, launching nothing: known CPU work.

    >>> t0 = time.perf_counter(); busy_cpu(2); (time.perf_counter() - t0) * 1e3 >= 2
    True
    """
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def cuda_graph(fn, *args, warmup: int = 3, **kwargs):
    """``fn(*args, **kwargs)`` captured once in a CUDA graph; returns a function of no arguments that
    replays it: the whole call's kernels for one launch's CPU cost. The inputs and outputs are the
    tensors of the capture (static: write new data into ``args`` to change what a replay computes).
    ``fn`` runs ``warmup`` times first on a side stream (allocations, autotuning, Triton compiles).
    On the CPU there are no CUDA graphs: the returned function calls ``fn(*args, **kwargs)``.

    >>> replay = cuda_graph(torch.ones, 8)
    >>> out = replay()
    >>> out is None if ON_GPU else out.tolist() == [1.0] * 8
    True
    """
    if not ON_GPU:
        return lambda: fn(*args, **kwargs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn(*args, **kwargs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(*args, **kwargs)

    def replay():
        graph.replay()
    replay.graph = graph  # keeps the graph (and its memory pool) alive as long as the function
    return replay
