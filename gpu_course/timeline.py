"""A profiler trace drawn as a timeline: each GPU stream's kernels and copies as bars over time, with
the CPU's launches (the CUDA runtime calls) above them, so idle gaps, overlap and launch-bound
stretches show without another tool. A trace with no GPU events (cpu mode) draws each CPU thread's
outermost operators instead.

>>> trace = {"traceEvents": [
...     {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 0, "dur": 10},
...     {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 13, "ts": 5, "dur": 10},
...     {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": -3, "dur": 2}]}
>>> [(b.lane, b.kind) for b in bars(trace)]
[('CPU: launches', 'launch'), ('stream 7', 'kernel'), ('stream 13', 'copy')]
>>> overlap_us(bars(trace), "kernel", "copy")
5.0
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "copy", "gpu_memset": "memset"}
COLORS = {"kernel": "tab:blue", "copy": "tab:orange", "memset": "tab:gray", "launch": "tab:green",
          "cpu_op": "tab:purple"}


@contextlib.contextmanager
def quiet_profiler_notes():
    """Around a profiler's start or stop: drop the lines PyTorch's C++ side writes to the process's
    stderr (file descriptor 2) then, such as ``USDT: ... profiler_start``, and pass every other line on
    to ``sys.stderr``. Does nothing where fd 2 cannot be redirected.

    >>> with quiet_profiler_notes():
    ...     _ = os.write(2, b"USDT: x profiler_start\\n")
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    tmp = tempfile.TemporaryFile()
    os.dup2(tmp.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2), os.close(saved), tmp.seek(0)
        text = tmp.read().decode(errors="replace")
        tmp.close()
        rest = [ln for ln in text.splitlines(True) if not ln.startswith("USDT:")]
        if rest:
            sys.stderr.write("".join(rest))


def run_profiled(p, fn, *args) -> None:
    """Start the profiler ``p``, run ``fn(*args)`` and wait for the GPU, then stop ``p``; its start and stop
    with :func:`quiet_profiler_notes`, so that the notes PyTorch's CPU build writes then stay out of the
    cell's output."""
    from .mode import synchronize
    with quiet_profiler_notes():
        p.start()
    try:
        fn(*args)
        synchronize()
    finally:
        with quiet_profiler_notes():
            p.stop()


@dataclass
class Bar:
    """One bar: its ``lane`` (a stream, or the CPU), ``name``, ``start`` and ``dur`` in µs, ``kind``
    (kernel, copy, memset, launch or cpu_op)."""
    lane: str
    name: str
    start: float
    dur: float
    kind: str

    @property
    def end(self) -> float:
        return self.start + self.dur


def trace_dict(source) -> dict:
    """The Chrome trace of ``source``: a ``torch.profiler.profile`` that ran, a path to its exported
    JSON, or the dict itself."""
    if isinstance(source, dict):
        return source
    if isinstance(source, (str, os.PathLike)):
        with open(source) as f:
            return json.load(f)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        source.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)
    finally:
        os.remove(path)


def _outermost(events: list) -> list:
    """The events of one thread that no other event of it contains."""
    out, end = [], float("-inf")
    for e in sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0))):
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e.get("dur", 0)
    return out


def bars(source) -> list:
    """The bars of a trace (see :func:`trace_dict`), time from the first bar, sorted by lane (CPU
    first) and start. GPU traces: one lane per stream (kernels, copies, memsets) and one for the CPU's
    CUDA runtime calls that launch work. CPU-only traces: one lane per thread, its outermost operators."""
    evs = [e for e in trace_dict(source).get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]
    gpu = [e for e in evs if e.get("cat") in GPU_CATS]
    out = []
    if gpu:
        for e in gpu:
            out.append(Bar(f"stream {e['tid']}", e["name"], float(e["ts"]), float(e.get("dur", 0)),
                           GPU_CATS[e["cat"]]))
        for e in evs:
            if e.get("cat") == "cuda_runtime" and any(w in e["name"] for w in ("Launch", "Memcpy", "Memset",
                                                                             "GraphLaunch")):
                out.append(Bar("CPU: launches", e["name"], float(e["ts"]), float(e.get("dur", 0)), "launch"))
    else:
        threads = sorted({e["tid"] for e in evs if e.get("cat") == "cpu_op"}, key=str)
        for k, tid in enumerate(threads):
            for e in _outermost([e for e in evs if e.get("cat") == "cpu_op" and e["tid"] == tid]):
                out.append(Bar(f"CPU thread {k}", e["name"], float(e["ts"]), float(e.get("dur", 0)), "cpu_op"))
    if not out:
        return out
    t0 = min(b.start for b in out)
    for b in out:
        b.start -= t0
    return sorted(out, key=lambda b: (not b.lane.startswith("CPU"), _lane_key(b.lane), b.start))


def _lane_key(lane: str):
    tail = lane.split()[-1]
    return (0, int(tail)) if tail.isdigit() else (1, tail)


def lanes(bs: list) -> list:
    """The lanes of ``bs``, top to bottom."""
    return list(dict.fromkeys(b.lane for b in bs))


def union(intervals) -> list:
    """Merge overlapping ``(start, end)`` intervals into disjoint ``[start, end]`` ones, in order.

    >>> union([(5, 7), (0, 2), (1, 3)])
    [[0, 3], [5, 7]]
    """
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def busy_us(bs: list, kinds=("kernel", "copy", "memset")) -> float:
    """Time during which at least one bar of ``kinds`` runs, µs."""
    return sum(e - s for s, e in union([(b.start, b.end) for b in bs if b.kind in kinds]))


def idle_share(bs: list) -> float:
    """The GPU's idle share: 1 − busy time / span from the first GPU bar's start to the last one's end."""
    g = [b for b in bs if b.kind in ("kernel", "copy", "memset")]
    if not g:
        return float("nan")
    span = max(b.end for b in g) - min(b.start for b in g)
    return 1 - busy_us(g) / span if span > 0 else 0.0


def gaps_us(bs: list, kind: str = "kernel") -> float:
    """Summed idle time between consecutive bars of ``kind`` (their union) from the first one's start to
    the last one's end, µs: e.g. the compute stream's gaps between kernels.

    >>> gaps_us([Bar("s", "a", 0, 10, "kernel"), Bar("s", "b", 15, 5, "kernel"), Bar("s", "c", 18, 4, "kernel")])
    5.0
    """
    u = union([(b.start, b.end) for b in bs if b.kind == kind])
    return float(sum(s2 - e1 for (_, e1), (s2, _) in zip(u, u[1:])))


def overlap_us(bs: list, kind_a: str, kind_b: str) -> float:
    """Time during which a bar of ``kind_a`` and one of ``kind_b`` run at once, µs."""
    a = union([(b.start, b.end) for b in bs if b.kind == kind_a])
    b_ = union([(b.start, b.end) for b in bs if b.kind == kind_b])
    total, j = 0.0, 0
    for s, e in a:
        for s2, e2 in b_:
            total += max(0.0, min(e, e2) - max(s, s2))
    return total


def draw(bs: list, title: str, ax=None, min_label_us: float | None = None, names: dict | None = None):
    """Draw the bars: one row per lane (CPU on top), time in ms across. Bars long enough are labelled
    with their name; a legend gives the kinds. ``names`` relabels lanes (``{"stream 7": "main stream
    (compute)"}``); a lane it does not name keeps its own label. Returns the figure."""
    import matplotlib.pyplot as plt
    names_, names = names, lanes(bs)
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 0.7 * len(names) + 1.4))
    else:
        fig = ax.figure
    span = max((b.end for b in bs), default=1.0)
    min_label_us = span / 12 if min_label_us is None else min_label_us
    for row, lane in enumerate(names):
        mine = [b for b in bs if b.lane == lane]
        ax.broken_barh([(b.start / 1e3, max(b.dur, span / 2000) / 1e3) for b in mine], (row - 0.4, 0.8),
                       facecolors=[COLORS[b.kind] for b in mine], edgecolor="white", linewidth=0.3)
        for b in mine:
            if b.dur >= min_label_us:
                ax.text((b.start + b.dur / 2) / 1e3, row, b.name[:int(b.dur / span * 120)], ha="center",
                        va="center", fontsize=6, color="white", clip_on=True)
    ax.set_yticks(range(len(names)), [(names_ or {}).get(n, n) for n in names])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title, loc="left", fontsize=10)
    from matplotlib.patches import Patch
    kinds = list(dict.fromkeys(b.kind for b in bs))
    ax.legend(handles=[Patch(color=COLORS[k], label=k) for k in kinds], fontsize=7, loc="lower right",
              bbox_to_anchor=(1.0, 1.0), ncol=len(kinds), frameon=False)      # above the rows, off the bars
    fig.tight_layout()
    return fig
