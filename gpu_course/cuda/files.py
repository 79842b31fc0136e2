"""The course's CUDA C files (kept with the kernels, under ``gpu_course/kernels/cuda/``), read as a notebook
prints them (:func:`cuda_source`) and joined as ``load_cuda`` builds them (:func:`cuda_unit`, in the
include order of :func:`cuda_files`). ``load_cuda``'s prelude, ``cuda_begin``, is one of them
(:data:`COMMON`), which is why this reader lives in ``cuda/``, below the kernels that use it.

>>> print(cuda_source("elementwise/01_naive.cu").splitlines()[0])
// v0 (notebook 03): one thread per element; square_f and gelu_f are the elementwise functions every
"""
from __future__ import annotations

import re
from pathlib import Path

__all__ = ["CUDA_DIR", "COMMON", "cuda_source", "cuda_files", "cuda_unit"]

CUDA_DIR = Path(__file__).resolve().parent.parent / "kernels" / "cuda"  # the files (data, not an import)
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
