"""The Python binding of an emulated module: ``funcs`` through the CPython API (no pybind11), with
the launch counters under the names of gpu_course/cuda/counters.py."""
from __future__ import annotations

from ...counters import COUNTS, LOG, RESET
from ...parsed import ParsedSource, parse


def binding(modname: str, funcs: list[str], cpp_src: str | ParsedSource) -> str:
    """C++ that makes ``funcs`` callable from Python through the CPython API (no pybind11)."""
    p = cpp_src if isinstance(cpp_src, ParsedSource) else parse(cpp_src)
    decls, entries = [], []
    for f in funcs:
        d = p.declaration(f)
        if d:
            decls.append(d)
            entries.append(f'  CUDA_EMU_FN("{f}", static_cast<decltype(&cuda_emu_decl::{f})>(&{f})),')
        else:
            entries.append(f'  CUDA_EMU_FN("{f}", &{f}),')
    return "\n".join([
        '#line 1 "cuda_emu_binding"',
        "namespace cuda_emu_decl {", *decls, "}",
        "static PyMethodDef cuda_emu_methods[] = {", *entries,
        "  CUDA_EMU_BUILTINS,", f'  CUDA_EMU_LAUNCH_METHODS("{COUNTS}", "{RESET}", "{LOG}"),',
        "  {nullptr, nullptr, 0, nullptr}};",
        f"CUDA_EMU_MODULE({modname}, cuda_emu_methods)", ""])
