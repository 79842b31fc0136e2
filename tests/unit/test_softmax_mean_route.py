"""The softmax's and the means' C++ route without a GPU: cpu mode says why it is not built, and, with a stand-in
extension in a faked GPU (launch_paths.fake_gpu), each wrapper takes the route exactly where a call's kind was
seen before, with the kernels its first call launched, and steps aside where the route must not be taken."""
import pytest
import torch

import utils
from gpu_course import launch_paths as lp
from gpu_course import triton_launch, triton_route
from gpu_course.kernels import triton_mean as tmean
from gpu_course.kernels import triton_softmax as ts

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: tests/gpu/test_triton_route_gpu.py runs the real route")


class _Route(triton_route.StandIn):
    """Stands in for the built extension: records each call, returns a marked output."""

    def softmax(self, x, kid, rows):
        self.calls.append(("softmax", kid, rows))
        return torch.full(x.shape, 7.0)

    def mean_two_pass(self, x, partial_id, sum_id, tile):
        self.calls.append(("mean_two_pass", partial_id, sum_id, tile))
        return torch.tensor(8.0)

    def mean_atomic(self, x, kid, tile):
        self.calls.append(("mean_atomic", kid, tile))
        return torch.tensor(9.0)


@pytest.fixture
def route(monkeypatch):
    mod = _Route()
    assert ts.ROUTE is tmean.ROUTE                     # one extension, one state
    monkeypatch.setattr(ts.ROUTE, "mod", mod)
    monkeypatch.setattr(ts.ROUTE, "entries", {})
    monkeypatch.setattr(triton_route, "register", lambda m, ck, nargs: m.add_kernel(ck, nargs))
    with lp.fake_gpu(ts.softmax_rows_kernel, tmean.partial_sums_kernel, tmean.sum_to_mean_kernel,
                     tmean.mean_atomic_kernel):
        yield mod


def test_cpu_mode_says_why_there_is_no_route():
    assert ts.build_route() is False and "cpu mode" in ts.ROUTE.why


def test_a_softmaxs_second_call_goes_through_the_route(route):
    x = torch.randn(37, 300)
    ts.softmax(x)                                        # first: the Python path, which registers its kernel
    assert route.calls == [] and route.kernels == [6]
    assert ts.softmax(x).eq(7).all()                     # second: the route, with the configuration's rows
    assert route.calls == [("softmax", 0, ts.softmax_config(300)["ROWS"])]
    ts.softmax(torch.randn(37, 129))                     # another shape: another key, the Python path first
    assert len(route.calls) == 1 and len(route.kernels) == 2


def test_each_mean_goes_through_the_route_with_its_own_kernels(route):
    x = torch.rand(5000)
    assert not tmean.route_taken("mean_two_pass", x)
    tmean.mean_two_pass(x), tmean.mean_atomic(x)         # first calls: both kernels of the two-pass, then one
    assert route.calls == [] and route.kernels == [3, 4, 3]
    assert tmean.route_taken("mean_two_pass", x) and tmean.route_taken("mean_atomic", x)
    with tmean.ROUTE.off():
        assert not tmean.route_taken("mean_two_pass", x)
    tile = tmean.mean_config()["BLOCK"] * tmean.mean_config()["TILES"]
    assert tmean.mean_two_pass(x).item() == 8 and tmean.mean_atomic(x).item() == 9
    assert route.calls == [("mean_two_pass", 0, 1, tile), ("mean_atomic", 2, tile)]


def test_the_route_steps_aside(route):
    x = torch.randn(37, 300)
    ts.softmax(x), tmean.mean_two_pass(x)
    with ts.ROUTE.off():
        ts.softmax(x), tmean.mean_two_pass(x)
    with triton_launch.through_jit():
        ts.softmax(x), tmean.mean_atomic(x)
    ts.softmax(x, cfg=ts.softmax_config(300)), ts.softmax(x, alloc=utils.poisoned)
    tmean.mean_two_pass(x, alloc=utils.poisoned), tmean.mean_two_pass(x, cfg=tmean.mean_config())
    assert route.calls == [] and ts.ROUTE.on is True
    with pytest.raises(ValueError, match="do not fit in one program's registers"):   # a learner's mistake, as before
        ts.softmax(torch.randn(2, 20000))


def test_a_kernel_the_route_cannot_launch_keeps_the_python_path(route, monkeypatch):
    monkeypatch.setattr(triton_route, "register", lambda m, ck, nargs: None)
    x = torch.randn(8, 64)
    ts.softmax(x), ts.softmax(x)
    assert route.calls == [] and ts.ROUTE.entries == {ts.route_key(x): None}
