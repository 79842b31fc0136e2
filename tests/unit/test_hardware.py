"""Unit tests of gpu_course/hardware.py: the GPU tables, the feature gates, and that adding a GPU is one
table entry which occupancy, the spec-sheet peaks, the links and the feature gates then follow (CPU)."""
import types

import pytest
import torch

import utils
from gpu_course import collectives, device_ceilings, hardware, mode, occupancy

# What adding an L40S to the course would be: this one entry (an Ada GPU, sm_89, whose limits ARCHS has).
L40S = hardware.GPU("NVIDIA L40S", "L40S", (8, 9), 142, 2520,
                    dict(fp32=91.6, tf32=183.0, fp16=362.0, bf16=362.0, fp8=733.0, int8=733.0, copy=864.0),
                    "NVIDIA L40S datasheet, dense", None, 32.0, "PCIe Gen4 x16")


def test_every_gpu_has_its_architecture_and_a_sourced_spec_sheet():
    for name, gpu in hardware.GPUS.items():
        assert gpu.name == name and gpu.source and gpu.arch is hardware.arch_of(gpu.cc)
        assert gpu.peaks["fp32"] > 0 and gpu.peaks["copy"] > 0 and gpu.pcie_gbps > 0
        # the fp32 peak is SMs x fp32 lanes x 2 x boost clock (64 lanes per SM on Volta to Ampere's A100, 128 after)
        lanes = 64 if gpu.cc in ((7, 0), (7, 5), (8, 0)) else 128
        assert gpu.sms * lanes * 2 * gpu.boost_mhz * 1e6 / 1e12 == pytest.approx(gpu.peaks["fp32"], rel=0.01), name
    assert {g.short for g in hardware.GPUS.values()} >= {"H100 SXM", "H100 PCIe", "H200", "A100 SXM", "L4", "T4"}
    assert hardware.REFERENCE.short == "H100 SXM" and occupancy.H100.name == "H100 SXM (sm_90)"


def test_architecture_rows_between_and_below_the_table():
    assert hardware.arch_of((9, 1)) is hardware.ARCHS[(9, 0)]
    with pytest.raises(ValueError, match="compute capability 6.1"):
        hardware.arch_of((6, 1))
    t4 = occupancy.limits_of(hardware.GPUS["Tesla T4"])
    assert (t4.threads, t4.blocks, t4.shared, t4.reserved_shared, t4.sms) == (1024, 16, 64 * 1024, 0, 40)


def test_feature_gates_by_compute_capability():
    assert hardware.supports("sm90a", (9, 0)) == (True, "")
    assert not hardware.supports("sm90a", (10, 0))[0] and not hardware.supports("sm90a", (8, 0))[0]
    ok, why = hardware.supports("fp8", (8, 0))
    assert not ok and why == "skipped on this GPU (sm_80): fp8 tensor cores need compute capability 8.9 (Ada) or newer"
    assert [hardware.supports("cp_async", g.cc)[0] for g in hardware.GPUS.values()] == [True] * 5 + [False]


def test_a_new_gpu_is_one_table_entry(monkeypatch):
    """Adding an L40S (one GPUS entry) and running on it: its SM limits, spec sheet, link and gates follow."""
    monkeypatch.setitem(hardware.GPUS, L40S.name, L40S)
    assert device_ceilings.spec_peak("fp8", "NVIDIA L40S") == 733.0
    assert collectives.link_spec_gbps("NVIDIA L40S") is None and hardware.link_gbps("NVIDIA L40S", "pcie") == 32.0
    # acting as the running GPU: torch's answers are those of an L40S
    props = types.SimpleNamespace(name=L40S.name, major=8, minor=9, multi_processor_count=142)
    monkeypatch.setattr(mode, "ON_GPU", True)
    monkeypatch.setattr(occupancy, "ON_GPU", True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: L40S.name)
    assert hardware.this_gpu() is L40S
    occ = occupancy.blocks_per_sm(256, registers=32, limits=occupancy.sm_limits())
    assert (occ.blocks, occ.limited_by, occ.grid) == (6, "threads", 142 * 6)   # 1,536 threads an SM on Ada
    assert device_ceilings.spec_peak("fp16") == 362.0
    assert hardware.gpu_supports("fp8") == (True, "") and not hardware.gpu_supports("wgmma")[0]
    assert hardware.fits_shared_memory(99 * 1024, "a tile") == (True, "")
    assert not hardware.fits_shared_memory(100 * 1024, "a tile")[0]


def test_an_unknown_gpu_gets_its_architecture_and_no_spec_sheet(monkeypatch):
    props = types.SimpleNamespace(name="NVIDIA Future GPU", major=9, minor=0, multi_processor_count=7)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)
    gpu = hardware.from_device(0)
    assert (gpu.sms, gpu.arch, gpu.peaks) == (7, hardware.ARCHS[(9, 0)], {})
    assert device_ceilings.spec_peak("fp16", "NVIDIA Future GPU") is None


def test_gpu_supports_with_a_faked_t4(monkeypatch):
    monkeypatch.setenv(hardware.CC_ENV, "7.5")  # Colab's T4
    assert hardware.compute_capability() == (7, 5)
    ok, why = hardware.gpu_supports("bf16")
    assert not ok and why == ("skipped on this GPU (sm_75): bfloat16 arithmetic needs compute "
                              "capability 8.0 (Ampere) or newer")
    assert not hardware.gpu_supports("flash_sdpa")[0] and not hardware.gpu_supports("wgmma")[0]
    monkeypatch.setenv(hardware.CC_ENV, "9.0")
    assert all(hardware.gpu_supports(f) == (True, "") for f in hardware.FEATURES)
    monkeypatch.setenv(hardware.CC_ENV, "8.0")
    assert hardware.gpu_supports("bf16")[0] and not hardware.gpu_supports("wgmma")[0]
    monkeypatch.setenv(hardware.CC_ENV, "seven")
    with pytest.raises(ValueError, match="MAJOR.MINOR"):
        hardware.compute_capability()
    monkeypatch.delenv(hardware.CC_ENV)
    with pytest.raises(ValueError, match="unknown feature 'fp4'"):
        hardware.gpu_supports("fp4")
