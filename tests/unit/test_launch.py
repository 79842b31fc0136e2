"""Unit tests of gpu_course/launch.py (CPU; the GPU branches run in tests/gpu and the notebooks)."""
import pytest
import torch

import utils


def test_dim3():
    assert utils.dim3(16) == (16, 1, 1)
    d = utils.dim3(4, 2)
    assert (d.x, d.y, d.z) == (4, 2, 1)
    assert utils.dim3(1, 2, 3).z == 3

@pytest.mark.parametrize("a,b,want", [(0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2),
                                      (10**8, 256, 390625), (10**8 + 1, 256, 390626)])
def test_cdiv(a, b, want):
    assert utils.cdiv(a, b) == want

@pytest.mark.parametrize("a,b,err", [(5, 0, ValueError), (5, -2, ValueError),
                                     (5.0, 2, TypeError), (5, True, TypeError)])
def test_cdiv_rejects(a, b, err):
    with pytest.raises(err):
        utils.cdiv(a, b)

def test_to_numba_shares_memory():
    t = torch.zeros(4, device=utils.DEVICE)
    a = utils.to_numba(t)
    if not utils.ON_GPU:
        a[1] = 5.0
        assert t[1].item() == 5.0
    assert a.shape == (4,)
