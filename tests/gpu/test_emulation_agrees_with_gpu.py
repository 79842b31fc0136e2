"""The CPU emulation's warp-level semantics, cp.async pipelines and race reports, checked against a
real GPU: the same kernels (from tests/unit/test_emulation_warp.py, test_emulation_async.py and
test_emulation_races.py) built with load_cuda on the GPU must give the results the unit tests expect,
and compute-sanitizer's racecheck must flag the missing-barrier matmul that the emulation flags.
Skipped on the CPU."""
import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import utils

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")
UNIT = Path(__file__).resolve().parent.parent / "unit"


def _unit(name):
    spec = importlib.util.spec_from_file_location(f"course_gpu_twin_{name}", UNIT / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


warp = _unit("test_emulation_warp") if utils.ON_GPU else None


@pytest.fixture(scope="module")
def w():
    cpp = "\n".join(utils.get_sig(f, warp.WARP) for f in warp.FUNCS)
    return utils.load_cuda(warp.WARP, cpp, warp.FUNCS)


@pytest.fixture(autouse=True)
def on_the_gpu():
    torch.set_default_device("cuda")  # the unit tests' tensors are made on the GPU
    yield
    torch.set_default_device(None)


@pytest.mark.parametrize("n, threads", [(1000, 256), (100_000, 256), (777, 64)])
def test_shfl_down_block_sum(w, n, threads):
    warp.test_shfl_down_block_sum(w, n, threads)


def test_shfl_xor_butterfly(w):
    warp.test_shfl_xor_butterfly(w)


def test_ballot_any_all(w):
    warp.test_ballot_any_all(w)


@pytest.mark.parametrize("width, threads", [(8, 64), (16, 48), (4, 40), (32, 32)])
def test_width_segments_and_partial_warp(w, width, threads):
    warp.test_width_segments_and_partial_warp(w, width, threads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8])
def test_shfl_every_scalar_type(w, dtype):
    warp.test_shfl_every_scalar_type(w, dtype)


def test_int_reductions_match_and_unsigned(w):
    warp.test_int_reductions_match_and_unsigned(w)


@pytest.mark.skipif(not shutil.which("compute-sanitizer"), reason="compute-sanitizer is not on PATH")
def test_racecheck_flags_the_missing_barrier_the_emulation_flags(tmp_path):
    races = _unit("test_emulation_races")
    script = tmp_path / "racy.py"
    script.write_text(textwrap.dedent(f"""
        import torch, utils
        src = {races.RACES!r}
        cpp = {races.CPP!r}
        m = utils.load_cuda(src, cpp, {races.FUNCS!r})
        a, b = torch.randn(40, 48, device="cuda"), torch.randn(48, 40, device="cuda")
        m.matmul(a, b, int(__import__("sys").argv[1]))
        torch.cuda.synchronize()
    """))
    def hazards(variant):
        r = subprocess.run(["compute-sanitizer", "--tool", "racecheck", sys.executable, str(script),
                            str(variant)], capture_output=True, text=True, timeout=300)
        return r.stdout + r.stderr
    assert "0 hazards" in hazards(0) or "RACECHECK SUMMARY: 0" in hazards(0)
    out = hazards(1)  # the barrier after the loads is missing: the emulation raises for it
    assert "hazard" in out.lower() and "RACECHECK SUMMARY: 0 hazards" not in out, out[-2000:]


asy = _unit("test_emulation_async") if utils.ON_GPU else None


@pytest.fixture(scope="module")
def a():
    return utils.load_cuda(asy.ASYNC, asy.CPP, asy.FUNCS)


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("n, blocks", [(5003, 3), (512 * 9, 2), (37, 1), (1_000_003, 96)])
def test_cp_async_pipeline(a, stages, n, blocks):
    asy.test_pipeline_streams_correctly(a, stages, n, blocks)


def test_cp_async_zfill(a):
    asy.test_zfill_zero_fills_the_tail_and_reads_nothing(a)
    asy.test_zfill_part_past_the_end_is_not_read(a)


def test_dynamic_shared_memory_limits_as_the_emulation_checks_them(a):
    out = utils.poisoned(1)
    with pytest.raises(RuntimeError):  # > 48 KiB without cudaFuncSetAttribute: the launch fails
        a.big_smem(out, 64 * 1024, -1)
    torch.cuda.synchronize()
    a.big_smem(out, 232448, 232448)  # the attribute raised to an H100's 227 KiB: it runs
    assert out.item() == 7.0
