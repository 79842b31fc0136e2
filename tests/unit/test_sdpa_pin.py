"""gpu_course.sdpa_pin.pin: the SDPA backend flags it sets inside the block, the ones it restores after (an exception
included), reuse of one pin for many calls, and a clear error for a backend that does not exist."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu_course.sdpa_pin import pin

NAMES = ("flash", "mem_efficient", "math", "cudnn")


def flags():
    return {n: getattr(torch._C, f"_get_{n}_sdp_enabled")() for n in NAMES}


@pytest.mark.parametrize("backend, name", [("FLASH_ATTENTION", "flash"), ("EFFICIENT_ATTENTION", "mem_efficient"),
                                           ("MATH", "math"), ("CUDNN_ATTENTION", "cudnn")])
def test_inside_the_block_only_that_backend_is_on_as_with_sdpa_kernel(backend, name):
    before = flags()
    with sdpa_kernel(getattr(SDPBackend, backend)):
        theirs = flags()
    p = pin(backend)
    for _ in range(2):                       # one pin, entered again and again
        with p:
            assert flags() == theirs and [n for n, on in flags().items() if on] == [name]
        assert flags() == before


def test_an_exception_inside_restores_the_flags():
    before = flags()
    with pytest.raises(ZeroDivisionError), pin("MATH"):
        1 / 0
    assert flags() == before


def test_sdpa_runs_inside_it_and_an_unknown_backend_is_refused():
    q = torch.randn(1, 2, 5, 8)
    with pin("MATH"):
        torch.testing.assert_close(F.scaled_dot_product_attention(q, q, q), torch.softmax(q @ q.mT / 8 ** 0.5, -1) @ q)
    with pytest.raises(ValueError, match="unknown SDPA backend 'FAST'"):
        pin("FAST")
