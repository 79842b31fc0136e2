"""Notebook 17's comparison of kernel languages, and the references of its exercises (edge tiles, a row in registers,
CuTe's swizzle in plain Python). How many lines of code a kernel takes in each (Helion, Triton, CUDA C, CuTe DSL),
counted one way for all: the lines that hold code, without blank lines, comments or docstrings, for the
kernel and the launcher a caller needs (a decorator line counts; so does a line that only closes a bracket).

>>> def f(x):
...     '''A docstring: not code.'''
...     # a comment: not code
...     y = (x +
...          1)   # code, with a comment
...
...     return y
>>> python_loc(f)
4
>>> c_loc('''// a kernel
... __global__ void k(float* x) {   /* one
...    comment */
...     x[0] = 1;
... }''')
3
"""
from __future__ import annotations

import inspect
import io
import re
import textwrap
import tokenize

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
         tokenize.ENDMARKER}


def _python_function(obj):
    """The Python function behind ``obj``: itself, or what ``@triton.jit`` / ``@helion.kernel`` wrap (``.fn``)."""
    while hasattr(obj, "fn") and not inspect.isfunction(obj):
        obj = obj.fn
    return obj


def python_loc(*objs) -> int:
    """Lines of code of Python functions (or Triton / Helion kernels: their ``.fn``), together: lines that hold a token
    other than a comment, and are not a docstring."""
    total = 0
    for obj in objs:
        src = textwrap.dedent(inspect.getsource(_python_function(obj)))
        lines, prev = set(), None
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type in _SKIP:
                if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                    prev = tok.type
                continue
            docstring = tok.type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT, None) \
                and _statement_is_string(src, tok)
            prev = tok.type
            if not docstring:
                lines.update(range(tok.start[0], tok.end[0] + 1))
        total += len(lines)
    return total


def _statement_is_string(src: str, tok) -> bool:
    """Whether the string token ``tok`` is a whole statement (a docstring, or a bare string used as a comment)."""
    rest = src.splitlines()[tok.end[0] - 1][tok.end[1]:].strip()
    return rest == "" or rest.startswith("#")


def c_loc(src: str) -> int:
    """Lines of code of C / C++ / CUDA C source: lines left with something other than spaces once ``//`` and ``/* */``
    comments are removed (strings are not parsed: a ``//`` inside a string literal would be taken for a comment)."""
    no_block = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    return sum(1 for line in no_block.splitlines() if line.split("//", 1)[0].strip())


def masked_share(m: int, n: int, block_m: int, block_n: int) -> float:
    """The share of an ``m x n`` output's tile lanes that the edge masks switch off when ``block_m x block_n``
    tiles cover it (``cdiv(m, block_m) x cdiv(n, block_n)`` tiles, each of ``block_m * block_n`` lanes): the work a
    kernel of static shapes launches and throws away at the edges.

    >>> masked_share(128, 128, 64, 64)
    0.0
    >>> round(masked_share(45, 37, 32, 32), 4)   # 2 x 2 tiles of 1024 lanes for 1665 elements
    0.5935
    """
    tiles = -(-m // block_m) * -(-n // block_n)
    return 1 - m * n / (tiles * block_m * block_n)


def reduction_width(w: int) -> int:
    """The lanes a program gives a whole row of ``w`` elements when it reduces it at once (Triton's blocks are
    powers of two): the next power of two, as Helion's ``_RDIM_SIZE`` and the course's ``BLOCK_W``.

    >>> [reduction_width(w) for w in (1, 100, 128, 129, 4096)]
    [1, 128, 128, 256, 4096]
    """
    return 1 << max(0, (w - 1).bit_length())


def loc_table(rows: dict) -> str:
    """A table of lines of code: ``{kernel: {language: lines or None}}``, one row per kernel, a column per language
    (``-`` where that language has no version here)."""
    langs = list(dict.fromkeys(lang for per in rows.values() for lang in per))
    width = max(len(k) for k in rows) + 2
    lines = [" " * width + "".join(f"{lang:>12}" for lang in langs)]
    for kernel, per in rows.items():
        lines.append(f"{kernel:<{width}}" + "".join(f"{per.get(lang) if per.get(lang) is not None else '-':>12}"
                                                     for lang in langs))
    return "\n".join(lines)


def versions_line() -> str:
    """``"triton 3.6.0 · helion 1.4.0"``, each package saying where it is missing."""
    from importlib.metadata import PackageNotFoundError, version
    parts = []
    for name in ("triton", "helion"):
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            parts.append(f"{name}: not installed")
    return " · ".join(parts)


def values_per_thread(w: int, block_rows: int, num_warps: int) -> float:
    """The fp32 values each thread of a program holds when the program keeps ``block_rows`` whole rows of ``w``
    elements in registers, each row padded to :func:`reduction_width` lanes, shared by its ``32 * num_warps``
    threads: the register pressure of a one-piece row reduction (Helion's softmax without ``reduction_loops``).

    >>> values_per_thread(300, 4, 4), values_per_thread(16384, 1, 4), values_per_thread(16385, 1, 4)
    (16.0, 128.0, 256.0)
    """
    return block_rows * reduction_width(w) / (32 * num_warps)


def swizzle(x: int, B: int, M: int, S: int) -> int:
    """CuTe's ``Swizzle<B, M, S>`` of an offset ``x``: the ``B`` bits of ``x`` that start ``M + S`` bits up are XORed
    into the ``B`` bits that start ``M`` bits up (the lowest ``M`` bits, the elements of one 2**M-element piece, stay).
    With ``B = S = 3`` and pieces of 16 bytes, it spreads the 8 pieces of a 128-byte row over the 8 rows of a
    1024-byte block: notebook 12's ``swz(row, piece) = piece ^ (row % 8)``.

    >>> [swizzle(x, 3, 3, 3) for x in (0, 64, 72, 448)]   # fp16: pieces of 8 elements, rows of 64
    [0, 72, 64, 504]
    """
    mask = ((1 << B) - 1) << (M + S)
    return x ^ ((x & mask) >> S)


def nb12_swizzled_offset(row: int, col: int, width: int = 64, piece: int = 8) -> int:
    """Where notebook 12's rungs 3 and 4 store element ``(row, col)`` of a row-major tile of ``width`` halves: its
    16-byte piece (``piece`` halves) moved to ``piece_index ^ (row % 8)`` within the row (tc_common.cuh's ``swz``)."""
    p, within = divmod(col, piece)
    return row * width + (p ^ (row % 8)) * piece + within


def swizzled_offset_128b(row: int, col: int, width: int, elem_bytes: int) -> int:
    """The element offset of ``(row, col)`` in a row-major tile of ``width`` elements of ``elem_bytes`` bytes under
    the 128-byte swizzle (what TMA's ``SWIZZLE_128B`` and wgmma's 128-byte layouts use): :func:`swizzle` with
    ``B = S = 3`` and ``M`` the bits of one 16-byte piece's elements.

    >>> swizzled_offset_128b(1, 0, 64, 2), swizzled_offset_128b(3, 5, 32, 4)
    (72, 105)
    """
    return swizzle(row * width + col, 3, (16 // elem_bytes).bit_length() - 1, 3)
