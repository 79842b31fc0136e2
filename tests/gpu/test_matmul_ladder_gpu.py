"""Notebook 04's matmul ladder on a real GPU: every rung and tile shape (rungs 9 and 10 included) against
float64 at sizes no tile divides, on the float4 path and off it; rung 9's autotuner on a real size.
Skipped on the CPU (tests/unit runs the same checks through the emulation)."""
import pytest
import torch

import utils
from gpu_course.kernels import matmul_ladder

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.fixture(scope="module")
def ladder():
    return matmul_ladder.build()


@pytest.mark.parametrize("h, k, w", [(1000, 777, 555), (1000, 776, 556), (257, 131, 67), (129, 4100, 260)])
def test_every_tile_shape_matches_float64(ladder, h, k, w):
    m, n = torch.randn(h, k, device="cuda"), torch.randn(k, w, device="cuda")
    ref = m.double() @ n.double()
    for rung, shapes in matmul_ladder.RUNG_CONFIGS.items():
        for cfg, shape in enumerate(shapes):
            utils.check(ladder.matmul_rung_cfg(m, n, utils.poisoned(h, w), rung, cfg), ref, **utils.dot_tol(k),
                        name=f"rung {rung} cfg {cfg} ({shape}) at {h}x{k}x{w}")


def test_warptiling_without_float4(ladder):
    h, k, w = 300, 264, 200   # rows a multiple of 4 floats, bases 4 bytes past a 16-byte boundary
    m = torch.randn(h * k + 1, device="cuda")[1:].view(h, k)
    n = torch.randn(k * w + 1, device="cuda")[1:].view(k, w)
    ref = m.double() @ n.double()
    for rung in (9, 10):
        for cfg in range(len(matmul_ladder.RUNG_CONFIGS[rung])):
            utils.check(ladder.matmul_rung_cfg(m, n, utils.poisoned(h, w), rung, cfg), ref, **utils.dot_tol(k),
                        name=f"rung {rung} cfg {cfg}, misaligned")


def test_autotune_rung9_on_a_real_size(ladder):
    m, n = torch.randn(1024, 512, device="cuda"), torch.randn(512, 768, device="cuda")
    tuned = matmul_ladder.autotune_rung9(m, n, mod=ladder, retune=True)
    assert all(t.on_gpu and t.n >= 5 for _, _, t in tuned.table)
    assert [row[0] for row in tuned.table] == list(range(len(matmul_ladder.RUNG9_SHAPES)))   # every shape timed
    assert matmul_ladder.autotune_rung9(m, n, mod=None, bench=None) is tuned                  # and kept
    assert "TFLOP/s" in str(tuned)
