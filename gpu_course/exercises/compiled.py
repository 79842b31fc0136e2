"""Evidence read from compiled code (gpu mode), where the compiler has already removed dead code:
a ``__shared__`` array that is never used, a ``tl.dot`` whose result is thrown away, a branch under
``#if 0`` leave nothing behind.

* SASS (``cuobjdump -sass`` of a CUDA C module, Numba's ``inspect_sass``): :func:`sass_ops`.
* PTX (Numba's ``inspect_asm``, a Triton kernel's ``asm["ptx"]``): :func:`ptx_ops`.
* Triton's GPU IR (``asm["ttgir"]``): :func:`triton_ir_ops`.

Each returns a :class:`collections.Counter` of the *kinds* of work the evidence asks about:
``"barrier"``, ``"shared_load"``, ``"shared_store"``, ``"shuffle"`` (SASS also by kind:
``"shfl_idx"``, ``"shfl_up"``, ``"shfl_down"``, ``"shfl_xor"``), ``"atomic"`` (SASS also
``"shared_atomic"``: ATOMS), ``"mma"`` (tensor-core matrix multiply), ``"dot"`` (Triton's dot,
before it is lowered).

>>> sorted(sass_ops('''
...     /*0090*/   STS [R7], R2 ;
...     /*00a0*/   BAR.SYNC.DEFER_BLOCKING 0x0 ;
...     /*00b0*/   LDS.128 R8, [R3] ;
...     /*00c0*/   SHFL.DOWN PT, R5, R4, 0x10, 0x1f ;
...     /*00d0*/   HMMA.16816.F32 R12, R4, R8, R12 ;
... ''').items())
[('barrier', 1), ('mma', 1), ('shared_load', 1), ('shared_store', 1), ('shfl_down', 1), ('shuffle', 1)]
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

_SASS = [  # (kind, opcode regex at the start of an instruction)
    ("barrier", r"BAR\.(SYNC|RED|ARV)\b|BAR\b"),
    ("shared_load", r"LDS(\.|\b)|LDSM\b|LDGSTS\b"),  # LDGSTS: cp.async, global -> shared
    ("shared_store", r"STS(\.|\b)|LDGSTS\b"),
    ("shuffle", r"SHFL\."),
    ("shfl_idx", r"SHFL\.IDX\b"),
    ("shfl_up", r"SHFL\.UP\b"),
    ("shfl_down", r"SHFL\.DOWN\b"),
    ("shfl_xor", r"SHFL\.BFLY\b"),
    ("atomic", r"(ATOM|ATOMS|ATOMG|RED)(\.|\b)"),
    ("shared_atomic", r"ATOMS(\.|\b)"),
    ("mma", r"(HMMA|IMMA|DMMA|HGMMA|QGMMA|IGMMA|BGMMA)(\.|\b)"),
]
_PTX = [
    ("barrier", r"bar\.sync|barrier\.sync|bar\.red|barrier\.cta"),
    ("shared_load", r"ld\.shared|ldmatrix|cp\.async\.(ca|cg)\.shared"),
    ("shared_store", r"st\.shared|cp\.async\.(ca|cg)\.shared"),
    ("shuffle", r"shfl\.sync"),
    ("atomic", r"(atom|red)\.(global|shared|[a-z]+\.)"),
    ("mma", r"(mma\.sync|wmma\.mma|wgmma\.mma_async)"),
]
_TTGIR = [
    ("dot", r"\btt\.dot\b|\bttng\.warp_group_dot\b|\bttng\.tc_gen5_mma\b"),
    ("shared_store", r"\bttg\.local_store\b|\bttg\.local_alloc\b.*=\s*\("),
    ("shared_load", r"\bttg\.local_load\b"),
    ("atomic", r"\btt\.atomic_"),
]

_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def sass_ops(sass: str) -> Counter:
    """The kinds of work in a SASS listing (one instruction a line, as ``cuobjdump -sass`` prints
    it: ``/*0090*/  STS [R7], R2 ;``, a predicate ``@P0`` allowed)."""
    found = Counter()
    for line in sass.splitlines():
        m = _SASS_LINE.search(line)
        if not m:
            continue
        op = m.group(1)
        for kind, pat in _SASS:
            if re.match(pat, op):
                found[kind] += 1
    return found


def ptx_ops(ptx: str) -> Counter:
    """The kinds of work in PTX text (comments and declarations skipped)."""
    found = Counter()
    for line in ptx.splitlines():
        code = line.split("//")[0].strip()
        if not code or code.startswith("."):
            continue
        code = re.sub(r"^@!?%?\w+\s+", "", code)  # a predicate
        for kind, pat in _PTX:
            if re.match(pat, code):
                found[kind] += 1
    return found


def ptx_shared_bytes(ptx: str) -> list[int]:
    """Sizes in bytes of the static shared arrays a PTX module declares
    (``.shared .align 4 .b8 name[512];``).

    >>> ptx_shared_bytes(".shared .align 4 .b8 _ZN6cudapy8__main__sA[512];\\n.shared .align 4 .b8 sB[1024];")
    [512, 1024]
    """
    return [int(n) for n in re.findall(r"\.shared\s+(?:\.align\s+\d+\s+)?\.b8\s+[\w$]+\[(\d+)\]", ptx)]


def ptx_shared_elements(ptx: str) -> list[set]:
    """For each static shared array a PTX module declares, the element counts it can hold: its bytes
    over its alignment, which Numba sets to the element size (4 for float32); every 2-, 4- and 8-byte
    reading when the alignment says nothing (above 8 bytes).

    >>> ptx_shared_elements(".shared .align 4 .b8 sA[512];")
    [{128}]
    >>> ptx_shared_elements(".shared .align 16 .b8 sB[1024];")[0] == {128, 256, 512}
    True
    """
    found = []
    for align, n in re.findall(r"\.shared\s+\.align\s+(\d+)\s+\.b8\s+[\w$]+\[(\d+)\]", ptx):
        align, n = int(align), int(n)
        sizes = (align,) if align in (2, 4, 8) else (2, 4, 8)
        found.append({n // a for a in sizes if n % a == 0})
    return found


def triton_ir_ops(ttgir: str) -> Counter:
    """The kinds of work in Triton's GPU IR (``compiled.asm["ttgir"]``)."""
    found = Counter()
    for line in ttgir.splitlines():
        for kind, pat in _TTGIR:
            if re.search(pat, line):
                found[kind] += 1
    return found


def triton_ops(compiled) -> Counter:
    """The kinds of work in a compiled Triton kernel (what ``kernel[grid](...)`` returns on a GPU):
    its GPU IR, and tensor-core instructions of its PTX."""
    asm = getattr(compiled, "asm", {}) or {}
    found = triton_ir_ops(asm.get("ttgir", "") or "")
    ptx = asm.get("ptx", "") or ""
    if isinstance(ptx, str):
        found.update({k: v for k, v in ptx_ops(ptx).items() if k == "mma"})
    return found


def numba_ptx(dispatcher) -> str:
    """The PTX of every compiled specialisation of a Numba kernel (gpu mode)."""
    asm = dispatcher.inspect_asm()
    return "\n".join(asm.values()) if isinstance(asm, dict) else str(asm)


def cuobjdump_sass(path) -> str:
    """``cuobjdump -sass path``: the SASS of every kernel in a binary (a .so or .cubin)."""
    tool = shutil.which("cuobjdump")
    if tool is None:  # the toolkit's bin directory is often not on PATH (Colab): where nvcc is
        import os
        homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
        nvcc = shutil.which("nvcc")
        if nvcc:
            homes.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
        tool = next((os.path.join(h, "bin", "cuobjdump") for h in homes
                     if h and os.path.exists(os.path.join(h, "bin", "cuobjdump"))), None)
    if tool is None:
        raise RuntimeError("cuobjdump is not on PATH: the CUDA toolkit's bin directory is needed to "
                           "read the compiled kernels")
    return subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, timeout=120,
                          check=True).stdout


def _mangled_name(symbol: str) -> str:
    """The function's own name in an Itanium-mangled symbol: ``_Z6relu_kPKfPfi`` -> ``relu_k``,
    ``_ZN3ops4mm_kILi16EEEvPKf`` -> ``mm_k``; a plain (``extern "C"``) symbol is its own name.

    >>> _mangled_name("_Z6relu_kPKfPfi"), _mangled_name("_ZN3ops4mm_kILi16EEEvPKf"), _mangled_name("k")
    ('relu_k', 'mm_k', 'k')
    """
    if symbol.startswith("_ZN"):
        pos, last = 3, ""
        while pos < len(symbol):
            m = re.match(r"\d+", symbol[pos:])
            if not m:
                break
            n = int(m.group())
            pos += len(m.group())
            last, pos = symbol[pos:pos + n], pos + n
        return last
    m = re.match(r"_Z(\d+)", symbol)
    if m:
        start = m.end()
        return symbol[start:start + int(m.group(1))]
    return symbol


def sass_of_kernel(sass: str, name: str) -> str:
    """The part of a ``cuobjdump -sass`` listing that belongs to kernel ``name`` (its mangled
    ``Function : _Z6relu_kPKfPfi`` header holds the name)."""
    parts = re.split(r"(?m)^\s*Function\s*:\s*", sass)
    mine = [p for p in parts[1:] if p.strip() and _mangled_name(p.splitlines()[0].strip()) == name]
    return "\n".join(mine)
