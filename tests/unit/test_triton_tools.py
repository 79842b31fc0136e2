"""Notebook 06's Triton helpers, on the CPU: the interpreter's version of a kernel
(``triton_debug.interpreted``), what a launch printed (``printed_lines``, ``line_counts``), the softmax
sweep's plumbing (``lessons.softmax.softmax_sweep`` and friends) and the perf_report plot
(``triton_plots``)."""
from __future__ import annotations

import pytest
import torch

import utils  # first: chooses the mode before triton is imported
import triton
import triton.language as tl

from gpu_course import triton_plots
from gpu_course.kernels import triton_softmax
from gpu_course.lessons import softmax as lesson_softmax
from gpu_course.kernels.triton_mean import mean_scalar_loop_kernel, sum_to_mean_kernel
from gpu_course.triton_check import TritonOutOfBounds
from gpu_course.triton_debug import Interpreted, interpreted, line_counts, printed_lines


@triton.jit
def _count_kernel(count_ptr):
    c = tl.load(count_ptr)
    tl.store(count_ptr, c + 1)


@triton.jit
def _peek_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.static_print("BLOCK", BLOCK)
    tl.device_print("x", x)


@triton.jit
def _copy8_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 8)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


# ------------------------------------------------------------------------------- interpreted
def test_interpreted_runs_programs_one_after_another():
    counter = torch.zeros(1, dtype=torch.int32)
    interpreted(_count_kernel)[(50,)](counter)  # a plain load + store: exact only when programs never overlap
    assert counter.item() == 50


def test_interpreted_runs_a_package_kernel_and_nests():
    k = interpreted(interpreted(mean_scalar_loop_kernel))  # wrapping twice changes nothing
    assert isinstance(k, Interpreted) and "mean_scalar_loop_kernel" in repr(k)
    sums = torch.full((2,), float("nan"))
    if utils.ON_GPU:  # it calls tl.minimum, a jit function of triton.language: compiled on a GPU machine
        with pytest.raises(NotImplementedError, match="tl.sum or tl.max"):
            k[(2,)](torch.ones(5), sums, 5, CHUNK=4)
        return
    k[(2,)](torch.ones(5), sums, 5, CHUNK=4)
    assert sums.tolist() == [4.0, 1.0]


def test_interpreted_kernel_with_tl_sum():
    """tl.sum is itself a @triton.jit function of triton.language: interpreted in cpu mode, refused
    with a clear error on a GPU machine."""
    partial, out = torch.arange(1, 6, dtype=torch.float32), torch.zeros(1)  # 1..5
    if utils.ON_GPU:
        with pytest.raises(NotImplementedError, match="tl.sum"):
            interpreted(sum_to_mean_kernel)[(1,)](partial, out, 5, 10, BLOCK=8)
    else:
        interpreted(sum_to_mean_kernel)[(1,)](partial, out, 5, 10, BLOCK=8)
        assert out.item() == pytest.approx(1.5)


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def _calls_twice_kernel(x_ptr):
    tl.store(x_ptr, _twice(tl.load(x_ptr)))


def test_interpreted_kernel_calling_another_jit_function():
    """In cpu mode every jit function is interpreted; on a GPU machine the callee stays compiled and
    the interpreter cannot call it: a clear error, not the interpreter's own."""
    x = torch.full((1,), 3.0)
    if utils.ON_GPU:
        with pytest.raises(NotImplementedError, match="calls a @triton.jit function"):
            interpreted(_calls_twice_kernel)[(1,)](x)
    else:
        interpreted(_calls_twice_kernel)[(1,)](x)
        assert x.item() == 6.0


def test_interpreted_checks_bounds():
    out = torch.zeros(8)
    with pytest.raises(TritonOutOfBounds) as e:
        interpreted(_copy8_kernel)[(1,)](torch.arange(6.0), out)
    assert e.value.kernel == "_copy8_kernel" and e.value.offsets.tolist() == [6, 7]
    assert out.eq(0).all()  # stopped before the store


def test_interpreted_refuses_what_is_not_a_kernel():
    with pytest.raises(TypeError, match="@triton.jit kernel"):
        interpreted(lambda x: x)


# ------------------------------------------------------------------------------ printed lines
def test_printed_lines_of_an_interpreted_kernel():
    lines = printed_lines(lambda: interpreted(_peek_kernel)[(2,)](torch.arange(4.0), BLOCK=4))
    assert len(lines) == 4  # static_print and device_print, once per program in the interpreter
    counts = line_counts(lines)
    assert counts[0] == (2, "BLOCK 4")
    assert [n for n, _ in counts] == [2, 1, 1]


def test_printed_lines_hides_the_output(capsys):
    assert printed_lines(lambda: print("a\nb\na")) == ["a", "b", "a"]
    assert capsys.readouterr().out == ""
    assert line_counts(["a", "b", "a"]) == [(2, "a"), (1, "b")]


# --------------------------------------------------------------------------- softmax sweep
def test_softmax_sweep_rows_and_table():
    sweep = lesson_softmax.softmax_sweep("test", widths=[16, 100], floats=400, reps=1)
    assert [row["w"] for row in sweep] == [16, 100]
    assert all(row["triton"] > 0 and row["torch"] > 0 and row["ceiling"] > 0 for row in sweep)
    table = lesson_softmax.sweep_table(sweep).splitlines()
    assert len(table) == 3 and table[0].split()[0] == "w" and table[2].split()[0] == "100"


def test_stored_softmax_sweep_prefers_an_h100_and_sorts():
    def row(size, device, rate="100"):
        return dict(kernel="softmax (triton)", size=size, device=device, rate=rate, baseline_ms="1",
                    pct_of_ceiling="50")
    rows = [row("2x256", "NVIDIA H100 80GB HBM3"), row("4x128", "NVIDIA H100 80GB HBM3"),
            row("4x128", "Tesla T4", "9"), dict(row("1x1", "NVIDIA H100 80GB HBM3"), kernel="other")]
    sweep = lesson_softmax.stored_softmax_sweep("06", rows=rows)
    assert [r["w"] for r in sweep] == [128, 256]
    assert {r["device"] for r in sweep} == {"NVIDIA H100 80GB HBM3"}
    assert sweep[0]["ceiling"] == 200.0 and sweep[0]["torch"] == pytest.approx(2 * 4 * 512 / 1.0 / 1e6)  # bytes / ms / 1e6 = GB/s
    assert lesson_softmax.stored_softmax_sweep("06", rows=[]) == []


def test_stored_softmax_sweep_reads_the_stored_h100_run():
    sweep = lesson_softmax.stored_softmax_sweep("06_triton_basics")
    if not sweep:
        pytest.skip("no stored GPU results for notebook 06")
    assert [r["w"] for r in sweep] == sorted(r["w"] for r in sweep)
    assert all(0 < r["triton"] <= 1.2 * r["ceiling"] for r in sweep)


# ------------------------------------------------------------------------------- perf_report
def _mark(x_vals=(1, 2, 4)):
    @triton.testing.perf_report(triton.testing.Benchmark(
        x_names=["w"], x_vals=list(x_vals), line_arg="provider", line_vals=["a", "ceiling"],
        line_names=["A", "ceiling"], styles=[("tab:blue", "-"), ("gray", "--")], xlabel="w", ylabel="GB/s",
        x_log=True, plot_name="t", args={}))
    def f(w, provider):
        return 10.0 if provider == "ceiling" else float(w)
    return f


def test_perf_report_lines_walk_the_benchmark():
    lines = triton_plots.perf_report_lines(_mark())
    assert lines == [("A", "a", ("tab:blue", "-"), [1, 2, 4], [1.0, 2.0, 4.0]),
                     ("ceiling", "ceiling", ("gray", "--"), [1, 2, 4], [10.0, 10.0, 10.0])]


def test_show_perf_report_draws_every_line():
    import matplotlib
    matplotlib.use("Agg")
    ax = triton_plots.show_perf_report(_mark(), title="t")
    assert [line.get_label() for line in ax.get_lines()] == ["A", "ceiling"]
    assert ax.get_xscale() == "log" and ax.get_ylim()[0] == 0 and ax.get_title() == "t"
