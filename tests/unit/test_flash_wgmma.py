"""The CUDA C++ attention forward's front end without a GPU: what it builds from, what it exposes, and the reason
it gives where it cannot run (tests/gpu/test_flash_wgmma_gpu.py runs it on an sm_90 GPU)."""
import utils
from gpu_course.cuda import get_sig
from gpu_course.kernels import flash_wgmma as F


def test_the_source_builds_on_rung_5_and_exposes_one_host_function():
    src = F.source()
    assert src.index("wgmma_tma_k") < src.index("flash_wgmma_k")        # rung 5's pieces come first
    assert get_sig("flash_wgmma", src).startswith("torch::Tensor flash_wgmma(")


def test_it_says_why_it_does_not_run_here():
    ok, why = F.runs_here()
    if not utils.ON_GPU:
        assert not ok and "sm_90" in why
    else:
        assert ok or "sm_90" in why
