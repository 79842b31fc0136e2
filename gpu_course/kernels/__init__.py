"""Kernels that a notebook teaches and a benchmark times, defined once: the notebook shows their
source (``utils.show_source`` for Triton, ``cuda_source`` for CUDA C) and ``bench/`` imports them.

* ``triton_mean``: notebook 06's parallel means (two-pass, atomic) and the seeds' one-program mean
* ``triton_softmax``: notebook 06's fused row softmax, several rows per program
* ``triton_matmul``: notebook 07's grouped, autotuned matmul with an optional bias + GeLU epilogue
* ``triton_layernorm`` (a package, one module a job): LayerNorm (forward, backward) and GeLU (forward, backward),
  each wrapped as a ``torch.autograd.Function`` and as a ``torch.library`` custom op; notebook 10's
  kernels, timed by ``bench/layernorm.py``
* ``triton_attention`` (a package, one module a job): attention, naive and online-softmax in torch,
  FlashAttention's forward and FlashAttention-2's backward in Triton; notebook 11's
  kernels, timed by ``bench/flash_attention.py``
* ``triton_decode``: notebook 16's decode attention: split-KV with its combine, GQA's query rows sharing a program,
  a paged KV cache read through a block table
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
that is ``utils.cuda_begin``) and the files it builds on. Their reader, re-exported here, is
:mod:`gpu_course.cuda.files`: :func:`cuda_source` gives a file as a notebook
prints it (without those lines), :func:`cuda_unit` the one string ``load_cuda`` builds for some files
(everything they include, in include order), :func:`cuda_ints` a constant the CUDA C defines.

The Triton modules import triton; import them after ``utils`` (or ``gpu_course``), which sets the
interpreter switch first. This module itself imports neither.

>>> print(cuda_source("elementwise/01_naive.cu").splitlines()[0])
// v0 (notebook 03): one thread per element; square_f and gelu_f are the elementwise functions every
"""
from __future__ import annotations

import re

# the .cu files' reader lives in cuda/ (load_cuda's prelude, cuda_begin, is one of the files); kernels/ re-exports it
from ..cuda.files import COMMON, CUDA_DIR, cuda_files, cuda_source, cuda_unit  # noqa: F401


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


# ---- single-file kernels of inline PTX: where they run, and their build ---------------------------------------------

def ptx_runs_here(feature: str, who: str, needs: str) -> tuple:
    """``(True, "")`` where a kernel of inline PTX gated by the course's ``feature`` (:data:`gpu_course.hardware.
    FEATURES`; ``COURSE_FAKE_CC`` pretends) runs here, else ``(False, reason)``, the reason one line naming ``who``:
    on a GPU by that gate; never in cpu mode, whose emulation runs CUDA C, not PTX (``needs`` says what the PTX
    needs, for that line)."""
    from ..hardware import compute_capability, supports
    from ..mode import ON_GPU
    cc = compute_capability()
    if cc is not None:
        ok, why = supports(feature, cc)
        if not ok:
            return False, f"{who}: {why}"
    if not ON_GPU:
        return False, f"{who}: {needs}; the CPU emulation runs CUDA C, not PTX"
    return True, ""


def build_source(src: str, funcs: list, **load_cuda_kwargs):
    """Build (or load from the cache) the CUDA C ``src`` as a module exposing the host functions ``funcs`` (their
    declarations read from ``src``)."""
    from ..cuda import get_sig, load_cuda
    return load_cuda(src, "\n".join(get_sig(f, src) for f in funcs), funcs, **load_cuda_kwargs)


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
