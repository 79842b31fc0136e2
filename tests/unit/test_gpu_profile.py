"""COURSE_GPU_PROFILE=t4: every question gpu_course.hardware answers, answered as Colab's T4 (also in cpu
mode, so that the profile is checked without a GPU), and what follows from it in the helpers the notebooks call."""
import pytest
import torch

import utils
from gpu_course import claims, device_ceilings, hardware, occupancy
from gpu_course.kernels import triton_matmul as tm


@pytest.fixture
def t4(monkeypatch):
    monkeypatch.delenv(hardware.CC_ENV, raising=False)
    monkeypatch.setenv(hardware.PROFILE_ENV, "t4")


def test_the_profile_answers_as_a_t4(t4):
    assert hardware.compute_capability() == (7, 5)
    assert hardware.shared_memory_per_block() == 64 * 1024
    assert hardware.sm_count() == 40 and utils.sm_count() == 40
    assert hardware.total_memory() == 15 * 2**30 and utils.total_memory() == 15 * 2**30
    assert hardware.this_gpu().short == "T4" and occupancy.sm_limits().threads == 1024
    props = utils.gpu_properties()
    assert props["compute capability"] == "7.5" and props["SMs"] == 40 and props["memory (GiB)"] == 15.0
    assert "profile t4" in props["name"]


@pytest.mark.parametrize("feature", ["bf16", "tf32", "wgmma", "sm90a", "flash_sdpa", "cudnn_sdpa", "cp_async", "fp8"])
def test_the_profile_lacks_what_a_t4_lacks(t4, feature, capsys):
    ok, why = hardware.gpu_supports(feature)
    assert not ok and why.startswith("skipped on this GPU (sm_75)") and "\n" not in why
    assert hardware.gpu_has(feature) is False and capsys.readouterr().out.count("\n") == 1


def test_the_profile_keeps_what_a_t4_has(t4):
    assert hardware.gpu_supports("wmma") == (True, "")


def test_tiles_follow_the_profiles_shared_memory(t4, capsys):
    cfg = tm.gpu_fixed_config(itemsize=4)
    assert (cfg["BLOCK_M"], cfg["BLOCK_K"], cfg["num_stages"]) == (64, 32, 2)
    assert "FIXED is 64x64x32, 2 stages instead" in capsys.readouterr().out
    assert tm.stages_that_fit(128, 128, 64, torch.float16, hardware.shared_memory_per_block()) == 2


def test_the_banner_and_the_claims_know_it_is_not_a_t4(t4):
    first = utils.banner().splitlines()[0]
    assert "Acting as a T4 (COURSE_GPU_PROFILE=t4: sm_75, 40 SMs, 64 KB shared memory per block, 15 GiB)" in first
    assert "kernels still run on this device" in first
    assert claims.strict() is False
    assert device_ceilings.spec_peak("fp16") is None


def test_fake_cc_still_works_and_wins_over_the_profile(t4, monkeypatch):
    monkeypatch.setenv(hardware.CC_ENV, "8.0")
    assert hardware.compute_capability() == (8, 0) and hardware.shared_memory_per_block() == 163 * 1024
    assert hardware.sm_count() == 40   # the profile's other facts stay


def test_an_unknown_profile_names_the_known_ones(monkeypatch):
    monkeypatch.setenv(hardware.PROFILE_ENV, "a100")
    with pytest.raises(ValueError, match="COURSE_GPU_PROFILE='a100': the profiles are t4"):
        hardware.compute_capability()


def test_without_a_profile_nothing_changes(monkeypatch):
    monkeypatch.delenv(hardware.PROFILE_ENV, raising=False)
    monkeypatch.delenv(hardware.CC_ENV, raising=False)
    assert hardware.acting() == "" and hardware.profile() is None
    assert hardware.limit_triton_to_profile() is False
    if not utils.ON_GPU:
        assert hardware.compute_capability() is None and hardware.total_memory() is None


def test_triton_launches_see_the_profiles_limits(t4, monkeypatch):
    """On a GPU, Triton's launcher reads max_shared_mem from driver.active.utils.get_device_properties: under
    the profile it reads 64 KB (a kernel that needs more raises OutOfResources, as on a T4) and 40 SMs."""
    import types
    import triton.runtime
    utils_ = types.SimpleNamespace(get_device_properties=lambda d: {"max_shared_mem": 232448,
                                                                     "multiprocessor_count": 132, "warpSize": 32})
    monkeypatch.setattr(triton.runtime, "driver", types.SimpleNamespace(active=types.SimpleNamespace(utils=utils_)))
    monkeypatch.setattr(hardware.mode, "ON_GPU", True)
    assert hardware.limit_triton_to_profile() is True
    assert utils_.get_device_properties(0) == {"max_shared_mem": 64 * 1024, "multiprocessor_count": 40, "warpSize": 32}
    wrapped = utils_.get_device_properties
    assert hardware.limit_triton_to_profile() is True and utils_.get_device_properties is wrapped   # once
    monkeypatch.setattr(hardware.mode, "ON_GPU", False)
    assert hardware.limit_triton_to_profile() is False                                           # cpu mode
