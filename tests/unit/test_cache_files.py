"""gpu_course/cuda/cache_files.py and its use by both builds: a damaged cache file is found before
it is used (a truncated module gave a Bus error in every later load), rebuilt once with a
one-line note, and temp files of killed builds do not stay forever."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import utils  # noqa: F401
from gpu_course.cuda import cache_files
from gpu_course.cuda.gpu_build.objects import compile_unit
from gpu_course.cuda.emulation import toolchain


def test_seal_and_check(tmp_path, capsys):
    f = tmp_path / "m.so"
    cache_files.write_atomic(f, b"x" * 1000)
    assert not cache_files.usable(f, "module")    # never sealed (an old cache, a killed build)
    assert not f.exists() and capsys.readouterr().out == ""   # rebuilt without a word
    cache_files.write_atomic(f, b"x" * 1000)
    cache_files.seal(f)
    assert cache_files.usable(f, "module")
    f.write_bytes(b"x" * 1000 + b"y")
    assert not cache_files.usable(f, "module") and not f.exists()
    assert "The cached module" in capsys.readouterr().out


def test_a_big_file_is_checked_by_its_size_and_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_files, "_BIG", 4096)
    monkeypatch.setattr(cache_files, "_EDGE", 1024)
    f = tmp_path / "h.gch"
    f.write_bytes(os.urandom(10000))
    cache_files.seal(f)
    cache_files._VERIFIED.clear()
    assert cache_files.intact(f)
    with open(f, "r+b") as fh:
        fh.seek(9990)
        fh.write(b"0123456789")
    cache_files._VERIFIED.clear()
    assert not cache_files.intact(f)
    f.write_bytes(f.read_bytes()[:5000])
    assert not cache_files.intact(f)


def test_temp_files_of_dead_builds_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    names = [f"tmp-{dead}.gch", f"device-abc.tmp{dead}.o", f"m.tmp{dead}.so",   # a dead process's
             f"tmp-{os.getpid()}.gch",                                             # ours: building
             "runtime.o", "tmp1_3f2a", "cuda_emu_pch.h.gch"]                        # not temp files
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / "build-old").mkdir()
    os.utime(tmp_path / "build-old", (0, 0))
    (tmp_path / "build-new").mkdir()
    cache_files.clean_temps(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(names[3:] + ["build-new"])


def test_a_build_failure_in_a_cache_file_is_not_blamed_on_the_source(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_EMU_CACHE", str(tmp_path))
    obj = tmp_path / "runtime-123" / "runtime.o"
    obj.parent.mkdir()
    obj.write_bytes(b"\x7fELF")
    cache_files.seal(obj)
    log = f"/usr/bin/ld: {obj}: file not recognized: file truncated\ncollect2: error: ld returned 1"
    assert toolchain.discard_blamed(log)
    assert not obj.exists()
    assert f"The build failed in the cache's {obj}: rebuilding it once." in capsys.readouterr().out
    assert not toolchain.discard_blamed("main.cpp:3:1: error: expected ';'")


def test_gpu_build_recompiles_a_damaged_object(tmp_path, capsys):
    """compile_unit (the GPU build's units) with a stand-in compiler: a cut-short object is rebuilt."""
    cc = tmp_path / "cc.py"
    cc.write_text("import sys; open(sys.argv[-1], 'wb').write(b'OBJ' * 100)")
    cmd, src, obj = [sys.executable, str(cc)], tmp_path / "u.cpp", tmp_path / "u.o"
    assert compile_unit(cmd, "int x;", src, obj)[2] > 0          # compiled
    assert compile_unit(cmd, "int x;", src, obj)[2] == 0         # cached
    obj.write_bytes(b"OBJ")
    got, _, secs = compile_unit(cmd, "int x;", src, obj)
    assert secs > 0 and got.read_bytes() == b"OBJ" * 100
    assert "The cached object file" in capsys.readouterr().out


_TWICE = textwrap.dedent("""
    import sys, torch
    from gpu_course.cuda import emulation, cuda_begin
    src = cuda_begin + '''
    __global__ void twice_k(const float* x, float* o, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) o[i] = 2 * x[i];
    }
    torch::Tensor twice(torch::Tensor x) {
        auto o = torch::empty_like(x);
        int n = x.numel();
        twice_k<<<cdiv(n, 64), 64>>>(x.data_ptr<float>(), o.data_ptr<float>(), n);
        return o;
    }'''
    m = emulation.load(src, "torch::Tensor twice(torch::Tensor x);", ["twice"],
                       build_dir=sys.argv[1], nvcc_check=False)
    print("RESULT", m.twice(torch.arange(3.0)).tolist())
    print("SO", m.cuda_emu_info["build_dir"])
""")


def _run_twice(tmp_path, build_dir):
    """_TWICE in a child process with a time limit (loading a truncated module can kill it), its cache in
    ``build_dir``."""
    (tmp_path / "s.py").write_text(_TWICE)
    return subprocess.run([sys.executable, str(tmp_path / "s.py"), str(build_dir)], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory):
    """A cache holding _TWICE's module, built once (each test damages its own copy)."""
    tmp = tmp_path_factory.mktemp("twice")
    first = _run_twice(tmp, tmp / "b")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "RESULT [0.0, 2.0, 4.0]" in first.stdout
    return tmp / "b"


@pytest.mark.slow
@pytest.mark.skipif(utils.ON_GPU, reason="the CPU emulation's cache")
@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_cached_module_is_rebuilt_in_one_call(tmp_path, damage, built_cache):
    """Was: a Bus error in every later load (truncated), or an error and a second call (empty).
    In a child process with a time limit, since loading a truncated module can kill it. The module is
    built once for both damages (built_cache); each damages a copy of the cache."""
    shutil.copytree(built_cache, tmp_path / "b")
    (so,) = (tmp_path / "b").glob("*/*.so")
    with open(so, "r+b") as f:
        f.truncate(so.stat().st_size // 3 if damage == "truncated" else 0)
    again = _run_twice(tmp_path, tmp_path / "b")
    assert again.returncode == 0, again.stderr[-2000:]   # no Bus error, no exception
    assert "RESULT [0.0, 2.0, 4.0]" in again.stdout
    assert f"The cached module {so} was damaged" in again.stdout and "rebuilding it" in again.stdout
    assert cache_files.intact(so)


def test_both_builds_keep_their_cache_under_one_root(monkeypatch, tmp_path):
    """One rule for both caches: $XDG_CACHE_HOME (else ~/.cache)/gpu-course/<build>, unless the build's
    own variable (README, Troubleshooting) moves it."""
    from gpu_course.cuda import gpu_build
    for var in ("COURSE_CUDA_CACHE", "CUDA_EMU_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gpu_build.cache_dir() == tmp_path / "xdg" / "gpu-course" / "cuda"
    assert toolchain.cache_dir() == tmp_path / "xdg" / "gpu-course" / "cuda_emu"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert gpu_build.cache_dir() == Path.home() / ".cache" / "gpu-course" / "cuda"
    monkeypatch.setenv("COURSE_CUDA_CACHE", str(tmp_path / "gpu"))
    monkeypatch.setenv("CUDA_EMU_CACHE", str(tmp_path / "emu"))
    assert (gpu_build.cache_dir(), toolchain.cache_dir()) == (tmp_path / "gpu", tmp_path / "emu")
