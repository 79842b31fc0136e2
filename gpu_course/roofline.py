"""A roofline of recorded matmul results: each record placed at its arithmetic intensity (FLOP per
byte of DRAM traffic if each matrix moves once) and achieved TFLOP/s, under the measured roofs of
its precision (``min(copy bandwidth x intensity, peak of the precision)``).

Records come from :func:`gpu_course.results.stored_results`; ceilings from
:func:`reference_ceilings` (this GPU's, or on the CPU the ones stored from the reference GPU).

>>> matmul_dims("4096³"), matmul_dims("5120×256×5120"), matmul_dims("8192x1024 @ 1024x4096")
((4096, 4096, 4096), (5120, 256, 5120), (8192, 1024, 4096))
>>> round(intensity("4096³", "fp16"))
1365
"""
from __future__ import annotations

import re

from .device_ceilings import CEILINGS_FILE, ceilings
from .mode import ON_GPU
from .paths import read_json

BYTES_PER_ELEMENT = {"fp16": 2, "bf16": 2, "tf32": 4, "fp32": 4}
PRECISION_STYLE = {"fp16": "C0", "bf16": "C4", "tf32": "C1", "fp32": "C2"}


def reference_ceilings(device: str | None = None) -> dict | None:
    """This GPU's measured ceilings in gpu mode; otherwise the ones stored in
    ``results/ceilings.json`` for ``device`` (by default the first stored GPU), or None."""
    if ON_GPU and device is None:
        return ceilings()
    stored = read_json(CEILINGS_FILE)
    if not stored:
        return None
    entry = stored.get(device) if device else next(iter(stored.values()))
    return entry["ceilings"] if entry else None


def matmul_dims(size: str) -> tuple[int, int, int]:
    """(h, k, w) of a recorded matmul size: ``"n³"``, ``"h×k×w"`` or ``"hxk @ kxw"``."""
    s = size.strip()
    m = re.fullmatch(r"(\d+)³", s)
    if m:
        n = int(m.group(1))
        return n, n, n
    m = re.fullmatch(r"(\d+)\s*[x×]\s*(\d+)\s*[x×]\s*(\d+)", s)
    if m:
        h, k, w = map(int, m.groups())
        return h, k, w
    m = re.fullmatch(r"(\d+)\s*[x×]\s*(\d+)\s*@\s*(\d+)\s*[x×]\s*(\d+)", s)
    if m and m.group(2) == m.group(3):
        h, k, _, w = map(int, m.groups())
        return h, k, w
    raise ValueError(f"matmul_dims: cannot read a matmul shape from {size!r} "
                     "(expected 'n³', 'h×k×w' or 'hxk @ kxw')")


def intensity(size: str, precision: str) -> float:
    """FLOP per byte for an ``h×k @ k×w`` product when a, b and out each cross DRAM once."""
    h, k, w = matmul_dims(size)
    nbytes = BYTES_PER_ELEMENT[precision] * (h * k + k * w + h * w)
    return 2 * h * k * w / nbytes


def points(rows: list) -> list[dict]:
    """The matmul records of ``rows`` (TFLOP/s with a known precision) as roofline points."""
    out = []
    for r in rows:
        if r.get("unit") != "TFLOP/s" or r.get("ceiling") not in BYTES_PER_ELEMENT or not r.get("rate"):
            continue
        out.append(dict(label=f"{r['kernel']} {r['size']}", kernel=r["kernel"], precision=r["ceiling"], size=r["size"],
                        intensity=intensity(r["size"], r["ceiling"]), tflops=float(r["rate"]),
                        notebook=r.get("notebook", "")))
    return out


def plot_roofline(pts: list[dict], ceil: dict, title: str = "", ax=None, annotate=None):
    """Draw the roofs of every precision in ``pts`` and the points; ``annotate(point)`` gives a
    short label (or None for no label); labels are moved (or left out) so that none covers another: label only
    the points the text discusses. Returns the axes."""
    import matplotlib.pyplot as plt
    import numpy as np
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    x = np.logspace(0, 4, 200)
    for prec in sorted({p["precision"] for p in pts}, key=lambda p: -ceil.get(p, 0)):
        if prec not in ceil:
            continue
        ax.loglog(x, np.minimum(ceil["copy"] * x / 1e3, ceil[prec]), "-", lw=1, color=PRECISION_STYLE[prec],
                  label=f"{prec} roof (best measured here): {ceil[prec]:,.0f} TFLOP/s, DRAM {ceil['copy']:,.0f} GB/s")
    markers = {nb: "os^Dv"[k % 5] for k, nb in enumerate(sorted({p["notebook"] for p in pts}))}
    notes = []
    for p in pts:
        ax.plot(p["intensity"], p["tflops"], markers[p["notebook"]], color=PRECISION_STYLE[p["precision"]], ms=5)
        text = annotate(p) if annotate else None
        if text:
            notes.append(ax.annotate(text, (p["intensity"], p["tflops"]), textcoords="offset points", xytext=(4, 2),
                                     fontsize=7, arrowprops=dict(arrowstyle="-", lw=0.5, color="gray")))
    ax.set_xlabel("FLOP per byte of DRAM traffic (each matrix moved once)")
    ax.set_ylabel("TFLOP/s achieved")
    if title:
        ax.set_title(title, fontsize=9)
    from matplotlib.lines import Line2D
    handles, _ = ax.get_legend_handles_labels()   # the roofs, then the marker of each notebook
    handles += [Line2D([], [], ls="", marker=mk, color="gray", ms=5, label=f"notebook {nb[:2]}" if nb else "recorded")
                for nb, mk in markers.items()]
    ax.legend(handles=handles, fontsize=7, loc="lower left")
    if notes:   # in the order of pts: a note that would cover an earlier one moves, or is left out
        from .plots import declutter
        declutter(ax, notes)
    return ax
