"""The launch counters and the launch log that every ``load_cuda`` module carries, in both back ends:
their names, given once here, and the functions that read them.

Both back ends give a module the same three functions under these names: the CPU emulation's
binding (emulation/source/binding.py, through ``CUDA_EMU_LAUNCH_METHODS`` of
include/emu/binding.h) and the split GPU build's binding unit (gpu_build/units.py). A module built
as one nvcc unit through ``load_inline`` has none of them (its launches are not counted). Read them
through :func:`launch_counts`, :func:`launch_log` and :func:`reset_launches`, never by name.

>>> import types
>>> m = types.SimpleNamespace(**{COUNTS: lambda: {"relu_k": 2}})
>>> launch_counts(m), launch_counts(types.SimpleNamespace())
({'relu_k': 2}, None)
"""
from __future__ import annotations

__all__ = ["COUNTS", "RESET", "LOG", "launch_counts", "launch_log", "reset_launches"]

COUNTS = "_course_launches"        # () -> {kernel name: launches since load or reset}
RESET = "_course_reset_launches"   # () -> None: every count back to zero
LOG = "_course_launch_log"         # (since) -> (launches so far, [(seq, kernel, grid, block, smem, args), ...])


def launch_counts(module) -> dict[str, int] | None:
    """``{kernel name: launches}`` of a ``load_cuda`` module since it was loaded (or reset), or None
    when it counts nothing. A templated kernel counts under its name and its instantiation
    (``matmul_k`` and ``matmul_k<16>``)."""
    f = getattr(module, COUNTS, None)
    if not callable(f):
        return None
    return {str(k): int(v) for k, v in dict(f()).items()}


def reset_launches(module) -> None:
    """Set every launch count of a ``load_cuda`` module to zero; raises ValueError when it has none.

    >>> import types
    >>> n = {"k": 3}
    >>> reset_launches(types.SimpleNamespace(**{RESET: n.clear})); n
    {}
    """
    f = getattr(module, RESET, None)
    if not callable(f):
        raise ValueError(f"{getattr(module, '__name__', module)!r} has no launch counters: it was not built by "
                         f"load_cuda's emulation or split GPU build")
    f()


def launch_log(module, since: int = 0) -> tuple[int, list[tuple]] | None:
    """A ``load_cuda`` module's launch log: ``(launches so far, entries)``, one entry per launch numbered
    ``since`` or later that the log still keeps (both back ends keep the latest 256), each ``(seq, kernel,
    grid, block, shared bytes, ((kind, size, bits), ...))`` with each argument as the host code gave
    it (``p`` a pointer, ``i``/``u`` an integer, ``f`` a float's double bits, ``b`` a bool); None
    when the module keeps no log.

    >>> import types
    >>> m = types.SimpleNamespace(**{LOG: lambda since: (1, [(0, "k", (1, 1, 1), (32, 1, 1), 0, ())])})
    >>> launch_log(m)
    (1, [(0, 'k', (1, 1, 1), (32, 1, 1), 0, ())])
    """
    f = getattr(module, LOG, None)
    if not callable(f):
        return None
    total, entries = f(since)
    return int(total), list(entries)
