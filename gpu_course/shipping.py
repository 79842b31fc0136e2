"""How a function travels to a rank's process (:class:`gpu_course.distributed.Ranks`): by reference where a
fresh process can import it, else by its source and the notebook's functions and values it reads; and the
results' way back, on the CPU.
"""
from __future__ import annotations

import builtins
import inspect
import textwrap
import types
from dataclasses import dataclass

import torch

def shipped(fn) -> tuple:
    """What a rank needs to call ``fn``: the function itself when a fresh process can import it by
    name, else the sources of ``fn`` and of the notebook's functions it calls (directly or through
    each other), and the other globals they read: modules by name, importable functions and picklable
    values as they are. The rank runs all the sources in one namespace, so functions that call each
    other (or themselves) find each other there."""
    if _importable(fn):
        return ("ref", fn)
    sources, names, todo = {}, {}, [fn]
    while todo:
        f = todo.pop()
        if f.__name__ in sources:
            continue
        sources[f.__name__] = _source(f)
        for name in _global_names(f.__code__):
            if name not in f.__globals__ or name in names or name in sources:
                continue
            v = f.__globals__[name]
            if isinstance(v, types.ModuleType):
                names[name] = ("module", v.__name__)
            elif isinstance(v, types.FunctionType) and not _importable(v):
                todo.append(v)
            else:
                names[name] = ("value", v)
    return ("src", fn.__name__, sources, names)


def _importable(fn) -> bool:
    """Whether a fresh process can import ``fn`` by its module and name."""
    mod = getattr(fn, "__module__", None)
    return bool(mod) and mod != "__main__" and not mod.startswith("__") and "<locals>" not in \
        getattr(fn, "__qualname__", "<locals>")


def _source(fn) -> str:
    """The source of ``fn``, or a TypeError saying why it cannot travel (a lambda, a closure, no source)."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"Ranks.run needs a function, got {type(fn).__name__}")
    if fn.__name__ == "<lambda>":
        raise TypeError("Ranks.run: define the function with def (a lambda cannot be shipped by its source)")
    if fn.__closure__:
        raise TypeError(f"Ranks.run: {fn.__name__} reads variables of an enclosing function; define it at the "
                        f"top level of a cell, and pass what it needs as arguments")
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        raise TypeError(f"Ranks.run: the source of {fn.__name__} cannot be read ({e}); define it with def in a "
                        f"cell or a file") from None


def _global_names(code) -> set:
    """The global names ``code`` (and the functions defined inside it) reads, less the builtins."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _global_names(c)
    return out - set(dir(builtins))


def rebuilt(sent):
    """In a rank: the function :func:`shipped` packed, imported by reference or run from its sources."""
    if sent[0] == "ref":
        return sent[1]
    _, name, sources, names = sent
    ns = {"__name__": "__rank__"}
    for k, (kind, v) in names.items():
        ns[k] = __import__(v, fromlist=["_"]) if kind == "module" else v
    for fname, src in sources.items():
        exec(compile(src, f"<{fname}>", "exec"), ns)
    return ns[name]


@dataclass(frozen=True)
class _Fn:
    """A function passed as an argument of :meth:`Ranks.run`, shipped as :func:`shipped` says."""
    shipped: tuple


def ship_args(args):
    """``args`` with each function among them packed by :func:`shipped`."""
    return tuple(_Fn(shipped(a)) if isinstance(a, types.FunctionType) else a for a in args)


def unship_args(args):
    """In a rank: ``args`` with each packed function rebuilt (:func:`rebuilt`)."""
    return tuple(rebuilt(a.shipped) if isinstance(a, _Fn) else a for a in args)


def to_cpu(x):
    """Results travel between processes on the CPU."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    return x


UNPICKLABLE = ("A rank could not unpack what was sent: a class defined in the notebook cannot travel to the "
                "ranks (they import modules, not cells); define it inside the function, or pass tensors and numbers\n")
