"""``triton.language.extra.libdevice`` in Triton's interpreter (cpu mode).

Generated Triton (Inductor's, Helion's) calls math functions through ``libdevice`` (``libdevice.erf`` for an exact
GeLU, ``libdevice.tanh``...). On a GPU each is a call into NVIDIA's libdevice; in the interpreter the module's
functions are bare stubs that return ``None``, so such a kernel fails far from its cause ("unsupported operand type(s)
for +: 'float' and 'NoneType'"). :func:`install` makes the interpreter give each libdevice function that
``triton.language.math`` also has (``erf``, ``exp``, ``log``, ``sqrt``, ``rsqrt``...; not ``tanh``, which ``tl.math``
lacks) that function while a kernel runs, as it does for ``tl.math``; the others stay stubs. Nothing changes on a GPU.

>>> sorted(set(shared_names()) & {"erf", "exp", "sqrt"})
['erf', 'exp', 'sqrt']
"""
from __future__ import annotations

_INSTALLED = False


def shared_names() -> list:
    """The functions ``libdevice`` and ``triton.language.math`` both have."""
    import triton.language as tl
    import triton.language.extra.libdevice as libdevice
    return [n for n in dir(libdevice) if not n.startswith("_") and callable(getattr(libdevice, n))
            and callable(getattr(tl.math, n, None))]


def install() -> bool:
    """Patch the interpreter once (a no-op where it has no ``_patch_lang`` to wrap); whether it is patched."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        import triton.language as tl
        import triton.language.extra.libdevice as libdevice
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang", None)
    if original is None:
        return False
    names = shared_names()

    def patch_lang(fn):
        scope = original(fn)            # tl.math's functions are the interpreter's from here until the kernel ends
        if any(v is libdevice for v in fn.__globals__.values()):
            for name in names:
                scope.set_attr(libdevice, name, getattr(tl.math, name))
        return scope

    interpreter._patch_lang = patch_lang
    _INSTALLED = True
    return True
