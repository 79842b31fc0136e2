"""Numba's CUDA simulator (cpu mode) made to behave as a GPU: a thread-safe ``cuda.shared.array``,
and the GPU's launch limits.

The simulator runs each thread of a block as a Python thread, and its ``cuda.shared.array`` finds a
block's array by the calling line: look it up, and if it is missing, allocate it and store it. Two
threads can both miss between the look-up and the store (the interpreter may switch threads there,
more often on a loaded machine); each then allocates *its own* array, so one thread's writes to
"shared" memory are seen by nobody, and the others read uninitialized memory: a correct tiled kernel
returns a few garbage elements, once in a while (seen in notebook 05 on a 2-core CI machine).

:func:`install` has :mod:`gpu_course.interpose.numba` (which owns every patch point of Numba) replace
that method with the same look-up under a lock (its ``shared_array``), as soon as the simulator's
``kernelapi`` module is imported (now, if it already is; otherwise by a one-shot import hook), so the
notebooks need not import numba in any particular order. ``mode`` installs it in cpu mode.

The simulator also runs launches a GPU refuses: 1025 threads in a block, a grid of 0 blocks (which
runs nothing, silently). :func:`check_launch` raises for them with the GPU's rule, at
``kernel[grid, block]`` (it subscribes to the layer's ``configure`` event), as numba raises on a GPU
at the launch.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .interpose import numba as _numba

# What every CUDA GPU since compute capability 2.0 accepts (cuLaunchKernel refuses the rest with
# CUDA_ERROR_INVALID_VALUE; numba raises it as CudaAPIError). The simulator checks none of it.
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)


def check_launch(grid, block) -> None:
    """Raise ``ValueError`` for a launch configuration a GPU refuses (3-tuples of ints).

    >>> check_launch((4, 1, 1), (256, 1, 1))
    >>> check_launch((1, 1, 1), (1025, 1, 1))
    Traceback (most recent call last):
    ...
    ValueError: kernel[1, 1025]: 1025 threads per block; a GPU runs at most 1024 threads in a block (blockDim.x * blockDim.y * blockDim.z <= 1024), and refuses this launch (CUDA_ERROR_INVALID_VALUE).
    """
    what = f"kernel[{_dims(grid)}, {_dims(block)}]"
    threads = block[0] * block[1] * block[2]
    if any(b < 1 for b in block):
        rule = f"a block of {_dims(block)} threads; every block dimension must be at least 1"
    elif threads > MAX_THREADS_PER_BLOCK:
        rule = (f"{threads} threads per block; a GPU runs at most 1024 threads in a block "
                f"(blockDim.x * blockDim.y * blockDim.z <= 1024)")
    elif any(b > m for b, m in zip(block, MAX_BLOCK)):
        rule = f"a block of {_dims(block)}; a GPU allows at most {MAX_BLOCK} in x, y, z"
    elif any(g < 1 for g in grid):
        rule = (f"a grid of {_dims(grid)} blocks; a GPU launches at least one block in each "
                f"dimension (a grid of 0 blocks is an error, not an empty launch: check the size "
                f"you computed the grid from)")
    elif any(g > m for g, m in zip(grid, MAX_GRID)):
        rule = f"a grid of {_dims(grid)}; a GPU allows at most {MAX_GRID} blocks in x, y, z"
    else:
        return
    raise ValueError(f"{what}: {rule}, and refuses this launch (CUDA_ERROR_INVALID_VALUE).")


def _dims(d) -> str:
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return str(d[0]) if len(d) == 1 else str(d)


def _check_configuration(ev) -> None:
    check_launch(ev.grid, ev.block)


_SUBSCRIPTION = []


def install() -> None:
    """Patch the simulator now if it is imported, else when it is (idempotent): the thread-safe shared
    array, and :func:`check_launch` at each ``kernel[grid, block]``."""
    _numba.install()
    if not _SUBSCRIPTION:
        _SUBSCRIPTION.append(_numba.subscribe("configure", _check_configuration))


# What a fresh simulator process runs before the code it is given: this module, imported under a bare
# gpu_course package (its __init__ would import torch) and installed, and a print that writes
# each call whole (the simulator's threads share Python's print, so two calls can interleave
# mid-line; a GPU's printf writes each call as one record).
PRELUDE = """import builtins, sys, threading, types
_pkg = types.ModuleType("gpu_course"); _pkg.__path__ = [{package!r}]; sys.modules["gpu_course"] = _pkg
import gpu_course.simulator_fix as _fix; _fix.install()
import numpy as np, numba
from numba import cuda
_print, _print_lock = builtins.print, threading.Lock()
def print(*args, **kwargs):
    with _print_lock:
        _print(*args, **kwargs)
"""


def simulator_output(code_text: str, timeout: float = 120) -> str:
    """Run ``code_text`` in a fresh Python with Numba's CUDA simulator on (``NUMBA_ENABLE_CUDASIM=1``
    set before numba is imported), this module's fix installed, ``np``, ``numba`` and ``cuda``
    imported and each ``print`` whole; return what it printed (stdout, then stderr), stripped.

    >>> simulator_output("from numba.cuda.simulator import kernelapi; print(kernelapi.FakeCUDAShared.array.__name__)")
    'shared_array'
    """
    import os
    import subprocess
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    r = subprocess.run([sys.executable, "-c", PRELUDE.format(package=str(Path(__file__).resolve().parent)) + code_text], env=env,
                       capture_output=True, text=True, timeout=timeout)
    return (r.stdout + r.stderr).strip()
