"""The nvcc check: does the device part of a source the emulation accepts also compile for a real
GPU?  The device part is the GPU build's own device unit (``gpu_build.make_units``: the same split,
the same headers, the same flags), compiled with ``--ptx`` for sm_80 (~0.5 s, in parallel with the
CPU build). Only errors the GPU build would call the learner's are reported
(``gpu_build.attribution``): one in a statement the device unit owns, not one the split made."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import gpu_build
from ..errors import CudaBuildError, format_compile_errors
from ..gpu_build.attribution import failure
from ..parsed import ParsedSource, parse


@dataclass
class NvccCheck:
    """A running nvcc on a source's device unit."""
    proc: subprocess.Popen
    units: gpu_build.Units


def start_nvcc(cuda_src: str | ParsedSource, workdir: Path) -> NvccCheck | None:
    """Start nvcc on the device unit of cuda_src (None if nvcc is not on PATH, or the GPU build
    would build this source as one unit: its device code is then not apart from the rest)."""
    if not shutil.which("nvcc"):
        return None
    try:
        p = cuda_src if isinstance(cuda_src, ParsedSource) else parse(cuda_src)
        units = gpu_build.make_units(p.text, parsed=p)
    except gpu_build.NeedsClassicBuild:
        return None
    src = workdir / "device.cu"
    src.write_text(units.device)
    # the PTX is not used, only nvcc's verdict: its device compiler does not optimise (-O0 for cicc: the same
    # errors, a third less time, once per cold build)
    cmd = gpu_build.nvcc_command(arch="-arch=sm_80", extra_cuda_cflags=["-Xcicc", "-O0"]) + [
        "--ptx", "-o", str(workdir / "device.ptx"), str(src)]
    env = dict(os.environ, LC_ALL="C", LANG="C")
    proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", env=env)
    return NvccCheck(proc, units)


def finish_nvcc(check: NvccCheck | None, cuda_src: str, verbose: bool) -> str | None:
    """Wait for nvcc; return an error message if it rejects the learner's device code."""
    if check is None:
        return None
    out, _ = check.proc.communicate()
    if verbose:
        print(f"[cuda_emu] nvcc check: exit {check.proc.returncode}")
    if check.proc.returncode == 0:
        return None
    if not isinstance(failure("device", out, check.units, cuda_src, ""), CudaBuildError):
        return None  # inconclusive: the split's doing, which the GPU build would build as one unit
    return format_compile_errors(out, {"cuda_src": cuda_src})
