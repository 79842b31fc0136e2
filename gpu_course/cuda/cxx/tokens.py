"""C++ tokens: :func:`tokenize` (comments, strings, raw strings, character literals, digit separators
and preprocessor lines each one token), :func:`match_brackets` (every bracket's partner), the
vocabulary the other parts read (keywords, CUDA qualifiers) and small readers of a token range
(:func:`text_of`, :func:`angle_close`, :func:`split_args`)."""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Tok:
    """One token: its kind, text, character span in the source and 1-based line."""
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


def match_brackets(toks: list[Tok]) -> dict[int, int]:
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


def unbalanced(toks: list[Tok], src: str | None = None) -> str | None:
    """Why the (), [] and {} of ``toks`` do not balance, naming the line of the bracket left
    open (or of the closing one that has no opener); None when they balance.

    >>> src = "int relu(int x) {\\n  if (x > 0) {\\n    return x;\\n  return 0;\\n}"
    >>> unbalanced(tokenize(src), src)
    "the braces do not balance: the '{' on line 1 is never closed (int relu(int x) {)"
    >>> unbalanced(tokenize("f(a));"))
    "the parentheses do not balance: the ')' on line 1 closes nothing"
    """
    lines = src.splitlines() if src else []
    closing = {")": "(", "]": "[", "}": "{"}
    kinds = {"(": "parentheses", "[": "brackets", "{": "braces"}
    stack = []

    def at(t):
        text = lines[t.line - 1].strip() if 0 < t.line <= len(lines) else ""
        return f"line {t.line}", (f" ({text})" if text else "")

    for t in toks:
        if t.kind != "punct":
            continue
        if t.text in kinds:
            stack.append(t)
        elif t.text in closing:
            if not stack:
                line, text = at(t)
                return f"the {kinds[closing[t.text]]} do not balance: the '{t.text}' on {line} closes nothing{text}"
            if stack[-1].text != closing[t.text]:
                o = stack[-1]
                line, text = at(o)
                return (f"the {kinds[o.text]} do not balance: the '{o.text}' on {line}{text} is "
                        f"closed by a '{t.text}' on line {t.line}")
            stack.pop()
    if stack:
        o = stack[0] if stack[0].text == "{" else stack[-1]   # the block left open: a function's
        line, text = at(o)
        return f"the {kinds[o.text]} do not balance: the '{o.text}' on {line} is never closed{text}"
    return None


# ----------------------------------------------------------------------------------------------
# Vocabulary
# ----------------------------------------------------------------------------------------------
KEYWORDS = set("""alignas alignof asm auto bool break case catch char class const constexpr
    const_cast continue decltype default delete do double dynamic_cast else enum explicit extern
    false float for friend goto if inline int long mutable namespace new noexcept nullptr operator
    private protected public register reinterpret_cast return short signed sizeof static
    static_assert static_cast struct switch template this throw true try typedef typeid typename
    union unsigned using virtual void volatile while co_return co_await co_yield""".split())
CUDA_QUALIFIERS = {"__global__", "__device__", "__host__", "__constant__", "__shared__", "__managed__"}
PTR_QUALS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
# name(...) groups in a declaration head that are not the declared function
FUNC_ATTRS = {"__launch_bounds__", "__align__", "alignas", "__attribute__", "__declspec",
              "__maxnreg__", "__cluster_dims__", "decltype", "noexcept", "throw", "alignof", "sizeof"}


def text_of(toks: list[Tok], a: int, b: int) -> str:
    """Source text of tokens [a, b): comments dropped, each gap between tokens one space.

    >>> toks = tokenize("torch::Tensor  f(/* x */ torch::Tensor x)")
    >>> text_of(toks, 0, len(toks))
    'torch::Tensor f( torch::Tensor x)'
    """
    out = []
    for k in range(a, b):
        if k > a and toks[k].start > toks[k - 1].end:
            out.append(" ")
        out.append(toks[k].text)
    return "".join(out)


def angle_close(toks: list[Tok], lt: int, match: dict[int, int], stop: int | None = None) -> int | None:
    """Index of the ``>`` closing the template bracket ``<`` at toks[lt] (None if unbalanced).
    ``>>`` closes two levels; (), [] and {} groups are skipped."""
    depth, k, n = 0, lt, len(toks) if stop is None else stop
    while k < n:
        x = toks[k].text
        if x in ("(", "[", "{") and k in match:
            k = match[k] + 1
            continue
        if x in (";", "{", "}", ")", "]"):
            return None
        if x == "<":
            depth += 1
        elif x == ">":
            depth -= 1
        elif x == ">>":
            depth -= 2
        elif x == ">>>":
            depth -= 3
        if depth <= 0:  # (below 0: a '>>' that also closes an enclosing bracket)
            return k
        k += 1
    return None


def _opens_template(toks: list[Tok], j: int, rp: int, match: dict[int, int]) -> bool:
    """Is the ``<`` at ``j`` (before ``rp``) the start of template arguments, not a comparison? It follows a
    name, and a ``>`` closes it before anything a template argument list cannot hold (``?``, ``;``, ``&&``,
    ``||``, braces) or ``rp``: ``std::min<int>(a, b)`` is one, ``cdiv(n, 256) < 8 ? cdiv(n, 256) : 8`` is not."""
    before = toks[j - 1] if j else None
    if before is None or before.kind != "id" or (before.text in KEYWORDS and not before.text.endswith("_cast")):
        return False
    depth, k = 1, j + 1
    while k < rp:
        x = toks[k].text
        if x in ("(", "[") and k in match:
            k = match[k] + 1
            continue
        if x in ("?", ";", "&&", "||", "{", "}"):
            return False
        if x == "<" and toks[k - 1].kind == "id":
            depth += 1
        elif x in (">", ">>"):
            depth -= len(x)
            if depth <= 0:
                return True
        k += 1
    return False


def split_args(toks: list[Tok], lp: int, rp: int, match: dict[int, int],
               angles: bool = True) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the comma-separated items between brackets lp and rp; with
    ``angles`` a comma inside ``<...>`` (template arguments) does not split, and a ``<`` that compares
    (:func:`_opens_template`) opens nothing.

    >>> toks = tokenize("f(std::pair<int, int> p, float* x)")
    >>> [text_of(toks, a, b) for a, b in split_args(toks, 1, len(toks) - 1, match_brackets(toks))]
    ['std::pair<int, int> p', 'float* x']
    >>> toks = tokenize("k<<<cdiv(n, 256) < 8 ? cdiv(n, 256) : 8, 256, 0, s>>>(x)")
    >>> [text_of(toks, a, b) for a, b in split_args(toks, 1, 25, match_brackets(toks))]
    ['cdiv(n, 256) < 8 ? cdiv(n, 256) : 8', '256', '0', 's']
    """
    params, a, j, angle = [], lp + 1, lp + 1, 0
    while j < rp:
        x = toks[j].text
        if x in ("(", "[", "{") and j in match:
            j = match[j] + 1
            continue
        if angles and x == "<" and _opens_template(toks, j, rp, match):
            angle += 1
        elif angles and x == ">" and angle:
            angle -= 1
        elif angles and x == ">>" and angle:
            angle = max(0, angle - 2)
        elif x == "," and angle == 0:
            params.append((a, j))
            a = j + 1
        j += 1
    if a < rp:
        params.append((a, rp))
    return params
