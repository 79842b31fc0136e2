"""The grouped order in which notebook 07's matmul (and notebook 15's FP8 matmul) take their tiles: program ``pid``
of a 1D grid computes tile ``(pid_m, pid_n)`` of ``out``, walking ``GROUP_M`` tile rows column by column, so that
the programs running together share strips of ``a`` and of ``b`` in the L2 cache.

:func:`tile_of` is plain Python: notebook 07 runs it on integers to print the order (on any machine, Triton or
not), and the kernels call it compiled, as ``triton.jit(tile_of)`` (``triton_matmul.tile_of_jit``): one
definition for both, so the order printed is the order run.

>>> [tile_of(pid, 3, 2, GROUP_M=2) for pid in range(6)]
[(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
"""
try:   # Triton's interpreter (cpu mode) runs a jit'd function only where triton.language is among its globals
    import triton.language as tl  # noqa: F401
except ImportError:   # no Triton (macOS, Windows): tile_of is plain Python only
    pass


def tile_of(pid, tiles_m, tiles_n, GROUP_M):
    """The tile ``(pid_m, pid_n)`` that program ``pid`` computes, of ``tiles_m x tiles_n`` tiles."""
    in_group = GROUP_M * tiles_n                       # programs per group of GROUP_M tile rows
    first_m = (pid // in_group) * GROUP_M              # the group's first tile row
    group_m = min(tiles_m - first_m, GROUP_M)          # the last group may be shorter
    pid_m = first_m + (pid % in_group) % group_m       # down the group's rows first...
    pid_n = (pid % in_group) // group_m                # ...then the next column
    return pid_m, pid_n


def _sign(v):
    return (v > 0) - (v < 0)


def _gilbert(x, y, ax, ay, bx, by):
    """The cells of the rectangle at (x, y) spanned by the vectors a (major, the walk's direction) and b, in the
    order of a generalized Hilbert curve: each cell next to the one before it (an odd side may cost one diagonal
    step). Cut the rectangle in two along a when it is long (a's half first, then the rest), else in three: up b's
    half, along a, and back down."""
    w, h = abs(ax + ay), abs(bx + by)
    dax, day, dbx, dby = _sign(ax), _sign(ay), _sign(bx), _sign(by)
    if h == 1 or w == 1:                              # a line: walk it
        step, n = ((dax, day), w) if h == 1 else ((dbx, dby), h)
        for i in range(n):
            yield x + i * step[0], y + i * step[1]
        return
    ax2, ay2, bx2, by2 = ax // 2, ay // 2, bx // 2, by // 2
    if 2 * w > 3 * h:                                 # long: two halves along a
        if abs(ax2 + ay2) % 2 and w > 2:              # keep both halves' long sides even where possible
            ax2, ay2 = ax2 + dax, ay2 + day
        yield from _gilbert(x, y, ax2, ay2, bx, by)
        yield from _gilbert(x + ax2, y + ay2, ax - ax2, ay - ay2, bx, by)
        return
    if abs(bx2 + by2) % 2 and h > 2:
        bx2, by2 = bx2 + dbx, by2 + dby
    yield from _gilbert(x, y, bx2, by2, ax2, ay2)                                       # up
    yield from _gilbert(x + bx2, y + by2, ax, ay, bx - bx2, by - by2)                   # across
    yield from _gilbert(x + (ax - dax) + (bx2 - dbx), y + (ay - day) + (by2 - dby),     # back down
                        -bx2, -by2, -(ax - ax2), -(ay - ay2))


def hilbert_order(rows: int, cols: int) -> list:
    """Every cell ``(row, col)`` of a ``rows x cols`` grid once, in the order of a generalized Hilbert curve
    (J. Červený's "gilbert" construction, for any rectangle): consecutive cells are neighbours, and any run of
    consecutive cells stays within a compact patch of rows and columns, which is what the L2 cache wants from
    the tiles running at once.

    >>> hilbert_order(2, 2)
    [(0, 0), (1, 0), (1, 1), (0, 1)]
    >>> sorted(hilbert_order(3, 5)) == [(r, c) for r in range(3) for c in range(5)]
    True
    """
    if rows < 1 or cols < 1:
        raise ValueError(f"hilbert_order: a grid has at least one row and one column, got {rows} x {cols}")
    walk = _gilbert(0, 0, cols, 0, 0, rows) if cols >= rows else _gilbert(0, 0, 0, rows, cols, 0)
    return [(r, c) for c, r in walk]


ORDERS = ("raster", "grouped", "hilbert")


def unit_order(rows: int, cols: int, kind: str = "grouped", group: int = 8) -> list:
    """The order in which a persistent kernel's blocks take the cells ``(row, col)`` of a ``rows x cols`` grid of
    work units: ``raster`` (row by row), ``grouped`` (:func:`tile_of`, ``group`` rows at a time, column by column)
    or ``hilbert`` (:func:`hilbert_order`). Block ``b`` of ``B`` takes cells ``b, b + B, b + 2B, ...`` of the
    list, so the blocks running at once hold a run of consecutive cells.

    >>> unit_order(2, 3, "raster")
    [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    >>> unit_order(2, 3, "grouped", group=2)
    [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    """
    if kind == "raster":
        return [(r, c) for r in range(rows) for c in range(cols)]
    if kind == "grouped":
        return [tile_of(p, rows, cols, group) for p in range(rows * cols)]
    if kind == "hilbert":
        return hilbert_order(rows, cols)
    raise ValueError(f"unit_order: kind must be one of {ORDERS}, got {kind!r}")
