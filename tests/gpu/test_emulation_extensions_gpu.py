"""The extension idioms of tests/fixtures/extension_idioms.cu (cooperative groups, `#if __CUDA_ARCH__ >= 800`,
__activemask() in a branch, CUDA guards and the current stream with cudaMemsetAsync/cudaMemcpyAsync, bf16)
built by load_cuda on a real GPU and checked against torch by the same checks as the CPU emulation's
(tests/unit/test_emulation_extensions.py). Skipped on the CPU; on a GPU machine:
`python -m pytest -p no:cacheprovider tests/gpu/test_emulation_extensions_gpu.py`."""
import sys
from pathlib import Path

import pytest
import torch

import utils

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import extension_idioms as idioms  # noqa: E402

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.fixture(scope="module")
def m():
    return utils.load_cuda(utils.cuda_begin + idioms.SRC, idioms.CPP, idioms.FUNCS)


def test_cuda_arch_is_a_modern_gpus(m):
    """The kernel runs code built for this GPU, sm_80 or newer, as the emulation's 800 stands for."""
    major, minor = torch.cuda.get_device_capability()
    assert 800 <= m.cuda_arch(torch.zeros(1, device="cuda")) <= 100 * major + 10 * minor


@pytest.mark.parametrize("check", [idioms.check_reduce_int, idioms.check_reduce_float, idioms.check_tile_ops,
                                   idioms.check_filter, idioms.check_branch_ballot, idioms.check_bf16,
                                   idioms.check_stream])
def test_idiom_matches_torch(m, check):
    check(m, "cuda")
    torch.cuda.synchronize()


def test_on_a_side_stream(m):
    """The current stream is the one torch.cuda.stream(s) sets: launches and the *Async calls follow it."""
    s = torch.cuda.Stream()
    x = torch.randn(1 << 20, device="cuda")
    with torch.cuda.stream(s):
        y, copy = m.axpy_stream(x, 2.0)
    s.synchronize()
    torch.testing.assert_close(y, 2.0 * x)
    assert torch.equal(copy, y)
