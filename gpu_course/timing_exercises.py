"""Notebook 01's exercises' references and checks (the learner works these out; the checks compare), and
its table of what each timing tool reports for one kernel."""
from __future__ import annotations

import statistics
import time

import torch

from .mode import DEVICE
from .timing import bench, busy_cpu


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


def check_cpu_ms_per_call(timer) -> None:
    """The check of notebook 01's exercise 2: ``timer(call, calls)`` must return the CPU's time per call, in ms,
    of ``calls`` calls of ``call()`` made back to back, the clock stopped when the last one returned (section 2c's
    ``launch_ms``). Each of the check's calls keeps the CPU busy for a few ms, a different time each (its launch),
    and queues tens of ms of GPU work (real on a GPU, simulated in cpu mode: see
    :func:`gpu_course.exercises.slow_work`), so a clock that waits for the GPU, anywhere, reads far more than
    the calls' CPU time; some of that work is queued before the timer is called. Refused: a wait for that work after
    the clock started, a wait for the GPU between two calls (the next call finds the queue empty),
    another number of calls than ``calls``, and the course's own loop (:func:`~gpu_course.timing.cpu_ms_back_to_back`,
    behind ``utils.cpu_ms_per_call`` and ``bench``'s ``launch_ms``)."""
    import random

    from . import mode, timing
    from .exercises.watching import slow_work, watch_calls
    for calls, cpu_range, work_ms in ((4, (2, 5), 30), (7, (8, 14), 40)):   # no one number fits both
        cpu = [random.uniform(*cpu_range) for _ in range(calls + 5)]
        made, waited, clock = [], [], []
        with slow_work(work_ms, within=[timer]) as launch, \
                watch_calls(timing.cpu_ms_back_to_back, within=[timer]) as course_loop:
            def call():
                if made and not launch.busy():
                    waited.append(len(made) + 1)
                if not made:
                    clock.append(time.perf_counter())        # the first call starts
                busy_cpu(cpu[len(made) % len(cpu)])          # the CPU's part of the call
                made.append(1)
                launch()                                      # then its GPU work, queued
                clock[1:] = [time.perf_counter()]             # the latest call returns
            launch()                                          # work queued before the loop: it must not count
            queued = time.perf_counter()
            got = timer(call, calls)
            mode.synchronize()                                # the check waits for the work; not the timer's
        assert not course_loop, "utils.cpu_ms_per_call (and bench's launch_ms) is the loop you are asked to write"
        assert not waited, (f"call {waited[0]} found the GPU's queue empty: your function waited for the GPU between "
                            f"two calls; a loop of calls does not wait")
        assert len(made) == calls, f"call fn exactly `calls` times: it was called {len(made)} times for calls={calls}"
        assert isinstance(got, (int, float)), f"return one number of milliseconds, not {got!r}"
        # the loop's CPU time per call, from the first call's start to the last one's return, as the check saw it
        # (on a busy machine a call can take longer than the CPU work it was given)
        loop = (clock[1] - clock[0]) * 1e3 / calls
        late = (clock[0] - queued) * 1e3                      # from the work queued before it to its first call
        assert not (late >= 0.5 * work_ms and got > 1.3 * loop + 2), (
            f"{got:.3g} ms per call, but the calls kept the CPU busy {loop:.1f} ms each: your clock counted "
            f"{late:.0f} ms of work queued before the loop (a wait for the GPU after the clock started); wait, if "
            f"at all, before starting the clock")
        assert got >= 0.9 * loop, (f"{got:.3g} ms per call, but the calls kept the CPU busy {loop:.1f} ms each on "
                                   f"average (milliseconds, per call)")
        assert got <= 1.3 * loop + 2, (
            f"{got:.3g} ms per call, but the calls kept the CPU busy only {loop:.1f} ms each on average: stop the "
            f"clock when the last call returns, before any wait for the GPU, and divide by the number of calls")


def square_by_each_tool(numel: int, graph_calls: int = 100) -> dict:
    """Notebook 01's table of tools (GPU and Triton needed): the time in ms that each tool reports for
    ``torch.square(x, out=y)`` on ``numel`` fp32 elements, and the CPU's time per call of a back-to-back loop
    (:func:`~gpu_course.user_timing.cpu_ms_per_call`: the median of 5 rounds of 50 calls, with the lowest and
    highest round beside it). The CUDA graph row is the GPU time per call of ``graph_calls`` calls captured once
    and replayed: no CPU work stands between two kernels."""
    import torch.utils.benchmark as benchmark_utils
    import triton.testing
    from .user_timing import cpu_ms_rounds
    src = torch.rand(numel, device=DEVICE)
    dst = torch.empty_like(src)
    fn = lambda: torch.square(src, out=dst)  # noqa: E731
    rows = {
        "utils.bench, idle queue": bench(fn, hide_launch=False).median,
        "utils.bench (launch hidden)": bench(fn).median,
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
    per = cpu_ms_rounds({"fn": fn}, n=50, rounds=5)["fn"]
    rows["CPU per call (loop), median"] = statistics.median(per)
    rows["  lowest / highest round"] = (min(per), max(per))
    return rows


def tools_table(tools: dict) -> str:
    """The table of :func:`square_by_each_tool`'s rows for several sizes (``{size label: rows}``), in µs, one
    column per size; a row of two figures (a range) is printed as ``low-high``."""
    cell = lambda v: f"{v[0] * 1e3:.1f}-{v[1] * 1e3:.1f}" if isinstance(v, tuple) else f"{v * 1e3:.1f}"  # noqa: E731
    lines = [f"{'torch.square(x, out=y), µs':<30}" + "".join(f"{label:>12}" for label in tools)]
    for row in next(iter(tools.values())):
        lines.append(f"{row:<30}" + "".join(f"{cell(t[row]):>12}" for t in tools.values()))
    return "\n".join(lines)
