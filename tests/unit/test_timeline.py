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


def test_draw_relabels_the_lanes_it_is_given():
    fig = tl.draw(tl.bars(TRACE), "t", names={"stream 7": "main stream (compute)"})
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["CPU: launches", "main stream (compute)", "stream 13"]


def test_profiler_notes_are_dropped_and_other_stderr_kept(capfd):
    import os
    with tl.quiet_profiler_notes():
        os.write(2, b"USDT: x profiler_start\nsomething else\n")
    assert capfd.readouterr().err == "something else\n"


def test_profile_of_a_step_prints_no_usdt_lines(capfd):
    from gpu_course import training_step as ts
    from gpu_course import step_memory as mem
    ts.profile(lambda: torch.ones(8).sum())
    mem.memory_timeline(lambda: torch.ones(8).sum())
    out = capfd.readouterr()
    assert "USDT" not in out.err and "USDT" not in out.out


def test_cpu_trace_draws_outermost_ops():
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as p:
        torch.ones(4).add(1).mul(2)
    bs = tl.bars(p)
    assert bs and all(b.kind == "cpu_op" for b in bs)
    assert {b.name for b in bs} >= {"aten::add", "aten::mul"}
