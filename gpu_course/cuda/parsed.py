"""A CUDA C / C++ source read once, for everything that reads it.

:func:`parse` gives the :class:`ParsedSource` of a text: its tokens, brackets, top-level statements
and what each declares, its CUDA functions and kernels, includes and names. Each part is computed
on first use and kept, and the latest sources are kept by text, so ``get_sig``, ``load_cuda``, its
back ends (the CPU emulation, the GPU split build) and the exercise checks all read one object:
a source is tokenized once however many of them look at it.

:func:`prepare` is what ``load_cuda`` hands a back end (:class:`Sources`): both sources parsed and
``funcs`` checked against ``cpp_src`` (:func:`check_funcs`), once.

>>> p = parse("template <int T> __global__ void k(float* x) { x[0] = T; }\\n"
...           "void run(torch::Tensor x) { k<2><<<1, 1>>>(x.data_ptr<float>()); }")
>>> p.kernels, [f.name for f in p.functions], p.declaration("run")
(('k',), ['k'], 'void run(torch::Tensor x);')
>>> parse(p.text) is p      # kept by text: read once
True
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from functools import cached_property

from . import cxx
from .language import INCLUDE_RE

__all__ = ["ParsedSource", "Sources", "parse", "prepare", "check_funcs"]


class ParsedSource:
    """One source's parts, each computed on first use and then kept. Shared by every reader of
    the same text (see :func:`parse`): read them, never change them.

    * ``toks``, ``match``: the tokens (:func:`cxx.tokenize`) and every bracket's partner;
    * ``statements``: the top-level statements (namespaces entered); ``declarations``:
      ``(statement, cxx.Decl)`` of each declaration among them, in order;
    * ``functions``: the ``__global__`` and ``__device__`` functions anywhere, class members too
      (:func:`cxx.find_functions`, the one reader of CUDA functions); ``kernels``: the names of
      the ``__global__`` ones; ``kernel_bodies``: ``{name: body tokens}`` of their definitions;
    * ``includes``: ``(line, header)`` of each ``#include``; ``called``: names followed by ``(``;
      ``defined_names``: what the source defines itself (:func:`cxx.defined_names`).
    """

    def __init__(self, text: str):
        self.text = text

    def __repr__(self):
        return f"<ParsedSource: {self.text.count(chr(10)) + 1} lines>"

    @cached_property
    def toks(self) -> list:
        return cxx.tokenize(self.text)

    @cached_property
    def match(self) -> dict:
        return cxx.match_brackets(self.toks)

    @cached_property
    def statements(self) -> list:
        return cxx.statements(self.toks, self.match)

    @cached_property
    def declarations(self) -> list:
        return [(s, cxx.analyze(self.toks, self.match, s)) for s in self.statements if s.kind == "decl"]

    @cached_property
    def functions(self) -> list:
        return cxx.find_functions(self.toks, self.match, ("__global__", "__device__"))

    @cached_property
    def kernels(self) -> tuple:
        return tuple(sorted({f.name for f in self.functions if f.qualifier == "__global__"}))

    @cached_property
    def kernel_bodies(self) -> dict:
        """``{name: tokens inside the braces}`` of each ``__global__`` definition (the last one of
        a name defined twice)."""
        return {f.name: self.toks[f.body[0] + 1:f.body[1]] for f in self.functions
                if f.qualifier == "__global__" and f.body}

    @cached_property
    def includes(self) -> list:
        out = []
        for t in self.toks:
            m = INCLUDE_RE.match(t.text) if t.kind == "pp" else None
            if m:
                out.append((t.line, m.group(1)))
        return out

    @cached_property
    def called(self) -> frozenset:
        toks = self.toks
        return frozenset(toks[k].text for k in range(len(toks) - 1)
                         if toks[k].kind == "id" and toks[k + 1].text == "(")

    @cached_property
    def defined_names(self) -> frozenset:
        return frozenset(cxx.defined_names(self.toks))

    def declaration(self, name: str) -> str | None:
        """The declaration of function ``name``, e.g. ``'torch::Tensor f(torch::Tensor x);'``: the
        first one, wherever it is (in a namespace, as a definition's head); None if there is none.

        >>> parse("namespace k { torch::Tensor f(torch::Tensor x); }  // f(...)").declaration("f")
        'torch::Tensor f(torch::Tensor x);'
        """
        for s, d in self.declarations:
            if d.kind == "function" and d.name == name:
                return cxx.text_of(self.toks, s.a, d.head_end).rstrip() + ";"
        return None


@functools.lru_cache(maxsize=32)
def parse(text: str) -> ParsedSource:
    """The :class:`ParsedSource` of ``text``; the latest 32 are kept, so a source that ``get_sig``,
    ``load_cuda`` and an exercise check all read is tokenized once."""
    return ParsedSource(text)


def check_funcs(cpp_src: str, funcs, error=ValueError) -> list:
    """``funcs`` as a list, after checking that each is a C++ name that ``cpp_src`` declares
    (the binding to Python sees only cpp_src, on the GPU as in the emulation); raises ``error``.

    >>> check_funcs("torch::Tensor square(torch::Tensor x);", "square")
    ['square']
    >>> check_funcs("torch::Tensor square(torch::Tensor x);", ["sqaure"])
    Traceback (most recent call last):
    ...
    ValueError: load_cuda: funcs lists 'sqaure', but cpp_src declares no such function; add its declaration, e.g. utils.get_sig('sqaure', cuda_src)
    """
    funcs = [funcs] if isinstance(funcs, str) else list(funcs)
    called = parse(cpp_src).called
    for f in funcs:
        if not isinstance(f, str) or not re.fullmatch(r"[A-Za-z_]\w*", f):
            raise error(f"load_cuda: funcs lists {f!r}, which is not a C++ function name")
        if f not in called:
            raise error(f"load_cuda: funcs lists {f!r}, but cpp_src declares no such function; "
                        f"add its declaration, e.g. utils.get_sig({f!r}, cuda_src)")
    return funcs


@dataclass(frozen=True)
class Sources:
    """What ``load_cuda`` hands a back end: ``cuda_src`` and ``cpp_src`` parsed, and ``funcs``
    checked against ``cpp_src``."""
    cuda: ParsedSource
    cpp: ParsedSource
    funcs: tuple


def prepare(cuda_src: str, cpp_src: str, funcs, error=ValueError) -> Sources:
    """Both sources parsed (each part on first use) and ``funcs`` checked (:func:`check_funcs`,
    raising ``error``).

    >>> s = prepare("__global__ void k() {}", "void f();", "f")
    >>> s.funcs, s.cuda.kernels
    (('f',), ('k',))
    """
    return Sources(parse(cuda_src), parse(cpp_src), tuple(check_funcs(cpp_src, funcs, error)))
