"""What the builds of a learner's CUDA C agree on about the language: the GPU's split build
(:mod:`.gpu_build`), its one-unit fallback, and the CPU emulation (:mod:`.emulation`, whose nvcc
check compiles the split build's device unit).

* :data:`CXX_STANDARD`: the one C++ standard of every compile, nvcc and g++, GPU and CPU;
* which names are torch's, so host code (:func:`uses_torch`), and which ``torch::`` namespaces only
  torch's full C++ frontend (``torch/all.h``) declares (:data:`FRONTEND_NAMESPACES`);
* which ``#include`` lines name torch's headers (:func:`includes`, :func:`is_torch_header`).

>>> STD_FLAG
'-std=c++17'
>>> includes('#include <cstdio>\\n  # include "ATen/ATen.h"\\nint x;')
['cstdio', 'ATen/ATen.h']
>>> [h for h in ("torch/types.h", "c10/cuda/CUDAException.h", "Python.h", "cuda_fp16.h") if is_torch_header(h)]
['torch/types.h', 'c10/cuda/CUDAException.h', 'Python.h']
"""
from __future__ import annotations

import re

# C++17 everywhere: nvcc 13, g++ and torch 2.13's headers all take it. torch 2.13's load_inline would
# pick C++20 by itself, so the one-unit build passes this standard to it too, and a source means the
# same on every path. (Under C++20, <cmath> brings std::lerp, which clashes with the common
# ``__device__ float lerp(...)`` of a learner: tests/unit/test_emulation_gpu_rules.py.)
CXX_STANDARD = "c++17"
STD_FLAG = f"-std={CXX_STANDARD}"

TORCH_NAMESPACES = ("torch", "at", "c10")
# names that only torch's headers declare: a statement that uses one is host code
TORCH_IDS = {*TORCH_NAMESPACES, "pybind11", "py", "Tensor", "TensorOptions", "IntArrayRef", "ScalarType",
             "PackedTensorAccessor32", "PackedTensorAccessor64", "CUDA_CHECK", "data_ptr", "mutable_data_ptr",
             "const_data_ptr", "packed_accessor32", "packed_accessor64", "getCurrentCUDAStream"}
TORCH_ID_RE = re.compile(r"(TORCH|AT|C10)_\w+|CHECK_(INPUT|CUDA|CONTIGUOUS)$")
# torch:: namespaces of the full C++ frontend (torch/all.h, torch/python.h), not of torch/types.h
FRONTEND_NAMESPACES = ("autograd", "cuda", "data", "fft", "jit", "mps", "nested", "nn", "optim", "python",
                       "serialize", "special", "xpu")


def uses_torch(toks, a: int, b: int) -> str | None:
    """The first torch name among the tokens ``toks[a:b]`` (of :func:`.cxx.tokenize`), else None.

    >>> from gpu_course.cuda.cxx import tokenize
    >>> toks = tokenize("void f(torch::Tensor x) { TORCH_CHECK(x.numel() > 0); }")
    >>> uses_torch(toks, 0, len(toks)), uses_torch(tokenize("int g(int v);"), 0, 6)
    ('torch', None)
    """
    for t in toks[a:b]:
        if t.kind == "id" and (t.text in TORCH_IDS or TORCH_ID_RE.match(t.text)):
            return t.text
    return None


INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def includes(text: str) -> list:
    """The headers that the ``#include`` lines of ``text`` name, in order."""
    return INCLUDE_RE.findall(text)


def is_torch_header(header: str) -> bool:
    """Is ``header`` (as an ``#include`` names it) one of torch's, pybind11's or Python's?"""
    return bool(re.match(r"(torch|ATen|c10|pybind11)/|Python\.h$", header))
