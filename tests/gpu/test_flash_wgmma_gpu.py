"""The CUDA C++ attention forward (gpu_course/kernels/flash_wgmma.py) on an sm_90 GPU: both schedules against a
float64 reference at sizes no tile divides (q and keys of different lengths, one key, a poisoned output), and the
preconditions it states as clear errors. Skipped on the CPU and on GPUs other than sm_90."""
import math

import pytest
import torch

import utils
from gpu_course.kernels import flash_wgmma as F

OK, WHY = F.runs_here() if utils.ON_GPU else (False, "needs a GPU (gpu mode)")
pytestmark = pytest.mark.skipif(not OK, reason=WHY)


@pytest.fixture(scope="module")
def mod():
    return F.build()


def _qkv(b, h, nq, nk, d):
    g = torch.Generator(device="cuda").manual_seed(nq * 7 + nk)
    return [torch.randn(b, h, n, d, device="cuda", dtype=torch.float16, generator=g) for n in (nq, nk, nk)]


@pytest.mark.parametrize("pingpong", sorted(F.SCHEDULES))
@pytest.mark.parametrize("b, h, nq, nk, d", [(1, 1, 128, 128, 64), (2, 3, 1000, 1000, 64), (1, 2, 777, 777, 128),
                                             (2, 2, 300, 517, 128), (1, 1, 64, 1, 64), (2, 2, 129, 2049, 64)])
def test_matches_float64(mod, pingpong, b, h, nq, nk, d):
    q, k, v = _qkv(b, h, nq, nk, d)
    want = torch.softmax(q.double() @ k.double().transpose(-1, -2) / math.sqrt(d), -1) @ v.double()
    out = F.forward(mod, q, k, v, pingpong, out=utils.poisoned(b, h, nq, d, dtype=torch.float16))
    utils.check(out, want, atol=4e-3, rtol=1e-2, name=f"flash_wgmma {b}x{h}x{nq}x{nk}x{d} pingpong {pingpong}")


def test_preconditions_give_clear_errors(mod):
    q, k, v = _qkv(1, 2, 64, 64, 64)
    with pytest.raises(RuntimeError, match="d must be 64 or 128"):
        mod.flash_wgmma(*(torch.zeros(1, 2, 64, 32, device="cuda", dtype=torch.float16) for _ in range(4)), 0)
    with pytest.raises(RuntimeError, match="float16"):
        mod.flash_wgmma(q.float(), k, v, torch.empty_like(q), 0)
    with pytest.raises(RuntimeError, match="k and v must be"):
        mod.flash_wgmma(q, k[:, :1], v, torch.empty_like(q), 0)
    with pytest.raises(ValueError, match="pingpong must be one of"):
        F.forward(mod, q, k, v, pingpong=2)
    torch.cuda.synchronize()   # no launch failed
