"""Notebook 17's kernels in CuTe DSL (NVIDIA's CUTLASS Python DSL, ``pip install nvidia-cutlass-dsl``), beside
their Helion (:mod:`.helion_kernels`), Triton (:mod:`.triton_softmax`, :mod:`.triton_matmul`) and CUDA C
(``cuda/tensor_cores/05_wgmma_tma.cu``) versions; one kernel family a module:

* :mod:`.cute_softmax`: the row softmax, 128-bit loads, predicates for the edges, shuffles for the reductions
  (any recent NVIDIA GPU);
* :mod:`.cute_matmul`: the fp16 matmul with fp32 accumulation for Hopper (sm_90a), a TMA copy atom, a wgmma MMA
  atom and a pipeline of ``num_stages`` shared-memory stages, warp-specialised as notebook 12's CUDA C and
  persistent, with the bias + GeLU epilogue as a switch.

Each host wrapper takes torch tensors, writes into the ``out`` the caller gives (so that a check can hand it a
NaN-poisoned tensor), and compiles once per shape (``cute.compile``, about a second), with ``--enable-tvm-ffi``: the
compiled function takes the torch tensors themselves and launches on torch's current stream, so that a call costs
the CPU its argument checks and one C++ call (20 to 40 µs on an H200's host), not a Python conversion of each
tensor (DLPack into a CuTe tensor, the DSL's default path, several times that). Compiling needs no GPU:
:func:`softmax_ptx` and :func:`matmul_ptx` compile from the shapes alone, for the architecture they are given
(``--gpu-arch sm_90a``: without a GPU the DSL cannot ask one, and ``CUTE_DSL_ARCH`` is read only when ``cutlass`` is
first imported), and return the PTX. CuTe DSL is optional: without it, importing this module raises ImportError
(its ``name`` is ``"cutlass"``, which the notebooks' skip machinery reads); nothing else in the course imports it
at import time.
"""
from __future__ import annotations

import os
import re
import tempfile

# ImportError (name "cutlass") where CuTe DSL is missing
from .cute_matmul import (CONFIG, check_config, check_sizes, compile_matmul, matmul,  # noqa: F401
                          shared_bytes, tflops)
from .cute_softmax import MAX_W, compile_softmax, softmax, softmax_config, softmax_dlpack  # noqa: F401

PTX_DIR = os.path.join(tempfile.gettempdir(), "gpu_course_cute_ptx")
KEEP_PTX = f"--keep-ptx --dump-dir {PTX_DIR}"   # the compile options that keep the PTX


def ptx(compiled) -> str:
    """The PTX of a kernel compiled with ``options=KEEP_PTX``: the DSL gives either the text or the file it wrote."""
    text = compiled.__ptx__ or ""
    if len(text) < 4096 and os.path.isfile(text):
        with open(text) as f:
            return f.read()
    return text


def softmax_ptx(shape, dtype, arch: str = "sm_90a") -> str:
    """The PTX of the softmax for ``shape`` and ``dtype`` (row-major), compiled here for ``arch``, no GPU needed."""
    os.makedirs(PTX_DIR, exist_ok=True)
    return ptx(compile_softmax(tuple(shape), dtype, options=f"{KEEP_PTX} --gpu-arch {arch}"))


def matmul_ptx(h: int, w: int, k: int, has_bias: bool = False, activation: str = "", cfg=None) -> str:
    """The PTX of the matmul for ``(h x k) @ (k x w)`` with these switches and ``cfg`` (default ``CONFIG``),
    compiled here for Hopper (sm_90a, the only architecture it is written for), no GPU needed."""
    os.makedirs(PTX_DIR, exist_ok=True)
    return ptx(compile_matmul(h, w, k, has_bias, activation, cfg, options=f"{KEEP_PTX} --gpu-arch sm_90a"))


def opcodes(ptx_text: str, *prefixes: str) -> dict:
    """How many instructions of ``ptx_text`` start with each of ``prefixes``, by full opcode
    (e.g. ``{"wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16": 4}``): what a reading of the PTX counts."""
    found: dict = {}
    for line in ptx_text.splitlines():
        op = line.strip().split(" ")[0].split("\t")[0].rstrip(";")
        if op.startswith(prefixes):
            found[op] = found.get(op, 0) + 1
    return found


def wgmma_descriptors(ptx_text: str) -> list:
    """The constant parts of the wgmma shared-memory descriptors in ``ptx_text`` (64-bit immediates with a swizzle
    mode in bits 62-63), decoded as notebook 12's ``wg_desc`` builds them: ``(lbo, sbo, swizzle)`` with the byte
    offsets in bytes and the mode (1: 128-byte swizzle). The start address, added at run time, is not in them."""
    found = []
    for imm in sorted({int(v) for v in re.findall(r"\b(\d{18,20})\b", ptx_text)}):
        if imm < 1 << 64 and imm >> 62 and not imm & 0x3fff:
            found.append((((imm >> 16) & 0x3fff) << 4, ((imm >> 32) & 0x3fff) << 4, imm >> 62))
    return found
