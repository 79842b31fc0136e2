"""Notebook 04's fp32 matmul ladder in CUDA C: one idea per rung, one file per rung
(``cuda/matmul/01_naive.cu`` ... ``07_conflict_free_prefetch.cu``, as in siboehm's SGEMM worklog),
and one dispatcher, ``cuda/matmul/matmul_rung.cu``, that Python calls:

* ``matmul_rung(m, n, out, rung)``: rung 1..7 in the shape the notebook teaches;
* ``matmul_rung_cfg(m, n, out, rung, cfg)``: one of the rung's compiled tile shapes
  (:data:`RUNG_CONFIGS`; cfg 0 is the default);
* ``matmul_tiled(m, n, out, tw)``: rung 3's templated shared-memory kernel for tw = 8, 16 or 32.

``out`` (h x w) = ``m`` (h x k) @ ``n`` (k x w), row-major fp32, any sizes. Notebook 04 prints each
rung's file (:func:`rung_source`) and builds :func:`source` together with its own kernels; notebook 05
builds rung 3 alone; ``bench/matmul_ladder.py`` builds it all (:func:`build`).

>>> RUNGS[7]
'rung 7 conflict-free + prefetch'
>>> rung_file(3)
'matmul/03_smem_tiles.cu'
"""
from __future__ import annotations

from ..cuda import cuda_begin, get_sig, load_cuda
from . import CUDA_DIR, cuda_source

# The name each rung is reported under (notebook 04 records its results with these).
RUNGS = {1: "rung 1 naive, x->row", 2: "rung 2 coalesced", 3: "rung 3 smem tiles 32x32",
         4: "rung 4 1D blocktiling", 5: "rung 5 2D blocktiling", 6: "rung 6 float4 loads",
         7: "rung 7 conflict-free + prefetch"}

# Each rung's compiled tile shapes, by cfg index (matmul_rung_cfg); index 0 is the one RUNGS names.
RUNG_CONFIGS = {1: ["16x16 threads"], 2: ["16x16 threads"], 3: ["TW=32", "TW=16", "TW=8"],
                4: ["64x64x8 TM=8"], 5: ["128x128x8 8x8"],
                6: ["128x128x8 8x8", "128x128x16 8x8", "64x128x8 8x8", "128x64x8 8x8", "64x64x16 4x4"],
                7: ["128x128x8 8x8"]}

DISPATCHER = "matmul/matmul_rung.cu"
FUNCS = ["matmul_tiled", "matmul_rung", "matmul_rung_cfg"]


def rung_file(rung: int) -> str:
    """The file (under ``gpu_course/kernels/cuda/``) that holds rung ``rung``'s kernels."""
    found = sorted(CUDA_DIR.glob(f"matmul/{rung:02d}_*.cu"))
    if rung not in RUNGS or len(found) != 1:
        raise ValueError(f"rung_file: no rung {rung!r}; the ladder has rungs {sorted(RUNGS)}")
    return str(found[0].relative_to(CUDA_DIR))


def rung_source(rung: int) -> str:
    """The CUDA C of one rung, as notebook 04 prints it."""
    return cuda_source(rung_file(rung)).rstrip()


def source(rungs=None) -> str:
    """The whole ladder, ready for ``load_cuda``: ``cuda_begin``, every rung's file in order, and
    the dispatcher. ``rungs=[3]`` gives rung 3 alone (``matmul_tiled``, no dispatcher)."""
    if rungs is not None:
        return cuda_begin + cuda_source(*(rung_file(r) for r in rungs))
    return cuda_begin + cuda_source(*(rung_file(r) for r in sorted(RUNGS)), DISPATCHER)


def build(**load_cuda_kwargs):
    """Build (or load from the cache) the whole ladder: a module with :data:`FUNCS`."""
    src = source()
    return load_cuda(src, "\n".join(get_sig(f, src) for f in FUNCS), FUNCS, **load_cuda_kwargs)
