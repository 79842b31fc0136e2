"""Checked pointers and accesses: pointer parameters (:func:`checked_param`) and local pointers
(:func:`local_pointers`) become bounds-checked ``gptr``, ``p[i]`` / ``*p`` on them name the element
reached (:func:`rewrite_derefs`), and accesses to ``__shared__`` arrays and pointer parameters are
recorded for the race check (:func:`rewrite_accesses`)."""
from __future__ import annotations

import re

from ... import cxx
from ...cxx import KEYWORDS, PTR_QUALS, Tok
from .rewriter import Rewriter


def checked_param(src: str, ptoks: list[Tok]) -> str | None:
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
    names = [t.text for t in after if t.text not in PTR_QUALS]
    if len(names) > 1 or any(not re.fullmatch(r"[A-Za-z_]\w*", x) for x in names):
        return None
    const = "const " if any(t.text == "const" for t in after) else ""
    return f"{const}::cuda_emu::gptr<{base}> {names[0] if names else ''}".rstrip()


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


def local_pointers(src: str, toks: list[Tok], match: dict[int, int], body: tuple[int, int],
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
            while q < b and toks[q].text in PTR_QUALS:
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


def rewrite_accesses(toks, match, rw, device_bodies, shared, pointer_params) -> None:
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


def rewrite_derefs(src: str, toks: list[Tok], match: dict[int, int], body: tuple[int, int], names: set[str],
                    rw: Rewriter) -> None:
    """``*p`` (p any pointer named: a checked one, a raw one, a member ``*io.x``; also ``*p++`` and
    ``*++p``), ``*(expr)`` and ``*reinterpret_cast<T*>(expr)`` in device code ->
    ``::cuda_emu::gderef<K>(LINE, "*p", p)``: the same element, counted, and an error that quotes the
    expression and names the line.  Declarators (``float *a, *b``, ``float **pp``) are left alone."""
    a, b = body
    for i in range(a + 1, b - 1):
        t = toks[i]
        if t.text != "*" or t.kind != "punct":
            continue
        prev = toks[i - 1]
        statement = prev.text == ")" and i - 1 in match and match[i - 1] > 0 and \
            toks[match[i - 1] - 1].text in ("for", "if", "while", "switch")   # for (...) *b++ = ...
        if not ((prev.kind == "punct" and prev.text not in (")", "]")) or prev.text in ("return", "case", "else", "do")
                or statement):
            continue  # a multiplication, or a declaration (float *p)
        if prev.text == ",":  # f(a, *p) yes; float *a, *b (a declaration at depth 0) no
            k = i - 1
            while k > a and toks[k].text not in ("(", "[", ";", "{", "}"):
                k = match[k] - 1 if toks[k].text in (")", "]") and k in match else k - 1
            if toks[k].text not in ("(", "["):
                continue
        j = i + 1
        u = toks[j]
        if u.kind == "id" and u.text not in KEYWORDS:
            if u.text not in names and prev.text in ("*", "&", "&&"):
                continue  # float **pp, a * *p: declarators, or nothing to follow
            end = j  # *p, *io.x, *p++ (the element p points at before it moves)
            while end + 2 < b and toks[end + 1].text in (".", "->") and toks[end + 2].kind == "id":
                end += 2
            if end + 1 < b and toks[end + 1].text in ("++", "--"):
                end += 1
        elif u.text in ("++", "--") and j + 1 < b and toks[j + 1].kind == "id" and toks[j + 1].text not in KEYWORDS:
            end = j + 1  # *++p
            if end + 1 < b and toks[end + 1].text in (".", "->"):
                continue
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
            continue  # *p[i], *f(x), (*p).x ...
        kind = 2 if prev.text in ("++", "--") or after in _COMPOUND or after in ("++", "--") else 1 if after == "=" else 0
        expr = "*" + " ".join(src[toks[j].start:toks[end].end].split())
        expr = expr.replace("\\", "\\\\").replace('"', '\\"')
        rw.wrap(t.start, toks[end].end, f'::cuda_emu::gderef<{kind}>({t.line}, "{expr}", ', ")")
        rw.replace(t.start, t.end, "")


def _c_pointer_cast(toks: list[Tok], i: int, match: dict[int, int]) -> bool:
    """Whether ``toks[i]`` opens a C-style cast to a pointer type: ``(const float4*)``, names and ``::`` and
    qualifiers inside, a ``*`` last, and an operand right after."""
    if toks[i].text != "(" or i not in match:
        return False
    j = match[i]
    inner = toks[i + 1:j]
    return (len(inner) >= 2 and inner[-1].text == "*" and inner[0].kind == "id"
            and all(u.kind == "id" or u.text in ("::", "*") for u in inner)
            and j + 1 < len(toks) and (toks[j + 1].kind == "id" or toks[j + 1].text == "("))


def rewrite_cast_subscripts(src: str, toks: list[Tok], match: dict[int, int], body: tuple[int, int],
                            rw: Rewriter) -> None:
    """``reinterpret_cast<T*>(expr)[i]`` and ``((T*)expr)[i]`` in device code (a ``float4`` load or store through
    a cast, the vector kernels' idiom) -> ``::cuda_emu::gat<K>(reinterpret_cast<T*>(expr), LINE, "...", (i))``: the same element,
    bounds-checked and counted as one access, like ``p[i]`` on a named pointer; without this the counts of a
    vector kernel held only its scalar tail. Addresses (``&reinterpret_cast<T*>(p)[i]``) and members
    (``...[i].x``) are left alone, as for names."""
    a, b = body
    for i in range(a + 1, b - 1):
        t = toks[i]
        if t.text == "reinterpret_cast" and toks[i + 1].text == "<":
            gt = cxx.angle_close(toks, i + 1, match, b)
            if gt is None or gt + 1 >= b or toks[gt + 1].text != "(" or gt + 1 not in match:
                continue
            lb = match[gt + 1] + 1
        elif t.text == "(" and i in match and _c_pointer_cast(toks, i + 1, match):
            lb = match[i] + 1      # ((const float4*)x)[i]
        else:
            continue
        if lb >= b or toks[lb].text != "[" or lb not in match or toks[i - 1].text == "*":
            continue   # not subscripted, or *reinterpret_cast<T*>(p) (rewrite_derefs)
        rb = match[lb]
        kind = _access_kind(toks, i, rb)
        if kind is None:
            continue
        var = " ".join(src[t.start:toks[lb - 1].end].split()).replace("\\", "\\\\").replace('"', '\\"')
        rw.wrap(t.start, toks[rb].end, f"::cuda_emu::gat<{kind}>(", "")
        rw.replace(toks[lb].start, toks[lb].end, f', {t.line}, "{var}", (')
        rw.replace(toks[rb].start, toks[rb].end, "))")


_MEM_CALLS = {"memcpy": "dmemcpy", "memmove": "dmemcpy", "memset": "dmemset",
              "__builtin_memcpy": "dmemcpy", "__builtin_memmove": "dmemcpy", "__builtin_memset": "dmemset"}


def rewrite_mem_calls(toks: list[Tok], body: tuple[int, int], rw: Rewriter) -> None:
    """``memcpy(&v, x + j, 4)`` (also ``std::``/``::``, memmove, memset) in device code ->
    ``::cuda_emu::dmemcpy(...)``: the same copy, its bytes counted as accesses and bounds-checked."""
    a, b = body
    for i in range(a + 1, b - 1):
        t = toks[i]
        if t.kind != "id" or t.text not in _MEM_CALLS or toks[i + 1].text != "(" or toks[i - 1].text in (".", "->"):
            continue
        start = i
        if toks[i - 1].text == "::":
            start = i - 2 if i >= 2 and toks[i - 2].text == "std" else i - 1
        rw.replace(toks[start].start, t.end, f"::cuda_emu::{_MEM_CALLS[t.text]}")


# tokens after which `NAME[` cannot start a declaration (the name is in an expression)
_EXPR_KEYWORDS = {"return", "case", "else", "do", "throw", "sizeof"}
_BLOCK_BEFORE = {")", ";", "{", "}", "else", "do", "try", "]"}


def _expression_context(toks: list[Tok], match: dict[int, int], i: int, a: int) -> bool:
    """Whether ``toks[i]`` (a name followed by ``[``) is in an expression, not declared there."""
    prev = toks[i - 1]
    if prev.kind == "pp":
        return True
    if prev.kind == "id":
        return prev.text in _EXPR_KEYWORDS
    if prev.kind != "punct":
        return False
    x = prev.text
    if x in (".", "->", "::", ">", ">>", "<", "]", ")"):
        return False  # members (elsewhere), templates, declarators
    if x == "*":  # float* p[4] declares; a * p[4] multiplies
        before = toks[i - 2]
        if before.text in (")", "]") or before.kind in ("num", "chr"):
            return True
        if before.kind == "id" and before.text not in KEYWORDS:
            bb = toks[i - 3]
            return bb.kind == "punct" and bb.text not in (";", "{", "}", ",", "(", "<", "::", ">", "*", "&")
        return False
    if x == ",":  # f(a, p[i]) and {a, p[i]}; not float a[4], b[4]
        k = i - 2
        while k > a and toks[k].text not in ("(", "[", "{", ";", "}"):
            k = match[k] - 1 if toks[k].text in (")", "]", "}") and k in match else k - 1
        if toks[k].text in ("(", "["):
            return True
        return toks[k].text == "{" and toks[k - 1].text not in _BLOCK_BEFORE and toks[k - 1].kind != "pp"
    return True


def rewrite_other_accesses(src: str, toks: list[Tok], match: dict[int, int], body: tuple[int, int],
                           handled: set[str], skip: list, rw: Rewriter) -> None:
    """The subscripts the checked pointers do not reach, in device code: ``io.out[j]`` and ``p->row[i]``
    (a member), ``q[j]`` (a name that is no checked pointer: a raw one, a pointer array ``ptrs[1][j]``, a
    local array) -> ``::cuda_emu::gat<K>(io.out, LINE, "io.out", (j))``: the same element, counted (and,
    for a raw pointer into known memory, bounds-checked) where it lies in global or shared memory. The
    names in ``handled`` (checked pointers and __shared__ arrays, rewritten elsewhere) and the token ranges
    in ``skip`` (declarations) are left alone, as are addresses (``&io.out[j]``)."""
    a, b = body
    for i in range(a + 1, b - 1):
        t = toks[i]
        if t.kind != "id" or t.text in KEYWORDS or toks[i + 1].text != "[" or i + 1 not in match:
            continue
        if any(x <= i < y for x, y in skip) or toks[i + 2].text == "[":   # [[attribute]]
            continue
        member = toks[i - 1].text in (".", "->")
        if member:
            start = cxx_start = _member_start(toks, i, match)
            if cxx_start is None:
                continue
        else:
            if t.text in handled or not _expression_context(toks, match, i, a):
                continue
            start = i
        groups, k = [], i + 1
        while k < b and toks[k].text == "[" and k in match:
            groups.append((k, match[k]))
            k = match[k] + 1
        if member:
            groups = groups[:1]  # a[i][j] of a member: its first index (a row of a member array is no access)
        kind = _access_kind(toks, start, groups[-1][1])
        if kind is None and toks[start - 1].text == "&" and toks[groups[-1][1] + 1].text not in (".", "->"):
            continue  # &io.out[j]: an address
        var = " ".join(src[toks[start].start:t.end].split()).replace("\\", "\\\\").replace('"', '\\"')
        for n, (lb, rb) in enumerate(groups):
            k_n = (kind or 0) if n == len(groups) - 1 else 0
            rw.wrap(toks[start].start, toks[rb].end, f"::cuda_emu::gat<{k_n}>(", "")
            rw.replace(toks[lb].start, toks[lb].end, f', {t.line}, "{var}", (')
            rw.replace(toks[rb].start, toks[rb].end, "))")


def rewrite_arrows(toks: list[Tok], match: dict[int, int], body: tuple[int, int], rw: Rewriter) -> None:
    """``p->m`` in device code -> ``::cuda_emu::arrow(p)->m``: a member of a struct in global or shared memory
    read through a pointer is a counted access. Left alone: ``p->row[i]`` (gat counts the element),
    ``p->f(...)``, ``&p->m`` and ``this->m``."""
    a, b = body
    for i in range(a + 1, b - 1):
        if toks[i].text != "->" or toks[i + 1].kind != "id" or toks[i + 2].text in ("[", "("):
            continue
        start = _member_start(toks, i + 1, match)
        if start is None or start >= i or toks[start].text == "this":
            continue
        if toks[start - 1].text == "&":
            before = toks[start - 2]
            if not (before.kind in ("num", "str", "chr") or before.text in (")", "]") or
                    (before.kind == "id" and before.text not in KEYWORDS)):
                continue
        rw.wrap(toks[start].start, toks[i - 1].end, "::cuda_emu::arrow(", ")")


def _member_start(toks: list[Tok], i: int, match: dict[int, int]) -> int | None:
    """Start of the postfix expression ``E.name`` / ``E->name`` that ends at toks[i] (None: not followed)."""
    from .rewriter import expr_start_before
    return expr_start_before(toks, i - 1, match)
