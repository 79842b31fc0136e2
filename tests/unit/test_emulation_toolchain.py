"""The emulation's build tools: the linker it picks, and when a precompiled header is worth building."""
import shutil
import sys

import pytest

from gpu_course.cuda.emulation import toolchain


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_EMU_CACHE", str(tmp_path))
    return tmp_path


def test_tier_2s_header_is_precompiled_from_its_second_build_on(fresh_cache):
    tc = toolchain.get_toolchain()
    if not toolchain._pch_dir(tc, True, 2):
        pytest.skip("no precompiled headers with this compiler")
    assert toolchain._first_use(tc, True, 1) is False          # tier 1's PCH serves every build
    assert toolchain._first_use(tc, True, 2) is True           # the first tier-2 build: no PCH
    assert toolchain._first_use(tc, True, 2) is False          # from the second on: built and used
    assert toolchain._first_use(tc, False, 2) is True          # -O0 has a PCH of its own
    assert toolchain._first_use(tc, True, 3) is False          # tier 3 never has one
    assert (toolchain._pch_dir(tc, True, 2) / "last-used").exists()  # pruned like the others when stale


def test_the_linker_is_one_that_links_a_shared_object_here(monkeypatch):
    cxx = toolchain.get_toolchain()["cxx"]
    flags = toolchain.fast_linker(cxx)
    assert flags in ([], ["-fuse-ld=lld"], ["-fuse-ld=gold"])
    if sys.platform == "linux" and (shutil.which("ld.gold") or shutil.which("ld.lld")):
        assert flags, "a faster linker is installed but not used"
    monkeypatch.setenv("CUDA_EMU_LINKER", "default")
    assert toolchain.fast_linker(cxx) == []
    assert not any(f.startswith("-fuse-ld") for f in toolchain.get_toolchain()["libs"])  # a cache hit does not probe


def test_torchs_paths_are_cpp_extensions():
    from torch.utils import cpp_extension
    assert toolchain.torch_paths() == (cpp_extension.include_paths(), cpp_extension.library_paths())
