"""The notebooks' key results drawn: grouped bars whose names never collide (``grouped_hbars``), the
measured ceilings against the spec sheet (``plot_ceilings``), attention's memory against N
(``plot_attention_memory``), the online softmax's running maximum and sum block by block
(``online_softmax_trace``, ``plot_online_softmax``), which thread computed which element (``plot_who_computed``),
and ``declutter``, which moves or drops notes that would cover one another.
Each returns its figure, which :mod:`gpu_course.figures` checks for legibility where it is shown.

>>> import matplotlib; matplotlib.use("Agg")
>>> from gpu_course.figures import problems
>>> fig = grouped_hbars(["a long kernel name", "another long kernel name"], {"4096³": [1, 2], "8192³": [2, 3]},
...                     "TFLOP/s", "a ladder on NVIDIA H200")
>>> problems(fig)
[]
"""
from __future__ import annotations


def grouped_hbars(names: list, series: dict, xlabel: str, title: str, ref: dict | None = None, ax=None,
                  highlight=()):
    """Horizontal bars, one row per name (top to bottom) and one bar per series in each row (``series``:
    {label: [value per name]}; a value of None or 0 draws nothing), the names as y tick labels, so no two
    collide however long. ``ref``: {label: x} vertical reference lines (a spec-sheet peak). Rows in
    ``highlight`` get a bold name (the baselines). Returns the figure."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.2 * len(names) * max(2, len(series)) + 1.2))
    fig, k = ax.figure, len(series)
    h = 0.8 / k
    for j, (label, vals) in enumerate(series.items()):
        ys = [i + h * (j - (k - 1) / 2) for i in range(len(names))]
        ax.barh(ys, [v or 0 for v in vals], height=h, label=label)
    for j, (label, x) in enumerate((ref or {}).items()):
        ax.axvline(x, color="k", lw=1, ls=("--", ":", "-.")[j % 3], label=label)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for t in ax.get_yticklabels():
        if t.get_text() in highlight:
            t.set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)   # beside the bars
    fig.tight_layout()
    return fig


def plot_ceilings(ceil: dict, rounds: dict, spec: dict, title: str):
    """Each measured ceiling (median, and its rounds' lowest to highest as a whisker) as a share of the
    spec sheet's peak ``spec`` (kinds without a peak are left out); the tick labels give both figures.
    Returns the figure."""
    import matplotlib.pyplot as plt
    from .timing import fmt_num
    kinds = [k for k in ("copy", "fp32", "tf32", "fp16", "bf16") if k in ceil and spec.get(k)]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    share = [100 * ceil[k] / spec[k] for k in kinds]
    lo = [100 * min(rounds.get(k, [ceil[k]])) / spec[k] for k in kinds]
    hi = [100 * max(rounds.get(k, [ceil[k]])) / spec[k] for k in kinds]
    ax.bar(range(len(kinds)), share, color=["tab:orange" if k == "copy" else "tab:blue" for k in kinds],
           yerr=[[max(0, s - a) for s, a in zip(share, lo)], [max(0, b - s) for s, b in zip(share, hi)]], capsize=4)
    unit = lambda k: "GB/s" if k == "copy" else "TFLOP/s"   # noqa: E731
    ax.set_xticks(range(len(kinds)), [f"{k}\n{fmt_num(ceil[k])} of {fmt_num(spec[k])}\n{unit(k)}" for k in kinds],
                  fontsize=8)
    ax.axhline(100, color="k", lw=1, ls="--", label="the spec sheet's peak")
    ax.set_ylim(0, 110)
    ax.set_ylabel("measured / spec sheet (%)")
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def attention_bytes(n: int, batch: int, heads: int, d: int) -> tuple:
    """The formulas' bytes at sequence length ``n`` in fp16: (naive: S and P, two N × N tensors at once;
    flash: the output and one fp32 log-sum-exp per row).

    >>> attention_bytes(1024, 1, 1, 64)
    (4194304, 135168)
    """
    return 2 * batch * heads * n * n * 2, batch * heads * n * (2 * d + 4)


def plot_attention_memory(sizes: list, batch: int, heads: int, d: int, rows: list | None, title: str):
    """Peak memory of the forward against N (log-log): the formulas as lines (N² for naive, N for flash),
    the measured ``rows`` (``forward_memory``'s, bytes; None: none measured) as points; a naive size
    that ran out of memory is marked on the top edge. Returns the figure."""
    import math
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    gib = 2 ** 30
    naive, flash = zip(*(attention_bytes(n, batch, heads, d) for n in sizes))
    ax.loglog(sizes, [b / gib for b in naive], "-", color="tab:red", label="naive, formula: 2·B·H·N²·2 bytes")
    ax.loglog(sizes, [b / gib for b in flash], "-", color="tab:blue", label="flash, formula: B·H·N·(2d + 4) bytes")
    for r in rows or []:
        for key, color, name in (("naive", "tab:red", "naive, measured"),
                                 ("ours", "tab:blue", "flash (ours), measured")):
            if math.isinf(r[key]):
                ax.plot(r["n"], max(naive) / gib, "x", color=color, ms=9, label="naive: out of memory")
            else:
                ax.plot(r["n"], r[key] / gib, "o", color=color, mfc="none", ms=8, label=name)
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))
    ax.legend(keep.values(), keep.keys(), fontsize=8, loc="upper left")
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.minorticks_off()
    ax.set(xlabel="sequence length N (tokens)", ylabel="peak memory above the inputs (GiB)")
    ax.set_title(title, fontsize=9, loc="left")
    fig.tight_layout()
    return fig


def declutter(ax, notes: list, offsets=((6, 4), (6, -12), (-8, 10), (-8, -14), (12, 16), (-14, 18))):
    """Move each annotation of ``notes`` (in order of importance) through ``offsets`` (points) until it
    covers no earlier one nor the legend and stays inside the axes; one that fits nowhere is removed. Returns the
    notes kept."""
    from matplotlib.text import Text
    from .figures import unchecked
    fig = ax.figure
    with unchecked(fig):   # this draw measures the notes where they start, before they move
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    kept, boxes = [], []
    if ax.get_legend() is not None:   # a note never goes under the legend
        boxes.append(ax.get_legend().get_window_extent(renderer))
    for note in notes:
        for off in offsets:
            note.set_position(off)
            if off[0] < 0:
                note.set_horizontalalignment("right")
            else:
                note.set_horizontalalignment("left")
            box, inside = Text.get_window_extent(note, renderer), ax.bbox
            fits = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if fits and not any(box.overlaps(b) for b in boxes):
                boxes.append(box)
                kept.append(note)
                break
        else:
            note.remove()
    return kept


def plot_fusion_bytes(rows: dict, title: str):
    """Bytes each kernel moves per element, one bar per way of running (``rows``: {label: [(kernel, bytes)]}),
    each kernel a segment named inside it. A drawing from the graph (nothing timed): returns the figure."""
    import matplotlib.pyplot as plt
    from .figures import drawing
    fig, ax = plt.subplots(figsize=(9, 0.7 * len(rows) + 1.3))
    for row, (label, kernels) in enumerate(rows.items()):
        left = 0
        for k, (name, nbytes) in enumerate(kernels):
            ax.barh(row, nbytes, left=left, height=0.6, color=f"C{k % 10}", edgecolor="white")
            ax.text(left + nbytes / 2, row, f"{name}\n{nbytes} B", ha="center", va="center", fontsize=7)
            left += nbytes
        ax.text(left + 0.5, row, f"{left} B", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), list(rows))
    ax.invert_yaxis()
    ax.set_xlim(0, max(sum(b for _, b in ks) for ks in rows.values()) * 1.1)
    ax.set_xlabel("bytes moved per element (read + written)")
    ax.set_title(title, fontsize=9, loc="left")
    fig.tight_layout()
    return drawing(fig)


def plot_who_computed(ids, threads, title: str):
    """:func:`gpu_course.lessons.numba_cuda.who_computed`'s answer drawn: each output element coloured by
    its block and labelled with blockIdx (x,y) above threadIdx (x,y); lines at the blocks' edges. A drawing
    (the same on every machine): returns the figure."""
    import matplotlib.pyplot as plt
    _, h, w = ids.shape
    bx, by, tx, ty = (ids[k].numpy() for k in range(4))
    fig, ax = plt.subplots(figsize=(0.55 * w + 1.5, 0.55 * h + 1.3))
    ax.imshow((by * (bx.max() + 1) + bx) % 20, cmap="tab20", vmin=0, vmax=19)
    for r in range(h):
        for c in range(w):
            ax.text(c, r, f"{bx[r, c]},{by[r, c]}\n{tx[r, c]},{ty[r, c]}", ha="center", va="center", fontsize=6.5)
    for x in range(threads[0], w, threads[0]):
        ax.axvline(x - 0.5, color="k", lw=1.5)
    for y in range(threads[1], h, threads[1]):
        ax.axhline(y - 0.5, color="k", lw=1.5)
    ax.set_xticks(range(w)), ax.set_yticks(range(h))
    ax.tick_params(labelsize=7)
    ax.set(xlabel="column (x)", ylabel="row (y)")
    ax.set_title(title, fontsize=9, loc="left")
    fig.tight_layout()
    from .figures import drawing
    return drawing(fig)


def online_softmax_trace(scores, block: int) -> list:
    """The online softmax of one row of ``scores`` (a 1-D tensor) taken ``block`` scores at a time, as notebook 11's
    kernels run it: after each block, ``{"block_max", "m", "alpha", "l"}``: the block's largest score, the running
    maximum, the factor ``alpha = exp(m_old - m_new)`` that rescaled the sum so far (1 where the maximum did not grow;
    0 at the first block, whose old sum is empty), and the running sum ``l`` of ``exp(s - m)`` in float64.

    >>> import torch
    >>> [round(t["alpha"], 3) for t in online_softmax_trace(torch.tensor([0.0, 1.0, 3.0, 2.0]), 2)]
    [0.0, 0.135]
    """
    import math
    s = [float(v) for v in scores]
    m, l, out = -math.inf, 0.0, []
    for b in range(0, len(s), block):
        part = s[b:b + block]
        m_new = max(m, max(part))
        alpha = math.exp(m - m_new)           # exp(-inf) = 0 at the first block
        l = alpha * l + sum(math.exp(x - m_new) for x in part)
        m = m_new
        out.append({"block_max": max(part), "m": m, "alpha": alpha, "l": l})
    return out


def plot_online_softmax(scores, trace: list, block: int, title: str):
    """:func:`online_softmax_trace` drawn. Top: the scores by key, the running maximum after each block as a step, the
    blocks whose maximum grew marked with their rescaling factor alpha. Bottom: the running sum ℓ after each block
    (relative to that block's m) and the same sum relative to the final m, ``ℓ * exp(m - m_final)``, which climbs to
    the exact sum (dashed). A drawing: the same on every machine. Returns the figure."""
    import math
    import matplotlib.pyplot as plt
    s = [float(v) for v in scores]
    m_final = trace[-1]["m"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.6), gridspec_kw={"height_ratios": [3, 2]})
    top.plot(range(len(s)), s, ".", color="tab:gray", label="score of key j")
    top.set_ylim(min(s) - 0.5, max(s) + 1.6)             # room above the highest step for its note and the block names
    for b, t in enumerate(trace):
        lo, hi = b * block - 0.5, min(len(s), (b + 1) * block) - 0.5
        top.hlines(t["m"], lo, hi, color="tab:red", lw=2, label="running maximum m after the block")
        if b and t["alpha"] < 1:
            top.annotate(f"α = {t['alpha']:.2f}", (hi, t["m"]), xytext=(-4, 6), textcoords="offset points",
                         ha="right", fontsize=8, color="tab:red")
        if b:
            top.axvline(lo, color="k", lw=0.5, ls=":")
        top.text((lo + hi) / 2, max(s) + 1.5, f"block {b}", ha="center", va="top", fontsize=7)
    handles, labels = top.get_legend_handles_labels()
    keep = dict(zip(labels, handles))
    top.legend(keep.values(), keep.keys(), fontsize=8, loc="upper left",
               bbox_to_anchor=(0, 0.92))                  # under the block names
    top.set(xlabel="key (index j)", ylabel="score (logit)")
    top.set_title(title, fontsize=9, loc="left")
    blocks = range(len(trace))
    bottom.bar(blocks, [t["l"] for t in trace], color="tab:blue", alpha=0.35,
               label="running sum ℓ, relative to the current m")
    bottom.plot(blocks, [t["l"] * math.exp(t["m"] - m_final) for t in trace], "o-", color="tab:blue",
                label="ℓ · exp(m − m_final): the same sum relative to the final m")
    exact = sum(math.exp(x - m_final) for x in s)
    bottom.axhline(exact, color="k", ls="--", lw=1, label="Σ exp(s − max s), all keys at once")
    bottom.set_xticks(list(blocks))
    bottom.set_ylim(0, 1.9 * max(max(t["l"] for t in trace), exact))   # the legend above the bars
    bottom.set(xlabel="block (index)", ylabel="ℓ (no unit)")
    bottom.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    from .figures import drawing
    return drawing(fig)
