"""The errors the CUDA C front end raises, and the one path from a compiler's log to the
learner's lines (and to the names it says are not declared: :func:`missing_name`). Both errors are ``RuntimeError``s whose message leads with what the learner must
fix (the compiler's own lines, mapped to lines of ``cuda_src``); ``.log`` holds the whole build
log (also what ``utils.last_build_log()`` shows)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass


class _BuildFailure(RuntimeError):
    def __init__(self, message: str = "", log: str = ""):
        super().__init__(message)
        self.log = log


class CudaBuildError(_BuildFailure):
    """The CUDA source did not compile, link or load on the GPU build; the message leads with the
    compiler's own error lines, mapped back to lines of ``cuda_src``."""


class CudaEmulationError(_BuildFailure):
    """A CUDA feature the CPU emulation does not support, a failed build, or a kernel error
    found while emulating (out-of-bounds access, divergent ``__syncthreads``, bad launch)."""


@dataclass
class Diagnostic:
    """One error line of a compiler log: the file as the compiler names it (``cuda_src`` through
    ``#line``), the 1-based line and column (0 when not given), the kind and the message."""
    file: str
    line: int
    col: int
    kind: str
    msg: str


# g++ / clang: "file:12:5: error: msg"; nvcc's front end: "file(12): error: msg"
_DIAG_RE = re.compile(r"^(?P<file>[^:()\n]+?)(?:\((?P<pline>\d+)\)|:(?P<line>\d+)(?::(?P<col>\d+))?):?\s+"
                      r"(?P<kind>fatal error|catastrophic error|error|warning|note)\s*:\s*(?P<msg>.*)$")


def diagnostics(log: str, kinds=("error", "fatal error", "catastrophic error")) -> list[Diagnostic]:
    """The diagnostics of ``kinds`` in a g++ or nvcc log, in order, without repeats.

    >>> [d.line for d in diagnostics('cuda_src(7): error: identifier "xx" is undefined\\n'
    ...                              "cuda_src:9:3: error: 'y' was not declared in this scope")]
    [7, 9]
    """
    out, seen = [], set()
    for raw in log.splitlines():
        m = _DIAG_RE.match(raw.strip())
        if not m or m.group("kind") not in kinds:
            continue
        d = Diagnostic(os.path.basename(m.group("file").strip()), int(m.group("pline") or m.group("line")),
                       int(m.group("col") or 0), m.group("kind"), m.group("msg").strip())
        key = (d.file, d.line, d.msg)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def format_compile_errors(log: str, sources: dict[str, str], limit: int = 12) -> str:
    """The error lines of a compiler log, those in the learner's ``sources`` (name -> text) first
    and each followed by the learner's line; other errors (or the log's tail) when none is.

    >>> print(format_compile_errors("cuda_src(2): error: identifier \\"xx\\" is undefined",
    ...                             {"cuda_src": "int a;\\nint b = xx;"}))
    cuda_src:2:0: error: identifier "xx" is undefined
         2 | int b = xx;
    """
    mine, others = [], []
    for d in diagnostics(log):
        if d.file in sources:
            lines = sources[d.file].splitlines()
            text = f"{d.file}:{d.line}:{d.col}: {d.kind}: {d.msg}"
            if 0 < d.line <= len(lines):
                text += f"\n{d.line:6d} | {lines[d.line - 1].strip()}"
            mine.append(text)
        else:
            others.append(f"{d.file}:{d.line}: {d.kind}: {d.msg}")
    picked = mine[:limit] if mine else others[:limit]
    if not picked:
        errs = [l.strip() for l in log.splitlines() if re.search(r"\berror\b", l, re.I)]
        picked = errs[:limit] or [l for l in log.splitlines() if l.strip()][-limit:] \
            or ["(no output from the compiler)"]
        return "\n".join(picked)
    total = len(mine) if mine else len(others)
    if total > len(picked):
        picked.append(f"... and {total - len(picked)} more error(s)")
    return "\n".join(picked)


_Q = "['\u2018\u2019`]"  # g++ quotes names with ' or, in a UTF-8 locale, with curly quotes
_MISSING = [re.compile(p) for p in (
    rf"{_Q}(?P<name>\w+){_Q} is not a member of {_Q}(?P<ns>[\w:]+){_Q}",
    rf"{_Q}(?P<name>\w+){_Q} in namespace {_Q}(?P<ns>[\w:]+){_Q} does not name a (?:template )?type",
    rf"{_Q}(?P<name>[\w:]+){_Q} (?:was not declared in this scope|has not been declared"
    rf"|does not name a (?:template )?type)",
    rf"there are no arguments to {_Q}(?P<name>\w+){_Q} that depend on a template parameter",
    r'identifier "(?P<name>\w+)" is undefined$',   # not "... is undefined in device code": a host name
    r'namespace "(?P<ns>[\w:]+)" has no member (?:class |function |template |variable )?"(?P<name>\w+)"',
    # clang's wordings
    rf"no (?:type|template|member) named {_Q}(?P<name>\w+){_Q} in namespace {_Q}(?P<ns>[\w:]+){_Q}",
    rf"use of undeclared identifier {_Q}(?P<name>[\w:]+){_Q}",
    rf"unknown type name {_Q}(?P<name>[\w:]+){_Q}",
)]


def missing_name(msg: str):
    """``(namespace or None, name)`` when a compiler message (g++, clang or nvcc) says that a name is not
    declared, else None.

    >>> missing_name('identifier "assert" is undefined')
    (None, 'assert')
    >>> missing_name("'kInt32' is not a member of 'torch'"), missing_name('namespace "torch" has no member "kInt32"')
    (('torch', 'kInt32'), ('torch', 'kInt32'))
    >>> missing_name("\u2018std::vector\u2019 has not been declared"), missing_name("expected ';' before '}' token")
    (('std', 'vector'), None)
    >>> missing_name('identifier "cdiv" is undefined in device code')   # declared, but a host function
    >>> missing_name("no member named 'tensor' in namespace 'torch'"), missing_name("use of undeclared identifier 'y'")
    (('torch', 'tensor'), (None, 'y'))
    """
    for pattern in _MISSING:
        m = pattern.search(msg)
        if m:
            name = m.group("name")
            ns = m.groupdict().get("ns")
            if "::" in name:
                ns, name = name.rsplit("::", 1)
            return (ns or None), name
    return None
