"""The matmul's C++ route without a GPU: cpu mode says why it is not built, and, with a stand-in extension in a
faked GPU (launch_paths.fake_gpu), :func:`matmul` takes the route exactly where a call's kinds were seen before."""
import pytest
import torch

import utils
from gpu_course import launch_paths as lp
from gpu_course import triton_launch, triton_route
from gpu_course.kernels import triton_matmul as tm


class _Route(triton_route.StandIn):
    """Stands in for the built extension: records each call, returns a marked output."""

    def matmul(self, a, b, kid, bm, bn):
        self.calls.append(("matmul", kid, bm, bn))
        return torch.full((a.shape[0], b.shape[1]), 7.0)

    def matmul_bias(self, a, b, bias, kid, bm, bn):
        self.calls.append(("matmul_bias", kid, bm, bn))
        return torch.full((a.shape[0], b.shape[1]), 8.0)


@pytest.fixture
def route(monkeypatch):
    mod = _Route()
    monkeypatch.setattr(tm.ROUTE, "mod", mod)
    monkeypatch.setattr(tm.ROUTE, "entries", {})
    monkeypatch.setattr(triton_route, "register", lambda m, ck, nargs: m.add_kernel(ck, nargs))
    with lp.fake_gpu(tm.matmul_tuned, tm.matmul_kernel):
        yield mod


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode")
def test_cpu_mode_says_why_there_is_no_route():
    assert tm.build_route() is False and "cpu mode" in tm.route_status()


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode")
def test_a_calls_second_time_goes_through_the_route(route):
    a, b, bias = torch.randn(40, 24), torch.randn(24, 56), torch.randn(56)
    tm.matmul(a, b)                                              # first: Python path, registers the kernel
    assert route.calls == [] and len(route.kernels) == 1
    assert tm.matmul(a, b).eq(7).all()                           # second: the route, with the chosen tile
    cfg = tm.matmul_tuned.configs[0].kwargs
    assert route.calls == [("matmul", 0, cfg["BLOCK_M"], cfg["BLOCK_N"])]
    tm.matmul(a, b.T.contiguous().T)                             # other strides: another key, Python first
    tm.matmul(a, b, bias=bias, activation="gelu")
    assert len(route.calls) == 1 and len(route.kernels) == 3
    assert tm.matmul(a, b, bias=bias, activation="gelu").eq(8).all() and route.calls[-1][0] == "matmul_bias"


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode")
def test_the_route_steps_aside(route):
    a, b = torch.randn(40, 24), torch.randn(24, 56)
    tm.matmul(a, b)
    with tm.without_route():
        tm.matmul(a, b)
    with triton_launch.through_jit():
        tm.matmul(a, b)
    tm.matmul(a, b, cfg=dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1, num_warps=4, num_stages=1))
    assert route.calls == []
    with pytest.raises(AssertionError, match="do not match"):    # a learner's mistake: the same message as before
        tm.matmul(a, a)
    assert tm.ROUTE.on is True


def test_kernel_layout_refuses_what_the_route_cannot_pass():
    ck = triton_route._Ck(["*fp16", "*fp16", "i32", "constexpr"], {"global_scratch_size": 0})
    assert triton_route.kernel_layout(ck, 3) == ("ppi", 1)
    assert triton_route.kernel_layout(ck, 4) == ("ppi-", 1)
    assert triton_route.kernel_layout(triton_route._Ck(["*fp16", "i32"], {"global_scratch_size": 256}), 2) is None
    assert triton_route.kernel_layout(triton_route._Ck(["*fp16", "i32"], {}), 1) is None   # a runtime arg left over
