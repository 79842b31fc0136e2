"""What the emulation refuses, found before compiling so that the message is about CUDA, not C++
(:func:`check_supported`: unsupported features, legacy warp intrinsics, CUDA runtime calls, headers,
inline PTX, misused symbols), and the wording of a refusal (:func:`refusal`)."""
from __future__ import annotations

import re

from ... import cxx
from ...cxx import Tok, tokenize  # noqa: F401  (tokenize: the examples)
from ...errors import CudaEmulationError
from ...parsed import ParsedSource, parse


def _features(names: str, what: str) -> dict[str, str]:
    return {n: what for n in names.split()}


_UNSUPPORTED = {
    **_features("__uni_sync __lanemask_lt __lanemask_le __lanemask_eq __lanemask_gt __lanemask_ge",
                "warp lane masks"),
    # cooperative groups within a block are emulated (emu_cg.h); a grid-wide sync is refused when it runs
    **_features("this_multi_grid multi_grid_group this_cluster cluster_group",
                "cooperative groups beyond a grid (multi-grid groups, clusters)"),
    **_features("cudaMalloc cudaMallocManaged cudaMallocHost cudaMallocAsync cudaMallocPitch "
                "cudaHostAlloc cudaMemcpy2D "
                "cudaFree cudaFreeHost cudaFreeAsync",
                "CUDA memory management (use torch tensors instead)"),
    # torch's current stream (at::cuda::getCurrentCUDAStream(), a cudaStream_t from it, cudaMemsetAsync and
    # cudaMemcpyAsync on it, CUDAGuard, CUDAStreamGuard) is emulated (emu/streams.h): the one stream there is
    **_features("cudaStreamCreate cudaStreamCreateWithFlags cudaStreamDestroy "
                "cudaStreamWaitEvent getStreamFromPool getDefaultCUDAStream setCurrentCUDAStream "
                "cudaStreamDefault cudaStreamNonBlocking", "CUDA streams other than torch's current one"),
    **_features("cudaEvent_t cudaEventCreate cudaEventRecord cudaEventSynchronize "
                "cudaEventElapsedTime cudaEventDestroy", "CUDA events"),
    # nvcuda::wmma (16x16x16 __half tiles) and __half are emulated (emu_wmma.h, emu_fp16.h); inline PTX is
    # refused by _inline_ptx, naming the instruction
    **_features("__hmma_m16n16k16_mma_f32f32 __hmma_m16n16k16_ld_a __hmma_m16n16k16_st_c_f32",
                "the compiler's tensor-core builtins (use nvcuda::wmma)"),
    # __nv_bfloat16 and __nv_bfloat162 are emulated (emu_bf16.h)
    **_features("__nv_fp8_e4m3 __nv_fp8_e5m2 __nv_fp8x2_e4m3 __nv_fp8x4_e4m3", "fp8 types"),
    **_features("tex1Dfetch tex1D tex2D tex3D texture cudaTextureObject_t surf2Dwrite "
                "surf2Dread cudaSurfaceObject_t", "textures and surfaces"),
    **_features("__managed__", "managed memory (__managed__)"),
    **_features("clock clock64 __nanosleep globaltimer", "GPU clocks and sleeping"),
    # cp.async through the pipeline primitives (__pipeline_memcpy_async ...) is emulated; not the
    # C++ APIs (cuda::memcpy_async, cuda::pipeline, cooperative_groups::memcpy_async) nor mbarriers
    **_features("cp_async memcpy_async __pipeline_arrive_on",
                "asynchronous copies other than __pipeline_memcpy_async (cp.async)"),
}
# Warp intrinsics removed in CUDA 9 for sm_70+ (nvcc rejects them too): name their _sync form.
_LEGACY_WARP = set("__shfl __shfl_up __shfl_down __shfl_xor __ballot __all __any".split())
# The CUDA runtime calls that make sense on the CPU; any other cudaXxx name is refused.
_CUDA_API_OK = {"cudaGetLastError", "cudaPeekAtLastError", "cudaDeviceSynchronize",
                "cudaGetErrorString", "cudaGetErrorName", "cudaSuccess", "cudaError_t",
                "cudaError", "cudaErrorInvalidValue", "cudaErrorInvalidConfiguration",
                # __constant__ / __device__ variables filled from host code
                "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaMemcpyKind", "cudaMemcpyHostToHost",
                "cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost", "cudaMemcpyDeviceToDevice",
                "cudaMemcpyDefault", "cudaErrorInvalidSymbol",
                # torch's current stream and the stream-ordered calls on it (emu/streams.h)
                "cudaStream_t", "cudaStreamSynchronize", "cudaMemsetAsync", "cudaMemcpyAsync", "cudaMemset",
                "cudaMemcpy",
                # kernel attributes: more than 48 KiB of dynamic shared memory
                "cudaFuncSetAttribute", "cudaFuncAttribute", "cudaFuncAttributeMaxDynamicSharedMemorySize",
                "cudaFuncAttributePreferredSharedMemoryCarveout", "cudaSharedCarveout",
                "cudaSharedmemCarveoutDefault", "cudaSharedmemCarveoutMaxShared", "cudaSharedmemCarveoutMaxL1"}
_INCLUDE_OK_CUDA = {"cuda_runtime.h", "cuda.h", "cuda_runtime_api.h",
                    "device_launch_parameters.h", "c10/cuda/CUDAException.h",
                    "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_fp16.h", "mma.h",
                    "c10/cuda/CUDAStream.h", "ATen/cuda/CUDAContext.h", "c10/cuda/CUDAGuard.h",
                    "ATen/cuda/Exceptions.h", "cooperative_groups.h", "cooperative_groups/reduce.h",
                    "cuda_bf16.h"}
_INCLUDE_REFUSED = [
    (re.compile(r"cooperative_groups"), "cooperative groups"),
    (re.compile(r"^crt/mma"), "the compiler's tensor-core internals (include <mma.h>)"),
    (re.compile(r"cuda_fp8"), "fp8 types"),
    (re.compile(r"^(cub|thrust|cuda|cute|cutlass)/"), "CUDA C++ libraries (cub, thrust, cutlass, libcu++)"),
    (re.compile(r"cublas|cudnn|curand|cufft|cusparse|cusolver|nccl|nvrtc|nvtx"), "CUDA libraries"),
    (re.compile(r"^(ATen|c10)/cuda/|^(ATen|c10)/hip/"), "CUDA-specific torch headers"),
    (re.compile(r"cuda_pipeline|cuda_awbarrier"),
     "asynchronous copies other than <cuda_pipeline.h>'s primitives (cp.async)"),
]


_ASM = {"asm", "__asm", "__asm__"}
_PTX_OPCODE = re.compile(r"(?<![.\w%$])([a-z][a-z0-9_]*(?:\.[a-z0-9_:]+)+)")


def _inline_ptx(toks: list[Tok], i: int) -> str:
    """The first PTX instruction of the ``asm(...)`` at toks[i] (``mma.sync.aligned.m16n8k16...``), or ``asm``.

    >>> _inline_ptx(tokenize('asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0}, [%1];" : "=r"(x));'), 0)
    'ldmatrix.sync.aligned.m8n8.x4.shared.b16'
    """
    for t in toks[i + 1:i + 8]:
        if t.kind == "str":
            m = _PTX_OPCODE.search(t.text)
            if m:
                return m.group(1)
    return toks[i].text


def refusal(origin: str, line: int, what: str, name: str, src_line: str) -> str:
    return (f"{origin} line {line}: {what} ({name}) is not supported by the CPU emulation; "
            f"run on a GPU.\n{line:6d} | {src_line.strip()}")


def check_supported(source: str | ParsedSource, origin: str = "cuda_src") -> None:
    """Raise :class:`CudaEmulationError` listing each feature outside the emulated subset.

    >>> check_supported("long long t0 = clock64();")
    Traceback (most recent call last):
    ...
    gpu_course.cuda.errors.CudaEmulationError: cuda_src line 1: GPU clocks and sleeping (clock64) is not supported by the CPU emulation; run on a GPU.
         1 | long long t0 = clock64();
    """
    p = source if isinstance(source, ParsedSource) else parse(source)
    toks = p.toks
    lines = p.text.splitlines() or [""]
    problems, seen = [], set()

    def add(line, what, name):
        if (line, name) not in seen:
            seen.add((line, name))
            problems.append(refusal(origin, line, what, name, lines[min(line, len(lines)) - 1]))

    own = p.defined_names  # a learner's cudaCheck(...) macro or function is theirs
    for line, header in p.includes:
        if header not in _INCLUDE_OK_CUDA:
            for pat, what in _INCLUDE_REFUSED:
                if pat.search(header):
                    add(line, what, f"#include <{header}>")
    asm_first, asm_more = None, 0
    for i, t in enumerate(toks):
        if t.kind == "pp":
            if "<<<" in t.text and re.match(r"\s*#\s*define", t.text):
                add(t.line, "a kernel launch inside a #define", "<<<")
            continue
        if t.kind != "id":
            continue
        if t.text in ("clock", "texture") and (i + 1 >= len(toks) or toks[i + 1].text not in ("(", "<")):
            continue  # ordinary identifiers unless called / templated
        if t.text in _ASM:   # one line for the first; the others are counted in it
            if asm_first is None:
                asm_first = len(problems)
                add(t.line, "inline PTX", _inline_ptx(toks, i))
            else:
                asm_more += 1
        elif t.text in _UNSUPPORTED:
            add(t.line, _UNSUPPORTED[t.text], t.text)
        elif t.text in _LEGACY_WARP and i + 1 < len(toks) and toks[i + 1].text == "(" and (t.line, t.text) not in seen:
            seen.add((t.line, t.text))
            problems.append(f"{origin} line {t.line}: {t.text}() is a warp intrinsic without _sync, removed in "
                            f"CUDA 9 for sm_70+ GPUs: use {t.text}_sync(mask, ...), e.g. {t.text}_sync(0xffffffff, "
                            f"...) when the whole warp takes part.\n{t.line:6d} | "
                            f"{lines[min(t.line, len(lines)) - 1].strip()}")
        elif re.match(r"cuda[A-Z]\w*$", t.text) and t.text not in _CUDA_API_OK and t.text not in own:
            add(t.line, "the CUDA runtime API", t.text)
    if asm_more:
        head, _, quoted = problems[asm_first].partition("\n")
        problems[asm_first] = (f"{head[:-1]} (the CPU emulation runs CUDA C, not PTX instructions; this source has "
                               f"{asm_more} more asm statement{'s' if asm_more > 1 else ''}).\n{quoted}")
    for line, msg in _symbol_misuse(p, origin):
        problems.append(f"{msg}\n{line:6d} | {lines[min(line, len(lines)) - 1].strip()}")
    if problems:
        more = f"\n(and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise CudaEmulationError("\n".join(problems[:8]) + more)


def _symbol_misuse(p: ParsedSource, origin: str) -> list[tuple[int, str]]:
    """(line, message) for each cudaMemcpyToSymbol / cudaMemcpyFromSymbol whose symbol is not a
    __constant__ or __device__ variable of this source (a GPU fails there with "invalid device
    symbol"; here it would quietly copy into host memory)."""
    toks, match = p.toks, p.match
    if not {"cudaMemcpyToSymbol", "cudaMemcpyFromSymbol"} & p.called:
        return []
    device_vars = set()
    for _, d in p.declarations:
        if d.kind == "variable" and d.specifiers & {"__constant__", "__device__"}:
            device_vars.update(toks[q].text for q, _ in d.names)
    out = []
    for i, t in enumerate(toks[:-1]):
        if t.text not in ("cudaMemcpyToSymbol", "cudaMemcpyFromSymbol") or i + 1 not in match:
            continue
        which = 0 if t.text == "cudaMemcpyToSymbol" else 1
        args = cxx.split_args(toks, i + 1, match[i + 1], match)
        arg = cxx.text_of(toks, *args[which]) if len(args) > which else ""
        named = len(args) > which and all(toks[k].kind == "id" or toks[k].text == "::" for k in range(*args[which]))
        if not named or toks[args[which][1] - 1].text not in device_vars:
            out.append((t.line, f"{origin} line {t.line}: the symbol of {t.text} must be a __constant__ or "
                                f"__device__ variable defined in this source, not {arg or 'nothing'!r} "
                                f"(as on a GPU)"))
    return out
