"""Both back ends of gpu_course/cuda/ give a module's launch counters the one set of names of cuda/counters.py."""
from __future__ import annotations

import pytest

from gpu_course.cuda import counters, gpu_build
from gpu_course.cuda.emulation import HEADER_DIR, source


def test_both_back_ends_bind_the_launch_counters_under_the_names_of_counters_py():
    emu = source.binding("m", ["f"], "void f();")
    assert f'CUDA_EMU_LAUNCH_METHODS("{counters.COUNTS}", "{counters.RESET}", "{counters.LOG}")' in emu
    assert "#define CUDA_EMU_LAUNCH_METHODS(COUNTS, RESET, LOG)" in (HEADER_DIR / "cuda_emu.h").read_text()
    units = gpu_build.make_units("__global__ void k() {}\nvoid f() { k<<<1, 1>>>(); }\n", "void f();", ["f"])
    for name in (counters.COUNTS, counters.RESET, counters.LOG):
        assert f'm.def("{name}"' in units.binding


def test_readers_of_a_module_without_counters():
    class NoCounters:
        __name__ = "plain"
    assert counters.launch_counts(NoCounters()) is None and counters.launch_log(NoCounters()) is None
    with pytest.raises(ValueError, match="'plain' has no launch counters"):
        counters.reset_launches(NoCounters())
