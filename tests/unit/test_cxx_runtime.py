"""One C++ runtime per process: a library linked with its own libstdc++ beside torch's loses (or crashes
on) number formatting; naming torch's shared libstdc++ on the link line keeps the copy out."""
import shutil
import subprocess
import sys
import textwrap

import pytest

from gpu_course.cuda.gpu_build import cxx_runtime

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("g++")
                                or not shutil.which("nm"), reason="GNU toolchain on Linux")

SRC = r'''
#include <sstream>
#include <string>
#include <cstring>
extern "C" int fmt(long k, char* buf, int n) {
    std::ostringstream s; s << "k=" << k;          // a number: the runtime's locale tables
    std::strncpy(buf, s.str().c_str(), n); return 0;
}'''


def build(tmp_path, name, flags):
    (tmp_path / "f.cpp").write_text(SRC)
    so = tmp_path / f"{name}.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", str(tmp_path / "f.cpp"), "-o", str(so), *flags],
                   check=True, capture_output=True, timeout=120)
    return so


def call(so):
    """fmt(7) in a fresh process that has torch (and its libstdc++) loaded first; a crash is a result."""
    code = textwrap.dedent(f'''
        import ctypes, torch
        lib = ctypes.CDLL({str(so)!r}); buf = ctypes.create_string_buffer(32)
        lib.fmt(7, buf, 32); print(repr(buf.value.decode()))''')
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_torchs_libstdcxx_is_found():
    import torch  # noqa: F401  (loads libstdc++)
    path = cxx_runtime.loaded_libstdcxx()
    assert path and "libstdc++.so" in path
    assert cxx_runtime.link_flags() == [path]


def test_a_static_copy_is_detected_and_the_shared_runtime_keeps_it_out(tmp_path):
    import torch  # noqa: F401
    copy = build(tmp_path, "copy", ["-static-libstdc++"])
    assert cxx_runtime.carries_own_runtime(copy) is True
    r = call(copy)
    print("with its own runtime:", r.returncode, r.stdout.strip())   # empty number here, a crash elsewhere
    shared = build(tmp_path, "shared", [*cxx_runtime.link_flags(), "-static-libstdc++"])
    assert cxx_runtime.carries_own_runtime(shared) is False
    r = call(shared)
    assert r.returncode == 0 and r.stdout.strip() == "'k=7'", r.stdout + r.stderr[-1000:]


def test_no_maps_means_no_flag(tmp_path):
    assert cxx_runtime.loaded_libstdcxx(str(tmp_path / "none")) is None
