"""Fast builds of CUDA C from a notebook: the GPU side of ``load_cuda`` (gpu_course/cuda/__init__.py).

Why not plain ``torch.utils.cpp_extension.load_inline``? Measured on an H100 machine, four small
kernels took 55 s to build and 48 s to rebuild after a one-line edit: nvcc spends nearly all of it
parsing ``torch/extension.h``, and load_inline rebuilds both translation units on every change.
Here the learner's source is split at top level (read by :mod:`..cxx`, the parser the CPU emulation
uses too) into three translation units, each compiled only when its own text changes (objects are
cached by content hash):

* **device** (nvcc, no torch headers, ~1 s): kernels, ``__device__`` functions and variables,
  shared declarations, one generated *launch stub* per ``kernel<<<...>>>`` call site (it counts
  the launches, see :mod:`..counters`), one *symbol stub* per ``__constant__`` /
  ``__device__`` variable and one *attribute stub* per ``cudaFuncSetAttribute(kernel, ...)`` call;
  it includes the C and C++ headers that ``torch/extension.h`` gives device code in one unit
  (``<cassert>``, ``<cstdio>``, ``<climits>``, ``<limits>`` ...);
* **host** (g++ with ``torch/types.h`` instead of ``torch/extension.h``: ATen, and the torch
  namespace of one unit, ``torch::kInt32`` included): the torch wrappers and
  other host code, each ``<<<...>>>`` launch rewritten into a call of its stub, each device
  variable a reference to the host shadow that nvcc registered (so ``cudaMemcpyToSymbol(mask,
  ...)`` and ``sizeof(mask)`` work as in one nvcc unit), each ``cudaFuncSetAttribute(kernel, attr,
  value)`` a call of its attribute stub (e.g. to allow a kernel over 48 KB of dynamic shared memory);
* **binding** (g++ with ``torch/python.h``): the pybind11 module for ``funcs`` plus the launch
  counters and log under the names of :mod:`..counters` (``launch_counts``, ``launch_log``: grid,
  block, shared bytes and arguments of the latest launches, recorded by the launch stubs: what an
  exercise check needs to make the learner's launch again); it depends only on ``cpp_src`` and so is
  reused across kernel and wrapper edits.

Editing a kernel recompiles only the device unit. Launch semantics are those of ``<<<>>>``: errors
are reported by ``cudaGetLastError`` (so ``C10_CUDA_KERNEL_LAUNCH_CHECK()`` works as usual). Every
compile uses the C++ standard of :mod:`..language`, the CPU emulation's too.

Anything the split cannot handle with certainty raises :class:`NeedsClassicBuild`, and
:func:`build` builds the source as one nvcc unit through ``load_inline`` (slower, equivalent):
found while splitting (a templated host function that launches a kernel, a kernel whose template
arguments are local names, device code that uses torch, host code that uses device built-ins,
``__managed__``, dynamic parallelism, a launch through a macro parameter ...), or when a unit fails
to compile only outside the statements it owns or on a name one unit would see (an error the split
made, not the learner: attribution.py), fails to link, or misses a symbol that is not one of
``funcs``. Errors in the learner's own statements are reported.

The parts, one module each: :mod:`.splitter` (what belongs where, :func:`make_units`), :mod:`.stubs`
(the launch, attribute and symbol stubs), :mod:`.units` (the units put together),
:mod:`.templates` (the generated C++), :mod:`.compilers` (compilers and flags), :mod:`.objects` (the
cache of compiled units), :mod:`.attribution` (whose error a failed unit is), :mod:`.loading`
(import), :mod:`.pipeline` (the build: :func:`build`, :func:`build_split`, :func:`build_one_unit`).
"""
from .compilers import arch_name, nvcc_command
from .loading import load_module
from .objects import cache_dir
from .pipeline import build, build_one_unit, build_split
from .splitter import make_units
from .units import GENERATED, SOURCE_NAME, NeedsClassicBuild, Units
from .templates import LAUNCH_LOG, LAUNCH_LOG_TABLE, init_unit

__all__ = ["arch_name", "build", "build_split", "build_one_unit", "make_units", "Units", "NeedsClassicBuild", "nvcc_command",
           "load_module", "init_unit", "cache_dir", "SOURCE_NAME", "GENERATED", "LAUNCH_LOG", "LAUNCH_LOG_TABLE"]
