"""A thread-safe ``cuda.shared.array`` for Numba's CUDA simulator (cpu mode).

The simulator runs each thread of a block as a Python thread, and its ``cuda.shared.array`` finds a
block's array by the calling line: look it up, and if it is missing, allocate it and store it. Two
threads can both miss between the look-up and the store (the interpreter may switch threads there,
more often on a loaded machine); each then allocates *its own* array, so one thread's writes to
"shared" memory are seen by nobody, and the others read uninitialized memory: a correct tiled kernel
returns a few garbage elements, once in a while (seen in notebook 05 on a 2-core CI machine).

:func:`install` replaces that method with the same look-up under a lock, as soon as the simulator's
``kernelapi`` module is imported (now, if it already is; otherwise by a one-shot import hook), so the
notebooks need not import numba in any particular order. ``mode`` installs it in cpu mode.
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
    with _LOCK:
        res = self._allocations.get(caller)
        if res is None:
            res = self._allocations[caller] = np.empty(shape, dtype)
    return res


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
