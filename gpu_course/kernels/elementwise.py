"""Notebook 03's elementwise kernels in CUDA C (square and the tanh GeLU), one file per step under
``cuda/elementwise/``; each step includes the one before and builds on its helpers:

* ``naive`` (v0, ``01_naive.cu``): one thread per element: ``square_naive(x, out)``, ``gelu_naive``;
* ``vec`` (v1, ``02_vec.cu``): one ``float4`` per thread: ``square_vec(x, out)``, ``gelu_vec``;
* ``fast`` (v2/v3, ``03_fast.cu``): a grid-stride loop with ``unroll`` float4 loads in flight:
  ``square_fast(x, out, blocks, threads, unroll)``, ``gelu_fast``;
* ``scalar4`` (v1s, ``04_scalar4.cu``): v1's grid, four 4-byte loads per thread instead of one ``float4``:
  ``square_scalar4(x, out)``, ``gelu_scalar4``; it includes ``memory/pointer_chase.cu``, so the same build
  has ``pointer_chase(next, end, start, steps)`` (one thread following ``next[]``: the latency of a load).

Every host function writes into the ``out`` it is given (fp32, as many elements as ``x``).
Notebook 03 prints the files and builds them; ``bench/elementwise.py`` builds the same source.

>>> functions("vec")
['square_naive', 'gelu_naive', 'square_vec', 'gelu_vec']
"""
from __future__ import annotations

from .ladder import Ladder

STEPS = {"naive": "elementwise/01_naive.cu", "vec": "elementwise/02_vec.cu",
         "fast": "elementwise/03_fast.cu", "scalar4": "elementwise/04_scalar4.cu"}
EXTRA = {"scalar4": ["pointer_chase"]}   # host functions a step's file brings besides its square_ and gelu_


def _upto(step: str) -> list:
    if step not in STEPS:
        raise ValueError(f"elementwise: no step {step!r}; the steps are {list(STEPS)}")
    names = list(STEPS)
    return names[:names.index(step) + 1]


# The steps as a ladder: a step's file includes the steps before it, so a build of one step is that file.
LADDER = Ladder("elementwise", {s: f"step {s}" for s in STEPS}, lambda step: [STEPS[step]],
                lambda steps: functions(steps[-1]))


def source(upto: str = "fast") -> str:
    """The file of step ``upto`` with what it includes (``cuda_begin`` and the steps before it), ready
    for ``load_cuda``."""
    _upto(upto)  # checks the name
    return LADDER.source([upto])


def functions(upto: str = "fast") -> list:
    """The host functions Python can call once the steps up to ``upto`` are built."""
    return [f for s in _upto(upto) for f in [f"square_{s}", f"gelu_{s}", *EXTRA.get(s, [])]]


def build(upto: str = "fast", **load_cuda_kwargs):
    """Build (or load from the cache) the steps up to ``upto``: a module with :func:`functions`."""
    _upto(upto)  # checks the name
    return LADDER.build([upto], **load_cuda_kwargs)
