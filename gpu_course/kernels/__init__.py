"""Kernels that a notebook teaches and a benchmark times, defined once: the notebook shows their
source (``utils.show_source`` for Triton, ``cuda_source`` for CUDA C) and ``bench/`` imports them.

* ``triton_mean``: notebook 06's parallel means (two-pass, atomic) and the seeds' one-program mean
* ``triton_softmax``: notebook 06's fused row softmax, several rows per program
* ``triton_matmul``: notebook 07's grouped, autotuned matmul with an optional bias + GeLU epilogue
* ``triton_layernorm``: LayerNorm (forward, backward) and GeLU (forward, backward), each wrapped as a
  ``torch.autograd.Function`` and as a ``torch.library`` custom op; notebook 10's
  kernels, timed by ``bench/layernorm.py``
* ``triton_attention``: attention, naive and online-softmax in torch, FlashAttention's forward and
  FlashAttention-2's backward in Triton; notebook 11's
  kernels, timed by ``bench/flash_attention.py``
* ``matmul_ladder``: notebook 04's fp32 CUDA C ladder, one file per rung in ``cuda/matmul/``
* ``tensor_cores``: notebook 12's fp16 tensor-core ladder (WMMA, mma.sync, cp.async, wgmma + TMA), one file per
  rung in ``cuda/tensor_cores/``
* ``elementwise``: notebook 03's CUDA C square and GeLU, one file per step in ``cuda/elementwise/``
* ``reductions``: notebook 09's CUDA C sums (a ladder, ``cuda/reduce/``), scans, histograms and image
  kernels, one file per step
* ``ladder``: what the four CUDA C ladders above share, declared once (rungs, files, configurations;
  source, build, the rungs that run here, autotuning)

What a notebook measures these kernels with (tables, recordings, ladders timed a step at a time, profiler
readings) is not here but in :mod:`gpu_course.lessons`.

The CUDA C files under ``cuda/`` each compile on their own (``nvcc -c``, an editor's language server),
as llm.c's ``dev/cuda/`` files do: each has an include guard and includes ``cuda/common.cuh`` (the prelude
that is ``utils.cuda_begin``) and the files it builds on. :func:`cuda_source` gives a file as a notebook
prints it (without those lines), :func:`cuda_unit` the one string ``load_cuda`` builds for some files
(everything they include, in include order), :func:`cuda_ints` a constant the CUDA C defines.

The Triton modules import triton; import them after ``utils`` (or ``gpu_course``), which sets the
interpreter switch first. This module itself imports neither.

>>> print(cuda_source("elementwise/01_naive.cu").splitlines()[0])
// v0 (notebook 03): one thread per element; square_f and gelu_f are the elementwise functions every
"""
from __future__ import annotations

import re
from pathlib import Path

CUDA_DIR = Path(__file__).resolve().parent / "cuda"
COMMON = "common.cuh"  # the prelude every file includes; utils.cuda_begin is its text (see cuda_source)

# What makes a file under cuda/ compile on its own, and what cuda_source leaves out: an include guard
# (#ifndef, #define, and #endif as the last line) and, after the guard's first two lines, the #include "..."
# of the files it builds on, common.cuh first. Comments before and among these lines belong to them.
_GUARD = re.compile(r"\s*#\s*ifndef\s+(\w+)\s*$")
_INCLUDE_LINE = re.compile(r'\s*#\s*include\s*"([^"]+)"\s*(//.*)?$')
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


_SPLITS: dict = {}   # (name, mtime, size) -> _split's result: a file is read again only when it changes


def _split(name: str) -> tuple:
    """:func:`_read_split` of ``name``, read once while the file is unchanged (a module's cache hit,
    e.g. the ladder's ``build()`` again, then costs no file reads: ~0.3 ms, not ~9)."""
    try:
        st = (CUDA_DIR / name).stat()
    except OSError:
        return _read_split(name)   # says which files there are
    key = (name, st.st_mtime_ns, st.st_size)
    if key not in _SPLITS:
        _SPLITS[key] = _read_split(name)
    return _SPLITS[key]


def _read_split(name: str) -> tuple:
    """``(includes, body, first body line)`` of the file ``name`` under ``cuda/``: the files it includes
    (relative to ``cuda/``, in order), its text without the include guard and the includes, and that
    text's first line number in the file (1-based). A quoted ``#include`` after the first line of code is
    refused: the files are joined in include order, so an include must come before the code."""
    path = CUDA_DIR / name
    if not path.is_file():
        have = sorted(str(p.relative_to(CUDA_DIR)) for p in CUDA_DIR.rglob("*.cu*"))
        raise FileNotFoundError(f"cuda_source: no file {name!r} under {CUDA_DIR}; there are: "
                                f"{', '.join(have)}")
    lines = path.read_text().splitlines(keepends=True)

    def code(i):  # the first line from i on that is not blank or a comment
        while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("//")):
            i += 1
        return i

    end, includes, guard = 0, [], None
    i = code(0)
    m = _GUARD.match(lines[i]) if i < len(lines) else None
    if m and i + 1 < len(lines) and re.fullmatch(rf"\s*#\s*define\s+{m.group(1)}\s*", lines[i + 1]):
        guard, end = m.group(1), i + 2
    while (i := code(end)) < len(lines) and (m := _INCLUDE_LINE.match(lines[i])):
        target = (path.parent / m.group(1)).resolve()
        if CUDA_DIR not in target.parents:
            raise ValueError(f"{name}:{i + 1}: #include \"{m.group(1)}\" is outside {CUDA_DIR}")
        includes.append(str(target.relative_to(CUDA_DIR)))
        end = i + 1
    stop = len(lines)
    if guard is not None:
        while stop > end and not lines[stop - 1].strip():
            stop -= 1
        if stop == end or not re.match(r"\s*#\s*endif\b", lines[stop - 1]):
            raise ValueError(f"{name}: the include guard #ifndef {guard} must end with #endif on the last line")
        stop -= 1
    body = "".join(lines[end:stop])
    late = _QUOTED_INCLUDE.search(body)
    if late:
        raise ValueError(f"{name}:{end + body[:late.start()].count(chr(10)) + 1}: #include \"{late.group(1)}\" "
                         f"comes after code; put it with the includes at the top of the file")
    return tuple(includes), body, end + 1


def cuda_source(*names: str) -> str:
    """The text of CUDA C files kept under ``gpu_course/kernels/cuda/``, as a notebook prints them:
    each without what makes it compile on its own (its include guard, and the ``#include`` of
    common.cuh and of the files it builds on), joined in the order given. For a source to build, see
    :func:`cuda_unit`.

    >>> "__global__ void mm_cols_k" in cuda_source("matmul/02_coalesced.cu")
    True
    >>> cuda_source("common.cuh").startswith("\\n#include <torch/extension.h>")   # utils.cuda_begin
    True
    """
    if not names:
        raise ValueError("cuda_source: name at least one file, e.g. 'matmul/01_naive.cu'")
    return "\n".join(_split(name)[1] for name in names)


def cuda_files(*names: str) -> list:
    """``names`` and every file they include, directly or not, each once and after the files it
    includes: the order in which a compiler reads them (an include guard keeps it to once).

    >>> cuda_files("elementwise/03_fast.cu")
    ['common.cuh', 'elementwise/01_naive.cu', 'elementwise/02_vec.cu', 'elementwise/03_fast.cu']
    """
    order, active = [], []

    def visit(name):
        if name in order:
            return
        if name in active:
            raise ValueError(f"cuda_files: {' -> '.join(active + [name])} includes itself")
        active.append(name)
        for inc in _split(name)[0]:
            visit(inc)
        active.pop()
        order.append(name)

    for name in names:
        visit(name)
    return order


def cuda_unit(*names: str, line_directives: bool = False) -> str:
    """One source for ``load_cuda`` from the files ``names``: what the compiler would read for a file
    that includes them all, as one string. The files of :func:`cuda_files` in order, each as
    :func:`cuda_source` gives it (common.cuh's text is ``utils.cuda_begin``), a blank line between two
    .cu files. Compile errors then name lines of this string, as for any source given to load_cuda.

    ``line_directives=True`` puts a ``#line`` before each file, so that a compiler given the string
    names the files and their own lines (for nvcc on the command line; load_cuda numbers the lines of
    the source it is given).

    >>> cuda_unit("matmul/03_smem_tiles.cu") == cuda_source("common.cuh") + cuda_source("matmul/03_smem_tiles.cu")
    True
    """
    out, prev = [], None
    for name in cuda_files(*names):
        _, body, first = _split(name)
        if prev is not None and prev.endswith(".cu") and name.endswith(".cu"):
            out.append("\n")
        if line_directives:
            out.append(f'#line {first} "{name}"\n')
        out.append(body)
        prev = name
    return "".join(out)


def cuda_ints(name: str, var: str) -> tuple:
    """The ints that the file ``name`` (under ``cuda/``) gives the constant ``var``: ``constexpr int
    RB = 256;`` gives ``(256,)``, ``static const int TW[] = {32, 16, 8};`` gives ``(32, 16, 8)`` (one
    constant per declaration). Python reads such constants where it needs them, so that they are written
    once, in the CUDA C.

    >>> cuda_ints("reduce/01_atomic.cu", "RB")
    (256,)
    """
    found = re.findall(rf"\bint\s+{re.escape(var)}\s*(?:\[\s*\])?\s*=\s*\{{?([-\d,\s]+?)\}}?\s*;",
                       cuda_source(name))
    if len(found) != 1:
        raise ValueError(f"cuda_ints: {name} defines {var} as an int constant {len(found)} times, not once")
    return tuple(int(x) for x in found[0].split(",") if x.strip())


def num_warps_for(block: int) -> int:
    """Warps per Triton program for a block of ``block`` elements: 4 below 2048, 8 below 4096,
    else 16, so that each thread holds a handful of elements.

    >>> [num_warps_for(b) for b in (128, 2048, 16384)]
    [4, 8, 16]
    """
    return 4 if block < 2048 else 8 if block < 4096 else 16


# ---- listings: the parts of a file that a notebook's text reads ---------------------------------------------------

_DEF_LINE = re.compile(r"^(?:template\s*<.*>\s*)?(?:__\w+__\s+|static\s+|inline\s+|constexpr\s+)*[\w:<>,\s*&]+?"
                       r"(?:\s|\*|&)(\w+)\s*\(")


def _definitions(text: str) -> dict:
    """``{name: (first line, last line, host)}`` (0-based, inclusive) of each top-level definition of a CUDA C
    text (a function, a kernel or a template, with its template line and the comment block right above it), by
    braces at the start of a line; ``host`` is True for a function that is neither ``__global__`` nor
    ``__device__`` (a launcher, a check)."""
    lines = text.splitlines()
    found, i = {}, 0
    while i < len(lines):
        line = lines[i]
        m = _DEF_LINE.match(line)
        if m and not line.startswith((" ", "//", "#")) and not line.rstrip().endswith(";"):
            name, start = m.group(1), i
            if name == "__launch_bounds__":      # __global__ void __launch_bounds__(...) on a line of its own
                name = re.match(r"^(\w+)\s*\(", lines[i + 1]).group(1)
            while start > 0 and lines[start - 1].startswith(("//", "template")):
                start -= 1
            depth, j, opened = 0, i, False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                opened = opened or "{" in lines[j]
                if opened and depth <= 0:
                    break
                j += 1
            head = " ".join(l for l in lines[start:i + 1] if not l.startswith("//"))
            found.setdefault(name, (start, j, "__global__" not in head and "__device__" not in head))
            i = j + 1
        else:
            i += 1
    return found


def _region(lines: list, path: str, first: str, last: str = None) -> tuple:
    """``(a, b)``: from the first line that contains ``first`` to the next line (that one or a later one) that
    contains ``last``; with no ``last``, to the line that closes the braces opened on that line (that line alone
    if it opens none)."""
    a = next((i for i, l in enumerate(lines) if first in l), None)
    if a is None:
        raise ValueError(f"listing: no line of {path} contains {first!r}")
    if last is None and "{" not in lines[a]:
        return a, a
    if last is None:
        depth, opened = 0, False
        for b in range(a, len(lines)):
            depth += lines[b].count("{") - lines[b].count("}")
            opened = opened or "{" in lines[b]
            if opened and depth <= 0:
                return a, b
        raise ValueError(f"listing: the braces opened from {path}'s line {first!r} on do not close")
    b = next((i for i in range(a, len(lines)) if last in lines[i]), None)
    if b is None:
        raise ValueError(f"listing: no line of {path} from {first!r} on contains {last!r}")
    return a, b


def listing(path: str, names=None, *, max_lines=40) -> str:
    """The parts of the CUDA C file ``path`` (under ``cuda/``, as :func:`cuda_source` gives it) that a notebook's
    text reads, in the file's order, each run of lines left out replaced by one line ``// ... (N lines left
    out)`` (indented as the next line shown, or at the end as the first line left out; blank lines between two
    parts are kept as they are), so that the listing says what it does not show; ``cuda_source(path)``
    prints the whole file.

    ``names``: the definitions to show (kernels, device functions, host functions, templates, each with the
    comment block above it), by name; or a ``(first, last)`` pair of texts, for the lines from the first line that
    contains ``first`` to the next one that contains ``last``, or a ``(first,)`` for the lines from ``first``'s to the one that closes the braces opened
    there (a kernel's main loop; that line alone if it opens none). ``None``: the whole file
    but its host functions (the launchers and their checks, with their comments). A name the file does not define
    raises ``ValueError`` with the names it does define. A listing longer than ``max_lines`` lines raises
    ``ValueError`` with the length of each part (``max_lines=None``: no limit).

    >>> print(listing("tensor_cores/tc_ptx.cuh", ["smem_addr"]))
    // ... (4 lines left out)
    // The address of a shared-memory variable as PTX's shared-state space counts it (32 bits).
    __device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
    // ... (32 lines left out)
    >>> print(listing("scan/01_kogge_stone.cu").splitlines()[-1])    # the launcher, left out
    // ... (11 lines left out)
    >>> print(listing("scan/01_kogge_stone.cu", [("for (int s",)]))       # the kernel's loop
        // ... (7 lines left out)
        for (int s = 1; s < blockDim.x; s *= 2) {
            float left = t >= s ? sh[t - s] : 0.0f;
            __syncthreads();   // every thread has read its left neighbour before any thread writes
            sh[t] += left;
            __syncthreads();
        }
        // ... (14 lines left out)
    >>> listing("scan/01_kogge_stone.cu", ["scan_k"])
    Traceback (most recent call last):
    ...
    ValueError: listing: scan/01_kogge_stone.cu defines no scan_k; it defines scan_kogge_stone, scan_kogge_stone_k
    """
    text = cuda_source(path).rstrip()
    lines, defs = text.splitlines(), _definitions(text)
    if names is None:
        host = sorted((a, b) for a, b, is_host in defs.values() if is_host)
        keep, at = [], 0
        for a, b in host:
            keep.append((at, a - 1))
            at = b + 1
        keep.append((at, len(lines) - 1))
        spans = [(a, b) for a, b in keep if a <= b]
    else:
        if isinstance(names, (str, tuple)):
            names = [names]
        missing = [n for n in names if isinstance(n, str) and n not in defs]
        if missing:
            raise ValueError(f"listing: {path} defines no {', '.join(missing)}; it defines {', '.join(sorted(defs))}")
        spans = sorted(defs[n][:2] if isinstance(n, str) else _region(lines, path, *n) for n in names)

    def gap(count, near):
        indent = near[:len(near) - len(near.lstrip())]
        return f"{indent}// ... ({count} line{'s' if count > 1 else ''} left out)"

    out, at, parts = [], 0, []
    for a, b in spans:
        a = max(a, at)
        if a > b:
            continue
        if a > at and any(l.strip() for l in lines[at:a]):
            out.append(gap(a - at, lines[a]))
        elif a > at:                      # only blank lines between two parts: kept, not counted
            out += lines[at:a]
        shown = lines[a:b + 1]
        if names is None:                # runs of blank lines where the host functions were: one blank line
            shown = [l for k, l in enumerate(shown) if l.strip() or (k and shown[k - 1].strip())]
            while out and not out[-1].strip() and shown and not shown[0].strip():
                shown = shown[1:]
        out += shown
        parts.append((a, b))
        at = b + 1
    if at < len(lines):                  # indented as the first line left out that is code
        out.append(gap(len(lines) - at, next((l for l in lines[at:] if l.strip() and not l.startswith("#")), "")))
    if max_lines is not None and len(out) > max_lines:
        sizes = ", ".join(f"lines {a + 1}-{b + 1} ({b - a + 1})" for a, b in parts)
        raise ValueError(f"listing: {len(out)} lines of {path}, more than max_lines={max_lines}: {sizes}; "
                         f"name fewer definitions, or a (first, last) part of one")
    return "\n".join(out)
