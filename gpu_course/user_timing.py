"""What a caller of a GPU function in a Python loop gets, three ways: the GPU's own time (:func:`bench`), the
time per step of a back-to-back loop (:func:`loop_ms`) and the CPU's time to make one call
(:func:`cpu_ms_per_call`); :func:`bench_user` / :func:`compare` take all three, and ``user_cells`` /
``user_ratios`` give its table's columns to a script's own table.

The waits around each clock are :func:`gpu_course.mode.synchronize` unless a caller gives its own
(``wait=``; ``barrier=`` also lines several processes up before each clock starts: see
:mod:`gpu_course.distributed`).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from .mode import ON_GPU, synchronize
from .timing import Timing, bench, cpu_ms_back_to_back, fmt_ms

def loop_ms(fn, *args, steps: int | None = None, rounds: int | None = None, warmup: int = 1, wait=None,
            barrier=None, **kwargs) -> float:
    """Time per step of ``fn(*args, **kwargs)`` called back to back in a plain Python loop with one
    synchronize at the end: what a training loop sees. When the CPU takes longer to make a call than
    the GPU takes to run it, this is the CPU's time, not the GPU's. The median of ``rounds`` loops of
    ``steps`` calls (default: about 20 ms a round on a GPU, at least 10 and at most 500 steps, 5
    rounds; 1 step and 1 round on the CPU), after ``warmup`` calls (at least one).

    ``wait`` (default :func:`~gpu_course.mode.synchronize`) waits for the device's queued work before each
    clock starts and before it stops; ``barrier``, where given, is called after that wait, just before
    each clock starts (``dist.barrier``: every rank of a process group starts its loop together).

    >>> calls = []
    >>> _ = loop_ms(calls.append, 1, steps=3, rounds=2)
    >>> len(calls)     # one warm-up call, then two rounds of three
    7
    """
    return loop_ms_each({"fn": fn}, *args, steps=steps, rounds=rounds, warmup=warmup, wait=wait, barrier=barrier,
                        **kwargs)["fn"]


def _loop_steps(fn, args, kwargs, steps=None, warmup: int = 1, wait=synchronize) -> int:
    """After ``warmup`` calls of ``fn`` (at least one): ``steps`` if given, else how many back-to-back calls
    make about 20 ms of ``fn`` (10 to 500) on a GPU; 1 on the CPU (a simulator's wall clock: one step says as
    little about a GPU as many)."""
    for _ in range(max(warmup, 1)):
        fn(*args, **kwargs)
    wait()
    if steps is not None:
        return steps
    if not ON_GPU:
        return 1
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    wait()
    one = max(time.perf_counter() - t0, 1e-6)
    return int(min(500, max(10, 0.02 / one)))


def loop_ms_each(fns: dict, *args, steps: int | None = None, rounds: int | None = None, warmup: int = 1,
                 wait=None, barrier=None, **kwargs) -> dict:
    """:func:`loop_ms` of each of ``fns`` (name -> function), their rounds interleaved: round r of every
    function runs before round r + 1 of any. A slow phase of the host (a background compile, another
    process) then costs every function the same round or two, which the median of the rounds drops,
    instead of all the rounds of whichever function it fell on. ``{name: ms per step}``; ``warmup``,
    ``wait`` and ``barrier`` as :func:`loop_ms`'s.

    >>> sorted(loop_ms_each({"ones": torch.ones, "zeros": torch.zeros}, 10, rounds=2))
    ['ones', 'zeros']
    """
    rounds = rounds if rounds is not None else (5 if ON_GPU else 1)
    wait = wait or synchronize
    n = {name: _loop_steps(f, args, kwargs, steps, warmup, wait) for name, f in fns.items()}
    per = {name: [] for name in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            wait()
            if barrier is not None:
                barrier()
            t0 = time.perf_counter()
            for _ in range(n[name]):
                f(*args, **kwargs)
            wait()
            per[name].append((time.perf_counter() - t0) * 1e3 / n[name])
    return {name: statistics.median(v) for name, v in per.items()}


def cpu_ms_per_call(fn, *args, n: int | None = None, rounds: int | None = None, wait=None, barrier=None,
                    **kwargs) -> float:
    """The CPU's time to make one call of ``fn(*args, **kwargs)``, as a back-to-back Python loop sees it
    (:func:`gpu_course.timing.cpu_ms_back_to_back`, the course's one definition, also ``Timing.launch_ms``):
    the median of ``rounds`` loops (5 on a GPU, 1 on the CPU) of ``n`` calls (10 on a GPU, 1 on the CPU),
    each loop started after a wait for the device and stopped when its last call returns. Python, torch's
    dispatch, the wrapper's checks and allocations and the kernel launches all count; the GPU's run does not
    (unless ``fn`` synchronizes itself). ``wait`` and ``barrier`` as :func:`loop_ms`'s (``barrier``: every
    rank's loop starts together).

    >>> calls = []
    >>> _ = cpu_ms_per_call(calls.append, 1, n=3)
    >>> len(calls)
    3
    """
    return cpu_ms_each({"fn": fn}, *args, n=n, rounds=rounds, wait=wait, barrier=barrier, **kwargs)["fn"]


def cpu_ms_rounds(fns: dict, *args, n: int | None = None, rounds: int | None = None, wait=None, barrier=None,
                  **kwargs) -> dict:
    """Each round's CPU time per call (:func:`cpu_ms_per_call`) of each of ``fns``, the functions' loops
    interleaved (round r of every function before round r + 1 of any): ``{name: [ms per call, a round each]}``;
    the rounds' range is the figure's spread within one run.

    >>> r = cpu_ms_rounds({"ones": torch.ones, "zeros": torch.zeros}, 10, n=2, rounds=3)
    >>> sorted(r), len(r["ones"])
    (['ones', 'zeros'], 3)
    """
    n = n if n is not None else (10 if ON_GPU else 1)
    rounds = rounds if rounds is not None else (5 if ON_GPU else 1)
    per = {name: [] for name in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            per[name] += cpu_ms_back_to_back(f, args, kwargs, calls=n, rounds=1, wait=wait or synchronize,
                                             barrier=barrier, each_round=True)
    return per


def cpu_ms_each(fns: dict, *args, n: int | None = None, rounds: int | None = None, wait=None, barrier=None,
                **kwargs) -> dict:
    """:func:`cpu_ms_per_call` of each of ``fns``, their loops interleaved as :func:`loop_ms_each`'s
    rounds are: the median of :func:`cpu_ms_rounds`. ``{name: ms per call}``.

    >>> sorted(cpu_ms_each({"ones": torch.ones, "zeros": torch.zeros}, 10, n=2))
    ['ones', 'zeros']
    """
    per = cpu_ms_rounds(fns, *args, n=n, rounds=rounds, wait=wait, barrier=barrier, **kwargs)
    return {name: statistics.median(v) for name, v in per.items()}


@dataclass(frozen=True)
class UserTiming:
    """What a caller of one function gets, three ways (milliseconds):

    * ``gpu``: a :class:`Timing` from :func:`bench`, the GPU's own time (launch hidden);
    * ``loop_ms``: time per step of a back-to-back Python loop (:func:`loop_ms`);
    * ``cpu_ms``: the CPU's time per call of a back-to-back loop (:func:`cpu_ms_per_call`).

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
