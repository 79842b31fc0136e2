"""Notebook 05's measurements around its Numba kernels (its timings in alternating rounds come from
:mod:`gpu_course.rounds`): the edit loop's costs (:func:`rebuild_after_edit`
for ``load_cuda``, :func:`numba_first_call_fresh` for Numba in a new process), and what the compiled
tiled kernels hold (:func:`ptx_counts`, :func:`cuda_c_ptx`).
"""
from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import time



def rebuild_after_edit(cuda_src: str, cpp_src: str, funcs, line: str) -> tuple:
    """Build ``cuda_src`` with one line edited (``line``, which must occur once, gets a comment holding
    a fresh number, so no cache has seen the text) through ``load_cuda``; return (seconds, module).
    The host code and torch's headers are unchanged, so the build recompiles only the kernels.

    >>> rebuild_after_edit("int a;", "", ["f"], "int b;")
    Traceback (most recent call last):
    ValueError: rebuild_after_edit: the line 'int b;' occurs 0 times in the source, not once
    """
    count = cuda_src.count(line)
    if count != 1:
        raise ValueError(f"rebuild_after_edit: the line {line!r} occurs {count} times in the source, not once")
    from ..cuda import load_cuda
    edited = cuda_src.replace(line, f"{line}  // edited {time.time_ns()}")
    t0 = time.perf_counter()
    mod = load_cuda(edited, cpp_src, funcs)
    return time.perf_counter() - t0, mod


_FRESH = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
import numba
from numba import cuda
t1 = time.perf_counter()
cuda.current_context()
t2 = time.perf_counter()
{kernel_src}
m = cuda.to_device(np.random.rand(256, 256).astype(np.float32))
o = cuda.device_array((256, 256), np.float32)
cuda.synchronize()
t3 = time.perf_counter()
{name}[(16, 16), (16, 16)](m, m, o)
cuda.synchronize()
t4 = time.perf_counter()
{name}[(16, 16), (16, 16)](m, m, o)
cuda.synchronize()
t5 = time.perf_counter()
ok = bool(np.allclose(o.copy_to_host(), m.copy_to_host() @ m.copy_to_host(), rtol=1e-4, atol=1e-3))
print(json.dumps(dict(import_s=t1 - t0, context_s=t2 - t1, first_call_s=t4 - t3, second_call_s=t5 - t4, ok=ok)))
"""


def numba_first_call_fresh(kernel_src: str, name: str, timeout: float = 300) -> dict:
    """Run ``kernel_src`` (a ``@cuda.jit`` kernel ``name`` taking (m, n, out), with what it needs
    from ``numba``, ``cuda``) in a fresh Python on the GPU, on 256 x 256 fp32 inputs with blocks of
    16 x 16, and return the seconds it took to import numba (``import_s``), to create the CUDA
    context (``context_s``), and the kernel's first call (compile + run, ``first_call_s``) and second
    (``second_call_s``), and whether the result was right (``ok``). GPU only: the simulator has
    nothing to compile.
    """
    code = _FRESH.format(kernel_src=kernel_src, name=name)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"numba_first_call_fresh: the fresh process failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def ptx_counts(ptx: str) -> dict:
    """In PTX text: the barriers and shared-memory loads as the exercise checks count them
    (:func:`gpu_course.exercises.compiled.ptx_ops`), the fp32 fused multiply-adds (``fma.rn.f32``) and
    the integer arithmetic (add, multiply, shift, logic... on 32- or 64-bit integers: ``integer``).

    >>> ptx_counts("bar.sync 0;\\n ld.shared.f32 %f1, [%r1];\\n fma.rn.f32 %f2, %f1, %f1, %f2;")
    {'barrier': 1, 'shared_load': 1, 'fma.rn.f32': 1, 'integer': 0}
    """
    from ..exercises.compiled import ptx_ops
    ops = ptx_ops(ptx)
    fma = sum(1 for line in ptx.splitlines() if re.search(r"\bfma\.rn\.f32\b", line))
    integer = sum(1 for line in ptx.splitlines() if re.match(_INT_OP, line))
    return {"barrier": ops["barrier"], "shared_load": ops["shared_load"], "fma.rn.f32": fma, "integer": integer}


_INT_OP = r"\s*(?:@%p\d+\s+)?(?:add|sub|mul|mad|shl|shr|and|or|xor|neg|min|max)(?:\.lo|\.wide|\.hi)?\.[sub](?:32|64)\b"


def cuda_c_ptx(kernel_text: str, instantiation: str = "", arch: str = "sm_90") -> str | None:
    """The PTX nvcc writes for ``kernel_text`` (kernels only, no torch headers; a template needs its
    explicit ``instantiation``), or None when there is no nvcc on this machine. Compile only: no GPU
    needed.
    """
    import shutil
    import tempfile
    from pathlib import Path
    if shutil.which("nvcc") is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        src, ptx = Path(d) / "k.cu", Path(d) / "k.ptx"
        src.write_text(kernel_text + "\n" + instantiation + "\n")
        subprocess.run(["nvcc", f"-arch={arch}", "-ptx", "-o", str(ptx), str(src)], check=True,
                       capture_output=True, text=True)
        return ptx.read_text()


@functools.cache
def _who_kernel():
    global cuda   # a module global: the simulator swaps the kernel's global `cuda` for its own (not a closure's)
    from numba import cuda

    @cuda.jit
    def who(ids):
        c, r = cuda.grid(2)                       # x -> column, y -> row, as in section 1
        if r < ids.shape[1] and c < ids.shape[2]:
            ids[0, r, c] = cuda.blockIdx.x
            ids[1, r, c] = cuda.blockIdx.y
            ids[2, r, c] = cuda.threadIdx.x
            ids[3, r, c] = cuda.threadIdx.y
    return who


def who_computed(h: int, w: int, threads=(4, 4)):
    """Launch, over an ``h`` × ``w`` output in blocks of ``threads`` (x along columns, y along rows), a Numba
    kernel in which each thread writes which block and thread it is into its element: returns an int tensor
    (4, h, w) on the CPU, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y of each element (-1: none wrote it)."""
    import torch
    from ..launch import cdiv, to_numba
    from ..mode import DEVICE, synchronize
    ids = torch.full((4, h, w), -1, dtype=torch.int32, device=DEVICE)
    _who_kernel()[(cdiv(w, threads[0]), cdiv(h, threads[1])), threads](to_numba(ids))
    synchronize()
    return ids.cpu()
