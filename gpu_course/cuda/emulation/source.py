"""The emulation's source side: what it refuses (found before compiling, so the message is about
CUDA, not C++), and the rewriting of CUDA C into C++ that the emulator's headers run on the CPU
(kernels, launches, ``__shared__`` arrays, checked pointers, checked accesses for the race
check)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import cxx
from ..cxx import KEYWORDS, Function, Tok, match_brackets, tokenize
from ..cxx import defined_names
from ..errors import CudaEmulationError

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
                    "cuda_pipeline.h", "cuda_pipeline_primitives.h"}
_INCLUDE_REFUSED = [
    (re.compile(r"cooperative_groups"), "cooperative groups"),
    (re.compile(r"^mma\.h$|^crt/mma"), "tensor cores (wmma/mma)"),
    (re.compile(r"cuda_fp16|cuda_bf16|cuda_fp8"), "half/bfloat16/fp8 types"),
    (re.compile(r"^(cub|thrust|cuda|cute|cutlass)/"), "CUDA C++ libraries (cub, thrust, cutlass, libcu++)"),
    (re.compile(r"cublas|cudnn|curand|cufft|cusparse|cusolver|nccl|nvrtc|nvtx"), "CUDA libraries"),
    (re.compile(r"^(ATen|c10)/cuda/|^(ATen|c10)/hip/"), "CUDA-specific torch headers"),
    (re.compile(r"cuda_pipeline|cuda_awbarrier"),
     "asynchronous copies other than <cuda_pipeline.h>'s primitives (cp.async)"),
]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def _refusal(origin: str, line: int, what: str, name: str, src_line: str) -> str:
    return (f"{origin} line {line}: {what} ({name}) is not supported by the CPU emulation; "
            f"run on a GPU.\n{line:6d} | {src_line.strip()}")


def check_supported(src: str, toks: list[Tok], origin: str = "cuda_src") -> None:
    """Raise :class:`CudaEmulationError` listing each feature outside the emulated subset.

    >>> check_supported("long long t0 = clock64();", tokenize("long long t0 = clock64();"))
    Traceback (most recent call last):
    ...
    gpu_course.cuda.errors.CudaEmulationError: cuda_src line 1: GPU clocks and sleeping (clock64) is not supported by the CPU emulation; run on a GPU.
         1 | long long t0 = clock64();
    """
    lines = src.splitlines() or [""]
    problems, seen = [], set()

    def add(line, what, name):
        if (line, name) not in seen:
            seen.add((line, name))
            problems.append(_refusal(origin, line, what, name, lines[min(line, len(lines)) - 1]))

    own = defined_names(toks)  # a learner's cudaCheck(...) macro or function is theirs
    for i, t in enumerate(toks):
        if t.kind == "pp":
            m = INCLUDE_RE.match(t.text)
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
        elif t.text in _LEGACY_WARP and i + 1 < len(toks) and toks[i + 1].text == "(" and (t.line, t.text) not in seen:
            seen.add((t.line, t.text))
            problems.append(f"{origin} line {t.line}: {t.text}() is a warp intrinsic without _sync, removed in "
                            f"CUDA 9 for sm_70+ GPUs: use {t.text}_sync(mask, ...), e.g. {t.text}_sync(0xffffffff, "
                            f"...) when the whole warp takes part.\n{t.line:6d} | "
                            f"{lines[min(t.line, len(lines)) - 1].strip()}")
        elif re.match(r"cuda[A-Z]\w*$", t.text) and t.text not in _CUDA_API_OK and t.text not in own:
            add(t.line, "the CUDA runtime API", t.text)
    for line, msg in _symbol_misuse(toks, origin):
        problems.append(f"{msg}\n{line:6d} | {lines[min(line, len(lines)) - 1].strip()}")
    if problems:
        more = f"\n(and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise CudaEmulationError("\n".join(problems[:8]) + more)


def _symbol_misuse(toks: list[Tok], origin: str) -> list[tuple[int, str]]:
    """(line, message) for each cudaMemcpyToSymbol / cudaMemcpyFromSymbol whose symbol is not a
    __constant__ or __device__ variable of this source (a GPU fails there with "invalid device
    symbol"; here it would quietly copy into host memory)."""
    match = match_brackets(toks)
    device_vars = set()
    for s in cxx.statements(toks, match):
        if s.kind == "decl":
            d = cxx.analyze(toks, match, s)
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
    return cxx.find_functions(toks, match, ("__global__", "__device__"))


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


def kernel_expr_start(toks: list[Tok], i: int) -> int | None:
    """Index of the first token of the kernel expression before ``<<<`` at index i."""
    return cxx.kernel_expr_start(toks, i)


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


def transform(src: str, *, checked: bool = True, origin: str = "cuda_src") -> Transformed:
    """Rewrite CUDA C into C++ for cuda_emu.h (see the module docstring for what changes)."""
    toks = tokenize(src)
    match = match_brackets(toks)
    funcs = find_functions(toks, match)
    device_bodies = [f.body for f in funcs if f.body]
    rw = Rewriter(src)

    def in_device_code(i: int) -> bool:
        return any(a < i < b for a, b in device_bodies)

    kernels: dict[str, list[str]] = {}
    pointer_params: dict[tuple[int, int], set[str]] = {}  # kernel body -> its checked pointer parameters
    for f in funcs:
        if f.qualifier != "__global__":
            continue
        params = _split_params(toks, f.lparen, f.rparen, match)
        names = [_param_name(toks[a:b]) for a, b in params]
        if f.body or f.name not in kernels:
            kernels[f.name] = names
        if checked:
            for (a, b), pname in zip(params, names):
                new = _checked_param(src, toks[a:b])
                if new is not None:
                    rw.replace(toks[a].start, toks[b - 1].end, new)
                    if f.body and pname:
                        pointer_params.setdefault(f.body, set()).add(pname)

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
    _simple_rewrites(toks, match, rw)
    return Transformed(rw.apply(), kernels)


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
    ks = kernel_expr_start(toks, i)
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


def declaration(cpp_src: str, name: str) -> str | None:
    """The declaration of function ``name`` in cpp_src, e.g. 'torch::Tensor f(torch::Tensor x);'
    (the first one, wherever it is: in a namespace, as a definition's head).

    >>> declaration("namespace k { torch::Tensor f(torch::Tensor x); }  // f(...)", "f")
    'torch::Tensor f(torch::Tensor x);'
    """
    toks = tokenize(cpp_src)
    match = match_brackets(toks)
    for s in cxx.statements(toks, match):
        if s.kind == "decl":
            d = cxx.analyze(toks, match, s)
            if d.kind == "function" and d.name == name:
                return cxx.text_of(toks, s.a, d.head_end).rstrip() + ";"
    return None


def binding(modname: str, funcs: list[str], cpp_src: str) -> str:
    """C++ that makes ``funcs`` callable from Python through the CPython API (no pybind11)."""
    decls, entries = [], []
    for f in funcs:
        d = declaration(cpp_src, f)
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
