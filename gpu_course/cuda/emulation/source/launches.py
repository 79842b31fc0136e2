"""Launches and the small rewrites: ``k<<<grid, block>>>(args)`` becomes a call of the emulator's
launcher (:func:`rewrite_launch`, templated kernels included), and the host-to-CPU mappings
(:func:`simple_rewrites`: ``is_cuda`` -> ``is_cpu`` ...)."""
from __future__ import annotations

import re

from ... import cxx
from ...cxx import Tok
from ...errors import CudaEmulationError
from .refused import refusal
from .rewriter import Rewriter, expr_start_before, split_params


def plain_kernels(toks: list[Tok], funcs) -> set[str]:
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


def kernel_templates(toks: list[Tok], match: dict[int, int], funcs) -> dict[str, tuple[int, int]]:
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
        params = split_params(toks, j, k, match) if inner else []
        defaults = sum(any(t.text == "=" for t in toks[a:b]) for a, b in params)
        out[f.name] = (len(params), defaults)
    return {n: v for n, v in out.items() if seen[n] == 1}


def simple_rewrites(toks: list[Tok], match: dict[int, int], rw: Rewriter) -> None:
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
            s = expr_start_before(toks, i - 1, match)
            if s is not None:
                rw.insert(toks[s].start, "::cuda_emu::track(")
                rw.insert(toks[i - 1].start, ")")
        elif x == "CUDA" and i >= 2 and toks[i - 1].text == "::" and toks[i - 2].text == "DeviceType":
            rw.replace(t.start, t.end, "CPU")


def rewrite_launch(src, toks, i, match, rw, kernels, in_device, origin, templates=None, plain=()) -> None:
    """``k<T><<<g, b, s>>>(args)`` -> ``::cuda_emu::kernel("k<T>", "x,y", __LINE__,
    [&](auto&&... a) { k<T>(a...); }, ::cuda_emu::kname<&k<T>>(), ::cuda_emu::kaddr(&k<T>)).config(g, b,
    s)(args)``: the instance's name for the launch counts and its address for the limit that
    cudaFuncSetAttribute raises, only where ``&k<T>`` names one function (see kernel_templates;
    ``kaddr(&k)`` for a kernel in ``plain``, ``kaddr(expr)`` when the launch is not of a kernel's
    name, e.g. of a variable holding one)."""
    line = toks[i].line
    if in_device:
        raise CudaEmulationError(refusal(origin, line, "dynamic parallelism (a launch inside a kernel)",
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
        nargs = len(split_params(toks, lt, i - 1, match))
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
