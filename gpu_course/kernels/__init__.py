"""Kernels that a notebook teaches and a benchmark times, defined once: the notebook shows their
source (``utils.show_source`` for Triton, ``cuda_source`` for CUDA C) and ``bench/`` imports them.

* ``triton_mean``: notebook 06's parallel means (two-pass, atomic) and the seeds' one-program mean
* ``triton_softmax``: notebook 06's fused row softmax, several rows per program
* ``triton_matmul``: notebook 07's grouped, autotuned matmul with an optional bias + GeLU epilogue
* ``triton_layernorm``: LayerNorm (forward, backward) and GeLU (forward, backward), each wrapped as a
  ``torch.autograd.Function`` and as a ``torch.library`` custom op; notebook 10's
  kernels, timed by ``bench/layernorm.py``
* ``triton_attention``: attention, naive and online-softmax in torch, FlashAttention's forward and
  FlashAttention-2's backward in Triton; notebook 11's
  kernels, timed by ``bench/flash_attention.py``
* ``matmul_ladder``: notebook 04's fp32 CUDA C ladder, one file per rung in ``cuda/matmul/``
* ``tensor_cores``: notebook 12's fp16 tensor-core ladder (WMMA, mma.sync, cp.async, wgmma + TMA), one file per
  rung in ``cuda/tensor_cores/``
* ``elementwise``: notebook 03's CUDA C square and GeLU, one file per step in ``cuda/elementwise/``
* ``reductions``: notebook 09's CUDA C sums (a ladder, ``cuda/reduce/``), scans, histograms and image
  kernels, one file per step

The Triton modules import triton; import them after ``utils`` (or ``gpu_course``), which sets the
interpreter switch first. This module itself imports neither.

>>> print(cuda_source("elementwise/01_naive.cu").splitlines()[0])
// v0 (notebook 03): one thread per element; square_f and gelu_f are the elementwise functions every
"""
from __future__ import annotations

from pathlib import Path

CUDA_DIR = Path(__file__).resolve().parent / "cuda"


def cuda_source(*names: str) -> str:
    """The text of CUDA C files kept under ``gpu_course/kernels/cuda/``, joined in the order given
    (a later file may use what an earlier one defines).

    >>> "__global__ void mm_cols_k" in cuda_source("matmul/02_coalesced.cu")
    True
    """
    if not names:
        raise ValueError("cuda_source: name at least one file, e.g. 'matmul/01_naive.cu'")
    texts = []
    for name in names:
        path = CUDA_DIR / name
        if not path.is_file():
            have = sorted(str(p.relative_to(CUDA_DIR)) for p in CUDA_DIR.rglob("*.cu"))
            raise FileNotFoundError(f"cuda_source: no file {name!r} under {CUDA_DIR}; there are: "
                                    f"{', '.join(have)}")
        texts.append(path.read_text())
    return "\n".join(texts)


def num_warps_for(block: int) -> int:
    """Warps per Triton program for a block of ``block`` elements: 4 below 2048, 8 below 4096,
    else 16, so that each thread holds a handful of elements.

    >>> [num_warps_for(b) for b in (128, 2048, 16384)]
    [4, 8, 16]
    """
    return 4 if block < 2048 else 8 if block < 4096 else 16
