"""The edits of a rewrite (:class:`Rewriter`: replacements, insertions and nested wraps applied at once,
line numbers kept) and the token readers the rewrites share."""
from __future__ import annotations

from ... import cxx
from ...cxx import KEYWORDS, PTR_QUALS, Tok


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


def split_params(toks: list[Tok], lp: int, rp: int, match: dict[int, int]) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the parameters between parentheses lp and rp."""
    return cxx.split_args(toks, lp, rp, match)


def param_name(ptoks: list[Tok]) -> str:
    """The declared name of one parameter ('' when unnamed)."""
    eq = next((k for k, t in enumerate(ptoks) if t.text == "="), len(ptoks))
    body = ptoks[:eq]
    while body and body[-1].text == "]":  # float x[4]
        k = max(k for k, t in enumerate(body) if t.text == "[")
        body = body[:k]
    if len(body) >= 2 and body[-1].kind == "id" and body[-1].text not in KEYWORDS | PTR_QUALS:
        return body[-1].text
    return ""


_HEADERS = ("for", "if", "while", "switch")   # keywords whose parenthesized header a statement follows


def expr_start_before(toks: list[Tok], dot: int, match: dict[int, int]) -> int | None:
    """Start of the postfix expression that ends just before toks[dot] ('.'), or None."""
    k, start = dot - 1, None
    while k >= 0:
        t = toks[k]
        if t.text in (")", "]") and k in match:
            start = k = match[k]
            k -= 1
            if k >= 0 and toks[k].kind == "id" and toks[k].text not in KEYWORDS:
                continue  # f(...) / a[...]
            if k >= 0 and toks[k].text == ")" and match.get(k, 0) > 0 and toks[match[k] - 1].text in _HEADERS:
                return start  # for (...) (o + j)->v: the group starts the statement the header controls
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
