"""Loop ticks and checked divisors: every loop of device code that does not surely end polls the
Ctrl-C / spin-wait flag (:func:`loop_ticks`), and the divisor of ``/`` and ``%`` is checked where it
can be zero (:func:`checked_divisors`)."""
from __future__ import annotations

import re

from ...cxx import KEYWORDS, Tok
from .rewriter import Rewriter


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


def loop_ticks(toks: list[Tok], match: dict[int, int], body: tuple[int, int], rw: Rewriter) -> None:
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


def checked_divisors(toks: list[Tok], match: dict[int, int], body: tuple[int, int], rw: Rewriter) -> None:
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
