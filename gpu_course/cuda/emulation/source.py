"""The emulation's source side: what it refuses (found before compiling, so the message is about
CUDA, not C++), and the rewriting of CUDA C into C++ that the emulator's headers run on the CPU
(kernels, launches, ``__shared__`` arrays, checked pointers -- parameters, locals and what they
derive --, checked accesses for the race check and the messages, loop ticks for Ctrl-C and
spin-waits, checked integer divisors)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import cxx
from ..counters import COUNTS, LOG, RESET
from ..cxx import KEYWORDS, Tok, match_brackets, tokenize
from ..errors import CudaEmulationError
from ..parsed import ParsedSource, parse

def _features(names: str, what: str) -> dict[str, str]:
    return {n: what for n in names.split()}


_UNSUPPORTED = {
    **_features("__uni_sync __lanemask_lt __lanemask_le __lanemask_eq __lanemask_gt __lanemask_ge",
                "warp lane masks"),
    **_features("cooperative_groups this_thread_block this_grid tiled_partition "
                "thread_block_tile grid_group coalesced_threads", "cooperative groups"),
    **_features("cudaMalloc cudaMallocManaged cudaMallocHost cudaMallocAsync cudaMallocPitch "
                "cudaHostAlloc cudaMemcpy cudaMemcpyAsync cudaMemcpy2D cudaMemset cudaMemsetAsync "
                "cudaFree cudaFreeHost cudaFreeAsync",
                "CUDA memory management (use torch tensors instead)"),
    # torch's current stream (at::cuda::getCurrentCUDAStream()) is emulated: the one stream there is
    **_features("cudaStream_t cudaStreamCreate cudaStreamDestroy cudaStreamSynchronize "
                "cudaStreamWaitEvent getStreamFromPool getDefaultCUDAStream setCurrentCUDAStream "
                "cudaStreamDefault cudaStreamNonBlocking", "CUDA streams other than torch's current one"),
    **_features("cudaEvent_t cudaEventCreate cudaEventRecord cudaEventSynchronize "
                "cudaEventElapsedTime cudaEventDestroy", "CUDA events"),
    # nvcuda::wmma (16x16x16 __half tiles) and __half are emulated (emu_wmma.h, emu_fp16.h); inline PTX is
    # refused by _inline_ptx, naming the instruction
    **_features("__hmma_m16n16k16_mma_f32f32 __hmma_m16n16k16_ld_a __hmma_m16n16k16_st_c_f32",
                "the compiler's tensor-core builtins (use nvcuda::wmma)"),
    **_features("__nv_bfloat16 __nv_bfloat162 __float2bfloat16 __bfloat162float "
                "__nv_fp8_e4m3 __nv_fp8_e5m2", "bfloat16/fp8 types"),
    **_features("tex1Dfetch tex1D tex2D tex3D texture cudaTextureObject_t surf2Dwrite "
                "surf2Dread cudaSurfaceObject_t", "textures and surfaces"),
    **_features("__managed__", "managed memory (__managed__)"),
    **_features("clock clock64 __nanosleep globaltimer", "GPU clocks and sleeping"),
    **_features("CUDAGuard OptionalCUDAGuard CUDAStreamGuard", "CUDA device/stream guards"),
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
                # kernel attributes: more than 48 KiB of dynamic shared memory
                "cudaFuncSetAttribute", "cudaFuncAttribute", "cudaFuncAttributeMaxDynamicSharedMemorySize",
                "cudaFuncAttributePreferredSharedMemoryCarveout", "cudaSharedCarveout",
                "cudaSharedmemCarveoutDefault", "cudaSharedmemCarveoutMaxShared", "cudaSharedmemCarveoutMaxL1"}
_INCLUDE_OK_CUDA = {"cuda_runtime.h", "cuda.h", "cuda_runtime_api.h",
                    "device_launch_parameters.h", "c10/cuda/CUDAException.h",
                    "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_fp16.h", "mma.h",
                    "c10/cuda/CUDAStream.h", "ATen/cuda/CUDAContext.h"}
_INCLUDE_REFUSED = [
    (re.compile(r"cooperative_groups"), "cooperative groups"),
    (re.compile(r"^crt/mma"), "the compiler's tensor-core internals (include <mma.h>)"),
    (re.compile(r"cuda_bf16|cuda_fp8"), "bfloat16/fp8 types"),
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


def _refusal(origin: str, line: int, what: str, name: str, src_line: str) -> str:
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
            problems.append(_refusal(origin, line, what, name, lines[min(line, len(lines)) - 1]))

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


_PTR_QUALS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}


class Rewriter:
    """Collects text edits (start, end, replacement) on a source and applies them."""

    def __init__(self, src: str):
        self.src, self.edits = src, []

    def replace(self, start: int, end: int, text: str) -> None:
        # keep every newline of the replaced text, so line numbers do not move
        self.edits.append((start, end, 1, (0, 0), len(self.edits), text + "\n" * self.src.count("\n", start, end)))

    def insert(self, pos: int, text: str) -> None:
        self.edits.append((pos, pos, 1, (0, 0), len(self.edits), text))

    def wrap(self, start: int, end: int, before: str, after: str) -> None:
        """Insert ``before`` at start and ``after`` at end, nesting properly with the other wraps
        that begin or end at the same places (the inner one closes first)."""
        n = len(self.edits)
        self.edits.append((start, start, 1, (-end, n), n, before))
        self.edits.append((end, end, 0, (-start, -n), n + 1, after))

    def apply(self) -> str:
        out, pos = [], 0
        for start, end, _, _, _, text in sorted(self.edits, key=lambda e: e[:5]):
            if start < pos:  # overlapping edit: the first one wins
                continue
            out += [self.src[pos:start], text]
            pos = end
        out.append(self.src[pos:])
        return "".join(out)


def _split_params(toks: list[Tok], lp: int, rp: int, match: dict[int, int]) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the parameters between parentheses lp and rp."""
    return cxx.split_args(toks, lp, rp, match)


def _param_name(ptoks: list[Tok]) -> str:
    """The declared name of one parameter ('' when unnamed)."""
    eq = next((k for k, t in enumerate(ptoks) if t.text == "="), len(ptoks))
    body = ptoks[:eq]
    while body and body[-1].text == "]":  # float x[4]
        k = max(k for k, t in enumerate(body) if t.text == "[")
        body = body[:k]
    if len(body) >= 2 and body[-1].kind == "id" and body[-1].text not in KEYWORDS | _PTR_QUALS:
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


def _expr_start_before(toks: list[Tok], dot: int, match: dict[int, int]) -> int | None:
    """Start of the postfix expression that ends just before toks[dot] ('.'), or None."""
    k, start = dot - 1, None
    while k >= 0:
        t = toks[k]
        if t.text in (")", "]") and k in match:
            start = k = match[k]
            k -= 1
            if k >= 0 and toks[k].kind == "id" and toks[k].text not in KEYWORDS:
                continue  # f(...) / a[...]
            if k >= 0 and toks[k].text in (">", ">>", "]", ")", "::", "."):
                return None  # casts, templates, chained calls: leave alone
            return start
        if t.kind == "id" and t.text not in KEYWORDS:
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


# A GPU takes at most 48 KiB of static __shared__ memory per kernel (ptxas: "uses too much shared
# data (0x10000 bytes, 0xc000 max)"); each declaration asserts the running total of its kernel.
STATIC_SHARED_MAX = 48 * 1024


def _static_shared_assert(sizes: list, origin: str, line: int) -> str:
    return (f'static_assert({" + ".join(sizes)} <= {STATIC_SHARED_MAX}, "{origin} line {line}: more '
            f'than 48 KB (0xc000 bytes) of static __shared__ memory in one kernel; a GPU refuses it '
            f'(ptxas: uses too much shared data, 0xc000 max). Use smaller tiles, or extern __shared__ '
            f'with the size at launch (above 48 KB also cudaFuncSetAttribute).");')


def _shared_decl(src, toks, i, match, in_function, checked, origin,
                 found: list | None = None, sizes: list | None = None) -> tuple[int, int, str] | None:
    """Rewrite of the ``__shared__`` declaration around toks[i]: (start, end, text), None to keep.
    Appends to ``found`` (name, rank, token range) for each array that became a checked
    ``shared_array``/``dshared`` (what the race check can follow), and to ``sizes`` (the
    kernel's static shared bytes so far, as C++ expressions) each static array's size."""
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
                if found is not None and checked and len(dims) == 1:
                    found.append((name, 1, (a, b)))
            continue
        if dims and checked and not is_volatile and all(dims):
            if found is not None:
                found.append((name, len(dims), (a, b)))
            decl = f"static ::cuda_emu::shared_array<{type_text}, {', '.join(f'({d})' for d in dims)}> {name}"
        else:
            decl = f"static {type_text} {name}" + "".join(f"[{d}]" for d in dims)
        out.append(f"{decl} __attribute__((aligned(16))); static ::cuda_emu::shared_reg "
                   f"cuda_emu_reg_{name}_{toks[i].line}((void*)&{name}, sizeof({name}), \"{name}\");")
        earlier = sizes if sizes is not None else []   # by type: their names may be out of scope
        out.append(_static_shared_assert(earlier + [f"sizeof({name})"], origin, toks[i].line))
        earlier.append(f"sizeof({type_text}{''.join(f'[{d}]' for d in dims)})")
    return toks[a].start, toks[b].end, " ".join(out)


def transform(source: str | ParsedSource, *, checked: bool = True, origin: str = "cuda_src") -> Transformed:
    """Rewrite CUDA C into C++ for cuda_emu.h (see the module docstring for what changes)."""
    p = source if isinstance(source, ParsedSource) else parse(source)
    src, toks, match, funcs = p.text, p.toks, p.match, p.functions
    device_bodies = [f.body for f in funcs if f.body]
    rw = Rewriter(src)

    def in_device_code(i: int) -> bool:
        return any(a < i < b for a, b in device_bodies)

    kernels: dict[str, list[str]] = {}
    pointer_params: dict[tuple[int, int], set[str]] = {}  # function body -> its checked pointers
    for f in funcs:
        params = _split_params(toks, f.lparen, f.rparen, match)
        names = [_param_name(toks[a:b]) for a, b in params]
        if f.qualifier == "__global__" and (f.body or f.name not in kernels):
            kernels[f.name] = names
        if not checked or f.qualifier not in ("__global__", "__device__") or not f.name.isidentifier() \
                or f.name == "__device__":
            continue
        # __device__ functions too (not the parameters whose type names a template parameter: their
        # callers would no longer deduce it)
        dependent = _template_names(toks, match, f) if f.qualifier == "__device__" else set()
        for (a, b), pname in zip(params, names):
            if any(toks[k].text in dependent for k in range(a, b)):
                continue
            new = _checked_param(src, toks[a:b])
            if new is not None:
                rw.replace(toks[a].start, toks[b - 1].end, new)
                if f.body and pname:
                    pointer_params.setdefault(f.body, set()).add(pname)
    if checked:
        for body in device_bodies:  # local pointers: float* row = out + 5;  -> a checked pointer too
            pointer_params.setdefault(body, set()).update(_local_pointers(src, toks, match, body, rw))

    shared: list = []  # (name, rank, declaration token range) of checked __shared__ arrays
    static_shared: dict = {}  # function body -> sizes of its static __shared__ arrays so far
    templates = _kernel_templates(toks, match, funcs)
    plain = _plain_kernels(toks, funcs)
    for i, t in enumerate(toks):
        if t.kind == "punct" and t.text == "<<<":
            _rewrite_launch(src, toks, i, match, rw, kernels, in_device_code(i), origin, templates, plain)
        elif t.kind == "id" and t.text == "__shared__":
            body = next((r for r in device_bodies if r[0] < i < r[1]), None)
            r = _shared_decl(src, toks, i, match, body is not None, checked, origin, shared,
                             static_shared.setdefault(body, []) if body else None)
            if r:
                rw.replace(*r)
        elif t.kind == "pp" and re.match(r"\s*#\s*define\b", t.text):
            # macros such as cuda_begin's CHECK_CUDA get the same host-side mapping
            sub = Rewriter(t.text)
            mtoks = tokenize(t.text, directives=False)
            _simple_rewrites(mtoks, match_brackets(mtoks), sub)
            rw.replace(t.start, t.end, sub.apply())
    if checked:
        _rewrite_accesses(toks, match, rw, device_bodies, shared, pointer_params)
        for body in device_bodies:
            _rewrite_derefs(src, toks, match, body, pointer_params.get(body, set()), rw)
    for body in device_bodies:
        _loop_ticks(toks, match, body, rw)
        _checked_divisors(toks, match, body, rw)
    _simple_rewrites(toks, match, rw)
    return Transformed(rw.apply(), kernels)


def _template_names(toks: list[Tok], match: dict[int, int], f) -> set[str]:
    """The identifiers of the ``template <...>`` header of function f (empty if none)."""
    k = f.lparen - 1
    while k > 0 and toks[k - 1].text not in (";", "}", "{") and toks[k - 1].kind != "pp":
        k -= 1
    while k < f.lparen and toks[k].text != "template":
        k += 1
    if k >= f.lparen or k + 1 >= len(toks) or toks[k + 1].text != "<":
        return set()
    gt = cxx.angle_close(toks, k + 1, match, f.lparen)
    return {t.text for t in toks[k + 2:gt or k + 2] if t.kind == "id" and t.text not in KEYWORDS}


_TYPE_WORDS = {"unsigned", "signed", "short", "long", "int", "char", "float", "double", "bool", "auto",
               "typename", "struct", "wchar_t", "char8_t", "char16_t", "char32_t"}
_NOT_TYPES = KEYWORDS - _TYPE_WORDS - {"const", "volatile"}


def _statement_starts(toks: list[Tok], match: dict[int, int], body: tuple[int, int]):
    """Token indices in the function body where a statement (or a for loop's init) may start."""
    a, b = body
    for i in range(a + 1, b):
        prev = toks[i - 1].text
        if prev in ("{", ";", "}") or (prev == "(" and i >= 2 and toks[i - 2].text == "for"):
            yield i


def _local_pointers(src: str, toks: list[Tok], match: dict[int, int], body: tuple[int, int],
                    rw: Rewriter) -> set[str]:
    """Rewrite the local pointer declarations of one function body into checked pointers:
    ``const float* q = p + k;`` -> ``::cuda_emu::gptr<const float> q = ::cuda_emu::bound(p + k);``
    (``auto* q = ...`` -> ``auto q = ::cuda_emu::aptr<false>(...)``).  A checked initializer keeps
    its bounds; a __shared__ array or a raw pointer gets those of what it points into.  Left as
    written: pointers to pointers, arrays of pointers, function pointers, void pointers, static
    ones, and declarations mixing pointers and non-pointers.  Returns the names rewritten."""
    a, b = body
    out = set()
    for s in _statement_starts(toks, match, body):
        k = s
        while k < b and toks[k].text in ("const", "volatile"):
            k += 1
        t0 = k  # the type: words like "unsigned int", or a (qualified, templated) name
        if k >= b or toks[k].kind != "id" or toks[k].text in _NOT_TYPES:
            continue
        if toks[k].text in _TYPE_WORDS - {"typename", "struct", "auto"}:
            while k < b and toks[k].text in _TYPE_WORDS | {"const", "volatile"}:
                k += 1
        else:
            if toks[k].text in ("typename", "struct"):
                k += 1
            while k < b:
                if k >= b or toks[k].kind != "id" or toks[k].text in _NOT_TYPES:
                    break
                k += 1
                if k < b and toks[k].text == "<":
                    gt = cxx.angle_close(toks, k, match, b)
                    if gt is None:
                        break
                    k = gt + 1
                if k < b and toks[k].text == "::":
                    k += 1
                    continue
                break
            while k < b and toks[k].text in ("const", "volatile"):
                k += 1
        if k == t0 or k >= b or toks[k].text != "*":
            continue
        base = " ".join(src[toks[s].start:toks[k - 1].end].split())
        is_auto = re.fullmatch(r"(const\s+|volatile\s+)*auto(\s+const|\s+volatile)*", base) is not None
        if re.fullmatch(r"(const\s+|volatile\s+)*void(\s+const|\s+volatile)*", base) or base.startswith("static"):
            continue
        decls, q, ok = [], k, True  # [(star, name, end of the declarator's initializer)]
        while ok:
            if toks[q].text != "*":
                ok = False
                break
            star, q = q, q + 1
            while q < b and toks[q].text in _PTR_QUALS:
                q += 1
            if q >= b or toks[q].kind != "id" or toks[q].text in KEYWORDS or q + 1 >= b:
                ok = False
                break
            name, q = q, q + 1
            if toks[q].text == "=":
                q += 1
                init_start = q
                while q < b and toks[q].text not in (",", ";"):
                    q = match[q] + 1 if toks[q].text in ("(", "[", "{") and q in match else q + 1
                if q >= b or q == init_start:
                    ok = False
                    break
                decls.append((star, name, (init_start, q)))
            elif toks[q].text in (",", ";"):
                decls.append((star, name, None))
            else:
                ok = False  # float* p[4], float* p(x), float* p{x}
                break
            if toks[q].text == ";":
                break
            q += 1
        if not ok or not decls or (is_auto and len(decls) > 1):
            continue
        quals = [{toks[x].text for x in range(star + 1, name)} for star, name, _ in decls]
        const_ptr = ["const" in qs for qs in quals]
        if len(decls) > 1 and any(const_ptr):
            continue  # float* const p = x, *q = y: one declaration cannot say it with gptr
        for n, (star, name, init) in enumerate(decls):
            if n == 0:
                if is_auto:
                    const_elems = "const" in base.split()
                    head = f"{'const ' if const_ptr[0] else ''}auto {toks[name].text}"
                else:
                    head = f"{'const ' if const_ptr[0] else ''}::cuda_emu::gptr<{base}> {toks[name].text}"
                rw.replace(toks[s].start, toks[name].end, head)
            else:
                rw.replace(toks[star].start, toks[name].end, toks[name].text)
            if init:
                ia, ib = init
                itext = src[toks[ia].start:toks[ib - 1].end].strip()
                if itext in ("0", "NULL", "nullptr") and not is_auto:
                    continue
                wrap = f"::cuda_emu::aptr<{'true' if const_elems else 'false'}>(" if is_auto else "::cuda_emu::bound("
                rw.wrap(toks[ia].start, toks[ib - 1].end, wrap, ")")
            out.add(toks[name].text)
    return out


def _statement_end(toks: list[Tok], match: dict[int, int], i: int, b: int) -> int:
    """Index of the last token of the statement that starts at toks[i] (within a body ending at b)."""
    x = toks[i].text
    if x == "{" and i in match:
        return match[i]
    if x in ("for", "while", "if", "switch") and i + 1 < b and toks[i + 1].text == "(" and i + 1 in match:
        end = _statement_end(toks, match, match[i + 1] + 1, b) if match[i + 1] + 1 < b else b
        if x == "if" and end + 1 < b and toks[end + 1].text == "else":
            end = _statement_end(toks, match, end + 2, b)
        return end
    if x == "do" and i + 1 < b:
        end = _statement_end(toks, match, i + 1, b)  # the body, then: while (...);
        return min(match[end + 2] + 1, b) if end + 2 < b and end + 2 in match else b
    while i < b and toks[i].text != ";":
        i = match[i] + 1 if toks[i].text in ("(", "[", "{") and i in match else i + 1
    return i


_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
_PURE_CALLS = {"min", "max", "sizeof", "static_cast", "std", "::"}


def _modified(toks: list[Tok], names: set[str], a: int, b: int) -> bool:
    """Is one of ``names`` assigned, incremented or has its address taken in toks[a..b]?"""
    for k in range(a, b + 1):
        t = toks[k]
        if t.kind != "id" or t.text not in names or toks[k - 1].text in (".", "->", "::"):
            continue
        if toks[k - 1].text in ("++", "--", "&") or (k + 1 <= b and toks[k + 1].text in _ASSIGN | {"++", "--"}):
            return True
    return False


def _bounded_for(toks: list[Tok], match: dict[int, int], i: int, c0: int, c1: int, b: int) -> bool:
    """Does ``for (INIT; v < E; v++)`` at toks[i] surely end?  v declared or set in INIT, compared with
    ``<``/``<=`` to E (no calls but min/max/sizeof), stepped by ``++`` or ``+= S`` (S a positive
    literal, blockDim/gridDim/warpSize, an upper-case constant or a product of those), and neither v
    nor E's names changed in the body.  These loops (register tiles, grid-stride loops) get no tick:
    they cost most in the inner loops, and cannot spin."""
    lp, rp = i + 1, match[i + 1]
    eq = next((k for k in range(lp + 1, c0) if toks[k].text == "="), None)
    if eq is None or toks[eq - 1].kind != "id":
        return False
    v = toks[eq - 1].text
    cond = toks[c0 + 1:c1]
    if len(cond) < 3 or cond[0].text != v or cond[1].text not in ("<", "<="):
        return False
    bound_names = set()
    for k in range(c0 + 3, c1):
        t = toks[k]
        if t.text in _ASSIGN | {"++", "--", "?"}:
            return False
        if t.kind == "id" and k + 1 < c1 and toks[k + 1].text in ("(", "<") and t.text not in _PURE_CALLS:
            return False  # a call: may change anything
        if t.kind == "id" and toks[k - 1].text not in (".", "->"):
            bound_names.add(t.text)
    step = toks[c1 + 1:rp]
    texts = [t.text for t in step]
    if texts not in ([v, "++"], ["++", v]):
        if len(step) < 3 or texts[:2] != [v, "+="]:
            return False
        for t in step[2:]:
            ok = (t.kind == "num" and re.fullmatch(r"[1-9][0-9']*[uUlL]*|0[xX]0*[1-9a-fA-F][0-9a-fA-F]*[uUlL]*", t.text)) \
                or t.text in ("*", ".", "blockDim", "gridDim", "warpSize", "x", "y", "z", "(", ")") \
                or (t.kind == "id" and re.fullmatch(r"[A-Z][A-Z0-9_]*", t.text))
            if not ok:
                return False
    if rp + 1 >= b:
        return False
    end = _statement_end(toks, match, rp + 1, b)
    return not _modified(toks, {v} | (bound_names - KEYWORDS), rp + 1, end)


def _loop_ticks(toks: list[Tok], match: dict[int, int], body: tuple[int, int], rw: Rewriter) -> None:
    """``while (c)`` -> ``while (::cuda_emu::tick(LINE), (c))`` and ``for (i; c; s)`` -> ``for (i;
    ::cuda_emu::tick(LINE), (c); s)`` in device code (``do ... while`` too): every iteration polls for
    Ctrl-C and for the watchdog's request to let the block's other threads run (see runtime.cpp).
    Loops that surely end are left alone: range-for loops, and the counting loops of _bounded_for."""
    a, b = body
    for i in range(a + 1, b):
        t = toks[i]
        if t.kind != "id" or t.text not in ("while", "for") or i + 1 not in match or toks[i + 1].text != "(":
            continue
        lp, rp = i + 1, match[i + 1]
        tick = f"::cuda_emu::tick({t.line}), "
        if t.text == "while":
            inner = toks[lp + 1:rp]
            if not inner or (len(inner) >= 2 and inner[0].kind == "id" and inner[1].kind == "id"):
                continue  # while (T x = f()): a declaration
            rw.wrap(toks[lp].end, toks[rp].start, tick + "(", ")")
            continue
        semis, j = [], lp + 1
        while j < rp:
            if toks[j].text in ("(", "[", "{") and j in match:
                j = match[j] + 1
                continue
            if toks[j].text == ";":
                semis.append(j)
            j += 1
        if len(semis) != 2:
            continue  # for (x : range)
        c0, c1 = semis
        if _bounded_for(toks, match, i, c0, c1, b):
            continue
        if c1 == c0 + 1:
            rw.insert(toks[c0].end, f" {tick}true")
        else:
            rw.wrap(toks[c0].end, toks[c1 - 1].end, f" {tick}(", ")")


_INT_ZERO = re.compile(r"0+[uUlL]*|0[xXbB]0+[uUlL]*")


def _checked_divisors(toks: list[Tok], match: dict[int, int], body: tuple[int, int], rw: Rewriter) -> None:
    """The divisor of ``/``, ``%``, ``/=``, ``%=`` in device code -> ``::cuda_emu::divisor(d, LINE)``
    when it is a name (``n``, ``blockDim.x``, ``p[i]``, ``f(x)``), a parenthesized expression or a
    literal integer 0: an integer 0 then raises an error naming the line (instead of SIGFPE, or the
    trap gcc emits for a literal 0).  Nonzero literals, casts and other operands are left alone."""
    a, b = body
    for i in range(a + 1, b - 1):
        t = toks[i]
        if t.kind != "punct" or t.text not in ("/", "%", "/=", "%="):
            continue
        j = i + 1
        u = toks[j]
        if u.kind == "num":
            if not _INT_ZERO.fullmatch(u.text):
                continue
            end = j
        elif u.text == "(" and j in match:
            end = match[j]
            if end + 1 < b and (toks[end + 1].kind in ("id", "num") or toks[end + 1].text == "("):
                continue  # (int)x: a cast
        elif u.kind == "id" and u.text not in KEYWORDS | {"this"}:
            end = j
            while True:
                if end + 1 < b and toks[end + 1].text in ("::", ".", "->") and end + 2 < b \
                        and toks[end + 2].kind == "id":
                    end += 2
                elif end + 1 < b and toks[end + 1].text in ("(", "[") and end + 1 in match:
                    end = match[end + 1]
                else:
                    break
            if end + 1 < b and toks[end + 1].text == "<":
                continue  # f<T>(x), or a comparison: leave it
        else:
            continue
        if end + 1 < b and toks[end + 1].text in ("++", "--"):
            continue
        rw.wrap(toks[j].start, toks[end].end, "::cuda_emu::divisor(", f", {t.line})")


_COMPOUND = {"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}


def _access_kind(toks: list[Tok], i: int, last: int) -> int | None:
    """How ``NAME[...]...[...]`` (toks[i] .. toks[last]) is used: 0 read, 1 write (``=``), 2
    read-modify-write (``+=``, ``++`` ...), None when not followed: its address (``&a[i]``: atomics,
    pointers) or a member (``a[i].x``: the check would see the whole element, so two threads
    writing different members of one element would look like a race)."""
    prev = toks[i - 1].text if i else ""
    if prev in ("++", "--"):
        return 2
    if prev == "&":
        before = toks[i - 2] if i >= 2 else None
        operand_end = before is not None and (before.kind in ("num", "str", "chr") or before.text in (")", "]") or
                                              (before.kind == "id" and before.text not in KEYWORDS))
        if not operand_end:
            return None
    e = last + 1
    if e < len(toks) and toks[e].text in (".", "->"):
        return None
    op = toks[e].text if e < len(toks) else ""
    return 1 if op == "=" else 2 if op in _COMPOUND or op in ("++", "--") else 0


def _rewrite_accesses(toks, match, rw, device_bodies, shared, pointer_params) -> None:
    """In kernels and device functions: ``tile[r][c]`` (a checked ``__shared__`` array with all its
    indices) -> ``::cuda_emu::sat<K>(tile, LINE, (r), (c))``, and ``out[i] += v`` (a kernel's pointer
    parameter, read-modify-write) -> ``::cuda_emu::sat<2>(out, LINE, (i)) += v``: the same reference,
    bounds-checked as before, recorded for the race check (K: see _access_kind).  Partial indexing,
    ``&a[i]``, ``a[i].x`` and pointers derived from the array are left alone (not race-checked)."""
    if not shared and not pointer_params:
        return
    decl_ranges = [r for _, _, r in shared]
    file_scope = {n: rank for n, rank, (a, _) in shared if not any(x < a < y for x, y in device_bodies)}
    for body in device_bodies:
        a, b = body
        names = dict(file_scope)
        names.update({n: rank for n, rank, (d, _) in shared if a < d < b})
        params = pointer_params.get(body, set())
        for i in range(a + 1, b):
            t = toks[i]
            if t.kind != "id" or i + 1 >= b or toks[i + 1].text != "[" or i + 1 not in match:
                continue
            if t.text not in names and t.text not in params:
                continue
            if toks[i - 1].text in (".", "->", "::") or any(x <= i < y for x, y in decl_ranges):
                continue
            groups, k = [], i + 1
            while k < b and toks[k].text == "[" and k in match:
                groups.append((k, match[k]))
                k = match[k] + 1
            if t.text not in names:  # a checked pointer (parameter or local)
                _pointer_access(toks, i, groups[0], rw)
                continue
            rank = names.get(t.text, 1)
            if len(groups) != rank or rank > 4:
                continue  # a row of a 2D array, more indices than dimensions (sat takes up to 4)
            kind = _access_kind(toks, i, groups[-1][1])
            if kind is None or (t.text not in names and kind != 2):
                continue  # pointer parameters: only read-modify-writes are checked
            rw.replace(t.start, t.end, f"::cuda_emu::sat<{kind}>({t.text}, {t.line}")
            for n, (lb, rb) in enumerate(groups):
                rw.replace(toks[lb].start, toks[lb].end, ", (")
                rw.replace(toks[rb].start, toks[rb].end, "))" if n == len(groups) - 1 else ")")


def _pointer_access(toks: list[Tok], i: int, group: tuple[int, int], rw: Rewriter) -> None:
    """``p[i]`` on a checked pointer -> ``::cuda_emu::gat<K>(p, LINE, "p", (i))`` (K as in
    _access_kind; the error names p, the line and the element reached), and ``&p[i]`` ->
    ``(p + (i))``: the same address, still a checked pointer (so that ``*reinterpret_cast<float4*>(
    &out[j])`` checks all 16 bytes, and ``&out[n]``, one past the end, is no error until used)."""
    t, (lb, rb) = toks[i], group
    after = toks[rb + 1].text if rb + 1 < len(toks) else ""
    prev = toks[i - 1].text if i else ""
    if prev == "&" and after not in (".", "->", "[", "(", "++", "--"):
        before = toks[i - 2] if i >= 2 else None
        binary = before is not None and (before.kind in ("num", "str", "chr") or before.text in (")", "]") or
                                         (before.kind == "id" and before.text not in KEYWORDS))
        if not binary:
            rw.replace(toks[i - 1].start, t.end, f"({t.text}")
            rw.replace(toks[lb].start, toks[lb].end, " + (")
            rw.replace(toks[rb].start, toks[rb].end, "))")
            return
    kind = _access_kind(toks, i, rb)
    rw.replace(t.start, t.end, f'::cuda_emu::gat<{kind or 0}>({t.text}, {t.line}, "{t.text}"')
    rw.replace(toks[lb].start, toks[lb].end, ", (")
    rw.replace(toks[rb].start, toks[rb].end, "))")


def _rewrite_derefs(src: str, toks: list[Tok], match: dict[int, int], body: tuple[int, int], names: set[str],
                    rw: Rewriter) -> None:
    """``*p`` (p a checked pointer), ``*(expr)`` and ``*reinterpret_cast<T*>(expr)`` in device code ->
    ``::cuda_emu::gderef<K>(LINE, "*p", p)``: the same element, and an error that quotes the
    expression and names the line.  ``*p++`` and declarators (``float *a, *b``) are left alone."""
    a, b = body
    for i in range(a + 1, b - 1):
        t = toks[i]
        if t.text != "*" or t.kind != "punct":
            continue
        prev = toks[i - 1]
        if not ((prev.kind == "punct" and prev.text not in (")", "]")) or prev.text in ("return", "case")):
            continue  # a multiplication, or a declaration (float *p)
        if prev.text == ",":  # f(a, *p) yes; float *a, *b (a declaration at depth 0) no
            k = i - 1
            while k > a and toks[k].text not in ("(", "[", ";", "{", "}"):
                k = match[k] - 1 if toks[k].text in (")", "]") and k in match else k - 1
            if toks[k].text not in ("(", "["):
                continue
        j = i + 1
        u = toks[j]
        if u.kind == "id" and u.text in names:
            end = j
        elif u.text == "(" and j in match:
            end = match[j]
            if end + 1 < b and (toks[end + 1].kind in ("id", "num") or toks[end + 1].text == "("):
                continue  # *(float4*)p: a cast
        elif u.text == "reinterpret_cast" and j + 1 < b and toks[j + 1].text == "<":
            gt = cxx.angle_close(toks, j + 1, match, b)
            if gt is None or gt + 1 >= b or toks[gt + 1].text != "(" or gt + 1 not in match:
                continue
            end = match[gt + 1]
        else:
            continue
        after = toks[end + 1].text if end + 1 < b else ""
        if after in ("++", "--", "[", "(", ".", "->"):
            continue  # *p++ is *(p++); *p.x ...
        kind = 2 if prev.text in ("++", "--") or after in _COMPOUND or after in ("++", "--") else 1 if after == "=" else 0
        expr = "*" + " ".join(src[toks[j].start:toks[end].end].split())
        expr = expr.replace("\\", "\\\\").replace('"', '\\"')
        rw.wrap(t.start, toks[end].end, f'::cuda_emu::gderef<{kind}>({t.line}, "{expr}", ', ")")
        rw.replace(t.start, t.end, "")


def _plain_kernels(toks: list[Tok], funcs) -> set[str]:
    """Kernels defined once and not templated: ``&name`` is their address (cudaFuncSetAttribute)."""
    defs: dict[str, int] = {}
    templated = set()
    for f in funcs:
        if f.qualifier != "__global__":
            continue
        k = f.lparen - 1
        while k > 0 and toks[k - 1].text not in (";", "}", "{", ")") and toks[k - 1].kind != "pp":
            k -= 1
            if toks[k].text == "template":
                templated.add(f.name)
        if f.body:
            defs[f.name] = defs.get(f.name, 0) + 1
    return {n for n, c in defs.items() if c == 1 and n not in templated}


def _kernel_templates(toks: list[Tok], match: dict[int, int], funcs) -> dict[str, tuple[int, int]]:
    """name -> (template parameters, how many have defaults) of each templated kernel defined
    once without a parameter pack: the launches whose template arguments name one instance."""
    out, seen = {}, {}
    for f in funcs:
        if f.qualifier != "__global__" or not f.body:
            continue
        seen[f.name] = seen.get(f.name, 0) + 1
        k = f.lparen - 1
        while k > 0 and toks[k].text != "__global__":
            k -= 1
        k -= 1
        if k < 0 or toks[k].text not in (">", ">>"):
            continue
        depth, j = 0, k
        while j >= 0:  # back to the matching '<' of `template <...>`
            depth += {">": 1, ">>": 2, "<": -1}.get(toks[j].text, 0)
            if toks[j].text in ("(", ")", "[", "]") and j in match and match[j] < j:
                j = match[j]
            if depth == 0:
                break
            j -= 1
        if j < 1 or toks[j - 1].text != "template":
            continue
        inner = toks[j + 1:k]
        if any(t.text == "..." for t in inner):
            continue
        params = _split_params(toks, j, k, match) if inner else []
        defaults = sum(any(t.text == "=" for t in toks[a:b]) for a, b in params)
        out[f.name] = (len(params), defaults)
    return {n: v for n, v in out.items() if seen[n] == 1}


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
            if x == "assert" and i + 1 in match and match[i + 1] > i + 2:  # the condition as written
                cond = " ".join(rw.src[toks[i + 2].start:toks[match[i + 1] - 1].end].split())
                cond = cond.replace("\\", "\\\\").replace('"', '\\"')
                rw.replace(start, toks[i + 1].end, f'CUDA_EMU_ASSERT_TEXT("{cond}", ')
                continue
            rw.replace(start, t.end, new)
        elif x in ("data_ptr", "mutable_data_ptr", "const_data_ptr") and i > 0 \
                and toks[i - 1].text == "." and i + 1 < len(toks) and toks[i + 1].text in ("<", "("):
            s = _expr_start_before(toks, i - 1, match)
            if s is not None:
                rw.insert(toks[s].start, "::cuda_emu::track(")
                rw.insert(toks[i - 1].start, ")")
        elif x == "CUDA" and i >= 2 and toks[i - 1].text == "::" and toks[i - 2].text == "DeviceType":
            rw.replace(t.start, t.end, "CPU")


def _rewrite_launch(src, toks, i, match, rw, kernels, in_device, origin, templates=None, plain=()) -> None:
    """``k<T><<<g, b, s>>>(args)`` -> ``::cuda_emu::kernel("k<T>", "x,y", __LINE__,
    [&](auto&&... a) { k<T>(a...); }, ::cuda_emu::kname<&k<T>>(), ::cuda_emu::kaddr(&k<T>)).config(g, b,
    s)(args)``: the instance's name for the launch counts and its address for the limit that
    cudaFuncSetAttribute raises, only where ``&k<T>`` names one function (see _kernel_templates;
    ``kaddr(&k)`` for a kernel in ``plain``, ``kaddr(expr)`` when the launch is not of a kernel's
    name, e.g. of a variable holding one)."""
    line = toks[i].line
    if in_device:
        raise CudaEmulationError(_refusal(origin, line, "dynamic parallelism (a launch inside a kernel)",
                                          "<<<", src.splitlines()[line - 1]))
    ks = cxx.kernel_expr_start(toks, i)
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
    flat = " ".join(expr.split())
    by_variable = name not in kernels and re.fullmatch(r"[A-Za-z_]\w*", flat)   # e.g. kern<<<...>>>
    if by_variable:
        # a variable holding a kernel (``auto kern = mm_k<64, 4>; ... kern<<<...>>>``): its parameters
        decl = re.findall(rf"\b{name}\s*=\s*&?\s*(?:::)?(?:\w+::)*(\w+)\s*[<;]", src[:toks[i].start])
        if decl and decl[-1] in kernels:
            params = ",".join(kernels[decl[-1]])
    rw.insert(toks[ks].start, f'::cuda_emu::kernel("{flat}", "{params}", __LINE__, '
                              f'[&](auto&&... cuda_emu_a) {{ ')
    pretty, addr = "", ""
    if toks[i - 1].text in (">", ">>") and name in (templates or {}):
        lt = next(k for k in range(ks, i) if toks[k].text == "<")
        nargs = len(_split_params(toks, lt, i - 1, match))
        nparams, defaults = templates[name]
        if nparams - defaults <= nargs <= nparams:
            pretty = f", ::cuda_emu::kname<&{flat} >()"
            addr = f", ::cuda_emu::kaddr(&{flat})"
    elif name in plain and toks[i - 1].text not in (">", ">>"):
        addr = f", ::cuda_emu::kaddr(&{flat})"
    elif by_variable:
        addr = f", ::cuda_emu::kaddr({flat})"  # a variable holding a kernel's address
    if addr and not pretty:
        pretty = ", nullptr"
    rw.insert(toks[i - 1].end, f"(cuda_emu_a...); }}{pretty}{addr})")
    rw.replace(toks[i].start, toks[i].end, ".config(")
    rw.replace(toks[j].start, toks[j].end, ")")


# ----------------------------------------------------------------------------------------------
# Building: compiler flags, the precompiled header, the cache.


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
