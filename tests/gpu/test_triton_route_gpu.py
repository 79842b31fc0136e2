"""The softmax's and the means' C++ route on a real GPU: once built, a call of a kind seen before goes through it
and returns what the Python launchers return (bit for bit, but for the atomic mean's order of additions), on
shapes that are not multiples of the block. Skipped on the CPU (tests/unit/test_softmax_mean_route.py fakes it)."""
import pytest
import torch

import utils
from gpu_course.kernels import triton_mean as tmean
from gpu_course.kernels import triton_softmax as ts

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.fixture(scope="module", autouse=True)
def built():
    assert ts.build_route(), ts.ROUTE.why


@pytest.mark.parametrize("shape, view", [((37, 300), False), ((1000, 4096), False), ((513, 777), True)])
def test_softmax_through_the_route_is_the_python_paths_result(shape, view):
    x = torch.randn(shape[0], shape[1] + (5 if view else 0), device="cuda")
    x = x[:, :shape[1]] if view else x                        # rows farther apart than their length
    with ts.ROUTE.off():
        want = ts.softmax(x)
    first = ts.softmax(x)                                     # the Python path, registering the kernel
    assert ts.ROUTE.entries.get(ts.route_key(x)) is not None, "the route did not take this kernel"
    got = ts.softmax(x)
    assert torch.equal(first, want) and torch.equal(got, want) and got.dtype == want.dtype
    utils.check(got, torch.softmax(x.double(), 1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("n", [1, 1000, 2**20 + 1, 10**7])
def test_the_means_through_the_route_are_the_python_paths_results(n):
    x = torch.rand(n, device="cuda")
    for mean, exact in ((tmean.mean_two_pass, True), (tmean.mean_atomic, False)):
        with tmean.ROUTE.off():
            want = mean(x)
        mean(x)
        assert tmean.ROUTE.entries.get(tmean.route_key(mean.__name__, x)) is not None, mean.__name__
        got = mean(x)
        assert got.shape == want.shape == () and got.dtype == want.dtype
        assert torch.equal(got, want) if exact else torch.allclose(got, want, rtol=1e-6, atol=0)
        utils.check(got, x.double().mean(), atol=0, rtol=1e-5, name=mean.__name__)


def test_a_call_of_another_kind_takes_the_python_path_first():
    x = torch.randn(64, 200, device="cuda")
    ts.softmax(x)
    half = x.half()                                            # another dtype: another key
    assert ts.ROUTE.entries.get(ts.route_key(half)) is None
    ts.softmax(half)
    assert ts.ROUTE.entries.get(ts.route_key(half)) is not None
    torch.cuda.synchronize()
