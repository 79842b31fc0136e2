"""Plotting a ``triton.testing.perf_report`` without pandas.

Triton's tutorials decorate a function with ``@triton.testing.perf_report(Benchmark(...))`` and
draw it with ``.run(show_plots=True)``, which needs pandas. :func:`perf_report_lines` walks the
same ``Benchmark`` (x values, one line per ``line_vals`` entry) and :func:`show_perf_report` draws
them with matplotlib, so a notebook keeps Triton's idiom with the course's packages.
"""
from __future__ import annotations


def perf_report_lines(mark) -> list:
    """``(name, line value, style, xs, ys)`` for each line of a ``perf_report``-decorated function
    ``mark``: its function called at every x value of its (one-axis) ``Benchmark``.

    >>> import triton
    >>> @triton.testing.perf_report(triton.testing.Benchmark(
    ...     x_names=["n"], x_vals=[1, 2], line_arg="p", line_vals=["a", "b"], line_names=["A", "B"],
    ...     styles=[("red", "-"), ("gray", "--")], ylabel="", plot_name="t", args={}))
    ... def f(n, p):
    ...     return n * (10 if p == "b" else 1)
    >>> perf_report_lines(f)
    [('A', 'a', ('red', '-'), [1, 2], [1, 2]), ('B', 'b', ('gray', '--'), [1, 2], [10, 20])]
    """
    bench = mark.benchmarks
    if isinstance(bench, (list, tuple)):
        if len(bench) != 1:
            raise ValueError(f"perf_report_lines: plot one Benchmark at a time, got {len(bench)}")
        bench = bench[0]
    if len(bench.x_names) != 1:
        raise ValueError(f"perf_report_lines: one x axis is supported, got {bench.x_names}")
    styles = bench.styles or [(None, "-")] * len(bench.line_vals)
    xs = list(bench.x_vals)
    return [(name, line, style, xs,
             [mark.fn(**{bench.x_names[0]: x, bench.line_arg: line}, **bench.args) for x in xs])
            for name, line, style in zip(bench.line_names, bench.line_vals, styles)]


def show_perf_report(mark, title: str = ""):
    """Draw a ``perf_report``-decorated function as its ``.run(show_plots=True)`` would: one line
    per provider against the x values (a log2 axis if ``x_log``), y from 0; dashed lines get no
    markers (a ceiling). Returns the matplotlib axes."""
    import matplotlib.pyplot as plt

    bench = mark.benchmarks[0] if isinstance(mark.benchmarks, (list, tuple)) else mark.benchmarks
    _, ax = plt.subplots(figsize=(7, 4))
    for name, _, (color, style), xs, ys in perf_report_lines(mark):
        ax.plot(xs, ys, label=name, color=color, ls=style, marker="" if style == "--" else "o")
    if bench.x_log:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(bench.xlabel)
    ax.set_ylabel(bench.ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend()
    plt.show()
    return ax
