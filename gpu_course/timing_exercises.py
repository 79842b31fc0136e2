"""Notebook 01's exercises' references and checks (the learner works these out; the checks compare), and
its table of what each timing tool reports for one kernel."""
from __future__ import annotations

import statistics

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
