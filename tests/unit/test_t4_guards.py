"""What a notebook skips on a GPU older than the H100 (Colab's T4, sm_75), checked with a faked compute
capability (COURSE_FAKE_CC): the guards in gpu_course.hardware and in the helpers the notebooks call. Each
skip is one printed line with its reason, and nothing is printed where the GPU has what is needed."""
import pytest
import torch

import utils
from gpu_course import device_ceilings, hardware, mode
from gpu_course.kernels import matmul_ladder as ml
from gpu_course.kernels import triton_attention as ta
from gpu_course.lessons.attention import sdpa as attention_sdpa

T4, A100, L4, H100 = "7.5", "8.0", "8.9", "9.0"


@pytest.fixture
def cc(monkeypatch):
    """cc("7.5"): act as a GPU of that compute capability for the rest of the test."""
    return lambda value: monkeypatch.setenv(hardware.CC_ENV, value)


def test_tf32_is_a_feature_of_ampere_and_later(cc):
    cc(T4)
    ok, why = hardware.gpu_supports("tf32")
    assert not ok and why.startswith("skipped on this GPU (sm_75): TF32 tensor cores need compute capability 8.0")
    assert "allow_tf32" in why and "\n" not in why
    cc(A100)
    assert hardware.gpu_supports("tf32") == (True, "")


def test_gpu_has_prints_the_reason_only_where_the_feature_is_missing(cc, capsys):
    assert hardware.gpu_has("tf32") is True and capsys.readouterr().out == ""     # cpu mode: present
    cc(T4)
    assert hardware.gpu_has("bf16") is False
    assert capsys.readouterr().out == hardware.gpu_supports("bf16")[1] + "\n"     # one line
    cc(H100)
    assert all(hardware.gpu_has(f) for f in hardware.FEATURES) and capsys.readouterr().out == ""


def test_shared_memory_per_block_by_compute_capability(cc):
    assert hardware.shared_memory_per_block() is None or mode.ON_GPU              # cpu mode: no limit
    expected = {T4: 64, A100: 163, "8.6": 99, L4: 99, H100: 227, "7.0": 96, "8.7": 163, "12.0": 99}
    for value, kb in expected.items():
        cc(value)
        assert hardware.shared_memory_per_block() == kb * 1024, value
    cc("9.1")                                                                   # between rows: the row below
    assert hardware.shared_memory_per_block() == 227 * 1024
    cc("6.1")                                                                   # older than the table
    assert hardware.shared_memory_per_block() == 48 * 1024


def test_fits_shared_memory_says_how_much_in_one_line(cc):
    assert hardware.fits_shared_memory(10**9, "anything") == (True, "") or mode.ON_GPU   # cpu mode: no limit
    cc(T4)
    assert hardware.fits_shared_memory(64 * 1024, "a 64 KB tile") == (True, "")
    ok, why = hardware.fits_shared_memory(120 * 1024, "rung 10")
    assert not ok and why == ("rung 10: skipped on this GPU (sm_75): it needs 120 KB of shared memory per block, "
                              "this GPU gives a block at most 64 KB")


def test_the_banner_says_when_the_capability_is_faked(cc):
    assert hardware.CC_ENV not in utils.banner()
    cc(T4)
    assert "Acting as a GPU of compute capability 7.5 (COURSE_FAKE_CC)" in utils.banner().splitlines()[0]


def test_ceilings_leave_out_what_the_gpu_lacks(cc):
    full = {"copy": 3002.0, "fp32": 51.6, "tf32": 379.0, "fp16": 702.0, "bf16": 681.0}
    assert device_ceilings.missing_ceilings() == {} and device_ceilings._without_missing(full) is full
    cc(T4)
    missing = device_ceilings.missing_ceilings()
    assert set(missing) == {"tf32", "bf16"} and all(w.startswith("skipped on this GPU (sm_75)") for w in missing.values())
    assert device_ceilings._without_missing(full) == {"copy": 3002.0, "fp32": 51.6, "fp16": 702.0}
    assert set(utils.ceilings()) <= {"copy", "fp32", "fp16"}
    with pytest.raises(ValueError, match="no measured ceiling 'tf32'.*TF32 tensor cores need"):
        utils.throughput(1.0, flops=10**9, kind="tf32")
    cc(A100)
    assert device_ceilings.missing_ceilings() == {}


def test_a_faked_gpu_has_no_spec_sheet(cc):
    h100 = "NVIDIA H100 80GB HBM3"
    assert utils.spec_peak("fp16", h100) == 989.4
    cc(T4)
    assert utils.spec_peak("fp16") is None            # the real device's sheet does not describe the faked one
    assert utils.spec_peak("fp16", h100) == 989.4     # named explicitly: still there


def test_rung_10_runs_where_cp_async_and_its_shared_memory_are(cc, capsys):
    assert [ml.rung10_shared_bytes(c) for c in range(3)] == [120 * 1024, 48 * 1024, 64 * 1024]
    assert ml.rungs_here() == ml.RUNGS and capsys.readouterr().out == ""       # cpu mode: all ten, silently
    cc(T4)                                                                      # no cp.async at all
    assert list(ml.rungs_here()) == list(range(1, 10))
    out = capsys.readouterr().out
    assert out == ("rung 10 cp.async pipeline: skipped on this GPU (sm_75): cp.async copies need compute "
                   "capability 8.0 (Ampere) or newer\n")
    assert all(ml.runs_here(r, c)[0] for r in range(1, 10) for c in range(len(ml.RUNG_CONFIGS[r])))
    cc(L4)                                                                      # cp.async, 99 KB per block
    assert [ml.runs_here(10, c)[0] for c in range(3)] == [False, True, True]
    assert list(ml.rungs_here()) == list(range(1, 10))
    assert "it needs 120 KB of shared memory per block, this GPU gives a block at most 99 KB" in capsys.readouterr().out
    cc(A100)
    assert ml.rungs_here() == ml.RUNGS and capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="no rung 10 with cfg 3"):
        ml.runs_here(10, 3)


def test_attention_tries_small_tiles_where_shared_memory_is_small(cc, monkeypatch):
    """Compiled for sm_75 at d = 128 (fp16), every listed tile needs 64 KB or more in the forward or the
    backward; a 64 KB GPU also tries 32-wide tiles (48 KB there). GPU lists only: cpu mode keeps its one."""
    assert not ta.small_shared_memory()
    monkeypatch.setattr(mode, "ON_GPU", True)   # the GPU lists, answered from the faked capability's row
    monkeypatch.setattr(ta.configs, "ON_GPU", True)   # small_shared_memory's mode: where the configs live
    def tiles(configs):
        return [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in configs]

    cc(H100)
    big = [tiles(ta.forward_configs()), *map(tiles, ta.backward_configs())]
    assert not ta.small_shared_memory() and [len(t) for t in big] == [4, 3, 3]
    cc(T4)
    assert ta.small_shared_memory()
    fwd, (dkdv, dq) = ta.forward_configs(), ta.backward_configs()
    assert [tiles(fwd), tiles(dkdv), tiles(dq)] == [big[0] + [(64, 32)], big[1] + [(32, 32)], big[2] + [(32, 32)]]
    assert all(c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0 for c in fwd + dq)   # the causal split's rule


def test_the_fp32_reference_slices_the_batch_when_memory_is_short(monkeypatch):
    assert attention_sdpa.reference_parts((4, 16, 4096, 64), free_bytes=75 * 2**30) == 1      # an H100
    assert attention_sdpa.reference_parts((4, 16, 4096, 128), free_bytes=14 * 2**30) == 2     # a T4
    assert attention_sdpa.reference_parts((2, 16, 65536, 64), free_bytes=14 * 2**30) == 2     # at most one slice per element
    q, k, v, do = (torch.randn(3, 2, 20, 16) for _ in range(4))
    whole = attention_sdpa.fp32_reference(q, k, v, do, causal=True)
    monkeypatch.setattr(attention_sdpa, "reference_parts", lambda shape: 3)
    sliced = attention_sdpa.fp32_reference(q, k, v, do, causal=True)
    assert all(torch.equal(a, b) for a, b in zip(whole, sliced))


def test_notebook_07s_fixed_tile_fits_the_gpu_and_stays_hoppers_on_hopper(cc, capsys):
    from gpu_course.kernels import triton_matmul as tm
    cc(H100)                                   # 192 KB in fp32 fits 227 KB: the tile the stored run used
    assert tm.gpu_fixed_config() == tm.FIXED_CONFIGS[0] and capsys.readouterr().out == ""
    for value, kb in ((T4, 64), (A100, 163), (L4, 99)):
        cc(value)
        cfg = tm.gpu_fixed_config()
        stages, bm, bn, bk = cfg["num_stages"], cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
        assert cfg != tm.FIXED_CONFIGS[0] and stages * (bm + bn) * bk * 4 <= kb * 1024, value
        why = capsys.readouterr().out
        assert why.count("\n") == 1 and "192 KB" in why and f"at most {kb} KB" in why and "FIXED is" in why
    cc(T4)
    assert tm.gpu_fixed_config(quiet=True) == tm.FIXED_CONFIGS[-1] and capsys.readouterr().out == ""
    assert tm.fixed_config() == (tm.gpu_fixed_config(quiet=True) if mode.ON_GPU else tm.CPU_FIXED)


def test_the_autotuner_gets_tiles_that_fit_where_none_of_its_own_does(cc):
    """Found running notebook 07 on an H100 acting as a T4: in fp32 every autotuned tile needs 96 KB or more, the
    autotuner found none it could launch, and the first call raised out of resources (196,608 of 65,536 bytes)."""
    from gpu_course.kernels import triton_matmul as tm
    gpu_configs = [tm.config(128, 256, 64, 3, 8), tm.config(64, 128, 32, 4, 4), tm.config(128, 64, 32, 4, 4)]
    fp32, fp16 = {"a_ptr": torch.empty(0)}, {"a_ptr": torch.empty(0, dtype=torch.float16)}
    cc(H100)
    assert tm.fitting_configs(gpu_configs, fp32) == gpu_configs       # Hopper: the list as it is
    cc(T4)
    assert tm.fitting_configs(gpu_configs, fp16) == gpu_configs       # one fits in fp16 (48 KB): as it is
    small = tm.fitting_configs(gpu_configs, fp32)
    assert small and all(c in tm.SMALL_CONFIGS for c in small)
    for c in small:
        kw = c.kwargs
        assert c.num_stages * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * 4 + 2048 <= 64 * 1024
    assert tm.matmul_tuned.early_config_prune is tm.fitting_configs
