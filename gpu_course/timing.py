"""Timing GPU work: ``bench`` (warm-up, repeats, the median), ``Timing`` and readable units;
``bench_user`` (what a caller in a Python loop gets: GPU time, time per step, CPU time per call),
``compare`` (a table of those against a library; ``user_cells`` / ``user_ratios`` give its columns to a
script's own table) and ``cuda_graph`` (the cure for launch-bound code).

Why a GPU timer needs care for short kernels: a CUDA event is a timestamp the GPU writes when it
*reaches* the event in its queue. If the queue is empty when Python records the start event, the GPU
writes that timestamp at once and then waits for the CPU to finish launching the kernel (5-80 µs of
Python, torch dispatch or Triton's launcher), so a 5 µs kernel can measure 30 µs. :func:`bench`
therefore keeps the GPU busy before each start event (a short spin kernel, ``torch.cuda._sleep``, or
the L2 flush), so the start timestamp is written only when the kernel is already queued: the events
then time what the GPU does, and the CPU's launch time is reported beside it (``Timing.launch_ms``).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from .mode import DEVICE, ON_GPU, device_name, synchronize


@dataclass(frozen=True)
class Timing:
    """Run times of one callable, in milliseconds. ``str()`` says how they were taken. Frozen, and the
    times kept as a tuple: a measurement is not edited after it is taken."""
    times_ms: tuple
    method: str
    device: str
    on_gpu: bool
    launch_ms: float | None = None  # median CPU time to enqueue one run (GPU only)

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
        """True when launching a run costs the CPU more time than the GPU spends running it:
        back-to-back calls then go at the CPU's pace, not the GPU's (see 01_timing)."""
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
    events also count the CPU's launch time). ``Timing.launch_ms`` is the CPU's time to enqueue one
    run; ``Timing.launch_bound`` says whether it exceeds the GPU time. With ``l2_flush=True`` the L2
    cache is emptied before each run (outside the timed region), which is what a kernel sees when
    its input is not already cached. On the CPU runs are timed with ``time.perf_counter``: fine for
    torch on the CPU, meaningless for simulators.

    ``reps=None`` repeats until about ``budget_ms`` of run time (300 ms on a GPU, 200 ms on the
    CPU, as ``timeit``'s autorange) is spent, at least 5 times on a GPU and 3 on the CPU, at most
    ``max_reps``. ``fn`` is called ``warmup`` times first (on a GPU each warm-up call is
    synchronized, to measure ``launch_ms``; with ``warmup=0`` one such call is still made there).
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
    launch = []  # on a GPU: the CPU's time to enqueue one run, each warm-up run on an empty queue
    for _ in range(warmup if warmup > 0 or not ON_GPU else 1):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        launch.append((time.perf_counter() - t0) * 1e3)
        if ON_GPU:
            torch.cuda.synchronize()
    if ON_GPU:
        # the first call may compile or allocate: the later ones say what a launch costs
        launch_ms = statistics.median(launch[1:] or launch)
        return _bench_gpu(fn, args, kwargs, reps, budget_ms, l2_flush, hide_launch, max_reps,
                          launch_ms)
    return _bench_cpu(fn, args, kwargs, reps, budget_ms, max_reps)


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
    # (launch_ms is measured with an empty queue: in the timed loop below the CPU runs ahead until
    # the launch queue is full, and then each launch waits for the GPU.)
    spin_ms = min(2 * launch_ms + 0.05, 20.0) if hide_launch else 0.0
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


# ------------------------------------------------------------------ what a user in a loop gets
def loop_ms(fn, *args, steps: int | None = None, rounds: int | None = None, **kwargs) -> float:
    """Time per step of ``fn(*args, **kwargs)`` called back to back in a plain Python loop with one
    synchronize at the end: what a training loop sees. When the CPU takes longer to make a call than
    the GPU takes to run it, this is the CPU's time, not the GPU's. The median of ``rounds`` loops of
    ``steps`` calls (default: about 20 ms a round on a GPU, at least 10 and at most 500 steps, 5
    rounds; 1 step and 1 round on the CPU), after one warm-up call.

    >>> loop_ms(torch.ones, 10, steps=3, rounds=2) > 0
    True
    """
    return loop_ms_each({"fn": fn}, *args, steps=steps, rounds=rounds, **kwargs)["fn"]


def _loop_steps(fn, args, kwargs, steps=None) -> int:
    """After a warm-up call of ``fn``: ``steps`` if given, else how many back-to-back calls make about
    20 ms of ``fn`` (10 to 500) on a GPU; 1 on the CPU (a simulator's wall clock: one step says as
    little about a GPU as many)."""
    fn(*args, **kwargs)
    synchronize()
    if steps is not None:
        return steps
    if not ON_GPU:
        return 1
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    return int(min(500, max(10, 0.02 / one)))


def loop_ms_each(fns: dict, *args, steps: int | None = None, rounds: int | None = None, **kwargs) -> dict:
    """:func:`loop_ms` of each of ``fns`` (name -> function), their rounds interleaved: round r of every
    function runs before round r + 1 of any. A slow phase of the host (a background compile, another
    process) then costs every function the same round or two, which the median of the rounds drops,
    instead of all the rounds of whichever function it fell on. ``{name: ms per step}``.

    >>> sorted(loop_ms_each({"ones": torch.ones, "zeros": torch.zeros}, 10, rounds=2))
    ['ones', 'zeros']
    """
    rounds = rounds if rounds is not None else (5 if ON_GPU else 1)
    n = {name: _loop_steps(f, args, kwargs, steps) for name, f in fns.items()}
    per = {name: [] for name in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            synchronize()
            t0 = time.perf_counter()
            for _ in range(n[name]):
                f(*args, **kwargs)
            synchronize()
            per[name].append((time.perf_counter() - t0) * 1e3 / n[name])
    return {name: statistics.median(v) for name, v in per.items()}


def cpu_ms_per_call(fn, *args, n: int | None = None, **kwargs) -> float:
    """The CPU's time to make one call of ``fn(*args, **kwargs)``: the median of ``n`` calls (20 on a
    GPU, 1 on the CPU), each made with the GPU idle (synchronized before, not timed), so no call
    waits for a full launch queue. Python, torch's dispatch, the wrapper's checks and allocations and
    the kernel launches all count; the GPU's run does not (unless ``fn`` synchronizes itself).

    >>> cpu_ms_per_call(torch.ones, 10, n=3) > 0
    True
    """
    return cpu_ms_each({"fn": fn}, *args, n=n, **kwargs)["fn"]


def cpu_ms_each(fns: dict, *args, n: int | None = None, **kwargs) -> dict:
    """:func:`cpu_ms_per_call` of each of ``fns``, their calls interleaved as :func:`loop_ms_each`'s
    rounds are. ``{name: ms per call}``.

    >>> sorted(cpu_ms_each({"ones": torch.ones, "zeros": torch.zeros}, 10, n=2))
    ['ones', 'zeros']
    """
    n = n if n is not None else (20 if ON_GPU else 1)
    times = {name: [] for name in fns}
    for _ in range(n):
        for name, f in fns.items():
            synchronize()
            t0 = time.perf_counter()
            f(*args, **kwargs)
            times[name].append((time.perf_counter() - t0) * 1e3)
    synchronize()
    return {name: statistics.median(v) for name, v in times.items()}


@dataclass(frozen=True)
class UserTiming:
    """What a caller of one function gets, three ways (milliseconds):

    * ``gpu``: a :class:`Timing` from :func:`bench`, the GPU's own time (launch hidden);
    * ``loop_ms``: time per step of a back-to-back Python loop (:func:`loop_ms`);
    * ``cpu_ms``: the CPU's time to make one call (:func:`cpu_ms_per_call`).

    ``median`` is the GPU time, so a ``UserTiming`` goes wherever a ``Timing`` does
    (``utils.throughput``, ``utils.report``). ``launch_bound`` says whether the CPU's time per call
    exceeds the GPU's time: a loop of such calls goes at the CPU's pace.
    """
    gpu: Timing
    loop_ms: float
    cpu_ms: float

    @property
    def median(self) -> float:
        return self.gpu.median

    @property
    def on_gpu(self) -> bool:
        return self.gpu.on_gpu

    @property
    def device(self) -> str:
        return self.gpu.device

    @property
    def launch_bound(self) -> bool:
        return self.cpu_ms > self.gpu.median

    def __str__(self):
        note = "" if self.on_gpu else " (CPU wall clock: says nothing about a GPU)"
        return (f"GPU {fmt_ms(self.gpu.median)}, loop {fmt_ms(self.loop_ms)} a step, "
                f"CPU {fmt_ms(self.cpu_ms)} a call{note}")


def bench_user(fn, *args, l2_flush: bool = False, budget_ms: float | None = None, **kwargs) -> UserTiming:
    """:class:`UserTiming` of ``fn(*args, **kwargs)``: :func:`bench` (GPU time, launch hidden; with
    ``l2_flush`` and ``budget_ms`` as there), :func:`loop_ms` and :func:`cpu_ms_per_call`. On the CPU
    each is one or two wall-clock runs (simulators: the figures say nothing about a GPU).

    >>> t = bench_user(torch.ones, 100)
    >>> t.loop_ms > 0 and t.cpu_ms > 0 and t.median == t.gpu.median
    True
    """
    return bench_users({"fn": fn}, *args, l2_flush=l2_flush, budget_ms=budget_ms, **kwargs)["fn"]


def bench_users(fns: dict, *args, l2_flush: bool = False, budget_ms: float | None = None, **kwargs) -> dict:
    """:func:`bench_user` of each of ``fns`` (name -> function): the GPU time of each in turn, then the
    loop and CPU figures with the functions interleaved (:func:`loop_ms_each`, :func:`cpu_ms_each`), so
    that a slow phase of the host does not land on one function alone. ``{name: UserTiming}``.

    >>> t = bench_users({"ones": torch.ones, "zeros": torch.zeros}, 64)
    >>> sorted(t), t["zeros"].cpu_ms > 0
    (['ones', 'zeros'], True)
    """
    gpu = {name: bench(f, *args, l2_flush=l2_flush, budget_ms=budget_ms, reps=None if ON_GPU else 1, **kwargs)
           for name, f in fns.items()}
    loops = loop_ms_each(fns, *args, **kwargs)
    cpus = cpu_ms_each(fns, *args, **kwargs)
    return {name: UserTiming(gpu[name], loops[name], cpus[name]) for name in fns}


def compare(fns: dict, *args, baseline: str | None = None, l2_flush: bool = False,
            show: bool = True, **kwargs) -> dict:
    """Time each of ``fns`` (name -> function of ``*args, **kwargs``) with :func:`bench_user` and print
    one table: GPU time, time per step in a loop, CPU time per call, and the baseline's time over
    each (``baseline``: a name of ``fns``, default the first; above 1.00 is faster than it), for the
    GPU time and for the loop. Returns ``{name: UserTiming}``.

    >>> t = compare({"ones": torch.ones, "zeros": torch.zeros}, 64, show=False)
    >>> sorted(t), t["ones"].loop_ms > 0
    (['ones', 'zeros'], True)
    """
    if not fns:
        raise ValueError("compare: give at least one function, as {name: function}")
    baseline = baseline if baseline is not None else next(iter(fns))
    if baseline not in fns:
        raise ValueError(f"compare: baseline {baseline!r} is not one of {list(fns)}")
    times = bench_users(fns, *args, l2_flush=l2_flush, **kwargs)
    if show:
        print(user_table(times, baseline))
    return times


def user_header(width: int = 11) -> str:
    """The headers of :func:`user_cells`' three columns.

    >>> user_header()
    '   GPU time  loop/step   CPU/call'
    """
    return f"{'GPU time':>{width}}{'loop/step':>{width}}{'CPU/call':>{width}}"


def user_cells(t, width: int = 11) -> str:
    """Three right-aligned columns of ``width``: the GPU time, the time per step in a loop and the CPU
    time per call of ``t`` (a :class:`UserTiming`); for a plain :class:`Timing` (a row of a
    configuration sweep, timed on the GPU alone) the last two are blank. A script's table puts
    these beside its own columns (GB/s, TFLOP/s) and :func:`user_ratios` after them.

    >>> user_cells(UserTiming(Timing([2.0], "m", "d", True), 0.5, 0.0123))
    '   2.000 ms   500.0 µs    12.3 µs'
    >>> user_cells(Timing([2.0], "m", "d", True)).rstrip()
    '   2.000 ms'
    """
    if isinstance(t, UserTiming):
        return f"{fmt_ms(t.median):>{width}}{fmt_ms(t.loop_ms):>{width}}{fmt_ms(t.cpu_ms):>{width}}"
    return f"{fmt_ms(t.median):>{width}}{'':>{2 * width}}"


def user_ratios(t, baseline) -> str:
    """``baseline``'s time over ``t``'s, for the GPU time and for the loop (above 1.00×: ``t`` is the
    faster), 14 characters; the loop's is ``-`` unless both are :class:`UserTiming` s.

    >>> b = UserTiming(Timing([2.0], "m", "d", True), 3.0, 0.01)
    >>> user_ratios(UserTiming(Timing([1.0], "m", "d", True), 4.0, 0.02), b)
    ' 2.00×,  0.75×'
    >>> user_ratios(Timing([4.0], "m", "d", True), b)
    ' 0.50×,     - '
    """
    loop = (f"{baseline.loop_ms / t.loop_ms:5.2f}×" if isinstance(t, UserTiming) and isinstance(baseline, UserTiming)
            else f"{'-':>5} ")
    return f"{baseline.median / t.median:5.2f}×, {loop}"


def user_table(times: dict, baseline: str) -> str:
    """The table :func:`compare` prints, from ``{name: UserTiming}``."""
    b = times[baseline]
    width = max(len(n) for n in times) + 2
    ratio_width = max(24, len(baseline[:18]) + 16)
    lines = [f"{'':<{width}}{user_header()}{'× ' + baseline[:18] + ' (GPU, loop)':>{ratio_width}}"]
    for name, t in times.items():
        lines.append(f"{name:<{width}}{user_cells(t)}{user_ratios(t, b):>{ratio_width}}")
    if not b.on_gpu:
        lines.append("(CPU wall clock of simulators and interpreters: these figures say nothing about a GPU)")
    return "\n".join(lines)


def cuda_graph(fn, *args, warmup: int = 3, **kwargs):
    """``fn(*args, **kwargs)`` captured once in a CUDA graph; returns a function of no arguments that
    replays it: the whole call's kernels for one launch's CPU cost. The inputs and outputs are the
    tensors of the capture (static: write new data into ``args`` to change what a replay computes).
    ``fn`` runs ``warmup`` times first on a side stream (allocations, autotuning, Triton compiles).
    On the CPU there are no CUDA graphs: the returned function calls ``fn(*args, **kwargs)``.

    >>> replay = cuda_graph(torch.ones, 8)
    >>> replay() is None or not ON_GPU
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


# --- the references of notebook 01's exercises (the learner works these out; the checks compare) ---

def flops_per_element_at_ridge(tflops: float, gbs: float, dtype: torch.dtype, inputs: int) -> float:
    """FLOP per element at which an elementwise op that reads ``inputs`` tensors of ``dtype`` and writes
    one stops being memory-bound on a device of ``tflops`` TFLOP/s and ``gbs`` GB/s: its arithmetic
    intensity (FLOP / bytes moved per element) equals the ridge point (rate / bandwidth).

    >>> flops_per_element_at_ridge(60.0, 3000.0, torch.float32, 1)   # 20 FLOP/byte x 8 bytes
    160.0
    """
    ridge = tflops * 1e12 / (gbs * 1e9)                       # FLOP per byte
    return ridge * (inputs + 1) * dtype.itemsize


def reduction_bytes(t: torch.Tensor, dim: int) -> int:
    """Bytes that ``t.mean(dim)`` moves at the least: every element of ``t`` read once, one element of
    ``t``'s dtype written per output (the size of ``t`` without ``dim``).

    >>> reduction_bytes(torch.empty(10, 3), 0)   # 30 floats read, 3 written
    132
    """
    out = t.numel() // t.shape[dim]
    return (t.numel() + out) * t.element_size()


def busy_cpu(ms: float) -> None:
    """Keep this thread busy for ``ms`` milliseconds on the CPU's clock, launching nothing: known CPU work.

    >>> t0 = time.perf_counter(); busy_cpu(2); (time.perf_counter() - t0) * 1e3 >= 2
    True
    """
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def slow_launch(cpu_ms: float, work_ms: float, *, within=()):
    """For checks of a timer that reports two clocks: a context that yields ``call``, a function that
    behaves like one GPU call: it keeps the CPU busy ``cpu_ms`` (the launch), then returns with
    ``work_ms`` of GPU work queued (see :func:`gpu_course.exercises.slow_work`: real on a GPU,
    simulated in cpu mode, where a synchronize waits for it)."""
    from contextlib import contextmanager

    from .exercises.watching import slow_work

    @contextmanager
    def ctx():
        with slow_work(work_ms, within=within) as launch:
            def call():
                busy_cpu(cpu_ms)                       # the CPU's part of the call
                launch()
            yield call
    return ctx()


def check_two_clocks(timer) -> None:
    """The check of notebook 01's exercise 2: ``timer(call)`` must return ``(ms until call() returned,
    ms until its GPU work was done)``, on calls whose CPU part and GPU work it does not know in advance."""
    import random
    for cpu_range, work_range in (((4, 8), (30, 50)), ((25, 35), (120, 160))):   # no one pair of numbers fits both
        cpu_ms, work_ms = random.uniform(*cpu_range), random.uniform(*work_range)
        with slow_launch(cpu_ms, work_ms, within=[timer]) as call:
            got = timer(call)
        assert isinstance(got, tuple) and len(got) == 2 and all(isinstance(v, (int, float)) for v in got), (
            f"return a tuple of two numbers of milliseconds, not {got!r}")
        returned, done = got
        total = cpu_ms + work_ms
        assert returned >= 0.8 * cpu_ms, (
            f"'returned' is {returned:.1f} ms, but the call kept the CPU busy {cpu_ms:.0f} ms before returning")
        assert returned < cpu_ms + 0.5 * work_ms, (
            f"'returned' is {returned:.1f} ms for a call that returned after {cpu_ms:.0f} ms: "
            f"stop the first clock when the call returns, before waiting")
        assert done >= 0.9 * total, (
            f"'done' is {done:.1f} ms for {total:.0f} ms of launch and work: the clock stopped before the work ended")
        assert done <= 1.25 * total + 10, (
            f"'done' is {done:.1f} ms for {total:.0f} ms of launch and work: time one call, in milliseconds")


def square_by_each_tool(numel: int, graph_calls: int = 100) -> dict:
    """Notebook 01's table of tools (GPU and Triton needed): the time in ms that each tool reports for
    ``torch.square(x, out=y)`` on ``numel`` fp32 elements, and the CPU's time to launch one call. The CUDA
    graph row is the GPU time per call of ``graph_calls`` calls captured once and replayed: no CPU work
    stands between two kernels."""
    import torch.utils.benchmark as benchmark_utils
    import triton.testing
    src = torch.rand(numel, device=DEVICE)
    dst = torch.empty_like(src)
    fn = lambda: torch.square(src, out=dst)  # noqa: E731
    t = bench(fn)
    rows = {
        "utils.bench, idle queue": bench(fn, hide_launch=False).median,
        "utils.bench (launch hidden)": t.median,
        "utils.bench, L2 flushed": bench(fn, l2_flush=True).median,
        "triton do_bench (median)": triton.testing.do_bench(fn, return_mode="median"),
        "torch.utils.benchmark": benchmark_utils.Timer("fn()", globals={"fn": fn})
                                 .blocked_autorange(min_run_time=0.3).median * 1e3,
    }
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(graph_calls):
            fn()
    rows["CUDA graph, per call"] = bench(graph.replay).median / graph_calls
    rows["CPU launch of one call"] = t.launch_ms
    return rows
