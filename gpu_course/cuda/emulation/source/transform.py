"""The rewrite of CUDA C into C++ for the emulator's headers (:func:`transform`): kernels, ``__shared__``
declarations (checked arrays, the 48 KB static limit), checked pointer parameters, and the passes of
the sibling modules over every device body."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ... import cxx
from ...cxx import KEYWORDS, Tok, match_brackets, tokenize
from ...errors import CudaEmulationError
from ...parsed import ParsedSource, parse
from .launches import kernel_templates, plain_kernels, rewrite_launch, simple_rewrites
from .loops import checked_divisors, loop_ticks
from .pointers import (checked_param, local_pointers, rewrite_accesses, rewrite_arrows, rewrite_cast_subscripts,
                       rewrite_derefs, rewrite_mem_calls, rewrite_other_accesses)
from .rewriter import Rewriter, param_name, split_params


@dataclass
class Transformed:
    text: str
    kernels: dict[str, list[str]]   # kernel name -> parameter names


# A GPU build for a portable target takes at most 48 KiB of static __shared__ memory per kernel (ptxas:
# "uses too much shared data (0x10000 bytes, 0xc000 max)"); Hopper's arch-specific sm_90a accepts more
# (64 KB built and ran on an H200), but such code runs on Hopper only, so cpu mode keeps the portable
# rule. Each declaration asserts the running total of its kernel.
STATIC_SHARED_MAX = 48 * 1024


def _static_shared_assert(sizes: list, origin: str, line: int) -> str:
    return (f'static_assert({" + ".join(sizes)} <= {STATIC_SHARED_MAX}, "{origin} line {line}: more '
            f'than 48 KB (0xc000 bytes) of static __shared__ memory in one kernel; a GPU build refuses it '
            f'(ptxas: uses too much shared data, 0xc000 max) for every target but Hopper-only sm_90a. Use smaller tiles, or extern __shared__ '
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
    """Rewrite CUDA C into C++ for cuda_emu.h (see the package docstring for what changes)."""
    p = source if isinstance(source, ParsedSource) else parse(source)
    src, toks, match, funcs = p.text, p.toks, p.match, p.functions
    device_bodies = [f.body for f in funcs if f.body]
    rw = Rewriter(src)

    def in_device_code(i: int) -> bool:
        return any(a < i < b for a, b in device_bodies)

    kernels: dict[str, list[str]] = {}
    pointer_params: dict[tuple[int, int], set[str]] = {}  # function body -> its checked pointers
    for f in funcs:
        params = split_params(toks, f.lparen, f.rparen, match)
        names = [param_name(toks[a:b]) for a, b in params]
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
                if f.body and pname:   # accessed through gat, which checks and counts a raw pointer too
                    pointer_params.setdefault(f.body, set()).add(pname)
                continue
            new = checked_param(src, toks[a:b])
            if new is not None:
                rw.replace(toks[a].start, toks[b - 1].end, new)
                if f.body and pname:
                    pointer_params.setdefault(f.body, set()).add(pname)
    if checked:
        _template_call_arguments(toks, match, funcs, device_bodies, rw)
        globals_ = _device_pointer_variables(src, toks, match, in_device_code, rw)
        for body in device_bodies:  # local pointers: float* row = out + 5;  -> a checked pointer too
            pointer_params.setdefault(body, set()).update(local_pointers(src, toks, match, body, rw))
            pointer_params[body].update(globals_)

    shared: list = []  # (name, rank, declaration token range) of checked __shared__ arrays
    static_shared: dict = {}  # function body -> sizes of its static __shared__ arrays so far
    templates = kernel_templates(toks, match, funcs)
    plain = plain_kernels(toks, funcs)
    for i, t in enumerate(toks):
        if t.kind == "punct" and t.text == "<<<":
            rewrite_launch(src, toks, i, match, rw, kernels, in_device_code(i), origin, templates, plain)
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
            simple_rewrites(mtoks, match_brackets(mtoks), sub)
            rw.replace(t.start, t.end, sub.apply())
    if checked:
        rewrite_accesses(toks, match, rw, device_bodies, shared, pointer_params)
        decl_ranges = [r for _, _, r in shared]
        shared_names = {n for n, _, _ in shared}
        for body in device_bodies:
            rewrite_derefs(src, toks, match, body, pointer_params.get(body, set()), rw)
            rewrite_cast_subscripts(src, toks, match, body, rw)
            rewrite_other_accesses(src, toks, match, body, shared_names | pointer_params.get(body, set()),
                                   decl_ranges, rw)
            rewrite_mem_calls(toks, body, rw)
            rewrite_arrows(toks, match, body, rw)
    for body in device_bodies:
        loop_ticks(toks, match, body, rw)
        checked_divisors(toks, match, body, rw)
    simple_rewrites(toks, match, rw)
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


def _device_pointer_variables(src: str, toks: list[Tok], match: dict[int, int], in_device_code,
                              rw: Rewriter) -> set[str]:
    """File-scope ``__device__ const float* p;`` (or ``= nullptr``) -> ``__device__ ::cuda_emu::gptr<const float>
    p ...;``: a pointer kept in a ``__device__`` variable keeps the bounds of what was assigned to it, so its
    accesses are checked and counted like a parameter's. Returns the names rewritten."""
    names = set()
    for i, t in enumerate(toks):
        if t.text != "__device__" or in_device_code(i) or (i and toks[i - 1].text not in (";", "}", "{")
                                                            and toks[i - 1].kind != "pp"):
            continue
        a, b = i + 1, i + 1
        while a < len(toks) and toks[a].text in ("static", "extern", "inline"):
            a += 1
        b = a
        while b < len(toks) and toks[b].text not in (";", "(", "{", "="):
            b = match.get(b, b) + 1 if toks[b].text == "[" else b + 1
        if b >= len(toks) or toks[b].text == "(" or toks[b].text == "{" or b == a:
            continue
        new = checked_param(src, toks[a:b])
        if new is not None:
            rw.replace(toks[a].start, toks[b - 1].end, new)
            names.add(toks[b - 1].text)
    return names


def _template_call_arguments(toks: list[Tok], match: dict[int, int], funcs, device_bodies, rw: Rewriter):
    """In device code, each argument of a call of a template ``__device__`` function becomes
    ``::cuda_emu::raw(arg)``: a checked pointer passes as a plain one, so that a parameter ``const T* p``
    deduces ``T`` (the build stays checked, and the helper's accesses are counted through gat)."""
    names = {f.name for f in funcs if f.qualifier == "__device__" and f.name.isidentifier()
             and _template_names(toks, match, f)}
    if not names:
        return
    for a, b in device_bodies:
        for i in range(a + 1, b):
            t = toks[i]
            if t.kind != "id" or t.text not in names or toks[i - 1].text in (".", "->", "::"):
                continue
            k = i + 1
            if k < b and toks[k].text == "<":
                gt = cxx.angle_close(toks, k, match, b)
                if not gt:
                    continue
                k = gt + 1
            if k >= b or toks[k].text != "(" or k not in match:
                continue
            for x, y in split_params(toks, k, match[k], match):
                if y > x:
                    rw.wrap(toks[x].start, toks[y - 1].end, "::cuda_emu::raw(", ")")
