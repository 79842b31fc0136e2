"""Numba's CUDA simulator (cpu mode) made to behave as a GPU: a thread-safe ``cuda.shared.array``,
and the GPU's launch limits.

The simulator runs each thread of a block as a Python thread, and its ``cuda.shared.array`` finds a
block's array by the calling line: look it up, and if it is missing, allocate it and store it. Two
threads can both miss between the look-up and the store (the interpreter may switch threads there,
more often on a loaded machine); each then allocates *its own* array, so one thread's writes to
"shared" memory are seen by nobody, and the others read uninitialized memory: a correct tiled kernel
returns a few garbage elements, once in a while (seen in notebook 05 on a 2-core CI machine).

:func:`install` replaces that method with the same look-up under a lock, as soon as the simulator's
``kernelapi`` module is imported (now, if it already is; otherwise by a one-shot import hook), so the
notebooks need not import numba in any particular order. ``mode`` installs it in cpu mode.

The simulator also runs launches a GPU refuses: 1025 threads in a block, a grid of 0 blocks (which
runs nothing, silently). :func:`check_launch` raises for them with the GPU's rule, at
``kernel[grid, block]`` (``FakeCUDAKernel.__getitem__``), as numba raises on a GPU at the launch.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
import traceback

import numpy as np

MODULE = "numba.cuda.simulator.kernelapi"
_LOCK = threading.Lock()


def _shared_array(self, shape, dtype, alignment=None):
    """``FakeCUDAShared.array`` with the allocation under a lock: one array per block and call site."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    kernelapi = sys.modules[MODULE]   # its own numba types and converters (numba-cuda's)
    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    if shape == 0:  # dynamic shared memory: one buffer for the whole block, allocated at launch
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    caller = traceback.extract_stack(sys._getframe())[-2][0:2]  # (file, line) of the kernel's call
    return block_array(self, caller, shape, dtype)


def block_array(shared, caller, shape, dtype):
    """The block's shared array declared at ``caller`` (file, line), allocated by the first thread
    that asks: look-up and allocation under one lock, so every thread of the block gets the same
    array. Whatever else replaces ``FakeCUDAShared.array`` (the exercise checks count who reads
    and writes shared memory) allocates through this function too."""
    with _LOCK:
        res = shared._allocations.get(caller)
        if res is None:
            res = shared._allocations[caller] = np.empty(shape, dtype)
    return res


KERNEL_MODULE = "numba.cuda.simulator.kernel"
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


def _checked_getitem(original):
    def __getitem__(self, configuration):
        out = original(self, configuration)
        check_launch(self.grid_dim, self.block_dim)
        return out
    __getitem__._course_original = original
    return __getitem__


def _patch_kernel(kernel) -> None:
    """The simulator's ``kernel[grid, block]`` refuses what a GPU refuses (see check_launch)."""
    cls = getattr(kernel, "FakeCUDAKernel", None)
    if cls is None or "__getitem__" not in vars(cls):
        return  # a simulator of another shape: leave it as it is
    if not hasattr(vars(cls)["__getitem__"], "_course_original"):
        cls.__getitem__ = _checked_getitem(vars(cls)["__getitem__"])


def _patch(kernelapi) -> None:
    shared = getattr(kernelapi, "FakeCUDAShared", None)
    if shared is None or not all(hasattr(kernelapi, x) for x in ("types", "numpy_support")):
        return  # a simulator of another shape: leave it as it is
    if shared.__dict__.get("array") is not _shared_array:
        shared._course_original = shared.__dict__.get("array")   # kept for the test that shows the race
        shared.array = _shared_array


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; when ``module`` is about to load, wraps its loader so that ``patch``
    is applied to it right after the module runs, then steps aside."""

    def __init__(self, module=MODULE, patch=None):
        self.module, self.patch = module, patch or _patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)   # one shot; and the search below must not find this finder
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, patch = spec.loader.exec_module, self.patch

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


def patch_when_imported(module: str, patch) -> None:
    """Call ``patch(module)`` now if ``module`` is imported, else right after it is (once: a
    second call for the same module while the first waits adds nothing)."""
    if module in sys.modules:
        patch(sys.modules[module])
    elif not any(isinstance(f, _PatchOnImport) and f.module == module for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(module, patch))


def install() -> None:
    """Patch the simulator now if it is imported, else when it is (idempotent)."""
    patch_when_imported(MODULE, _patch)
    patch_when_imported(KERNEL_MODULE, _patch_kernel)


# What a fresh simulator process runs before the code it is given: this module, loaded from its
# file (not through gpu_course, which would import torch) and installed, and a print that writes
# each call whole (the simulator's threads share Python's print, so two calls can interleave
# mid-line; a GPU's printf writes each call as one record).
PRELUDE = """import builtins, importlib.util, threading
_spec = importlib.util.spec_from_file_location("simulator_fix", {path!r})
_fix = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(_fix); _fix.install()
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
    '_shared_array'
    """
    import os
    import subprocess
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    r = subprocess.run([sys.executable, "-c", PRELUDE.format(path=__file__) + code_text], env=env,
                       capture_output=True, text=True, timeout=timeout)
    return (r.stdout + r.stderr).strip()
