"""Legibility as a check: a figure whose tick labels, notes, titles or legend overlap, whose numeric axes have no label
(with a unit where the axis is a quantity), or whose measurements name no device is refused.

``check_legible(fig)`` draws the figure and raises :class:`FigureIllegible` with every problem found;
``problems(fig)`` lists them. ``watch`` is the hook that ``notebooks/matplotlibrc`` names
(``figure.hooks``): every figure pyplot makes is checked each time it is drawn, so every figure a
notebook shows is checked where it is shown. ``COURSE_CHECK_FIGURES=1`` (the test runs) makes a failed
check raise; ``0`` turns it off; unset, it warns. ``drawing(fig)`` marks a figure that explains (a
layout, a walk through an algorithm) rather than measures: it needs no device name.

>>> import matplotlib; matplotlib.use("Agg")
>>> import matplotlib.pyplot as plt
>>> fig, ax = plt.subplots(figsize=(2, 2))
>>> _ = ax.bar(["a rather long label", "another rather long label"], [1, 2])
>>> [p.split(":")[0] for p in problems(fig)]
['overlapping text', 'no axis label', 'no device']
>>> plt.close(fig)
"""
from __future__ import annotations

import contextlib
import os
import re
import warnings

ENV = "COURSE_CHECK_FIGURES"
# a unit: in parentheses or brackets, or one of these words; or a count or index needing none
UNIT = re.compile(r"[(\[].+[)\]]|(?<![\w/])(ms|µs|us|ns|s|GB/s|TB/s|TFLOP/s|GFLOP/s|FLOP/byte|FLOP/B|bytes?|"
                  r"B|KiB|MiB|GiB|KB|MB|GB|%|×|x)(?![\w/])")
UNITLESS = re.compile(r"^\s*(runs?|steps?|iterations?|count|index|rank|lane|thread|block|row|column|col|"
                      r"[a-z ]*loss|n|N|k|i|j|x|y)\s*$", re.I)
DEVICE = re.compile(r"NVIDIA|GeForce|RTX|Tesla|\b(H100|H200|A100|A10G?|L4|T4|V100|B200|GH200)\b|\bCPU\b")


class FigureIllegible(AssertionError):
    """A figure the legibility check refuses; the message lists every problem."""


def drawing(fig):
    """Mark ``fig`` as a drawing (it explains, it measures nothing): it needs to name no device."""
    fig._course_drawing = True
    return fig


def _visible_labels(axis):
    """The tick labels drawn: visible, not empty, and at a tick inside the axis' view (the locator also
    places ticks beyond it, whose labels matplotlib keeps but does not draw)."""
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(abs(lo), abs(hi), 1.0)
    out = []
    for ticks in (axis.get_major_ticks(), axis.get_minor_ticks()):
        for tick in ticks:
            loc = tick.get_loc()
            if loc is None or not lo - eps <= loc <= hi + eps:
                continue
            out += [t for t in (tick.label1, tick.label2) if t.get_visible() and t.get_text().strip()]
    return out


def _numeric(texts) -> bool:
    def num(s):
        s = s.replace("\u2212", "-").replace("$", "").replace("\\mathdefault{", "").replace("}", "")
        s = s.replace("{", "").replace("^", "e").replace(",", "").replace("×", "").strip()
        try:
            float(s.replace("10e", "1e"))
            return True
        except ValueError:
            return False
    return bool(texts) and all(num(t.get_text()) for t in texts)


def _overlaps(a, b, tol: float = 1.0) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tol) and (min(a.y1, b.y1) - max(a.y0, b.y0) > tol)


def problems(fig, renderer=None, device: bool | None = None) -> list:
    """What makes ``fig`` hard to read, one line each (empty: legible). ``renderer``: the one that just
    drew it (else the figure is drawn here). ``device``: whether the figure must name a device (default:
    unless it is a :func:`drawing` or has no numeric axis)."""
    from matplotlib.text import Text
    if renderer is None:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
    out, numeric_axes = [], 0
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison or ax.get_label() == "<colorbar>":
            continue
        texts = [t for axis in (ax.xaxis, ax.yaxis) for t in _visible_labels(axis)]
        texts += [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        texts += [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_visible() and t.get_text().strip()]
        boxes = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in texts]
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            boxes.append(("the legend", legend.get_window_extent(renderer)))
        for i, (s1, b1) in enumerate(boxes):
            for s2, b2 in boxes[i + 1:]:
                if _overlaps(b1, b2):
                    out.append(f"overlapping text: {s1!r} and {s2!r}")
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            ticks = _visible_labels(axis)
            if not _numeric(ticks):
                continue
            numeric_axes += 1
            label = axis.get_label().get_text().strip()
            if not label:
                out.append(f"no axis label: the {name} axis of {ax.get_title() or 'a plot'!r}")
            elif not (UNIT.search(label) or UNITLESS.match(label)):
                out.append(f"no unit: the {name} axis {label!r} (name it in parentheses, e.g. 'time (ms)')")
    if device is None:
        device = numeric_axes > 0 and not getattr(fig, "_course_drawing", False)
    if device:
        from .mode import device_name
        words = " ".join(t.get_text() for t in fig.findobj(Text) if t.get_visible())
        if not (DEVICE.search(words) or device_name() in words):
            out.append("no device: name the device measured in the title (e.g. utils.device_name())")
    return list(dict.fromkeys(out))


def check_legible(fig, device: bool | None = None):
    """Draw ``fig`` and raise :class:`FigureIllegible` listing its :func:`problems`; returns ``fig``."""
    found = problems(fig, device=device)
    if found:
        raise FigureIllegible("the figure is hard to read:\n  " + "\n  ".join(found))
    return fig


@contextlib.contextmanager
def unchecked(fig):
    """Draws of ``fig`` inside this block are not checked: a helper that draws to measure its texts before it
    moves them (``plots.declutter``)."""
    fig._course_unchecked = True
    try:
        yield fig
    finally:
        fig._course_unchecked = False


def _on_draw(event):
    fig = event.canvas.figure
    if getattr(fig, "_course_unchecked", False):
        return
    found = problems(fig, renderer=event.renderer)
    if not found:
        return
    msg = "the figure is hard to read:\n  " + "\n  ".join(found)
    if os.environ.get(ENV) == "1":
        raise FigureIllegible(msg)
    warnings.warn(msg, stacklevel=2)


def watch(fig):
    """The ``figure.hooks`` hook: check ``fig`` each time it is drawn (see the module's text)."""
    if os.environ.get(ENV) != "0":
        fig.canvas.mpl_connect("draw_event", _on_draw)
