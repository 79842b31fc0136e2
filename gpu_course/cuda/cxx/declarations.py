"""C++ declarations: the top-level statements of a token list (:func:`statements`: namespaces and
``extern "C" {}`` are entered) and what one of them declares (:func:`analyze`: a function, a
variable or a type, its name, specifiers, parameters and body)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .tokens import CUDA_QUALIFIERS, FUNC_ATTRS, KEYWORDS, PTR_QUALS, Tok, angle_close
from .tokens import match_brackets, text_of, tokenize  # noqa: F401  (the examples use them)

_TRAILERS = {"const", "volatile", "noexcept", "override", "final", "mutable", "&", "&&"}  # after a function's ()


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
