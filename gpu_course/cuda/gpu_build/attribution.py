"""Error attribution: when a unit does not compile, whose error is it? The learner's (a
:class:`CudaBuildError` naming their lines), or the split's (:class:`NeedsClassicBuild`: the source
builds as one unit instead, as ``load_inline`` would build it)?

It is the split's when the compiler points only outside the statements the unit owns, or when it
says that a name is not declared which one unit would see: a name ``cuda_src`` declares at file
scope (the split left it to the other unit), or one that ``torch/extension.h`` brings
(:func:`one_unit_names`; e.g. ``assert`` in a kernel, ``torch::kInt32`` in host code, had the
units lacked their headers). A misspelt name is neither, and stays a quick learner's error.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sysconfig
import tempfile

from .. import cache_files
from ..errors import CudaBuildError, diagnostics, format_compile_errors, missing_name
from ..language import STD_FLAG, TORCH_NAMESPACES
from .compilers import digest
from .objects import cache_dir
from .units import SOURCE_NAME, NeedsClassicBuild, Units

_UNIT_WHAT = {"device": "the kernels do not compile (nvcc)",
              "host": "the host code does not compile (C++)",
              "binding": "cpp_src or funcs do not match the functions (binding)"}


def failure(kind: str, log: str, units: Units, cuda_src: str, cpp_src: str,
            other_log: str = "") -> Exception:
    """The exception for a unit that did not compile: the learner's error when the compiler points
    into statements that unit owns, into a line where the other unit (``other_log``) fails too,
    or into cpp_src; else NeedsClassicBuild (an error the split made, see the module docstring)."""
    ptxas = [ln.strip() for ln in log.splitlines() if re.match(r"\s*ptxas\s+(error|fatal)", ln)]
    if kind == "device" and ptxas:  # the assembler's limits (registers, shared memory): the kernels'
        hint = ("\n(a kernel may use at most 48 KB (0xc000 bytes) of static __shared__ memory; "
                "for more, use extern __shared__ with the size at launch and cudaFuncSetAttribute)"
                if any("too much shared data" in ln for ln in ptxas) else "")
        return CudaBuildError(f"load_cuda: {_UNIT_WHAT[kind]}:\n" + "\n".join(ptxas) + hint +
                              "\n(the full compiler output is in utils.last_build_log())")
    if kind == "binding":  # cpp_src: load_inline compiles it apart from cuda_src too, with torch/extension.h
        hidden = unit_misses([d for d in diagnostics(log) if d.file == "cpp_src"])
        if hidden:
            return NeedsClassicBuild(f"the binding unit does not see {hidden}, which one unit would")
        sources = {"cpp_src": cpp_src}
    else:
        owned = units.device_lines if kind == "device" else units.host_lines
        errors = [d for d in diagnostics(log) if d.file == SOURCE_NAME]
        both = {d.line for d in diagnostics(other_log) if d.file == SOURCE_NAME}
        mine = [d for d in errors if d.line in owned | both]
        if not mine:
            return NeedsClassicBuild(f"the {kind} unit does not compile, and not because of the "
                                     f"statements it owns")
        hidden = unit_misses(mine, units.file_names)
        if hidden:
            return NeedsClassicBuild(f"the {kind} unit does not see {hidden}, which one unit would")
        sources = {SOURCE_NAME: cuda_src}
    return CudaBuildError(f"load_cuda: {_UNIT_WHAT[kind]}:\n{format_compile_errors(log, sources)}\n"
                          f"(line numbers count from the first line of {next(iter(sources))}; the full "
                          f"compiler output is in utils.last_build_log())")


def unit_misses(errors, file_names=frozenset()) -> str | None:
    """The first name that ``errors`` (diagnostics of a unit) say is not declared and that one unit
    would see (``torch::kInt32``, ``assert``, one of ``file_names``: those ``cuda_src`` declares at
    file scope), else None."""
    found = [m for m in (missing_name(d.msg) for d in errors) if m]
    for ns, name in found:
        if ns is None and name in file_names:
            return name
    if not found:
        return None
    names = one_unit_names()
    for ns, name in found:
        top = (ns or "").split("::")[0]
        seen = (name in names["macros"] or name in names["global"] if ns is None
                else name in names["std"] if top == "std"
                else name in names["torch"] if top in TORCH_NAMESPACES else False)
        if seen:
            return f"{ns}::{name}" if ns else name
    return None


_NAMES: dict = {}
_LINEMARK = re.compile(r'#\s*\d+\s+"([^"]*)"((?:\s+\d)*)\s*$')
_DEFINE = re.compile(r"#\s*define\s+(\w+)")
_ID = re.compile(r"[A-Za-z_]\w*")
# a declaration at file scope (at the start of a line, or after one on the same line)
_GLOBAL = re.compile(r"(?:^ ?|;\s*)(?:extern\b[^;(]*?\b(\w+)\s*\(|typedef\b[^;{]*?\b(\w+)\s*;)")


def one_unit_names() -> dict:
    """The names one ``load_inline`` unit sees through ``torch/extension.h``, read from the
    preprocessor's output (``-E -dD``): ``"macros"``; ``"global"``, the functions and types that
    the system headers (the C library) declare at file scope (``printf``, ``memcpy``, ``uint8_t``);
    ``"std"``, every identifier of the system headers' code (for ``std::`` names); ``"torch"``,
    those of torch's own headers (for ``torch::``, ``at::`` and ``c10::`` names). Unqualified names
    are looked up in the first two only, where a learner's misspelt or undeclared variable (``idx``,
    ``sum``) is not. Made once per torch and compiler (~3 s), then read from the cache; empty sets
    where the preprocessor cannot run."""
    import torch
    from torch.utils import cpp_extension as ce
    cxx = os.environ.get("CXX", "c++")
    inc = [f"-I{p}" for p in ce.include_paths() + [sysconfig.get_paths()["include"]]]
    path = cache_dir() / f"one-unit-names-{digest(torch.__version__, cxx, inc, STD_FLAG)}.json"
    if path in _NAMES:
        return _NAMES[path]
    names = None
    if cache_files.usable(path, "list of names"):
        try:
            names = {k: frozenset(v) for k, v in json.loads(path.read_text()).items()}
        except (OSError, ValueError):
            names = None
    if names is None:
        names = _preprocessed_names([cxx, STD_FLAG, "-DTORCH_API_INCLUDE_EXTENSION_H", *inc])
        if names["macros"]:
            path.parent.mkdir(parents=True, exist_ok=True)
            cache_files.write_atomic(path, json.dumps({k: sorted(v) for k, v in names.items()}))
            cache_files.seal(path)
    _NAMES[path] = names
    return names


def _preprocessed_names(cmd: list) -> dict:
    """:func:`one_unit_names` from the preprocessor run as ``cmd`` (compiler and flags)."""
    names = {"macros": set(), "global": set(), "std": set(), "torch": set()}
    with tempfile.TemporaryDirectory() as d:
        probe = os.path.join(d, "probe.cpp")
        with open(probe, "w") as f:
            f.write("#include <torch/extension.h>\n")
        try:
            r = subprocess.run(cmd + ["-E", "-dD", probe], capture_output=True, text=True, errors="replace",
                               timeout=300)
        except (OSError, subprocess.SubprocessError):
            return {k: frozenset() for k in names}
    if r.returncode != 0:
        return {k: frozenset() for k in names}
    system = False
    for line in r.stdout.splitlines():
        if line.startswith("#"):
            m = _LINEMARK.match(line)
            if m:
                system = "3" in m.group(2).split()
                continue
            m = _DEFINE.match(line)
            if m:
                names["macros"].add(m.group(1))
            continue
        names["std" if system else "torch"].update(_ID.findall(line))
        if system:
            names["global"].update(m.group(1) or m.group(2) for m in _GLOBAL.finditer(line))
    return {k: frozenset(v) for k, v in names.items()}
