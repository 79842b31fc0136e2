"""Notebook 09's CUDA C: the sum ladder, the scans, the histograms and the image kernels, one file
per step under ``cuda/reduce/``, ``cuda/scan/``, ``cuda/histogram/`` and ``cuda/image/``; a file
includes the ones whose code it uses (``block_sum`` of rung 6, ``sum4`` and ``thread_sum4`` of rung 7),
and :func:`source` joins them in that order.

Host functions (every output is a tensor the caller passes, so checks can hand in poisoned ones):

* ``sum_rung(x, out, rung, blocks)``: the sum of fp32 ``x`` into the one-element ``out`` with rung
  1..8 (:data:`RUNGS`); ``blocks`` is the grid of the grid-stride rungs 5-8. Rungs 2-4 write one
  partial per block and run again on the partials (:func:`tree_grids` gives the passes' grids),
  rungs 5-6 run a second launch of one block over their ``blocks`` partials;
* ``sum_tree_padded(x, out)``: a control for rung 3, not a rung: its tree on a padded shared array (no bank
  conflicts), in the passes of rungs 2-4;
* ``scan_kogge_stone(x, out)`` (n <= 1024), ``scan_brent_kung(x, out)`` (n <= 2048): one block;
  ``scan_three_pass(x, out)``, ``scan_lookback(x, out)``: any n, inclusive, fp32;
* ``histogram(x, counts, lo, hi, privatized, blocks)``: int32 ``counts`` with torch.histc's bins;
* ``rgb_to_grey(rgb, grey)`` (h x w x 3 uint8 -> h x w uint8), ``blur(grey, out, radius)``.

>>> RUNGS[6]
'rung 6 warp shuffles'
>>> rung_file(8)
'reduce/08_last_block.cu'
>>> FUNCS[:2]
['sum_rung', 'scan_kogge_stone']
>>> tree_grids(100_000_000)
[390625, 1526, 6, 1]
"""
from __future__ import annotations

from . import COMMON, cuda_files, cuda_ints, listing as _listing
from .ladder import Ladder, numbered

# The name each rung of the sum is reported under (notebook 09 records its results with these).
RUNGS = {1: "rung 1 atomicAdd per element", 2: "rung 2 tree, divergent warps",
         3: "rung 3 tree, bank conflicts", 4: "rung 4 sequential addressing",
         5: "rung 5 thread coarsening", 6: "rung 6 warp shuffles",
         7: "rung 7 float4, one atomic per block", 8: "rung 8 last block, deterministic"}

SCANS = {"kogge_stone": "scan/01_kogge_stone.cu", "brent_kung": "scan/02_brent_kung.cu",
         "tiles": "scan/03_tiles.cu", "three_pass": "scan/04_three_pass.cu",
         "lookback": "scan/05_lookback.cu"}
HISTOGRAMS = {"global": "histogram/01_global.cu", "privatized": "histogram/02_privatized.cu"}
IMAGES = {"rgb_to_grey": "image/rgb_to_grey.cu", "blur": "image/blur.cu"}
DISPATCHER = "reduce/sum_rung.cu"

FUNCS = ["sum_rung", "scan_kogge_stone", "scan_brent_kung", "scan_three_pass", "scan_lookback",
         "histogram", "rgb_to_grey", "blur", "sum_tree_padded"]


RB = cuda_ints("reduce/01_atomic.cu", "RB")[0]   # threads per block of every rung


def tree_grids(n: int, block: int = RB) -> list:
    """The grid (blocks) of each launch rungs 2-4 make for a sum of ``n`` values: each block sums
    ``block`` values into one partial, and the next launch sums the partials, until one block is left.

    >>> tree_grids(70_001)
    [274, 2, 1]
    """
    if n < 1:
        return []
    grids = []
    while True:
        n = -(-n // block)
        grids.append(n)
        if n == 1:
            return grids


def launches(rung: int, n: int, blocks: int) -> dict:
    """``{kernel name: launches}`` that ``sum_rung(x, out, rung, blocks)`` makes for ``n >= 1`` values.

    >>> launches(4, 70_001, 3), launches(6, 70_001, 3), launches(6, 70_001, 1)
    ({'sum_sequential_k': 3}, {'sum_shuffle_k': 2}, {'sum_shuffle_k': 1})
    """
    kernel = {1: "sum_atomic_k", 2: "sum_tree_divergent_k", 3: "sum_tree_conflicts_k", 4: "sum_sequential_k",
              5: "sum_coarsened_k", 6: "sum_shuffle_k", 7: "sum_float4_k", 8: "sum_last_block_k"}[rung]
    count = len(tree_grids(n)) if rung in (2, 3, 4) else (2 if rung in (5, 6) and blocks > 1 else 1)
    return {kernel: count}


# The sum ladder: rung r is cuda/reduce/0r_*.cu; a build is the whole notebook's (:func:`files`: the dispatcher,
# which includes every rung, then the scans, histograms and image kernels).
LADDER = Ladder("reductions", RUNGS, numbered("reduce"), lambda rungs: list(FUNCS), whole=lambda: files(),
                what="the sum ladder")


def rung_file(rung: int) -> str:
    """The file (under ``gpu_course/kernels/cuda/``) that holds rung ``rung``'s kernel."""
    return LADDER.rung_file(rung)


def rung_source(rung: int) -> str:
    """The CUDA C of one rung of the sum, as notebook 09 prints it."""
    return LADDER.rung_source(rung)


def files() -> list:
    """Every file of the notebook's build (each step of each kernel), in the order :func:`source` joins
    them; a file comes after those it includes."""
    tops = [DISPATCHER, *SCANS.values(), *HISTOGRAMS.values(), *IMAGES.values()]
    return [f for f in cuda_files(*tops) if f != COMMON]


def source() -> str:
    """All of it, ready for ``load_cuda``: ``cuda_begin`` and every file, each after those it includes."""
    return LADDER.source()


def cpp_source(funcs=None) -> str:
    """The declarations of ``funcs`` (default :data:`FUNCS`) for ``load_cuda``'s ``cpp_src``."""
    return LADDER.cpp_source(FUNCS if funcs is None else funcs, source())


def build(**load_cuda_kwargs):
    """Build (or load from the cache) every kernel of notebook 09: a module with :data:`FUNCS`."""
    return LADDER.build(**load_cuda_kwargs)


# ------------------------------------------------------------------ decoupled look-back, walked through
LOOKBACK_EVENTS = (("scan", 1), ("scan", 2), ("scan", 0), ("look", 2), ("look", 1))


def lookback_walk(sums, events=LOOKBACK_EVENTS) -> list:
    """Decoupled look-back (``scan/05_lookback.cu``) on a few tiles, one event at a time, as a list of
    ``(what happened, statuses)``; ``statuses[t]`` is tile t's published ``(flag, value)``, flag one of
    ``"-"`` (nothing yet), ``"AGG"`` (its own total), ``"PREFIX"`` (the sum of it and every tile before).

    ``sums`` are the tiles' totals. An event ``("scan", t)``: tile t has scanned its tile and publishes
    its total (tile 0 publishes it as its PREFIX: nothing comes before it), then looks back once; an
    event ``("look", t)``: tile t looks back again. Looking back, as the kernel's warp does: if a tile
    before it has published nothing, it waits (looks again later); otherwise it adds the values from
    the tile just before it down to the nearest PREFIX, and publishes its own PREFIX.

    >>> [s for _, s in lookback_walk([3, 5, 4])][-1]
    [('PREFIX', 3), ('PREFIX', 8), ('PREFIX', 12)]
    """
    status = [("-", 0)] * len(sums)
    steps = []

    def look(t):
        if status[t][0] == "PREFIX":
            return f"tile {t} is done"
        if any(flag == "-" for flag, _ in status[:t]):
            waiting = max(p for p in range(t) if status[p][0] == "-")
            return f"tile {t} looks back: tile {waiting} has published nothing, so it waits"
        before, used = 0, []
        for p in range(t - 1, -1, -1):
            flag, value = status[p]
            before += value
            used.append(f"{flag} {value} of tile {p}")
            if flag == "PREFIX":
                break
        status[t] = ("PREFIX", before + sums[t])
        return (f"tile {t} looks back: {' + '.join(used)} = {before}; it publishes PREFIX {before} + {sums[t]} "
                f"= {before + sums[t]} and adds {before} to its tile")

    for kind, t in events:
        if not 0 <= t < len(sums) or kind not in ("scan", "look"):
            raise ValueError(f"lookback_walk: bad event {(kind, t)!r} for {len(sums)} tiles")
        if kind == "scan":
            if t == 0:
                status[0] = ("PREFIX", sums[0])
                text = f"tile 0 scans its tile and publishes PREFIX {sums[0]} (no tile before it)"
            else:
                status[t] = ("AGG", sums[t])
                text = f"tile {t} scans its tile and publishes AGG {sums[t]}; " + look(t)
        else:
            text = look(t)
        steps.append((text, list(status)))
    return steps


def plot_lookback(steps, ax=None):
    """Draw :func:`lookback_walk`'s steps: one row per event, one box per tile (grey: nothing published,
    orange: AGG, green: PREFIX), the event's text to the right. Returns the matplotlib axes."""
    import matplotlib.pyplot as plt

    tiles = len(steps[0][1])
    if ax is None:
        _, ax = plt.subplots(figsize=(13, 0.75 * len(steps) + 0.6))
    colours = {"-": "#dddddd", "AGG": "#f5b041", "PREFIX": "#58d68d"}
    for row, (text, status) in enumerate(steps):
        y = len(steps) - 1 - row
        for t, (flag, value) in enumerate(status):
            ax.add_patch(plt.Rectangle((t * 1.1, y + 0.1), 1, 0.8, color=colours[flag]))
            ax.text(t * 1.1 + 0.5, y + 0.5, "-" if flag == "-" else f"{flag}\n{value}", ha="center", va="center",
                    fontsize=9)
        ax.text(tiles * 1.1 + 0.1, y + 0.5, f"{row + 1}. {text}", va="center", fontsize=9, wrap=True)
    for t in range(tiles):
        ax.text(t * 1.1 + 0.5, len(steps) + 0.15, f"tile {t}", ha="center", fontsize=10)
    ax.set_xlim(0, tiles * 1.1 + 9.5)
    ax.set_ylim(0, len(steps) + 0.6)
    ax.axis("off")
    return ax


# ------------------------------------------------------------------ the checks' inputs
def exact_sum_input(n: int, device="cpu"):
    """``n`` fp32 values drawn from {-3, -2, -1, 1, 2, 3} (torch's default generator), on which every
    order of summation gives the exact sum: every partial sum is an integer of magnitude at most
    the sum of the positive values or of the negative ones (about ``n``), and integers below 2**24
    are exact in fp32 (raises ValueError when that bound is not met; for n up to about 1.6e7 it is).
    So a sum can be checked with ``atol=0``, and a lost or doubled element (never 0) changes it.

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> v = exact_sum_input(10)
    >>> sorted(set(v.abs().tolist())) <= [1.0, 2.0, 3.0], v.dtype
    (True, torch.float32)
    """
    import torch

    v = torch.randint(-3, 3, (n,), device=device, dtype=torch.int32)
    v = torch.where(v >= 0, v + 1, v)                        # -3..-1 and 1..3: no zero
    pos, neg = int(v.clamp(min=0).sum()), int((-v).clamp(min=0).sum())
    if max(pos, neg) >= 2**24:
        raise ValueError(f"exact_sum_input: {n:,} values: a partial sum may reach {max(pos, neg):,} >= 2**24, "
                         f"where fp32 stops holding every integer")
    return v.float()


# ------------------------------------------------------------------ the exercises' references and evidence
def segmented_exclusive_scan(x, starts):
    """The exclusive scan of ``x`` restarted at every ``True`` of ``starts`` (element 0 always starts a
    segment): ``out[i]`` is the sum of the elements of i's segment before i, in float64.

    >>> import torch
    >>> segmented_exclusive_scan(torch.tensor([1., 2., 3., 4., 5.]), torch.tensor([0, 0, 1, 0, 0]).bool()).tolist()
    [0.0, 1.0, 0.0, 3.0, 7.0]
    """
    import torch

    xd = x.double().cpu()
    before = torch.cumsum(xd, 0) - xd                        # exclusive scan of the whole array
    idx = torch.arange(len(xd))
    start = torch.where(starts.cpu().bool() | (idx == 0), idx, 0).cummax(0).values   # each element's segment start
    return (before - before[start]).to(x.device)


def kernel_source(path: str, *, max_lines=None) -> str:
    """The CUDA C of ``path`` (as :func:`cuda_source` gives it) without its host functions: the
    top-level functions that are not ``__global__`` or ``__device__`` (the
    launchers and their checks) with the comment lines just above them, which the notebook's text
    does not read, each run of them replaced by a line ``// ... (N lines left out)``:
    :func:`gpu_course.kernels.listing` with no names.

    >>> "void scan_kogge_stone(" in kernel_source(SCANS["kogge_stone"])
    False
    >>> "__global__ void scan_kogge_stone_k(" in kernel_source(SCANS["kogge_stone"])
    True
    """
    return _listing(path, max_lines=max_lines) + "\n"
