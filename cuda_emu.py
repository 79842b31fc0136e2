"""Build and run the course's CUDA C on a CPU: an emulation for machines without a GPU.

``utils.load_cuda`` calls :func:`load` in CPU mode. It takes the same sources as
``torch.utils.cpp_extension.load_inline`` and returns a module exposing ``funcs``:

>>> import cuda_emu, torch                                                        # doctest: +SKIP
>>> src = utils.cuda_begin + r'''                                              # doctest: +SKIP
... __global__ void square_k(const float* __restrict__ x, float* __restrict__ out, int n) {
...     int i = blockIdx.x * blockDim.x + threadIdx.x;
...     if (i < n) out[i] = x[i] * x[i];
... }
... torch::Tensor square(torch::Tensor x) {
...     CHECK_INPUT(x);
...     auto out = torch::empty_like(x);
...     int n = x.numel(), threads = 256;
...     square_k<<<cdiv(n, threads), threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
...     C10_CUDA_KERNEL_LAUNCH_CHECK();
...     return out;
... }'''
>>> m = cuda_emu.load(src, "torch::Tensor square(torch::Tensor x);", ["square"])  # doctest: +SKIP
>>> m.square(torch.arange(4.0))                                                  # doctest: +SKIP
tensor([0., 1., 4., 9.])

How it runs
-----------
Blocks run one after another.  The threads of a block run as cooperative fibers on one OS
thread (a 20-instruction context switch on x86-64, ucontext elsewhere) and switch only at
``__syncthreads()``: between two barriers a thread runs alone, from where it was to its next
barrier, in thread order.  So a missing barrier gives a real race, the same every run.  A barrier
that only part of a block reaches (e.g. after an early ``return``), or threads waiting at
different ``__syncthreads()``, raise :class:`CudaEmulationError` naming the line, block and
threads: no hang.  (``CUDA_EMU_STRICT_BARRIERS=0`` lets returned threads count as arrived, as
most GPUs do in practice.)

Checks a GPU would not make (``checked=True``, the default):

* kernel pointer parameters become bounds-checked pointers (``cuda_emu::gptr<T>``): an access
  outside the tensor that ``data_ptr()`` came from raises an error naming the kernel, block,
  thread, parameter and index, before the bad write happens;
* ``__shared__`` arrays are bounds-checked, ``extern __shared__`` against the launch's size;
* shared memory is filled with all-ones bits (NaN for float, -1 for int) at the start of every
  block, so reading shared memory that no thread wrote shows up;
* a ``reinterpret_cast`` of a kernel pointer to ``float4*`` etc. checks the alignment;
* a segfault, stack overflow or integer division by zero inside a kernel raises instead of
  killing Python; so do ``assert``, ``exit`` and ``abort``.

Pointers the emulation cannot bound (computed in host code, not from ``data_ptr``, or copied into
a plain ``float*`` inside the kernel) are not checked.  A build that fails only because of the
checked types (e.g. a helper template deducing ``T`` from a ``T*``) is retried unchecked.

Not modelled: concurrency between threads between barriers (a non-atomic ``x += 1`` from many
threads gives the right answer here, unlike on a GPU), warps, timing, the memory hierarchy.

What is supported, what is refused
----------------------------------
Supported: ``__global__ / __device__ / __host__ / __forceinline__ / __noinline__ /
__launch_bounds__ / __constant__ / __restrict__``; ``dim3``, ``threadIdx / blockIdx / blockDim /
gridDim`` in 1-3 dimensions, ``warpSize``; launches ``k<<<grid, block[, smem[, 0]]>>>(...)``
including templated kernels ``k<16><<<...>>>`` (launch limits are checked as on a GPU);
static ``__shared__`` (also at file scope) and ``extern __shared__``; ``__syncthreads()`` and
``__syncthreads_count/and/or``, ``__threadfence*``; ``atomicAdd/Sub/Exch/Min/Max/Inc/Dec/CAS/And/
Or/Xor`` (int, unsigned, unsigned long long, float, double; ``_block``/``_system``); ``printf``
(flushed at the end of every launch, so ``wurlitzer.pipes()`` sees it); device math (``expf``,
``tanhf``, ``__expf``, ``rsqrtf``, ``fmaxf``, ``min/max`` on mixed types, ``__fdividef``,
``__float_as_int``, ``__popc``...); vector types ``float4`` & co with ``make_float4`` (CUDA's
alignment); ``__ldg`` and the other cache-hint loads; ``cudaGetLastError / cudaDeviceSynchronize
/ cudaGetErrorString``; host code with ``torch::Tensor``, ``data_ptr``, ``TORCH_CHECK``,
``C10_CUDA_KERNEL_LAUNCH_CHECK()``, ``C10_CUDA_CHECK``, ``AT_DISPATCH_*``, tensor accessors.
Functions in ``funcs`` may take tensors, ints, floats, bools, strings, ``std::vector`` and
``std::optional`` of those, and return those, ``void`` or ``std::tuple``.

Host code is mapped to the CPU: ``x.is_cuda()`` becomes ``x.is_cpu()``, ``kCUDA`` becomes
``kCPU``, ``DeviceType::CUDA`` becomes ``DeviceType::CPU`` and ``x.cuda()`` becomes ``x.cpu()``
(also inside ``#define`` macros), so ``CHECK_CUDA`` accepts the CPU tensors of CPU mode.

Refused at build time with :class:`CudaEmulationError` ("<feature> (<name>) is not supported by
the CPU emulation; run on a GPU", with the line): warp shuffles, votes, reductions and
``__syncwarp``; cooperative groups; ``cudaMalloc/cudaMemcpy/cudaFree`` and every other CUDA
runtime call not listed above; streams (also a 4th launch argument other than 0) and events;
tensor cores (wmma/mma); inline ``asm``; half/bfloat16/fp8 intrinsics; textures;
``__managed__``; ``clock()``; ``cp.async``; launches inside kernels or inside ``#define``s; CUDA
library headers (cub, thrust, cutlass, cuBLAS, cuRAND, ...) and ``ATen/cuda`` headers.

When ``nvcc`` is on PATH, the device part of the source (host functions that use torch are left
out) is also compiled with ``nvcc --ptx -arch=sm_80``, alongside the CPU build (~0.3 s): a kernel
that the emulation accepts but a GPU would not (e.g. calling a host function) raises.  Sources
whose device code uses torch types (packed accessors) skip this check, and nvcc errors that
involve torch names are ignored (the extract leaves torch out).  ``nvcc_check=False`` or
``CUDA_EMU_NVCC=0`` turns it off.

Builds
------
The host C++ compiler builds the source against a precompiled header (the emulator plus a
"lite" slice of ATen: Tensor, its methods and operators, factories, AT_DISPATCH) and links a
precompiled runtime object; the binding to Python uses the CPython API (no pybind11).  A typical
small source builds in ~1 s; the header and runtime are built once per machine (~10 s, ~150 MB
under the cache directory).  A source that uses more of torch (``torch::matmul``,
``torch::tensor``, ``#include <ATen/...>``) is built against all of ATen (another precompiled
header, built once, ~15 s and ~400 MB; then ~4 s per build), or against ``torch/all.h`` (no
precompiled header, ~25 s), escalating automatically.  Builds are named by a hash of the sources,
options and emulator, and cached in ``$CUDA_EMU_CACHE`` (default ``~/.cache/gpu-course/cuda_emu``):
an unchanged source reloads in milliseconds; each build directory keeps the generated
``main.cpp`` and, after a failure, ``build.log``.  Compile errors show the compiler's own error
lines first, as ``cuda_src:LINE:COL: error: ...`` with the learner's line under each.

Environment: ``CUDA_EMU_CACHE`` (cache directory), ``CUDA_EMU_CHECKED=0`` (no bounds checks),
``CUDA_EMU_NVCC=0`` (no nvcc check), ``CUDA_EMU_STRICT_BARRIERS=0`` (see above),
``CUDA_EMU_STACK_KB`` (stack per emulated thread, default 256), ``CUDA_EMU_FIBERS=ucontext``
(portable fiber switch), ``CUDA_EMU_PCH=0`` (no precompiled headers), ``CXX`` (compiler).
Linux with g++ is what is tested; other compilers build without precompiled headers.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["load", "CudaEmulationError", "HEADER_DIR", "cache_dir"]

HEADER_DIR = Path(__file__).resolve().parent / "cuda_emu"
_VERSION = "1"  # bump to invalidate every cached build


class CudaEmulationError(RuntimeError):
    """A CUDA feature the CPU emulation does not support, a failed build, or a kernel error
    found while emulating (out-of-bounds access, divergent ``__syncthreads``, bad launch)."""


# ----------------------------------------------------------------------------------------------
# Tokenizer: enough C++ to find kernels, launches and declarations without being fooled by
# comments, strings or preprocessor lines.
# ----------------------------------------------------------------------------------------------
@dataclass
class Tok:
    kind: str   # id, num, str, chr, punct, pp (a whole preprocessor directive)
    text: str
    start: int
    end: int
    line: int   # 1-based


_TOKEN_RE = re.compile(r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+|\\\n)
  | (?P<comment>//(?:[^\n\\]|\\.|\\\n)*|/\*.*?\*/)
  | (?P<str>(?:u8|u|U|L)?R"(?P<delim>[^()\\ \n]{0,16})\(.*?\)(?P=delim)"
            |(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")
  | (?P<chr>(?:u8|u|U|L)?'(?:[^'\\\n]|\\.)*')
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<punct><<<|>>>|::|->|\.\.\.|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--|[-+*/%&|^]=
             |[-+*/%&|^!~=<>()\[\]{};,.?:\#@$`\\])
""", re.S | re.X)

_PP_RE = re.compile(r"[ \t]*\#(?:[^\n\\/]|\\.|\\\n|/\*.*?\*/|/(?![*/]))*(?://[^\n]*)?", re.S)


def tokenize(src: str, directives: bool = True) -> list[Tok]:
    """Code tokens of ``src`` (comments and whitespace dropped; a directive is one ``pp`` token).

    >>> [t.text for t in tokenize('k<<<1, 2>>>(x); // hi')]
    ['k', '<<<', '1', ',', '2', '>>>', '(', 'x', ')', ';']
    """
    toks, pos, line, line_start = [], 0, 1, True
    n = len(src)
    while pos < n:
        if line_start and directives:
            m = _PP_RE.match(src, pos)
            if m and m.group().lstrip().startswith("#"):
                text = m.group()
                toks.append(Tok("pp", text, m.start(), m.end(), line))
                line += text.count("\n")
                pos = m.end()
                line_start = False
                continue
        m = _TOKEN_RE.match(src, pos)
        if not m:  # a stray character: keep it as punctuation
            toks.append(Tok("punct", src[pos], pos, pos + 1, line))
            pos += 1
            line_start = False
            continue
        kind = m.lastgroup if m.lastgroup != "delim" else "str"
        text = m.group()
        if kind == "nl":
            line += 1
            line_start = True
        elif kind in ("ws", "comment"):
            line += text.count("\n")
            if "\n" in text and kind == "comment" and text.startswith("//"):
                line_start = True
        else:
            if kind == "delim":
                kind = "str"
            toks.append(Tok(kind, text, m.start(), m.end(), line))
            line += text.count("\n")
            line_start = False
        pos = m.end()
    return toks


def _match_brackets(toks: list[Tok]) -> dict[int, int]:
    """Index of the matching bracket for every (), [], {} token (both directions)."""
    pairs, stack = {}, []
    opening, closing = {"(": ")", "[": "]", "{": "}"}, {")": "(", "]": "[", "}": "{"}
    for i, t in enumerate(toks):
        if t.kind != "punct":
            continue
        if t.text in opening:
            stack.append(i)
        elif t.text in closing:
            # unwind to the matching opener; a syntax error is left for the compiler
            for k in range(len(stack) - 1, -1, -1):
                if toks[stack[k]].text == closing[t.text]:
                    j = stack[k]
                    del stack[k:]
                    pairs[i], pairs[j] = j, i
                    break
    return pairs


# ----------------------------------------------------------------------------------------------
# What the emulation refuses, found before compiling so the message is about CUDA, not C++.
# ----------------------------------------------------------------------------------------------
def _features(names: str, what: str) -> dict[str, str]:
    return {n: what for n in names.split()}


_UNSUPPORTED = {
    **_features("__shfl __shfl_up __shfl_down __shfl_xor __shfl_sync __shfl_up_sync "
                "__shfl_down_sync __shfl_xor_sync", "warp shuffle"),
    **_features("__syncwarp", "warp synchronisation"),
    **_features("__ballot __ballot_sync __all __all_sync __any __any_sync __activemask "
                "__match_any_sync __match_all_sync __uni_sync __lanemask_lt __lanemask_eq",
                "warp vote"),
    **_features("__reduce_add_sync __reduce_min_sync __reduce_max_sync __reduce_and_sync "
                "__reduce_or_sync __reduce_xor_sync", "warp reduction"),
    **_features("cooperative_groups this_thread_block this_grid tiled_partition "
                "thread_block_tile grid_group coalesced_threads", "cooperative groups"),
    **_features("cudaMalloc cudaMallocManaged cudaMallocHost cudaMallocAsync cudaMallocPitch "
                "cudaHostAlloc cudaMemcpy cudaMemcpyAsync cudaMemcpy2D cudaMemset cudaMemsetAsync "
                "cudaFree cudaFreeHost cudaFreeAsync cudaMemcpyToSymbol cudaMemcpyFromSymbol "
                "cudaMemcpyHostToDevice cudaMemcpyDeviceToHost cudaMemcpyDeviceToDevice",
                "CUDA memory management (use torch tensors instead)"),
    **_features("cudaStream_t cudaStreamCreate cudaStreamDestroy cudaStreamSynchronize "
                "cudaStreamWaitEvent getCurrentCUDAStream getStreamFromPool CUDAStream "
                "cudaStreamDefault cudaStreamNonBlocking", "CUDA streams"),
    **_features("cudaEvent_t cudaEventCreate cudaEventRecord cudaEventSynchronize "
                "cudaEventElapsedTime cudaEventDestroy", "CUDA events"),
    **_features("wmma nvcuda mma_sync load_matrix_sync store_matrix_sync fill_fragment "
                "__hmma_m16n16k16_mma_f32f32", "tensor cores (wmma/mma)"),
    **_features("asm __asm __asm__", "inline assembly (asm/PTX)"),
    **_features("__half __half2 __nv_bfloat16 __nv_bfloat162 __float2half __half2float "
                "__float2bfloat16 __bfloat162float __hadd __hmul __hfma __float22half2_rn "
                "__nv_fp8_e4m3 __nv_fp8_e5m2", "half/bfloat16/fp8 types"),
    **_features("tex1Dfetch tex1D tex2D tex3D texture cudaTextureObject_t surf2Dwrite "
                "surf2Dread cudaSurfaceObject_t", "textures and surfaces"),
    **_features("__managed__", "managed memory (__managed__)"),
    **_features("clock clock64 __nanosleep globaltimer", "GPU clocks and sleeping"),
    **_features("CUDAGuard OptionalCUDAGuard CUDAStreamGuard", "CUDA device/stream guards"),
    **_features("__pipeline_memcpy_async __pipeline_commit __pipeline_wait_prior "
                "cp_async memcpy_async", "asynchronous copies (cp.async)"),
}
# The CUDA runtime calls that make sense on the CPU; any other cudaXxx name is refused.
_CUDA_API_OK = {"cudaGetLastError", "cudaPeekAtLastError", "cudaDeviceSynchronize",
                "cudaGetErrorString", "cudaGetErrorName", "cudaSuccess", "cudaError_t",
                "cudaError", "cudaErrorInvalidValue", "cudaErrorInvalidConfiguration"}
_INCLUDE_OK_CUDA = {"cuda_runtime.h", "cuda.h", "cuda_runtime_api.h",
                    "device_launch_parameters.h", "c10/cuda/CUDAException.h"}
_INCLUDE_REFUSED = [
    (re.compile(r"cooperative_groups"), "cooperative groups"),
    (re.compile(r"^mma\.h$|^crt/mma"), "tensor cores (wmma/mma)"),
    (re.compile(r"cuda_fp16|cuda_bf16|cuda_fp8"), "half/bfloat16/fp8 types"),
    (re.compile(r"^(cub|thrust|cuda|cute|cutlass)/"), "CUDA C++ libraries (cub, thrust, cutlass, libcu++)"),
    (re.compile(r"cublas|cudnn|curand|cufft|cusparse|cusolver|nccl|nvrtc|nvtx"), "CUDA libraries"),
    (re.compile(r"^(ATen|c10)/cuda/|^(ATen|c10)/hip/"), "CUDA-specific torch headers"),
    (re.compile(r"cuda_pipeline|cuda_awbarrier"), "asynchronous copies (cp.async)"),
]
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def _refusal(origin: str, line: int, what: str, name: str, src_line: str) -> str:
    return (f"{origin} line {line}: {what} ({name}) is not supported by the CPU emulation; "
            f"run on a GPU.\n{line:6d} | {src_line.strip()}")


def check_supported(src: str, toks: list[Tok], origin: str = "cuda_src") -> None:
    """Raise :class:`CudaEmulationError` listing each feature outside the emulated subset.

    >>> check_supported("int x = __shfl_down_sync(0xffffffff, v, 1);",
    ...                 tokenize("int x = __shfl_down_sync(0xffffffff, v, 1);"))
    Traceback (most recent call last):
    ...
    cuda_emu.CudaEmulationError: cuda_src line 1: warp shuffle (__shfl_down_sync) is not supported by the CPU emulation; run on a GPU.
         1 | int x = __shfl_down_sync(0xffffffff, v, 1);
    """
    lines = src.splitlines() or [""]
    problems, seen = [], set()

    def add(line, what, name):
        if (line, name) not in seen:
            seen.add((line, name))
            problems.append(_refusal(origin, line, what, name, lines[min(line, len(lines)) - 1]))

    for i, t in enumerate(toks):
        if t.kind == "pp":
            m = _INCLUDE_RE.match(t.text)
            if m and m.group(1) not in _INCLUDE_OK_CUDA:
                for pat, what in _INCLUDE_REFUSED:
                    if pat.search(m.group(1)):
                        add(t.line, what, f"#include <{m.group(1)}>")
            if "<<<" in t.text and re.match(r"\s*#\s*define", t.text):
                add(t.line, "a kernel launch inside a #define", "<<<")
            continue
        if t.kind != "id":
            continue
        if t.text in ("clock", "texture") and (i + 1 >= len(toks) or toks[i + 1].text not in ("(", "<")):
            continue  # ordinary identifiers unless called / templated
        if t.text in _UNSUPPORTED:
            add(t.line, _UNSUPPORTED[t.text], t.text)
        elif re.match(r"cuda[A-Z]\w*$", t.text) and t.text not in _CUDA_API_OK:
            add(t.line, "the CUDA runtime API", t.text)
    if problems:
        more = f"\n(and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise CudaEmulationError("\n".join(problems[:8]) + more)


# ----------------------------------------------------------------------------------------------
# Source transformation.  Edits never add or remove a newline, so line numbers stay the
# learner's and `#line 1 "cuda_src"` maps compiler messages back exactly.
# ----------------------------------------------------------------------------------------------
_KEYWORDS = set("""alignas alignof asm auto bool break case catch char class const constexpr
    const_cast continue decltype default delete do double dynamic_cast else enum explicit extern
    false float for friend goto if inline int long mutable namespace new noexcept nullptr operator
    private protected public register reinterpret_cast return short signed sizeof static
    static_assert static_cast struct switch template this throw true try typedef typeid typename
    union unsigned using virtual void volatile while co_return co_await co_yield""".split())
_PTR_QUALS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
_FUNC_ATTRS = {"__launch_bounds__", "__align__", "alignas", "__attribute__", "__declspec",
               "__maxnreg__", "__cluster_dims__"}


@dataclass
class Function:
    qualifier: str          # __global__ or __device__
    name: str
    lparen: int             # token indices
    rparen: int
    body: tuple[int, int] | None  # { and } token indices, None for a declaration


class Rewriter:
    """Collects text edits (start, end, replacement) on a source and applies them."""

    def __init__(self, src: str):
        self.src, self.edits = src, []

    def replace(self, start: int, end: int, text: str) -> None:
        # keep every newline of the replaced text, so line numbers do not move
        self.edits.append((start, end, len(self.edits), text + "\n" * self.src.count("\n", start, end)))

    def insert(self, pos: int, text: str) -> None:
        self.edits.append((pos, pos, len(self.edits), text))

    def apply(self) -> str:
        out, pos = [], 0
        for start, end, _, text in sorted(self.edits, key=lambda e: (e[0], e[1], e[2])):
            if start < pos:  # overlapping edit: the first one wins
                continue
            out += [self.src[pos:start], text]
            pos = end
        out.append(self.src[pos:])
        return "".join(out)


def find_functions(toks: list[Tok], match: dict[int, int]) -> list[Function]:
    """``__global__`` and ``__device__`` functions (definitions and declarations)."""
    funcs = []
    for i, t in enumerate(toks):
        if t.kind != "id" or t.text not in ("__global__", "__device__"):
            continue
        j = i + 1
        while j < len(toks):
            u = toks[j]
            if u.text in (";", "{", "=", "}") or u.kind == "pp":
                break  # a variable (or garbage), not a function
            if u.text == "(":
                prev = toks[j - 1]
                if prev.text in _FUNC_ATTRS and j in match:
                    j = match[j] + 1
                    continue
                if prev.kind == "id" and prev.text not in _KEYWORDS and j in match:
                    rp = match[j]
                    k = rp + 1
                    while k < len(toks) and toks[k].text not in ("{", ";", "}"):
                        k = match.get(k, k) + 1 if toks[k].text == "(" else k + 1
                    body = (k, match[k]) if k < len(toks) and toks[k].text == "{" and k in match else None
                    funcs.append(Function(t.text, prev.text, j, rp, body))
                break
            j += 1
    return funcs


def _split_params(toks: list[Tok], lp: int, rp: int, match: dict[int, int]) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the parameters between parentheses lp and rp."""
    params, a, j, angle = [], lp + 1, lp + 1, 0
    while j < rp:
        x = toks[j].text
        if x in ("(", "[", "{") and j in match:
            j = match[j] + 1
            continue
        if x == "<":
            angle += 1
        elif x == ">" and angle:
            angle -= 1
        elif x == ">>" and angle:
            angle = max(0, angle - 2)
        elif x == "," and angle == 0:
            params.append((a, j))
            a = j + 1
        j += 1
    if a < rp:
        params.append((a, rp))
    return params


def _param_name(ptoks: list[Tok]) -> str:
    """The declared name of one parameter ('' when unnamed)."""
    eq = next((k for k, t in enumerate(ptoks) if t.text == "="), len(ptoks))
    body = ptoks[:eq]
    while body and body[-1].text == "]":  # float x[4]
        k = max(k for k, t in enumerate(body) if t.text == "[")
        body = body[:k]
    if len(body) >= 2 and body[-1].kind == "id" and body[-1].text not in _KEYWORDS | _PTR_QUALS:
        return body[-1].text
    return ""


def _checked_param(src: str, ptoks: list[Tok]) -> str | None:
    """``const float* __restrict__ x`` -> ``::cuda_emu::gptr<const float> x`` (None: keep as is)."""
    if any(t.text == "=" for t in ptoks):
        return None
    depth, stars = 0, []
    for k, t in enumerate(ptoks):
        if t.text == "<":
            depth += 1
        elif t.text == ">":
            depth -= 1
        elif t.text == "*" and depth == 0:
            stars.append(k)
        elif t.text in ("(", "[", "&", "&&", "...") and depth == 0:
            return None  # function pointers, arrays, references, packs
    if len(stars) != 1 or stars[0] == 0:
        return None
    s = stars[0]
    base = src[ptoks[0].start:ptoks[s - 1].end].replace("\n", " ")
    if re.fullmatch(r"\s*(const\s+|volatile\s+)*void(\s+const|\s+volatile)*\s*", base):
        return None
    after = ptoks[s + 1:]
    names = [t.text for t in after if t.text not in _PTR_QUALS]
    if len(names) > 1 or any(not re.fullmatch(r"[A-Za-z_]\w*", x) for x in names):
        return None
    const = "const " if any(t.text == "const" for t in after) else ""
    return f"{const}::cuda_emu::gptr<{base}> {names[0] if names else ''}".rstrip()


def _kernel_expr_start(toks: list[Tok], i: int) -> int | None:
    """Index of the first token of the kernel expression before ``<<<`` at index i."""
    k = i - 1
    if k < 0:
        return None
    if toks[k].text in (">", ">>"):  # template arguments: k<16, T>
        depth = 0
        while k >= 0:
            x = toks[k].text
            depth += {">": 1, ">>": 2, "<": -1}.get(x, 0)
            if depth == 0:
                break
            k -= 1
        k -= 1
    if k < 0 or toks[k].kind != "id":
        return None
    while k >= 2 and toks[k - 1].text == "::" and toks[k - 2].kind == "id":
        k -= 2
    if k >= 1 and toks[k - 1].text == "::":
        k -= 1
    return k


def _expr_start_before(toks: list[Tok], dot: int, match: dict[int, int]) -> int | None:
    """Start of the postfix expression that ends just before toks[dot] ('.'), or None."""
    k, start = dot - 1, None
    while k >= 0:
        t = toks[k]
        if t.text in (")", "]") and k in match:
            start = k = match[k]
            k -= 1
            if k >= 0 and toks[k].kind == "id" and toks[k].text not in _KEYWORDS:
                continue  # f(...) / a[...]
            if k >= 0 and toks[k].text in (">", ">>", "]", ")", "::", "."):
                return None  # casts, templates, chained calls: leave alone
            return start
        if t.kind == "id" and t.text not in _KEYWORDS:
            start = k
            k -= 1
            if k >= 0 and toks[k].text in (".", "->", "::"):
                if toks[k].text == "::" and (k == 0 or toks[k - 1].kind != "id"):
                    return k  # ::name
                k -= 1
                continue
            if k >= 0 and toks[k].text in (">", ">>"):
                return None  # foo<T>::x
            return start
        if t.text == "this":
            return k
        return None
    return start


@dataclass
class Transformed:
    text: str
    kernels: dict[str, list[str]]   # kernel name -> parameter names


def _shared_decl(src, toks, i, match, in_function, checked, origin) -> tuple[int, int, str] | None:
    """Rewrite of the ``__shared__`` declaration around toks[i]: (start, end, text), None to keep."""
    a = i
    while a > 0 and toks[a - 1].text in ("extern", "static", "volatile"):
        a -= 1
    b = i + 1
    while b < len(toks) and toks[b].text not in (";", "}"):
        b = match.get(b, b) + 1 if toks[b].text in ("(", "[", "{") else b + 1
    if b >= len(toks) or toks[b].text != ";":
        return None
    is_extern = any(toks[k].text == "extern" for k in range(a, b))
    is_volatile = any(toks[k].text == "volatile" for k in range(a, b))
    rest, k = [], a  # token indices without storage qualifiers and __align__(n)
    while k < b:
        x = toks[k].text
        if x in ("extern", "static", "__shared__", "volatile"):
            k += 1
        elif x in ("__align__", "alignas") and k + 1 < b and toks[k + 1].text == "(" and k + 1 in match:
            k = match[k + 1] + 1
        else:
            rest.append(k)
            k += 1
    if any(toks[k].text in ("=", "{") for k in rest):
        raise CudaEmulationError(
            f"{origin} line {toks[i].line}: a __shared__ variable cannot have an initializer "
            f"(CUDA rejects it too): assign it inside the kernel, then __syncthreads().")
    groups, cur, depth = [], [], 0  # declarators: TYPE name[dims], name2[dims] ...
    for k in rest:
        x = toks[k].text
        depth += {"[": 1, "(": 1, "<": 1, "]": -1, ")": -1, ">": -1}.get(x, 0)
        if x == "," and depth == 0:
            groups.append(cur)
            cur = []
        else:
            cur.append(k)
    groups.append(cur)
    first = groups[0]
    ni = next((p for p, k in enumerate(first) if toks[k].text == "["), len(first)) - 1
    if ni < 1 or toks[first[ni]].kind != "id":
        return None
    vol = "volatile " if is_volatile else ""
    type_text = vol + src[toks[first[0]].start:toks[first[ni - 1]].end].replace("\n", " ")
    groups[0] = first[ni:]
    out = []
    for grp in groups:
        if not grp or toks[grp[0]].kind != "id":
            return None
        name, dims, p = toks[grp[0]].text, [], 1
        while p < len(grp) and toks[grp[p]].text == "[" and grp[p] in match:
            close = match[grp[p]]
            dims.append(" ".join(src[toks[grp[p]].end:toks[close].start].split()))
            p += close - grp[p] + 1
        if p != len(grp):
            return None
        if is_extern:
            if in_function and not checked:
                out.append(f"{type_text}* const {name} = reinterpret_cast<{type_text}*>(::cuda_emu::g.dyn);")
            else:
                out.append(f'static ::cuda_emu::dshared<{type_text}> {name}{{"{name}"}};')
            continue
        if dims and checked and not is_volatile and all(dims):
            decl = f"static ::cuda_emu::shared_array<{type_text}, {', '.join(f'({d})' for d in dims)}> {name}"
        else:
            decl = f"static {type_text} {name}" + "".join(f"[{d}]" for d in dims)
        out.append(f"{decl} __attribute__((aligned(16))); static ::cuda_emu::shared_reg "
                   f"cuda_emu_reg_{name}_{toks[i].line}((void*)&{name}, sizeof({name}), \"{name}\");")
    return toks[a].start, toks[b].end, " ".join(out)


def transform(src: str, *, checked: bool = True, origin: str = "cuda_src") -> Transformed:
    """Rewrite CUDA C into C++ for cuda_emu.h (see the module docstring for what changes)."""
    toks = tokenize(src)
    match = _match_brackets(toks)
    funcs = find_functions(toks, match)
    device_bodies = [f.body for f in funcs if f.body]
    rw = Rewriter(src)

    def in_device_code(i: int) -> bool:
        return any(a < i < b for a, b in device_bodies)

    kernels: dict[str, list[str]] = {}
    for f in funcs:
        if f.qualifier != "__global__":
            continue
        params = _split_params(toks, f.lparen, f.rparen, match)
        names = [_param_name(toks[a:b]) for a, b in params]
        if f.body or f.name not in kernels:
            kernels[f.name] = names
        if checked:
            for a, b in params:
                new = _checked_param(src, toks[a:b])
                if new is not None:
                    rw.replace(toks[a].start, toks[b - 1].end, new)

    for i, t in enumerate(toks):
        if t.kind == "punct" and t.text == "<<<":
            _rewrite_launch(src, toks, i, match, rw, kernels, in_device_code(i), origin)
        elif t.kind == "id" and t.text == "__shared__":
            r = _shared_decl(src, toks, i, match, in_device_code(i), checked, origin)
            if r:
                rw.replace(*r)
        elif t.kind == "pp" and re.match(r"\s*#\s*define\b", t.text):
            # macros such as cuda_begin's CHECK_CUDA get the same host-side mapping
            sub = Rewriter(t.text)
            mtoks = tokenize(t.text, directives=False)
            _simple_rewrites(mtoks, _match_brackets(mtoks), sub)
            rw.replace(t.start, t.end, sub.apply())
    _simple_rewrites(toks, match, rw)
    return Transformed(rw.apply(), kernels)


def _simple_rewrites(toks: list[Tok], match: dict[int, int], rw: Rewriter) -> None:
    """Token-level rewrites: host code to the CPU, casts, assert/exit, data_ptr tracking."""
    for i, t in enumerate(toks):
        x = t.text
        if t.kind != "id":
            continue
        if x == "kCUDA":
            rw.replace(t.start, t.end, "kCPU")
        elif x in ("is_cuda", "cuda") and i > 0 and toks[i - 1].text in (".", "->") \
                and i + 2 < len(toks) and toks[i + 1].text == "(" and toks[i + 2].text == ")":
            rw.replace(t.start, t.end, "is_cpu" if x == "is_cuda" else "cpu")
        elif x == "reinterpret_cast" and i + 1 < len(toks) and toks[i + 1].text == "<":
            rw.replace(t.start, t.end, "::cuda_emu::rcast")
        elif x == "__noinline__":
            rw.replace(t.start, t.end, "__attribute__((noinline))")
        elif x in ("assert", "exit", "abort") and i + 1 < len(toks) and toks[i + 1].text == "(":
            prev = toks[i - 1].text if i else ""
            if prev in (".", "->"):
                continue
            start = t.start
            if prev == "::":
                if i >= 2 and toks[i - 2].text == "std" and x != "assert":
                    start = toks[i - 2].start
                else:
                    continue
            new = {"assert": "CUDA_EMU_ASSERT", "exit": "::cuda_emu::exit_", "abort": "::cuda_emu::abort_"}[x]
            rw.replace(start, t.end, new)
        elif x in ("data_ptr", "mutable_data_ptr", "const_data_ptr") and i > 0 \
                and toks[i - 1].text == "." and i + 1 < len(toks) and toks[i + 1].text in ("<", "("):
            s = _expr_start_before(toks, i - 1, match)
            if s is not None:
                rw.insert(toks[s].start, "::cuda_emu::track(")
                rw.insert(toks[i - 1].start, ")")
        elif x == "CUDA" and i >= 2 and toks[i - 1].text == "::" and toks[i - 2].text == "DeviceType":
            rw.replace(t.start, t.end, "CPU")


def _rewrite_launch(src, toks, i, match, rw, kernels, in_device, origin) -> None:
    """``k<T><<<g, b, s>>>(args)`` -> ``::cuda_emu::kernel("k<T>", "x,y", __LINE__,
    [&](auto&&... a) { k<T>(a...); }).config(g, b, s)(args)``."""
    line = toks[i].line
    if in_device:
        raise CudaEmulationError(_refusal(origin, line, "dynamic parallelism (a launch inside a kernel)",
                                          "<<<", src.splitlines()[line - 1]))
    ks = _kernel_expr_start(toks, i)
    j, depth = i + 1, 0
    while j < len(toks) and not (toks[j].text == ">>>" and depth == 0):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(toks[j].text, 0)
        j += 1
    if ks is None or j + 1 >= len(toks) or toks[j + 1].text != "(":
        raise CudaEmulationError(
            f"{origin} line {line}: could not read this kernel launch; write it as "
            f"kernel<<<grid, block>>>(args) or kernel<T><<<grid, block, smem>>>(args).\n"
            f"{line:6d} | {src.splitlines()[line - 1].strip()}")
    expr = src[toks[ks].start:toks[i - 1].end]
    name = re.sub(r"<.*", "", expr).split("::")[-1].strip()
    params = ",".join(kernels.get(name, []))
    rw.insert(toks[ks].start, f'::cuda_emu::kernel("{" ".join(expr.split())}", "{params}", __LINE__, '
                              f'[&](auto&&... cuda_emu_a) {{ ')
    rw.insert(toks[i - 1].end, "(cuda_emu_a...); })")
    rw.replace(toks[i].start, toks[i].end, ".config(")
    rw.replace(toks[j].start, toks[j].end, ")")


# ----------------------------------------------------------------------------------------------
# Building: compiler flags, the precompiled header, the cache.
# ----------------------------------------------------------------------------------------------
def cache_dir() -> Path:
    """Where builds and precompiled headers live: ``$CUDA_EMU_CACHE``, else
    ``~/.cache/gpu-course/cuda_emu`` (next to the GPU builds of cuda_build.py)."""
    env = os.environ.get("CUDA_EMU_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu-course" / "cuda_emu"


def _run(cmd: list[str], cwd: Path | None = None) -> tuple[int, str]:
    env = dict(os.environ, LC_ALL="C", LANG="C")  # plain ASCII quotes in compiler messages
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", env=env)
    return p.returncode, p.stdout


_TOOLCHAIN: dict | None = None


def _toolchain() -> dict:
    """Compiler, flags and libraries for building against this Python's torch (cached)."""
    global _TOOLCHAIN
    if _TOOLCHAIN is not None:
        return _TOOLCHAIN
    import torch
    from torch.utils import cpp_extension

    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        raise CudaEmulationError("no C++ compiler found (install g++ or set CXX): the CPU "
                                 "emulation of CUDA C compiles with it.")
    cxx = shlex.split(cxx)
    code, version = _run(cxx + ["--version"])
    is_gcc = code == 0 and "clang" not in version.lower() and ("gcc" in version.lower() or "g++" in version.lower()
                                                               or "free software foundation" in version.lower())
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    includes = [f"-I{HEADER_DIR / 'shim'}"]
    for d in cpp_extension.include_paths():
        includes += ["-isystem", d]
    includes += ["-isystem", sysconfig.get_paths()["include"]]
    # -fstack-clash-protection: a big local array probes page by page, so it hits the guard page
    # below a fiber's stack (a clear error) instead of jumping over it into other memory.
    flags = ["-std=c++20", "-fPIC", "-fno-strict-aliasing", "-fvisibility=hidden",
             "-fvisibility-inlines-hidden", "-fstack-clash-protection", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    if os.environ.get("CUDA_EMU_FIBERS", "") == "ucontext":  # the portable fiber switch (tests)
        flags.append("-DCUDA_EMU_UCONTEXT")
    libdirs = cpp_extension.library_paths()
    libs = [f"-L{d}" for d in libdirs] + [f"-Wl,-rpath,{d}" for d in libdirs] + \
        ["-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
    if sys.platform == "darwin":
        libs += ["-undefined", "dynamic_lookup"]
    _TOOLCHAIN = dict(cxx=cxx, version=version.splitlines()[0] if version else "?", is_gcc=is_gcc,
                      flags=flags, includes=includes, libs=libs, torch=torch.__version__,
                      torch_dir=os.path.dirname(torch.__file__))
    return _TOOLCHAIN


def _headers_digest(with_python: bool = False) -> str:
    """Digest of the emulator's C++ files (and of this file if ``with_python``): a change
    invalidates the precompiled header and runtime (every module build, with this file)."""
    h = hashlib.sha256(Path(__file__).read_bytes() if with_python else b"")
    for p in sorted([*HEADER_DIR.rglob("*.h"), *HEADER_DIR.rglob("*.cpp")]):
        h.update(str(p.relative_to(HEADER_DIR)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


_PRUNE_AFTER_S = 7 * 24 * 3600


def _prune_stale(prefix: str, keep: Path) -> None:
    """Remove other cache entries named prefix* not used for a week (old headers, old torch)."""
    for d in cache_dir().glob(prefix + "*"):
        try:
            if d != keep and time.time() - (d / "last-used").stat().st_mtime > _PRUNE_AFTER_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def _prune_modules(root: Path) -> None:
    """Once per process: remove module builds not loaded for a month (each edit makes one)."""
    if root in _TOUCHED:
        return
    _TOUCHED.add(root)
    for d in root.glob("*_*"):
        if d.name.startswith(("pch-", "runtime-")) or not d.is_dir():
            continue
        try:
            used = max(p.stat().st_mtime for p in d.iterdir())
        except (OSError, ValueError):
            continue
        if time.time() - used > 30 * 24 * 3600:
            shutil.rmtree(d, ignore_errors=True)


_TOUCHED: set = set()


def _mark_used(d: Path) -> None:
    """Note (once per process) that a precompiled entry is in use, for _prune_stale."""
    if d not in _TOUCHED:
        _TOUCHED.add(d)
        try:
            (d / "last-used").touch()
        except OSError:
            pass


def _opt_flags(opt: bool) -> list[str]:
    return ["-O2"] if opt else ["-O0", "-g"]


class _FileLock:
    """An exclusive lock on a file (POSIX), so parallel processes build a PCH once."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.f = open(self.path, "a+")
        try:
            import fcntl
            fcntl.flock(self.f, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover (Windows)
            pass
        return self

    def __exit__(self, *exc):
        self.f.close()


def _tier_flags(tier: int) -> list[str]:
    return [f"-DCUDA_EMU_TORCH={tier}"]


def _pch_dir(tc: dict, opt: bool, tier: int) -> Path | None:
    """Directory of the precompiled header for this toolchain/tier/opt, or None if none is used.

    One PCH per torch tier and optimisation level; tier 3 (torch/all.h) has none (too big)."""
    if not tc["is_gcc"] or tier >= 3 or os.environ.get("CUDA_EMU_PCH", "1") == "0":
        return None
    key = hashlib.sha256("\0".join([_VERSION, tc["version"], " ".join(tc["cxx"]), tc["torch"], tc["torch_dir"],
                                    sys.version, " ".join(tc["flags"] + tc["includes"] + _opt_flags(opt)),
                                    str(tier), _headers_digest()]).encode()).hexdigest()[:16]
    return cache_dir() / f"pch-t{tier}{'' if opt else '-O0'}-{key}"


def _pch_path(tc: dict, opt: bool, tier: int) -> Path | None:
    """The PCH stub if it is built already, else None."""
    d = _pch_dir(tc, opt, tier)
    return d / "cuda_emu_pch.h" if d and (d / "cuda_emu_pch.h.gch").exists() else None


def _prebuilt(tc: dict, opt: bool, tier: int, verbose: bool) -> tuple[Path | None, Path]:
    """(PCH stub or None, runtime object), building what is missing, both at once if need be."""
    if _pch_path(tc, opt, tier) or not _pch_dir(tc, opt, tier):
        return _pch(tc, opt, tier, verbose), _runtime(tc, verbose)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:  # ~6 s instead of ~9 s on two cores, once per machine
        pch, runtime = pool.submit(_pch, tc, opt, tier, verbose), pool.submit(_runtime, tc, verbose)
        return pch.result(), runtime.result()


def _pch(tc: dict, opt: bool, tier: int, verbose: bool) -> Path | None:
    """Path of the precompiled-header stub to ``-include`` (built on first use), or None."""
    d = _pch_dir(tc, opt, tier)
    if d is None:
        return None
    stub, gch = d / "cuda_emu_pch.h", d / "cuda_emu_pch.h.gch"
    if gch.exists():
        _mark_used(d)
        return stub
    d.mkdir(parents=True, exist_ok=True)
    _prune_stale("pch-", d)
    with _FileLock(d / "lock"):
        if gch.exists():
            return stub
        stub.write_text(f'#include "{HEADER_DIR / "cuda_emu.h"}"\n')
        tmp = d / f"tmp-{os.getpid()}.gch"
        cmd = (tc["cxx"] + tc["flags"] + _opt_flags(opt) + _tier_flags(tier) + tc["includes"] +
               ["-x", "c++-header", str(stub), "-o", str(tmp)])
        t0 = time.time()
        code, out = _run(cmd)
        if verbose:
            print(f"[cuda_emu] precompiled header (torch tier {tier}) built in {time.time() - t0:.1f} s: {gch}")
        if code != 0:
            tmp.unlink(missing_ok=True)
            (d / "pch-error.log").write_text(" ".join(cmd) + "\n\n" + out)
            if verbose:
                print(f"[cuda_emu] could not build the precompiled header (see {d / 'pch-error.log'}); "
                      f"building without it")
            return None
        os.replace(tmp, gch)
    _mark_used(d)
    return stub


def _runtime(tc: dict, verbose: bool) -> Path:
    """The emulator's runtime (cuda_emu/runtime.cpp) as an object file, compiled on first use."""
    key = hashlib.sha256("\0".join([_VERSION, tc["version"], " ".join(tc["cxx"]), tc["torch"], tc["torch_dir"],
                                    sys.version, " ".join(tc["flags"] + tc["includes"]),
                                    _headers_digest()]).encode()).hexdigest()[:16]
    d = cache_dir() / f"runtime-{key}"
    obj = d / "runtime.o"
    if obj.exists():
        _mark_used(d)
        return obj
    d.mkdir(parents=True, exist_ok=True)
    _prune_stale("runtime-", d)
    with _FileLock(d / "lock"):
        if obj.exists():
            return obj
        pch = _pch_path(tc, True, 1)  # use the PCH if it is there already, do not wait for it
        pre = ["-include", str(pch)] if pch else []
        tmp = d / f"tmp-{os.getpid()}.o"
        cmd = (tc["cxx"] + tc["flags"] + _opt_flags(True) + _tier_flags(1) + tc["includes"] + pre +
               ["-c", str(HEADER_DIR / "runtime.cpp"), "-o", str(tmp)])
        t0 = time.time()
        code, out = _run(cmd)
        if code != 0:
            tmp.unlink(missing_ok=True)
            raise CudaEmulationError(f"could not compile the emulator's runtime ({' '.join(cmd)}):\n{out[-3000:]}")
        os.replace(tmp, obj)
        if verbose:
            print(f"[cuda_emu] runtime compiled in {time.time() - t0:.1f} s: {obj}")
    _mark_used(d)
    return obj


# ----------------------------------------------------------------------------------------------
# Compile errors: the compiler's own lines, mapped to the learner's source, first.
# ----------------------------------------------------------------------------------------------
_DIAG_RE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<kind>fatal error|error|warning|note): (?P<msg>.*)$")


def _format_compile_errors(log: str, sources: dict[str, str], limit: int = 12) -> str:
    """The error lines of a compiler log, each followed by the learner's source line."""
    mine, others = [], []
    for raw in log.splitlines():
        m = _DIAG_RE.match(raw)
        if not m or m.group("kind") not in ("error", "fatal error"):
            continue
        f = os.path.basename(m.group("file"))
        if f in sources:
            lines = sources[f].splitlines()
            n = int(m.group("line"))
            text = f"{f}:{n}:{m.group('col') or 0}: {m.group('kind')}: {m.group('msg')}"
            if 0 < n <= len(lines):
                text += f"\n{n:6d} | {lines[n - 1].strip()}"
            mine.append(text)
        else:
            others.append(f"{f}:{m.group('line')}: {m.group('kind')}: {m.group('msg')}")
    picked = mine[:limit] if mine else others[:limit]
    if not picked:
        tail = [l for l in log.splitlines() if l.strip()][-limit:]
        picked = tail or ["(no output from the compiler)"]
    total = len(mine) if mine else len(others)
    if total > len(picked):
        picked.append(f"... and {total - len(picked)} more error(s)")
    return "\n".join(picked)


def _needs_unchecked(log: str) -> bool:
    return bool(re.search(r"cuda_emu::(gptr|sarr|dshared|shared_array|rcast)", log))


_NEEDS_MORE_TORCH = re.compile(
    r"error: (.*is not a member of '(torch|at|c10)\b"
    r"|no match for '[^']*' \(operand types? (is|are) .*'(at|c10)::\w+'"
    r"|'(torch|at|c10|py|pybind11)(::[\w:]+)?' has not been declared"
    r"|.*(torch|at)::\w+.* (does not name a type|was not declared in this scope)"
    r"|no matching function for call to '(torch|at)::"
    r"|.*incomplete type '(torch|at|c10)::)")


def _first_tier(src: str) -> int:
    """Torch tier to start with: 2 if the source includes ATen headers itself, 3 for torch/ ones
    other than torch/extension.h (their declarations would clash with the lite tier's)."""
    tier = 1
    for inc in re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', src, flags=re.M):
        if inc.startswith("torch/") and inc != "torch/extension.h":
            tier = 3
        elif inc.startswith("ATen/") and not inc.startswith(("ATen/cuda/", "ATen/hip/")):
            tier = max(tier, 2)
    return tier


# names only the full C++ frontend (tier 3) declares
_FRONTEND_ONLY = re.compile(r"error: '(nn|optim|data|jit|autograd|serialize|python|cuda|indexing)' "
                            r"(is not a member of '(torch|at)'|has not been declared)")


def _needs_more_torch(log: str) -> bool:
    """Did a build fail because the source uses parts of torch its tier does not declare?"""
    return bool(_NEEDS_MORE_TORCH.search(log))


# ----------------------------------------------------------------------------------------------
# The module's binding code and the public entry point.
# ----------------------------------------------------------------------------------------------
def _declaration(cpp_src: str, name: str) -> str | None:
    """The declaration of function ``name`` in cpp_src, e.g. 'torch::Tensor f(torch::Tensor x);'."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", cpp_src, flags=re.S)
    code = "\n".join(l for l in code.splitlines() if not l.lstrip().startswith("#"))
    pat = re.compile(rf"[^=()]*\b{re.escape(name)}\s*\(.*\)\s*(const|noexcept)?", re.S)
    for stmt in re.split(r"[;{}]", code):
        s = " ".join(stmt.split())
        if pat.fullmatch(s) and not re.match(r"(return|if|while|for|switch|else|do)\b", s):
            return s + ";"
    return None


def _binding(modname: str, funcs: list[str], cpp_src: str) -> str:
    decls, entries = [], []
    for f in funcs:
        d = _declaration(cpp_src, f)
        if d:
            decls.append(d)
            entries.append(f'  CUDA_EMU_FN("{f}", static_cast<decltype(&cuda_emu_decl::{f})>(&{f})),')
        else:
            entries.append(f'  CUDA_EMU_FN("{f}", &{f}),')
    return "\n".join([
        '#line 1 "cuda_emu_binding"',
        "namespace cuda_emu_decl {", *decls, "}",
        "static PyMethodDef cuda_emu_methods[] = {", *entries,
        "  CUDA_EMU_BUILTINS,", "  {nullptr, nullptr, 0, nullptr}};",
        f"CUDA_EMU_MODULE({modname}, cuda_emu_methods)", ""])


_LOADED: dict[str, object] = {}
last_log = ""  # command and compiler output of the last build in this process (utils.last_build_log)


def _import(so: Path, modname: str, funcs: list[str]):
    """Import the built extension; translate an undefined symbol into a learner's message."""
    key = str(so)
    if key in _LOADED:
        return _LOADED[key]
    spec = importlib.util.spec_from_file_location(modname, so)
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except ImportError as e:
        msg = str(e)
        m = re.search(r"undefined symbol: (\S+)", msg)
        so.unlink(missing_ok=True)  # keep only loadable modules in the cache
        if m:
            sym = m.group(1)
            code, dem = _run(["c++filt", sym]) if shutil.which("c++filt") else (1, sym)
            dem = dem.strip() if code == 0 else sym
            raise CudaEmulationError(
                f"link error: {dem} is declared (e.g. in cpp_src) and used, but never defined in "
                f"cuda_src; check its name and parameter types.\n({msg})") from None
        raise CudaEmulationError(f"could not load the built module {so}: {msg}") from None
    _LOADED[key] = mod
    return mod


def _annotate(mod, moddir: Path):
    """Record on the module how it was built: ``mod.cuda_emu_info`` = {checked, tier, build_dir}."""
    info = {"build_dir": str(moddir)}
    try:
        for kv in (moddir / "build-info.txt").read_text().split():
            k, v = kv.split("=")
            info[k] = int(v)
    except OSError:
        pass
    info["checked"] = bool(info.get("checked", 1))
    mod.cuda_emu_info = info
    return mod


def _check_funcs(funcs: list[str], cpp_src: str, cuda_src: str) -> None:
    ids = {t.text for t in tokenize(cpp_src + "\n" + cuda_src) if t.kind == "id"}
    for f in funcs:
        if not re.fullmatch(r"[A-Za-z_]\w*", f):
            raise CudaEmulationError(f"funcs lists {f!r}, which is not a C++ function name.")
        if f not in ids:
            raise CudaEmulationError(
                f"funcs lists {f!r}, but neither cpp_src nor cuda_src declares a function of that "
                f"name (declare it in cpp_src, e.g. 'torch::Tensor {f}(torch::Tensor x);').")


def _clean_flags(extra_cflags) -> list[str]:
    """Each flag its own element; -O levels are the emulation's choice (they must match the PCH)."""
    out = []
    for f in extra_cflags or ():
        for x in shlex.split(str(f)):
            if re.match(r"-O\d?$|-Os$|-Ofast$|-g\d?$", x) or not x.startswith("-") or x.startswith("--"):
                continue  # optimisation levels, and nvcc-only flags such as --use_fast_math
            out.append(x)
    return out


# ----------------------------------------------------------------------------------------------
# The nvcc check: does the device part also compile for a real GPU?  (~0.3 s, run in parallel
# with the CPU build; only errors clearly about the learner's device code are reported.)
# ----------------------------------------------------------------------------------------------
_HOST_ONLY = re.compile(r"^(torch|at|c10|TORCH_\w+|AT_\w+|C10_\w+|CHECK_\w+|CUDA_CHECK|pybind11|py)$")


def _top_level_statements(toks: list[Tok], match: dict[int, int]) -> list[tuple[int, int]]:
    """Token ranges [a, b] of top-level declarations/definitions (namespaces are entered)."""
    out, i, n = [], 0, len(toks)
    while i < n:
        if toks[i].kind == "pp" or toks[i].text in (";", "}"):
            i += 1
            continue
        if toks[i].text == "namespace" or (toks[i].text == "extern" and i + 2 < n and toks[i + 1].kind == "str"
                                           and toks[i + 2].text == "{"):
            k = i
            while k < n and toks[k].text not in ("{", ";"):
                k += 1
            i = k + 1  # enter the namespace / extern "C" block: its statements are top level too
            continue
        a, k = i, i
        while k < n and toks[k].text != ";" and toks[k].kind != "pp":
            if toks[k].text == "{" and k in match:
                close = match[k]
                if toks[k - 1].text == ")" or toks[k - 1].kind == "id" and toks[k - 1].text in _KEYWORDS | {"const", "noexcept"}:
                    k = close  # a function body ends the statement (an optional ';' follows)
                    break
                k = close
            elif toks[k].text in ("(", "[") and k in match:
                k = match[k]
            k += 1
        out.append((a, min(k, n - 1)))
        i = k + 1
    return out


def device_source(cuda_src: str) -> str | None:
    """The device part of cuda_src for nvcc: top-level statements that use torch or launch
    kernels are blanked (newlines kept), torch/ATen/c10 includes dropped, and templated kernels
    launched with literal template arguments are instantiated at the end.  None when device code
    itself uses torch types (e.g. packed accessors): that needs the torch headers, too slow."""
    toks = tokenize(cuda_src)
    match = _match_brackets(toks)
    chars = list(cuda_src)

    def blank(a: int, b: int) -> None:
        for p in range(a, b):
            if chars[p] != "\n":
                chars[p] = " "

    for t in toks:
        m = _INCLUDE_RE.match(t.text) if t.kind == "pp" else None
        if m and re.match(r"(torch|ATen|c10|pybind11)/|Python\.h$", m.group(1)):
            blank(t.start, t.end)
    insts = []
    for a, b in _top_level_statements(toks, match):
        ids = {t.text for t in toks[a:b + 1] if t.kind == "id"}
        launches = [k for k in range(a, b + 1) if toks[k].text == "<<<"]
        if ids & {"__global__", "__device__"}:
            if ids & {"torch", "at", "c10"}:
                return None
            continue
        if launches or any(_HOST_ONLY.match(x) for x in ids):
            for k in launches:  # instantiate k<16, float> launched from host code
                ks = _kernel_expr_start(toks, k)
                if ks is not None and toks[k - 1].text == ">":
                    args = [t.text for t in toks[ks + 2:k - 1] if t.text != ","]
                    if all(re.fullmatch(r"\d+[uUlL]*|true|false|float|double|int|unsigned|char|long|short", x)
                           for x in args):
                        insts.append(cuda_src[toks[ks].start:toks[k - 1].end])
            blank(toks[a].start, toks[b].end)
    tail = "".join(f"\nstatic void* cuda_emu_instance_{i} = (void*)&{e};" for i, e in enumerate(dict.fromkeys(insts)))
    return '#line 1 "cuda_src"\n' + "".join(chars) + tail + "\n"


def _nvcc_start(cuda_src: str, workdir: Path):
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


_NVCC_DIAG = re.compile(r"^cuda_src\((\d+)\): (error|catastrophic error): (.*)$")


def _nvcc_finish(proc, cuda_src: str, verbose: bool) -> str | None:
    """Wait for nvcc; return an error message if it rejects the learner's device code."""
    if proc is None:
        return None
    out, _ = proc.communicate()
    if verbose:
        print(f"[cuda_emu] nvcc check: exit {proc.returncode}")
    if proc.returncode == 0:
        return None
    errors = [m for m in map(_NVCC_DIAG.match, out.splitlines()) if m]
    # Inconclusive (skip): no error located in cuda_src, or errors about torch/host parts that
    # the device extract left out (in the message or on the offending line).
    lines = cuda_src.splitlines()
    host_ref = re.compile(r"\b(torch|at|c10|Tensor|TORCH_\w+|AT_\w+|C10_\w+)\b|cuda_emu_instance")

    def line_of(m) -> str:
        n = int(m.group(1))
        return lines[n - 1] if 1 <= n <= len(lines) else ""

    if not errors or any(host_ref.search(m.group(3)) or host_ref.search(line_of(m)) for m in errors):
        return None
    log = "\n".join(f"cuda_src:{m.group(1)}:0: error: {m.group(3)}" for m in errors)
    return _format_compile_errors(log, {"cuda_src": cuda_src})


def load(cuda_src: str, cpp_src: str, funcs: list[str], *, name: str | None = None,
         opt: bool = True, extra_cflags=(), verbose: bool = False, build_dir=None,
         checked: bool | None = None, nvcc_check: bool | None = None):
    """Build ``cuda_src`` (CUDA C + torch host wrappers) for the CPU and return the Python module
    exposing ``funcs`` (declared in ``cpp_src``), like ``torch.utils.cpp_extension.load_inline``.

    ``name`` prefixes the module name; ``opt=False`` builds with -O0 -g; ``extra_cflags`` are
    extra compiler flags (-D, -I, -W, -f ...; -O levels and nvcc flags are ignored);
    ``build_dir`` overrides the cache directory; ``checked`` (default: $CUDA_EMU_CHECKED or True)
    turns the bounds checks on; ``nvcc_check`` (default: True unless $CUDA_EMU_NVCC is "0") also
    compiles the device part with nvcc for a real GPU when nvcc is on PATH.  Raises
    :class:`CudaEmulationError` for unsupported features, compile and link errors.

    The module also has ``cuda_emu_info`` = {"checked", "tier", "build_dir"}: how it was built.

    >>> m = load(cuda_src, "torch::Tensor square(torch::Tensor x);", ["square"])  # doctest: +SKIP
    """
    t0 = time.time()
    if isinstance(funcs, str):
        funcs = [funcs]
    funcs = list(funcs)
    if checked is None:
        checked = os.environ.get("CUDA_EMU_CHECKED", "1") != "0"
    if nvcc_check is None:
        nvcc_check = os.environ.get("CUDA_EMU_NVCC", "1") != "0"
    tc = _toolchain()
    flags = _clean_flags(extra_cflags)
    nvcc_check = bool(nvcc_check and shutil.which("nvcc"))
    digest = hashlib.sha256("\0".join([_VERSION, cuda_src, cpp_src, ",".join(funcs), str(opt), str(checked),
                                       str(nvcc_check),
                                       " ".join(flags), tc["version"], tc["torch"], tc["torch_dir"],
                                       sys.version, _headers_digest(with_python=True)]).encode()).hexdigest()[:16]
    base = re.sub(r"\W", "_", name or "cuda_emu")[:40]
    modname = f"{base}_{digest}" if re.match(r"[A-Za-z_]", base) else f"m_{base}_{digest}"
    root = Path(build_dir).expanduser() if build_dir else cache_dir()
    moddir = root / modname
    so = moddir / f"{modname}.so"
    if so.exists():
        mod = _import(so, modname, funcs)
        mod._cuda_emu_set_error_type(CudaEmulationError)
        _mark_used(moddir)
        if verbose:
            print(f"[cuda_emu] {modname}: loaded from cache in {time.time() - t0:.2f} s")
        return _annotate(mod, moddir)

    _check_funcs(funcs, cpp_src, cuda_src)
    check_supported(cuda_src, tokenize(cuda_src), "cuda_src")
    check_supported(cpp_src, tokenize(cpp_src), "cpp_src")

    global last_log
    _prune_modules(root)
    moddir.mkdir(parents=True, exist_ok=True)
    chk, tier, nvcc_error = checked, _first_tier(cuda_src + "\n" + cpp_src), None
    while True:  # escalate: unchecked pointers if the checked types get in the way, more torch
        code, log, cmd, nvcc_result = _build(tc, moddir, modname, so, cuda_src, cpp_src, funcs, opt, chk, tier,
                                             flags, verbose, nvcc_check)
        nvcc_error = nvcc_result if nvcc_check else nvcc_error
        last_log = " ".join(cmd) + "\n\n" + log
        if code == 0:
            if nvcc_error:
                so.unlink(missing_ok=True)  # not cached: the next load checks again
                raise CudaEmulationError(
                    "the CUDA source builds for the CPU emulation, but nvcc rejects it for a real "
                    "GPU:\n" + nvcc_error + "\n(set CUDA_EMU_NVCC=0 to skip this check)")
            break
        nvcc_check = False  # checked once is enough
        if chk and _needs_unchecked(log):
            chk = False
        elif tier < 3 and _needs_more_torch(log):
            tier = 3 if _FRONTEND_ONLY.search(log) else tier + 1
        else:
            (moddir / "build.log").write_text(last_log)
            raise CudaEmulationError(
                "the CUDA source did not compile (CPU emulation):\n" +
                _format_compile_errors(log, {"cuda_src": cuda_src, "cpp_src": cpp_src}) +
                f"\n(full compiler output: {moddir / 'build.log'})")
    mod = _import(so, modname, funcs)
    mod._cuda_emu_set_error_type(CudaEmulationError)
    if verbose:
        print(f"[cuda_emu] {modname}: built in {time.time() - t0:.1f} s -> {so}")
    return _annotate(mod, moddir)


def _build(tc, moddir, modname, so, cuda_src, cpp_src, funcs, opt, checked, tier, flags, verbose, nvcc_check):
    """One compile+link attempt (with the nvcc check alongside if asked); returns
    (exit code, compiler output, command, nvcc error message or None)."""
    cuda_t = transform(cuda_src, checked=checked, origin="cuda_src").text
    cpp_t = transform(cpp_src, checked=checked, origin="cpp_src").text
    text = "\n".join([f"// generated by cuda_emu.py for {modname}", '#line 1 "cpp_src"', cpp_t,
                      '#line 1 "cuda_src"', cuda_t, _binding(modname, funcs, cpp_src)])
    tmpdir = Path(tempfile.mkdtemp(prefix="build-", dir=moddir))
    try:
        src = tmpdir / "main.cpp"
        src.write_text(text)
        pch, runtime = _prebuilt(tc, opt, tier, verbose)
        pre = ["-include", str(pch), "-Winvalid-pch"] if pch else ["-include", str(HEADER_DIR / "cuda_emu.h")]
        out = tmpdir / f"{modname}.so"
        cmd = (tc["cxx"] + tc["flags"] + _opt_flags(opt) + _tier_flags(tier) + tc["includes"] + pre + flags +
               ["-fdiagnostics-color=never", "-fmax-errors=30", str(src), str(runtime), "-shared",
                "-o", str(out)] + tc["libs"])
        t0 = time.time()
        nvcc = _nvcc_start(cuda_src, tmpdir) if nvcc_check else None
        code, log = _run(cmd, cwd=tmpdir)
        nvcc_error = _nvcc_finish(nvcc, cuda_src, verbose)
        if verbose:
            what = ("checked" if checked else "unchecked") + f", torch tier {tier}"
            print(f"[cuda_emu] compile ({what}, {'PCH' if pch else 'no PCH'}) {time.time() - t0:.1f} s, exit {code}")
            if code == 0 and log.strip():
                print(log)
        shutil.copyfile(src, moddir / "main.cpp")  # the generated source, for reading / debugging
        if code == 0:
            (moddir / "build-info.txt").write_text(f"checked={int(checked)} tier={tier}\n")
            os.replace(out, so)
        return code, log, cmd, nvcc_error
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
