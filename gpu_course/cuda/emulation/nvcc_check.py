"""The nvcc check: does the device part of a source the emulation accepts also compile for a real
GPU?  (~0.3 s, run in parallel with the CPU build; only errors clearly about the learner's device
code are reported.)"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from .. import cxx
from ..errors import diagnostics, format_compile_errors
from ..parsed import INCLUDE_RE, ParsedSource, parse

_HOST_ONLY = re.compile(r"^(torch|at|c10|TORCH_\w+|AT_\w+|C10_\w+|CHECK_\w+|CUDA_CHECK|pybind11|py)$")


def device_source(cuda_src: str | ParsedSource) -> str | None:
    """The device part of cuda_src for nvcc: top-level statements that use torch or launch
    kernels are blanked (newlines kept), torch/ATen/c10 includes dropped, and templated kernels
    launched with literal template arguments are instantiated at the end.  None when device code
    itself uses torch types (e.g. packed accessors): that needs the torch headers, too slow."""
    p = cuda_src if isinstance(cuda_src, ParsedSource) else parse(cuda_src)
    cuda_src, toks, match = p.text, p.toks, p.match
    chars = list(cuda_src)

    def blank(a: int, b: int) -> None:
        for p in range(a, b):
            if chars[p] != "\n":
                chars[p] = " "

    for t in toks:
        m = INCLUDE_RE.match(t.text) if t.kind == "pp" else None
        if m and re.match(r"(torch|ATen|c10|pybind11)/|Python\.h$", m.group(1)):
            blank(t.start, t.end)
    insts = []
    for a, b in ((s.a, s.b - 1) for s in p.statements if s.kind == "decl"):
        ids = {t.text for t in toks[a:b + 1] if t.kind == "id"}
        if ids & {"__global__", "__device__"}:
            if ids & {"torch", "at", "c10"}:
                return None
            continue
        try:
            launches = cxx.find_launches(toks, match, a, b + 1)
        except cxx.LaunchSyntaxError:  # the emulation reports it
            launches = []
        if launches or any(toks[k].text == "<<<" for k in range(a, b + 1)) or any(_HOST_ONLY.match(x) for x in ids):
            for L in launches:  # instantiate k<16, float> launched from host code
                if L.template_args:
                    args = [t.text for t in toks[L.template_args[0] + 1:L.template_args[1]] if t.text != ","]
                    if all(re.fullmatch(r"\d+[uUlL]*|true|false|float|double|int|unsigned|char|long|short", x)
                           for x in args):
                        insts.append(cuda_src[toks[L.start].start:toks[L.lt - 1].end])
            blank(toks[a].start, toks[b].end)
    tail = "".join(f"\nstatic void* cuda_emu_instance_{i} = (void*)&{e};" for i, e in enumerate(dict.fromkeys(insts)))
    return '#line 1 "cuda_src"\n' + "".join(chars) + tail + "\n"


def start_nvcc(cuda_src: str | ParsedSource, workdir: Path):
    """Start nvcc on the device part of cuda_src (None if nvcc is not on PATH)."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    text = device_source(cuda_src)
    if text is None:
        return None
    src = workdir / "device.cu"
    src.write_text(text)
    cmd = [nvcc, "-std=c++17", "-arch=sm_80", "--expt-relaxed-constexpr", "--ptx", "-o",
           str(workdir / "device.ptx"), str(src)]
    env = dict(os.environ, LC_ALL="C", LANG="C")
    return subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", env=env)


def finish_nvcc(proc, cuda_src: str, verbose: bool) -> str | None:
    """Wait for nvcc; return an error message if it rejects the learner's device code."""
    if proc is None:
        return None
    out, _ = proc.communicate()
    if verbose:
        print(f"[cuda_emu] nvcc check: exit {proc.returncode}")
    if proc.returncode == 0:
        return None
    errors = [d for d in diagnostics(out) if d.file == "cuda_src"]
    # Inconclusive (skip): no error located in cuda_src, or errors about torch/host parts that
    # the device extract left out (in the message or on the offending line).
    lines = cuda_src.splitlines()
    host_ref = re.compile(r"\b(torch|at|c10|Tensor|TORCH_\w+|AT_\w+|C10_\w+)\b|cuda_emu_instance")

    def line_of(d) -> str:
        return lines[d.line - 1] if 1 <= d.line <= len(lines) else ""

    if not errors or any(host_ref.search(d.msg) or host_ref.search(line_of(d)) for d in errors):
        return None
    return format_compile_errors(out, {"cuda_src": cuda_src})


