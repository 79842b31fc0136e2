"""Unit tests of gpu_course/mode.py (CPU; the GPU branches run in tests/gpu and the notebooks)."""
import pytest
import torch

import utils
from gpu_course import mode


def test_choose_mode():
    assert mode._choose_mode(None, True) == "gpu"
    assert mode._choose_mode(None, False) == "cpu"
    assert mode._choose_mode(" CPU ", True) == "cpu"
    assert mode._choose_mode("auto", False) == "cpu"
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        mode._choose_mode("gpu", False)
    with pytest.raises(ValueError, match="use 'gpu', 'cpu'"):
        mode._choose_mode("tpu", True)


def test_forced_cpu_mode_sets_switches_before_numba_and_triton(run_py):
    r = run_py("""
        import os, utils
        from numba import cuda, config
        import triton, triton.language as tl
        @triton.jit
        def k(x): pass
        print(utils.MODE, utils.DEVICE, os.environ["NUMBA_ENABLE_CUDASIM"],
              os.environ["TRITON_INTERPRET"], config.ENABLE_CUDASIM, type(k).__name__)
    """, COURSE_MODE="cpu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cpu", "cpu", "1", "1", "1", "InterpretedFunction"]


def test_auto_mode_follows_torch(run_py):
    r = run_py("import utils, torch; print(utils.MODE, torch.cuda.is_available())")
    assert r.returncode == 0, r.stderr
    mode, avail = r.stdout.split()
    assert mode == ("gpu" if avail == "True" else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")


def test_forcing_gpu_without_gpu_is_a_clear_error(run_py):
    r = run_py("import utils", COURSE_MODE="gpu")
    assert r.returncode != 0
    assert "COURSE_MODE=gpu but torch sees no CUDA GPU" in r.stderr


def test_bad_mode_is_a_clear_error(run_py):
    r = run_py("import utils", COURSE_MODE="fast")
    assert "COURSE_MODE='fast': use 'gpu', 'cpu'" in r.stderr


def test_importing_numba_first_warns(run_py):
    r = run_py("import numba, warnings, utils", COURSE_MODE="cpu", PYTHONWARNINGS="always")
    assert r.returncode == 0, r.stderr
    assert "numba was imported before utils" in r.stderr


def test_by_mode_and_banner():
    assert utils.by_mode(gpu="big", cpu="small") == ("big" if utils.ON_GPU else "small")
    assert utils.banner().startswith(f"Mode {utils.MODE}:")


def test_versions_and_properties():
    v = utils.versions()
    assert v["torch"] == torch.__version__ and v["python"].count(".") == 2
    assert (utils.gpu_properties() is None) == (not utils.ON_GPU)


def test_the_known_gpu_warning_is_filtered_and_others_are_not():
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mode._quiet_known_gpu_warnings()
        warnings.warn("Attempting to run cuBLAS, but there was no current CUDA context! Attempting to set "
                      "the primary context... (Triggered internally at CublasHandlePool.cpp:335.)", UserWarning)
        warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in seen] == ["something else"]
