"""The C++ front end shared by the GPU split build, the CPU emulation and ``get_sig``: enough
C++ to find kernels, launches and declarations without being fooled by comments, strings, raw
strings, character literals, digit separators (``1'000``) or preprocessor lines. One module a part:
:mod:`.tokens`, :mod:`.declarations`, :mod:`.launches`; every name is read from here.

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

from .declarations import Decl, Stmt, analyze, statements
from .launches import (Function, Launch, LaunchSyntaxError, defined_names, find_functions, find_launches,
                       kernel_expr_start)
from .tokens import (CUDA_QUALIFIERS, FUNC_ATTRS, KEYWORDS, PTR_QUALS, Tok, angle_close, match_brackets, split_args,
                     text_of, tokenize, unbalanced)

__all__ = ["Tok", "tokenize", "match_brackets", "unbalanced", "text_of", "angle_close", "split_args", "KEYWORDS",
           "CUDA_QUALIFIERS", "PTR_QUALS", "FUNC_ATTRS", "Stmt", "statements", "Decl", "analyze", "Function",
           "find_functions", "defined_names", "kernel_expr_start", "Launch", "LaunchSyntaxError", "find_launches"]
