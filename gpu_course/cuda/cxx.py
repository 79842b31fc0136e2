"""The C++ front end shared by the GPU split build, the CPU emulation and ``get_sig``: enough
C++ to find kernels, launches and declarations without being fooled by comments, strings, raw
strings, character literals, digit separators (``1'000``) or preprocessor lines.

* :func:`tokenize`, :func:`match_brackets`: tokens, and the partner of every bracket;
* :func:`statements`: the top-level statements (namespaces and ``extern "C" {}`` are entered);
* :func:`analyze`: what one statement declares (a function, a variable, a type), its name,
  specifiers (``__global__``, ``static`` ...), parameters and body;
* :func:`find_functions`: ``__global__`` / ``__device__`` functions anywhere (class members too);
* :func:`find_launches`: every ``kernel<<<...>>>(...)``, with its configuration and arguments.

>>> [t.text for t in tokenize("k<<<1, 2>>>(x); // hi")]
['k', '<<<', '1', ',', '2', '>>>', '(', 'x', ')', ';']
>>> src = "namespace k { __global__ void sq(float* x) { x[0] *= x[0]; } }"
>>> toks = tokenize(src); match = match_brackets(toks)
>>> [(s.kind, s.scope) for s in statements(toks, match)]
[('open', ()), ('decl', ('k',)), ('close', ('k',))]
>>> d = analyze(toks, match, statements(toks, match)[1])
>>> d.kind, d.name, sorted(d.specifiers & CUDA_QUALIFIERS)
('function', 'sq', ['__global__'])
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


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
_TRAILERS = {"const", "volatile", "noexcept", "override", "final", "mutable", "&", "&&"}


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


def split_args(toks: list[Tok], lp: int, rp: int, match: dict[int, int],
               angles: bool = True) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the comma-separated items between brackets lp and rp; with
    ``angles`` a comma inside ``<...>`` (template arguments) does not split.

    >>> toks = tokenize("f(std::pair<int, int> p, float* x)")
    >>> [text_of(toks, a, b) for a, b in split_args(toks, 1, len(toks) - 1, match_brackets(toks))]
    ['std::pair<int, int> p', 'float* x']
    """
    params, a, j, angle = [], lp + 1, lp + 1, 0
    while j < rp:
        x = toks[j].text
        if x in ("(", "[", "{") and j in match:
            j = match[j] + 1
            continue
        if angles and x == "<":
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


# ----------------------------------------------------------------------------------------------
# Top-level statements
# ----------------------------------------------------------------------------------------------
@dataclass
class Stmt:
    """A top-level statement: tokens [a, b) of kind ``pp`` (a directive), ``open`` (``namespace
    k {`` or ``extern "C" {``), ``close`` (its ``}``) or ``decl`` (a declaration or definition);
    ``scope`` names the enclosing namespaces (``""`` for an anonymous one, ``'extern "C"'``)."""
    kind: str
    a: int
    b: int
    scope: tuple = ()


def _scope_opener(toks: list[Tok], i: int, match: dict[int, int], limit: int):
    """(scope name, index of its '{') if toks[i] opens a namespace or a linkage block."""
    k = i
    if toks[k].text == "inline" and k + 1 < limit and toks[k + 1].text == "namespace":
        k += 1
    if toks[k].text == "namespace":
        k += 1
        name = []
        while k < limit and (toks[k].kind == "id" or toks[k].text == "::"):
            name.append(toks[k].text)
            k += 1
        if k < limit and toks[k].text == "{" and k in match:
            return "".join(name), k
        return None
    if toks[k].text == "extern" and k + 2 < limit and toks[k + 1].kind == "str" \
            and toks[k + 2].text == "{" and k + 2 in match:
        return f"extern {toks[k + 1].text}", k + 2
    return None


def _skip_template_header(toks: list[Tok], k: int, match: dict[int, int], limit: int) -> int:
    """Index after any ``template <...>`` headers starting at k."""
    while k + 1 < limit and toks[k].text == "template" and toks[k + 1].text == "<":
        gt = angle_close(toks, k + 1, match, limit)
        if gt is None:
            return k
        k = gt + 1
    return k


def _is_function_body(toks: list[Tok], a: int, lb: int, match: dict[int, int]) -> bool:
    """Is the '{' at lb the body of a function whose head is toks[a:lb]?"""
    texts, j = [], _skip_template_header(toks, a, match, lb)
    while j < lb:  # the head at bracket depth 0; "(" stands for a whole (...) group
        x = toks[j].text
        texts.append(x)
        j = match[j] + 1 if x in ("(", "[") and j in match else j + 1
    if "(" not in texts:
        return False
    before = texts[:texts.index("(")]
    if "operator" not in texts and any(x in ("struct", "class", "union", "enum", "=") for x in before):
        return False  # struct alignas(16) S {...}: a class body
    prev = toks[lb - 1].text
    if prev == ")" or prev in _TRAILERS:
        return True
    return "->" in texts[texts.index("("):]  # a trailing return type: auto f(int x) -> float {


def _statement_end(toks: list[Tok], i: int, match: dict[int, int], limit: int) -> int:
    """One past the last token of the statement that starts at toks[i]."""
    k = _skip_template_header(toks, i, match, limit)
    eq = False
    while k < limit:
        x = toks[k]
        if x.kind == "pp":
            return k
        if x.text == ";":
            return k + 1
        if x.text == "=" and toks[k - 1].text != "operator":
            eq = True
        elif x.text in ("(", "[") and k in match:
            k = match[k] + 1
            continue
        elif x.text == "{" and k in match:
            close = match[k]
            if not eq and _is_function_body(toks, i, k, match):
                return close + 1
            k = close + 1
            continue
        elif x.text in ("}", ")", "]"):
            return k  # unbalanced: let the compiler complain
        k += 1
    return limit


def statements(toks: list[Tok], match: dict[int, int]) -> list[Stmt]:
    """The top-level statements of a token list; the statements inside a namespace or an
    ``extern "C" {}`` block are top level too (between its ``open`` and ``close``).

    >>> src = "#define N 4\\nint a = 1'000;\\nnamespace k { void f() {} }"
    >>> toks = tokenize(src)
    >>> [(s.kind, text_of(toks, s.a, s.b)) for s in statements(toks, match_brackets(toks))]
    [('pp', '#define N 4'), ('decl', "int a = 1'000;"), ('open', 'namespace k {'), ('decl', 'void f() {}'), ('close', '}')]
    """
    out, stack, i, n = [], [], 0, len(toks)
    while i < n:
        scope = tuple(name for _, name in stack)
        limit = stack[-1][0] if stack else n
        if stack and i == limit:
            out.append(Stmt("close", i, i + 1, scope))
            stack.pop()
            i += 1
            continue
        t = toks[i]
        if t.kind == "pp":
            out.append(Stmt("pp", i, i + 1, scope))
            i += 1
            continue
        if t.text in (";", "}", ")", "]"):  # a stray ';' after a body, or unbalanced
            i += 1
            continue
        opener = _scope_opener(toks, i, match, limit)
        if opener:
            name, lb = opener
            out.append(Stmt("open", i, lb + 1, scope))
            stack.append((match[lb], name))
            i = lb + 1
            continue
        end = max(_statement_end(toks, i, match, limit), i + 1)
        out.append(Stmt("decl", i, end, scope))
        i = end
    return out


# ----------------------------------------------------------------------------------------------
# What a statement declares
# ----------------------------------------------------------------------------------------------
@dataclass
class Decl:
    """What the declaration statement toks[a:b] declares.

    ``kind``: ``function`` (a declaration or definition), ``variable``, ``type`` (struct, class,
    union or enum, possibly with variables) or ``other`` (using, typedef, static_assert, ...);
    ``name``: the function's (unqualified) name, the first variable's or the type's;
    ``specifiers``: the identifiers of the head before the name (``__global__``, ``static``,
    ``inline``, ``constexpr``, the type ...); ``template``: (``<``, ``>``) of a template header;
    ``lparen``/``rparen``: a function's parameter list; ``body``: ``{`` and ``}`` of a function
    definition or class body; ``head_end``: where the head ends (the body's ``{``, or the ``;``);
    ``names``: each declared variable, as (name index, initializer [start, end) or None)."""
    a: int
    b: int
    kind: str
    head_end: int
    name: str = ""
    specifiers: frozenset = frozenset()
    template: tuple | None = None
    lparen: int | None = None
    rparen: int | None = None
    body: tuple | None = None
    names: list = field(default_factory=list)
    scope: tuple = ()


def analyze(toks: list[Tok], match: dict[int, int], stmt: Stmt) -> Decl:
    """What the ``decl`` statement ``stmt`` declares (see :class:`Decl`).

    >>> src = "template <int T> __global__ void k(float* x) { }  __constant__ float m[3], n = 2;"
    >>> toks = tokenize(src); match = match_brackets(toks)
    >>> fn, var = [analyze(toks, match, s) for s in statements(toks, match)]
    >>> fn.kind, fn.name, "__global__" in fn.specifiers, fn.template is not None, fn.body is not None
    ('function', 'k', True, True, True)
    >>> var.kind, [toks[q].text for q, _ in var.names], "__constant__" in var.specifiers
    ('variable', ['m', 'n'], True)
    """
    a, b = stmt.a, stmt.b
    end = b - 1 if b > a and toks[b - 1].text == ";" else b
    k, template = a, None
    if k + 1 < end and toks[k].text == "template" and toks[k + 1].text == "<":
        gt = angle_close(toks, k + 1, match, end)
        if gt is not None:
            template = (k + 1, gt)
            k = _skip_template_header(toks, k, match, end)
    d = Decl(a, b, "other", end, template=template, scope=stmt.scope)
    if k < end and toks[k].text in ("using", "typedef", "static_assert", "friend", "namespace",
                                     "asm", "__asm__"):
        return d
    spec, angle, j, type_kw = [], 0, k, None
    while j < end:
        t = toks[j]
        x = t.text
        if x == "[" and j + 1 < end and toks[j + 1].text == "[" and j in match:  # [[attribute]]
            j = match[j] + 1
            continue
        if x == "<" and j > k and (toks[j - 1].kind == "id"):
            angle += 1
        elif x in (">", ">>") and angle:
            angle = max(0, angle - (2 if x == ">>" else 1))
        elif angle:
            if x in ("(", "[", "{") and j in match:
                j = match[j] + 1
                continue
        elif x in ("struct", "class", "union", "enum"):
            type_kw = j
        elif x == "(" and j in match:
            prev = toks[j - 1] if j > k else None
            if prev is not None and prev.text in FUNC_ATTRS:
                j = match[j] + 1
                continue
            if prev is not None and prev.kind == "id" and prev.text not in KEYWORDS | PTR_QUALS \
                    and type_kw is None:
                # a function: name(params) [trailers] ({ body } | ;)
                d.kind, d.name, d.lparen, d.rparen = "function", prev.text, j, match[j]
                d.specifiers = frozenset(spec[:-1])
                q = match[j] + 1
                while q < end and toks[q].text != "{":
                    q = match[q] + 1 if toks[q].text in ("(", "[") and q in match else q + 1
                if q < end and q in match:
                    d.body, d.head_end = (q, match[q]), q
                return d
            break  # (*fp)(int), operator(), a macro call: "other"
        elif x in ("{", "=", ",", ";", "[", ":", "("):
            break
        if t.kind == "id":
            spec.append(x)
        j += 1
    if type_kw is not None:
        d.kind, d.specifiers = "type", frozenset(spec)
        names = [toks[q].text for q in range(type_kw + 1, j) if toks[q].kind == "id"
                 and toks[q].text not in KEYWORDS | FUNC_ATTRS]
        d.name = names[0] if names else ""
        q = j
        while q < end and toks[q].text != "{":
            q += 1
        if q < end and q in match:
            d.body, d.head_end = (q, match[q]), q
        return d
    decls = _declarators(toks, match, k, end)
    if decls:
        d.kind, d.name, d.names = "variable", toks[decls[0][0]].text, decls
        d.specifiers = frozenset(toks[q].text for q in range(k, decls[0][0]) if toks[q].kind == "id")
    return d


def _declarators(toks: list[Tok], match: dict[int, int], k: int, end: int) -> list:
    """[(name index, initializer range or None)] of a variable declaration toks[k:end]."""
    out, start, j, angle = [], k, k, 0

    def close(a: int, b: int) -> None:
        name, init = None, None
        q = a
        while q < b:
            x = toks[q].text
            if x in ("(", "[", "{") and q in match:
                if x == "(" and name is None:  # (*fp)(...): not a plain name
                    return
                if x in ("{", "(") and name is not None:  # int x{3}; int x(3);
                    init = (q, match[q] + 1)
                    break
                q = match[q] + 1
                continue
            if x == "=":
                init = (q, b)
                break
            if x == "<" and q > a and toks[q - 1].kind == "id":
                gt = angle_close(toks, q, match, b)
                q = (gt if gt is not None else q) + 1
                continue
            if toks[q].kind == "id" and x not in KEYWORDS | PTR_QUALS | CUDA_QUALIFIERS | FUNC_ATTRS \
                    and not (q + 1 < b and toks[q + 1].text == "::"):
                name = q  # the last plain identifier: the declared name
            q += 1
        if name is not None:
            out.append((name, init))

    while j < end:
        x = toks[j].text
        if x in ("(", "[", "{") and j in match:
            j = match[j] + 1
            continue
        if x == "<" and j > k and toks[j - 1].kind == "id":
            angle += 1
        elif x in (">", ">>") and angle:
            angle = max(0, angle - (2 if x == ">>" else 1))
        elif x == "=" and angle == 0:
            # skip the initializer up to the next top-level comma
            q = j + 1
            while q < end and toks[q].text != ",":
                q = match[q] + 1 if toks[q].text in ("(", "[", "{") and q in match else q + 1
            j = q
            continue
        elif x == "," and angle == 0:
            close(start, j)
            start = j + 1
        j += 1
    close(start, end)
    return out


# ----------------------------------------------------------------------------------------------
# CUDA functions and launches
# ----------------------------------------------------------------------------------------------
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
