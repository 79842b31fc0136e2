"""The orders in which kernels take their tiles (gpu_course/tile_order.py): every tile once, and the locality each
order is for."""
import pytest

from gpu_course.tile_order import hilbert_order, tile_of, unit_order

GRIDS = [(r, c) for r in (1, 2, 3, 4, 7, 8, 20, 32) for c in (1, 2, 5, 8, 9, 20, 40)]


@pytest.mark.parametrize("rows, cols", GRIDS)
@pytest.mark.parametrize("kind", ["raster", "grouped", "hilbert"])
def test_every_cell_once(kind, rows, cols):
    assert sorted(unit_order(rows, cols, kind)) == [(r, c) for r in range(rows) for c in range(cols)]


@pytest.mark.parametrize("rows, cols", GRIDS)
def test_hilbert_steps_to_a_neighbour(rows, cols):
    """Each step goes to a neighbouring cell, but for one diagonal step where the long side is odd and the short
    one even (the generalized curve's documented exception)."""
    walk = hilbert_order(rows, cols)
    far = [(p, q) for p, q in zip(walk, walk[1:]) if abs(p[0] - q[0]) + abs(p[1] - q[1]) != 1]
    long_side, short_side = max(rows, cols), min(rows, cols)
    allowed = 1 if long_side % 2 and not short_side % 2 else 0
    assert len(far) <= allowed and all(abs(p[0] - q[0]) == abs(p[1] - q[1]) == 1 for p, q in far)


def _footprint(order, run):
    """How many distinct rows plus columns ``run`` consecutive cells of ``order`` touch, on average over the
    order's runs: the strips of the two operands that the blocks running at once read."""
    runs = [order[i:i + run] for i in range(0, len(order) - run + 1, run)]
    return sum(len({r for r, _ in cells}) + len({c for _, c in cells}) for cells in runs) / len(runs)


def test_hilbert_and_grouped_runs_touch_fewer_strips_than_raster():
    """66 units at once (an H100's clusters of two) on a 32 x 32 grid of units: a raster run spans two rows and
    every column (35 strips), grouped and Hilbert runs compact patches (about 19 and 20)."""
    raster, grouped, hilbert = (_footprint(unit_order(32, 32, k), 66) for k in ("raster", "grouped", "hilbert"))
    assert raster == 35 and grouped < 0.6 * raster and hilbert < 0.6 * raster, (raster, grouped, hilbert)


def test_grouped_is_tile_of():
    assert unit_order(5, 3, "grouped", group=2) == [tile_of(p, 5, 3, 2) for p in range(15)]


def test_bad_input_says_what_is_wrong():
    with pytest.raises(ValueError, match="kind must be one of"):
        unit_order(2, 2, "zigzag")
    with pytest.raises(ValueError, match="at least one row"):
        hilbert_order(0, 3)
