"""Compiler setup: the compilers, include and library flags for torch extensions on this machine,
and the flags of each unit (nvcc for the device unit, the host compiler for the others), all with
the one C++ standard of :mod:`..language`."""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import sysconfig

from ..language import STD_FLAG
from . import cxx_runtime


def arch_name(major: int, minor: int) -> str:
    """The architecture a build targets on a GPU of compute capability major.minor: ``"90a"`` on sm_90
    (Hopper's wgmma and setmaxnreg exist only in code built for sm_90a, which runs on sm_90 GPUs only,
    as this build does), else ``f"{major}{minor}"``.

    >>> arch_name(9, 0), arch_name(8, 6)
    ('90a', '86')
    """
    return f"{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


def digest(*parts) -> str:
    """A short hash of ``parts`` (each turned into text): the cache's keys.

    >>> digest("device", "int x;") == digest("device", "int x;") != digest("host", "int x;")
    True
    """
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def toolchain() -> dict:
    """Compilers, include and library flags for torch extensions on this machine (needs a GPU: the
    architecture is this GPU's); ``"id"`` names them for the cache's keys."""
    import torch
    from torch.utils import cpp_extension as ce
    cuda_home = ce.CUDA_HOME or "/usr/local/cuda"
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    includes = ce.include_paths("cuda") + [sysconfig.get_paths()["include"]]
    inc = [f"-I{p}" for p in includes]
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    sm = arch_name(*torch.cuda.get_device_capability())
    arch = f"-gencode=arch=compute_{sm},code=sm_{sm}"
    runtime = cxx_runtime.link_flags()   # torch's libstdc++, named before the compiler's own -lstdc++
    libs = [f"-L{ce.TORCH_LIB_PATH}", "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda",
            "-ltorch", "-ltorch_python", f"-L{os.path.join(cuda_home, 'lib64')}", "-lcudart",
            f"-Wl,-rpath,{ce.TORCH_LIB_PATH}"] + runtime
    cxx = os.environ.get("CXX", "c++")
    return {"nvcc": nvcc, "cxx": cxx, "inc": inc, "abi": abi, "arch": arch, "libs": libs,
            "id": digest(torch.__version__, nvcc, cxx, arch, sys.version, *runtime)}


def nvcc_command(opt: bool = True, extra_cuda_cflags=(), arch: str | None = None) -> list:
    """The nvcc command (without source and output) that compiles a device unit: for this GPU, or
    for ``arch`` (e.g. ``"-arch=sm_90"``), which needs only the CUDA toolkit, not a GPU.

    Notebook 04 compiles a device unit with ``-Xptxas -v`` this way for the register report; the CPU
    emulation's nvcc check compiles one with ``--ptx`` for ``-arch=sm_80``."""
    if arch is None:
        tc = toolchain()
        nvcc, arch = tc["nvcc"], tc["arch"]
    else:
        from torch.utils import cpp_extension as ce
        nvcc = shutil.which("nvcc") or os.path.join(ce.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
    return nvcc_flags(nvcc, arch, opt, extra_cuda_cflags)


def nvcc_flags(nvcc: str, arch: str, opt: bool, extra_cuda_cflags=()) -> list:
    """nvcc and its flags for a device unit (``opt=False``: ``-O0 -g -G``, for debugging)."""
    return ([nvcc, STD_FLAG, "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC", arch]
            + (["-O3", "-lineinfo"] if opt else ["-O0", "-g", "-G"]) + list(extra_cuda_cflags))


def cxx_flags(tc: dict, opt: bool) -> list:
    """The host compiler and its flags for the host, binding and init units."""
    return [tc["cxx"], STD_FLAG, "-fPIC", "-O2" if opt else "-O0", tc["abi"],
            "-DTORCH_API_INCLUDE_EXTENSION_H", "-w"] + tc["inc"]
