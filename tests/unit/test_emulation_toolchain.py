"""The emulation's build tools: the linker it picks, when a precompiled header is worth building, and what
names a build in the cache (every file it includes, every file of the code generator)."""
import re
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


def _quoted_includes(path):
    """The files that ``path`` includes with ``#include "..."``, resolved as the compiler does (next to it)."""
    return [(path.parent / m).resolve() for m in re.findall(r'^\s*#\s*include\s*"([^"]+)"', path.read_text(), re.M)]


def test_every_file_the_emulator_includes_is_in_the_cache_key():
    """What a build reads from include/ (cuda_emu.h, runtime.cpp and the shims, and every part they
    include, however deep) is among the files headers_digest hashes, so an edit to any part rebuilds."""
    hashed = {p.resolve() for p in toolchain.header_files()}
    roots = [toolchain.HEADER_DIR / "cuda_emu.h", toolchain.HEADER_DIR / "runtime.cpp",
             *(toolchain.HEADER_DIR / "shim").rglob("*.h")]
    seen, todo = set(), [p.resolve() for p in roots]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += [q for q in _quoted_includes(p) if q.is_file()]
    assert seen <= hashed and len(seen) > 20, sorted(str(p) for p in seen - hashed)
    parts = {p.relative_to(toolchain.HEADER_DIR).parts[0] for p in seen}
    assert {"emu", "runtime", "shim"} <= parts   # the split headers and runtime are followed


def test_an_edit_to_any_emulator_file_or_generator_file_changes_the_build_keys(tmp_path, monkeypatch):
    include = tmp_path / "include"
    shutil.copytree(toolchain.HEADER_DIR, include)
    monkeypatch.setattr(toolchain, "HEADER_DIR", include)
    files = toolchain.header_files()
    assert {p.name for p in files} >= {"cuda_emu.h", "runtime.cpp", "threads.cpp", "binding.h"}
    before = toolchain.headers_digest()
    for p in files:
        text = p.read_bytes()
        p.write_bytes(text + b"\n")
        assert toolchain.headers_digest() != before, p
        p.write_bytes(text)
    assert toolchain.headers_digest() == before
    gen = toolchain.generator_files()
    source_dir = toolchain.Path(toolchain.__file__).resolve().parent / "source"
    assert set(gen) == set(source_dir.glob("*.py")) | {source_dir.parent.parent / "counters.py"}
    copies = []
    for p in gen:
        copies.append(tmp_path / "gen" / p.relative_to(source_dir.parent.parent))
        copies[-1].parent.mkdir(parents=True, exist_ok=True)
        copies[-1].write_bytes(p.read_bytes())
    monkeypatch.setattr(toolchain, "generator_files", lambda: copies)
    before = toolchain.generator_digest()
    for p in copies:
        text = p.read_bytes()
        p.write_bytes(text + b"\n")
        assert toolchain.generator_digest() != before, p
        p.write_bytes(text)
    assert toolchain.generator_digest() == before
