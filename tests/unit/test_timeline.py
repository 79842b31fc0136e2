"""The profiler-trace timeline: bars per lane, overlap, and the drawing."""
import matplotlib
matplotlib.use("Agg")
import torch  # noqa: E402

from gpu_course import timeline as tl  # noqa: E402

TRACE = {"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 0, "dur": 10},
    {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 20, "dur": 10},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 13, "ts": 5, "dur": 10},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": -3, "dur": 2},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDevice", "pid": 1, "tid": 1, "ts": -9, "dur": 1}]}


def test_bars_lanes_and_overlap():
    bs = tl.bars(TRACE)
    assert len(bs) == 4 and tl.lanes(bs) == ["CPU: launches", "stream 7", "stream 13"]
    assert tl.overlap_us(bs, "kernel", "copy") == 5.0
    assert abs(tl.idle_share(bs) - 5 / 30) < 1e-9


def test_draw_makes_one_bar_per_event():
    fig = tl.draw(tl.bars(TRACE), "t")
    n = sum(len(c.get_paths()) for c in fig.axes[0].collections)
    assert n == 4


def test_cpu_trace_draws_outermost_ops():
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as p:
        torch.ones(4).add(1).mul(2)
    bs = tl.bars(p)
    assert bs and all(b.kind == "cpu_op" for b in bs)
    assert {b.name for b in bs} >= {"aten::add", "aten::mul"}
