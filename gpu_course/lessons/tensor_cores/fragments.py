"""What notebook 12 draws and asks about the tensor cores' fragments: the lane layouts ``fragment_layouts`` measures
(and their drawing), the rows ``ldmatrix`` reads and the shared-memory banks they hit (with and without a swizzle),
and the smallest block tile that keeps the tensor cores fed."""
from __future__ import annotations

import math


def layout_grids(mod, like) -> dict:
    """The lane layouts that ``fragment_layouts`` (tc_common.cuh) measures, as ``{name: (lane grid, element grid)}``
    of int tensors on the CPU: the WMMA accumulator (16 x 16), and mma.m16n8k16's A (16 x 16), B (16 x 8) and C
    (16 x 8). ``like`` is any tensor on the device to run on."""
    names = ["WMMA accumulator 16x16 (float)", "mma.sync m16n8k16: A 16x16", "mma.sync m16n8k16: B 16x8",
             "mma.sync m16n8k16: C 16x8"]
    out = {}
    for name, grid in zip(names, mod.fragment_layouts(like)):
        g = grid.cpu().to(dtype=grid.dtype).round().long()
        if bool((g < 0).any()):
            raise RuntimeError(f"layout_grids: no lane wrote some elements of {name}")
        out[name] = (g // 16, g % 16)
    return out


def draw_layouts(grids: dict, title: str = ""):
    """Draw :func:`layout_grids`' tiles side by side, each element coloured by the lane that holds it and labelled
    with that lane's number (and, small, the element's index in the lane's fragment). Returns the figure."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(grids), figsize=(4.2 * len(grids), 4.6),
                             gridspec_kw={"width_ratios": [g[0].shape[1] for g in grids.values()]})
    for ax, (name, (lanes, elems)) in zip(axes, grids.items()):
        ax.imshow(lanes.numpy(), cmap="tab20b", vmin=0, vmax=31)
        for r in range(lanes.shape[0]):
            for c in range(lanes.shape[1]):
                ax.text(c, r - 0.12, str(int(lanes[r, c])), ha="center", va="center", fontsize=6.5, color="white")
                ax.text(c, r + 0.3, str(int(elems[r, c])), ha="center", va="center", fontsize=4.5, color="white")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(lanes.shape[1]))
        ax.set_yticks(range(lanes.shape[0]))
        ax.tick_params(labelsize=6)
        ax.set_xlabel("column")
        ax.set_ylabel("row")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    from ...figures import drawing
    return drawing(fig)   # a layout: the same on every GPU, it names none


def ldmatrix_rows(r0: int, c0: int) -> list:
    """(row, 16-byte piece) that each lane of a warp gives ``ldmatrix.x4`` when it loads an A fragment (16 x 16
    halves) whose top left is row ``r0``, piece ``c0`` of a tile of 128-byte rows, as rung 3 does: lane l gives row
    r0 + l % 16, piece c0 + l / 16. The hardware reads the rows of lanes 8j .. 8j + 7 (matrix j) in one pass.

    >>> ldmatrix_rows(0, 0)[:3], ldmatrix_rows(0, 0)[16]
    ([(0, 0), (1, 0), (2, 0)], (0, 1))
    """
    return [(r0 + lane % 16, c0 + lane // 16) for lane in range(32)]


def banks_of(row: int, piece: int, row_bytes: int = 128) -> set:
    """The 4 shared-memory banks (of 32, 4 bytes each) that the 16 bytes at (row, piece) of a tile with rows
    ``row_bytes`` long occupy, the tile starting at a bank-0 address.

    >>> sorted(banks_of(0, 1)), sorted(banks_of(1, 0))
    ([4, 5, 6, 7], [0, 1, 2, 3])
    """
    start = (row * row_bytes + piece * 16) // 4
    return {(start + i) % 32 for i in range(4)}


def ldmatrix_conflicts(swizzle, r0: int = 0, c0: int = 0, row_bytes: int = 128) -> list:
    """The bank conflicts of an ``ldmatrix.x4`` from a tile with rows ``row_bytes`` long (128: rung 3's 64 halves; 64:
    a tile 32 halves wide) whose piece p of row r is stored at piece ``swizzle(r, p)`` of that row: a list of
    (matrix j, lane a, lane b, shared banks) for each pair of lanes of one matrix (one pass of the hardware) whose 16
    bytes share a bank. Empty: conflict-free.

    >>> len(ldmatrix_conflicts(lambda r, p: p)) > 0, ldmatrix_conflicts(lambda r, p: p ^ (r % 8))
    (True, [])
    >>> len(ldmatrix_conflicts(lambda r, p: p, row_bytes=64)) > 0
    True
    """
    rows = ldmatrix_rows(r0, c0)
    found = []
    for j in range(4):
        lanes = range(8 * j, 8 * j + 8)
        banks = {lane: banks_of(rows[lane][0], swizzle(*rows[lane]), row_bytes) for lane in lanes}
        for a in lanes:
            for b in lanes:
                if a < b and banks[a] & banks[b]:
                    found.append((j, a, b, sorted(banks[a] & banks[b])))
    return found



def smallest_square_tile(flop_per_clock: float, bytes_per_clock: float) -> int:
    """The side ``b`` (a multiple of 16) of the smallest square block tile with which an SM receiving
    ``bytes_per_clock`` bytes of fp16 ``m`` and ``n`` a clock keeps its tensor cores at ``flop_per_clock`` FLOP a
    clock: a k-step of ``bk`` brings ``2 b bk 2`` bytes for ``2 b² bk`` FLOP, ``b / 2`` FLOP per byte (``bk``
    cancels), which must reach ``flop_per_clock / bytes_per_clock``: ``b >= 2 flop_per_clock / bytes_per_clock``.

    >>> smallest_square_tile(4096, 64), smallest_square_tile(4096, 48)
    (128, 176)
    """
    need = 2 * flop_per_clock / bytes_per_clock        # the side that does exactly the FLOP per byte asked
    return 16 * max(1, math.ceil(need / 16 - 1e-9))
