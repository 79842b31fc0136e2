"""``gpu_course.launch_paths`` in cpu mode: the fake GPU that measures the direct path's Python, the normal
path's wrapper, the profile of one call, and the rounds' table and ratios."""
import pytest
import torch

import utils
from gpu_course import launch_paths as lp, triton_launch
from gpu_course.kernels import triton_matmul as tm
from gpu_course.timing import Timing
from gpu_course.user_timing import UserTiming


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode only")
def test_fake_gpu_takes_the_direct_path_and_restores_everything():
    launcher = triton_launch.direct(tm.matmul_tuned)
    before = launcher.direct
    a = torch.randn(32, 32, dtype=torch.float16)
    with lp.fake_gpu(tm.matmul_tuned):
        for _ in range(3):
            tm.matmul(a, a)
        assert launcher.direct == before + 2 and triton_launch.direct(tm.matmul_tuned) is launcher
    assert launcher.kernel is tm.matmul_tuned and not triton_launch.ON_GPU
    assert launcher.direct == before + 2   # outside the block: kernel[grid] again (the interpreter)
    utils.check(tm.matmul(a, a), a.double() @ a.double(), atol=1e-2)
    assert launcher.direct == before + 2


def test_normal_path_goes_through_kernel_grid():
    seen = []
    lp.normal_path(lambda: seen.append(triton_launch._DIRECT[0]))()
    assert seen == [False] and triton_launch._DIRECT[0] is True


def test_profile_call_lists_the_functions_of_one_call():
    text = lp.profile_call(torch.add, torch.ones(3), torch.ones(3), top=3)
    assert "Python functions" in text and "own µs" in text


def test_the_table_gives_medians_and_the_rounds_range():
    def u(loop_ms):
        return UserTiming(Timing((0.01,), "m", "d", True), loop_ms, 0.005)
    taken = {"cuBLAS": [u(0.010), u(0.012)], "Triton, direct": [u(0.010), u(0.015)]}
    assert lp.loop_ratios(taken, "Triton, direct") == [1.0, 0.8]
    assert lp.cpu_us(taken, "cuBLAS") == [5.0, 5.0]
    assert "0.90× (0.80-1.00×)" in lp.paths_table(taken)
