"""Notebook 04's tables and figures of the ladder: this run's rows on a GPU or the stored ones in cpu mode, the table,
the bar plot, the roofline with the bandwidth each rung asks for, and the closing table against the targets."""
from __future__ import annotations

from ...mode import ON_GPU, device_name
from ...results import stored_results
from .timing import CUBLAS


def ladder_rows(run_rows: list, notebook: str, sizes) -> tuple:
    """``(rows, source)``: this run's rows on a GPU (``run_rows``, from ``time_ladder``); in cpu mode the rungs and
    cuBLAS rows of ``sizes`` stored for ``notebook`` from the last GPU run (``([], None)`` if there are none)."""
    if ON_GPU:
        return run_rows, device_name() + " (this run)"
    rows = [r for r in stored_results(notebook=notebook)
            if r["kernel"].startswith(("rung", CUBLAS)) and r["size"] in sizes]
    if rows:   # one GPU's run: the GPU with the latest row
        latest = max(rows, key=lambda r: r["when"])["device"]
        rows = [r for r in rows if r["device"] == latest]
    out = [dict(kernel=r["kernel"], size=r["size"], tflops=float(r["rate"]),
                vs=float(r["vs_baseline"]) if r["vs_baseline"] else 1.0) for r in rows]
    return out, (f"stored results from {rows[0]['device']}, not this machine" if rows else None)


def _row(rows: list, name: str, size: str):
    return next((r for r in rows if r["kernel"] == name and r["size"] == size), None)


def ladder_table(rows: list, names: list, sizes) -> str:
    """One line per kernel of ``names``: TFLOP/s and ratio to cuBLAS at each of ``sizes``.

    >>> print(ladder_table([dict(kernel="rung 1", size="4096³", tflops=1.0, vs=0.02)], ["rung 1"], ["4096³"]))
    kernel                                               4096³
    rung 1                                  1.0 TFLOP/s  0.02×
    """
    lines = [f"{'kernel':32s}" + "".join(f"{s:>26s}" for s in sizes)]
    for name in names:
        cells = [f"{r['tflops']:8.1f} TFLOP/s {r['vs']:5.2f}×" if (r := _row(rows, name, s)) else "" for s in sizes]
        lines.append(f"{name:32s}" + "".join(f"{c:>26s}" for c in cells))
    return "\n".join(lines)


def short_name(name: str) -> str:
    """A kernel's name for a tick label: ``"rung 7 conflict-free + prefetch"`` -> ``"7 conflict-free"``.

    >>> short_name("rung 7 conflict-free + prefetch"), short_name("cuBLAS fp32 (TF32 off)")
    ('7 conflict-free', 'cuBLAS')
    """
    if not name.startswith("rung "):
        return name.split(" ")[0]
    number, _, rest = name[5:].partition(" ")
    return f"{number} {rest.split(' ')[0]}".strip()


def plot_ladder(rows: list, names: list, sizes, title: str):
    """Bars of TFLOP/s per kernel of ``names``, one colour per size, drawn across so that the full names sit
    beside their bars without overlapping (cuBLAS's in bold). Returns the figure."""
    from ...plots import grouped_hbars
    series = {s: [(r["tflops"] if (r := _row(rows, nm, s)) else None) for nm in names] for s in sizes}
    return grouped_hbars(names, series, "TFLOP/s (fp32)", title, highlight=names[-1:])


def roofline_points(rows: list, rungs: dict, intensity, size: str = "4096³") -> list:
    """``(FLOP per byte of loads issued, TFLOP/s, name)`` of each rung with an ``intensity(rung)`` (None: skipped)
    that has a row at ``size``."""
    pts = []
    for rung, name in rungs.items():
        ai, r = intensity(rung), _row(rows, name, size)
        if ai is not None and r:
            pts.append((ai, r["tflops"], name))
    return pts


def plot_roofline(pts: list, ceil: dict, title: str):
    """The roofline (DRAM copy bandwidth, cuBLAS fp32) with ``pts``; rungs on one point share one label (rung 9 is
    often rung 8's shape), so no two labels overlap there. Returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.logspace(-1, 3, 200)
    ax.loglog(x, np.minimum(ceil["copy"] * x / 1e3, ceil["fp32"]), "k-", lw=1,
              label=f"roofline: DRAM {ceil['copy']:,.0f} GB/s, cuBLAS fp32 {ceil['fp32']:.1f} TFLOP/s")
    labels: dict = {}
    for ai, tf, name in pts:
        labels.setdefault((round(ai, 3), round(tf, 1)), []).append(name.split(" ", 2)[1])
    notes = []
    for (ai, tf), nums in labels.items():
        ax.plot(ai, tf, "o")
        notes.append(ax.annotate(", ".join(nums), (ai, tf), textcoords="offset points", xytext=(5, -10), fontsize=8))
    ax.set_xlabel("FLOP per byte of global loads issued")
    ax.set_ylabel("TFLOP/s at 4096³")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    from ...plots import declutter
    declutter(ax, notes, offsets=((5, -10), (5, 4), (-5, 4), (-5, -10), (8, 12), (8, -18)))   # none covers another
    return fig


def closing_lines(rows: list, names: list, size: str = "4096³") -> str:
    """Each kernel of ``names`` at ``size``: TFLOP/s and ratio to cuBLAS fp32.

    >>> closing_lines([dict(kernel="rung 1", size="4096³", tflops=1.0, vs=0.02)], ["rung 1"])
    'rung 1                              1.0 TFLOP/s  0.02× cuBLAS fp32'
    """
    return "\n".join(f"{n:32s} {r['tflops']:6.1f} TFLOP/s  {r['vs']:.2f}× cuBLAS fp32"
                     for n in names if (r := _row(rows, n, size)))


def last_rung_ratio(rows: list, name: str, size: str):
    """The ratio to cuBLAS of kernel ``name`` at ``size`` in ``rows`` (None if it has no row)."""
    r = _row(rows, name, size)
    return r["vs"] if r else None
