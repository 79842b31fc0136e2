"""CUDA in C++ tokens: ``__global__`` / ``__device__`` functions anywhere (:func:`find_functions`), the
names a source defines (:func:`defined_names`) and every ``kernel<<<...>>>(...)`` launch with its
configuration and arguments (:func:`find_launches`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .tokens import FUNC_ATTRS, KEYWORDS, Tok, split_args
from .tokens import match_brackets, tokenize  # noqa: F401  (the examples use them)


@dataclass
class Function:
    """A ``__global__`` or ``__device__`` function: its qualifier, name, the token indices of its
    parameter list's parentheses and of its body's braces (None for a declaration)."""
    qualifier: str
    name: str
    lparen: int
    rparen: int
    body: tuple[int, int] | None


def find_functions(toks: list[Tok], match: dict[int, int],
                   qualifiers=("__global__", "__device__")) -> list[Function]:
    """Functions declared with one of ``qualifiers``, anywhere (in namespaces, as class members),
    definitions and declarations, in source order.

    >>> toks = tokenize("struct S { __device__ float f(int i) const { return i; } };")
    >>> [(f.qualifier, f.name, f.body is not None) for f in find_functions(toks, match_brackets(toks))]
    [('__device__', 'f', True)]
    """
    funcs = []
    for i, t in enumerate(toks):
        if t.kind != "id" or t.text not in qualifiers:
            continue
        j = i + 1
        while j < len(toks):
            u = toks[j]
            if u.text in (";", "{", "=", "}") or u.kind == "pp":
                break  # a variable (or garbage), not a function
            if u.text == "(":
                prev = toks[j - 1]
                if prev.text in FUNC_ATTRS and j in match:
                    j = match[j] + 1
                    continue
                name = None
                if prev.text == "operator" and j + 2 < len(toks) and toks[j + 1].text == ")":
                    name, j = "operator()", j + 2  # the parameters follow "operator()"
                elif j >= 2 and toks[j - 2].text == "operator" and prev.kind == "punct":
                    name = "operator" + prev.text
                elif prev.kind == "id" and prev.text not in KEYWORDS:
                    name = prev.text
                if name and toks[j].text == "(" and j in match:
                    rp = match[j]
                    k = rp + 1
                    while k < len(toks) and toks[k].text not in ("{", ";", "}"):
                        k = match.get(k, k) + 1 if toks[k].text == "(" else k + 1
                    body = (k, match[k]) if k < len(toks) and toks[k].text == "{" and k in match else None
                    funcs.append(Function(t.text, name, j, rp, body))
                break
            j += 1
    return funcs


# words before a name that make it an expression, not a declaration: ``return f(x)``
_NOT_A_TYPE = {"return", "else", "case", "goto", "throw", "new", "delete", "sizeof", "alignof",
               "co_return", "co_await", "co_yield", "do", "typename", "operator", "using"}
_DEFINE_RE = re.compile(r"\s*#\s*define\s+([A-Za-z_]\w*)")


def defined_names(toks: list[Tok]) -> set:
    """Names the source defines or declares itself: macros, functions, variables and parameters,
    types (struct/class/union/enum, using, typedef). A lexical reading: a name counts when it
    follows a type (a name that is not a statement keyword, ``*``, ``&`` or ``>``) and comes
    before ``(``, ``=``, ``;``, ``,``, ``[``, ``{``, ``)`` or ``:``.

    >>> toks = tokenize("#define CHECK(x) x\\nvoid cudaCheck(cudaError_t cudaStatus) {}\\n"
    ...                 "int main() { cudaCheck(cudaGetLastError()); return f(1); }")
    >>> sorted(defined_names(toks))
    ['CHECK', 'cudaCheck', 'cudaStatus', 'main']
    """
    names = set()
    for i, t in enumerate(toks):
        if t.kind == "pp":
            m = _DEFINE_RE.match(t.text)
            if m:
                names.add(m.group(1))
            continue
        if t.kind != "id" or t.text in KEYWORDS or i == 0 or i + 1 >= len(toks):
            continue
        prev, nxt = toks[i - 1], toks[i + 1].text
        if prev.text in ("struct", "class", "union", "enum", "namespace"):
            names.add(t.text)
        elif prev.text == "using" and nxt == "=":
            names.add(t.text)
        elif nxt in ("(", "=", ";", ",", "[", "{", ")", ":") and (
                (prev.kind == "id" and prev.text not in _NOT_A_TYPE) or prev.text in ("*", "&", "&&", ">")):
            if i >= 2 and toks[i - 2].text in (".", "->") and prev.kind == "id":
                continue
            names.add(t.text)
    return names


def kernel_expr_start(toks: list[Tok], i: int) -> int | None:
    """Index of the first token of the kernel expression before the ``<<<`` at index i
    (``k``, ``ns::k``, ``k<16, float>``), None if there is none."""
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


@dataclass
class Launch:
    """``kernel<<<config>>>(args)``: token indices of the kernel expression's first token, of
    ``<<<``, ``>>>`` and the argument list's parentheses; ``config``: token ranges of grid, block
    [, shared bytes [, stream]]; ``name``: the kernel's name without namespace or template
    arguments; ``template_args``: token range of ``<...>`` after the name, or None."""
    start: int
    lt: int
    gt: int
    lparen: int
    rparen: int
    config: list
    name: str
    template_args: tuple | None = None


class LaunchSyntaxError(ValueError):
    """A ``<<<`` that is not followed by ``>>>`` and an argument list: ``.line`` says where."""

    def __init__(self, line: int):
        super().__init__(f"line {line}: could not read this kernel launch; write it as "
                         f"kernel<<<grid, block>>>(args) or kernel<T><<<grid, block, smem>>>(args)")
        self.line = line


def find_launches(toks: list[Tok], match: dict[int, int], a: int = 0, b: int | None = None) -> list[Launch]:
    """Every kernel launch among toks[a:b], in source order (several per statement, inside
    lambdas, with templated kernels); raises :class:`LaunchSyntaxError` on a malformed one.

    >>> toks = tokenize("a<<<1, 32>>>(x), ns::b<16><<<g, t, 0, s>>>(y, n);")
    >>> [(L.name, len(L.config)) for L in find_launches(toks, match_brackets(toks))]
    [('a', 2), ('b', 4)]
    """
    out, b = [], len(toks) if b is None else b
    for i in range(a, b):
        if toks[i].kind != "punct" or toks[i].text != "<<<":
            continue
        ks = kernel_expr_start(toks, i)
        j, depth = i + 1, 0
        while j < b and not (toks[j].text == ">>>" and depth == 0):
            if toks[j].text in (";", "{", "}"):
                break
            depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(toks[j].text, 0)
            j += 1
        if ks is None or j + 1 >= b or toks[j].text != ">>>" or toks[j + 1].text != "(" \
                or j + 1 not in match:
            raise LaunchSyntaxError(toks[i].line)
        config = split_args(toks, i, j, match)
        name_at = ks + (1 if toks[ks].text == "::" else 0)
        while name_at + 2 < i and toks[name_at + 1].text == "::":
            name_at += 2
        targs = (name_at + 1, i - 1) if toks[i - 1].text in (">", ">>") and name_at + 1 < i - 1 else None
        out.append(Launch(ks, i, j, j + 1, match[j + 1], config, toks[name_at].text, targs))
    return out
