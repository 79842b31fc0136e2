"""Notebook 12's tensor-core ladder in CUDA C: ``out = m @ n`` with float16 ``m`` (h x k), ``n`` (k x w) and ``out``
(h x w), all row-major, products summed in float32, one idea per rung, one file per rung under
``cuda/tensor_cores/`` (``tc_common.cuh`` first, what they share):

* rung 1 ``01_wmma.cu``: WMMA (``nvcuda::wmma``), one warp per 16x16 tile of out, tiles straight from global memory;
* rung 2 ``02_wmma_shared.cu``: WMMA on tiles staged in shared memory by blocks of 8 warps (any size);
* rung 3 ``03_mma_ldmatrix.cu``: ``mma.sync.m16n8k16`` and ``ldmatrix`` (inline PTX, ``tc_ptx.cuh``) on XOR-swizzled
  shared tiles, fragments double-buffered in registers;
* rung 4 ``04_cp_async.cu``: rung 3's warps fed by ``cp.async`` through a multistage pipeline;
* rung 5 ``05_wgmma_tma.cu``: Hopper's ``wgmma.mma_async`` on tiles that TMA copies, an mbarrier pipeline and
  warp specialisation (sm_90 only);
* rung 6 ``06_persistent.cu``: rung 5's warpgroups in persistent blocks that take their tiles in a chosen order
  (:func:`unit_table`), in clusters of two that share n's tiles by TMA multicast, results stored by TMA while the
  next tile's copies run (sm_90 only).

Each rung has one host function (:data:`FUNCS`); rungs 4 to 6 take a ``cfg`` too, one of their compiled shapes
(:data:`CONFIGS`). :func:`run` calls any of them; :func:`build` compiles the rungs that run here
(:func:`rungs_here`: rungs 3 to 6 are inline PTX, which the CPU emulation refuses, and need sm_80, sm_80, sm_90
and sm_90).
``fragment_layouts`` (tc_common.cuh) gives the lane layouts notebook 12 draws. The ladder's plumbing (files, source,
build, rungs that run here, autotuning) is :class:`gpu_course.kernels.ladder.Ladder`'s; what notebook 12 draws,
times against cuBLAS and reads from Nsight Compute is in :mod:`gpu_course.lessons.tensor_cores`.

>>> RUNGS[3]
'rung 3 mma.sync + ldmatrix, swizzled'
>>> files(4)
['tensor_cores/tc_common.cuh', 'tensor_cores/tc_ptx.cuh', 'tensor_cores/03_mma_ldmatrix.cu', 'tensor_cores/04_cp_async.cu']
>>> tol(4096)["atol"] > tol(256)["atol"]
True
"""
from __future__ import annotations

from ..cuda import cuda_begin
from ..hardware import compute_capability, fits_shared_memory, supports
from ..mode import ON_GPU
from ..timing import bench as _bench
from . import cuda_source, listing as _listing
from .ladder import Ladder, Tuned

# The name each rung is reported under (notebook 12 records its results with these).
RUNGS = {1: "rung 1 WMMA, tiles from global memory", 2: "rung 2 WMMA, shared-memory tiles",
         3: "rung 3 mma.sync + ldmatrix, swizzled", 4: "rung 4 cp.async pipeline",
         5: "rung 5 wgmma + TMA (Hopper)", 6: "rung 6 persistent, clusters, TMA store"}
DIR = "tensor_cores/"
COMMON = DIR + "tc_common.cuh"
# Each rung's files after tc_common.cuh, in the order they build (a later file uses what an earlier one defines).
_FILES = {1: ["01_wmma.cu"], 2: ["02_wmma_shared.cu"], 3: ["tc_ptx.cuh", "03_mma_ldmatrix.cu"],
          4: ["tc_ptx.cuh", "03_mma_ldmatrix.cu", "04_cp_async.cu"], 5: ["tc_ptx.cuh", "05_wgmma_tma.cu"],
          6: ["tc_ptx.cuh", "05_wgmma_tma.cu", "06_persistent.cu"]}
FUNCS = {1: "tc_wmma_global", 2: "tc_wmma_shared", 3: "tc_mma", 4: "tc_async", 5: "tc_wgmma", 6: "tc_persistent"}
LAYOUTS = "fragment_layouts"   # tc_common.cuh: the lane layouts notebook 12 draws
# The compiled shapes of the rungs that take a cfg (the cases of their host functions, in order; cfg 0 is the
# default): block tile, warp tile, pipeline stages.
CONFIGS = {4: ["128x256x64 w64x64 3 stages", "128x128x64 w64x64 3 stages", "256x128x64 w64x64 3 stages",
               "128x256x64 w64x64 4 stages", "128x128x64 w64x32 4 stages"],
           5: ["128x256x64, 2 consumer warpgroups, 4 stages", "128x128x64, 2 consumer warpgroups, 5 stages",
               "128x256x64, 4 stages, n transposed first (K-major)"],
           6: ["128x256x64, 3 stages, clusters of 2, grouped order", "128x256x64, 3 stages, clusters of 2, Hilbert order",
               "128x256x64, 3 stages, clusters of 2, raster order", "128x256x64, 3 stages, no clusters, grouped order",
               "128x128x64, 5 stages, clusters of 2, grouped order", "128x128x64, 5 stages, no clusters, grouped order",
               "128x256x64, 4 stages, clusters of 2, Hilbert order, stored in halves",
               "128x256x64, 4 stages, no clusters, grouped order, stored in halves"]}
# Rung 6's shapes as (compiled variant of tc_persistent: (BN, STAGES, CLUSTER), tile order), in CONFIGS[6]'s order.
P6_VARIANTS = [(256, 3, 2), (256, 3, 1), (128, 5, 2), (128, 5, 1), (256, 4, 2), (256, 4, 1)]   # + parts of the store
P6_PARTS = [1, 1, 1, 1, 2, 2]   # the results stored through a buffer of 1/parts of them, part after part
P6_CONFIGS = [(0, "grouped"), (0, "hilbert"), (0, "raster"), (1, "grouped"), (2, "grouped"), (3, "grouped"),
              (4, "hilbert"), (5, "grouped")]
# What each rung needs: the hardware feature gates (gpu_course.hardware.FEATURES) it uses.
NEEDS = {1: ("wmma",), 2: ("wmma",), 3: ("mma_fp16",), 4: ("mma_fp16", "cp_async"), 5: ("sm90a",), 6: ("sm90a",)}
PTX = {3: "ldmatrix, mma.sync", 4: "ldmatrix, mma.sync, cp.async", 5: "wgmma, TMA, mbarrier",   # inline PTX
       6: "wgmma, TMA multicast and stores, clusters, mbarrier"}


def _rung_files(rung: int) -> list:
    """tc_common.cuh, then rung ``rung``'s files (:data:`_FILES`)."""
    return [COMMON] + [DIR + f for f in _FILES[rung]]


def _unit(*names: str) -> str:
    """``cuda_begin``, then the files ``names`` as :func:`cuda_source` gives them."""
    return cuda_begin + cuda_source(*names)


def files(rung: int) -> list:
    """The files (under ``gpu_course/kernels/cuda/``) that rung ``rung`` builds from, in order."""
    return LADDER.rung_files(rung, "tensor_cores")


def rung_source(rung: int) -> str:
    """The CUDA C of rung ``rung``'s own file, as notebook 12 prints it."""
    return LADDER.rung_source(rung)


def source(rungs=None) -> str:
    """The CUDA C of ``rungs`` (default: all), ready for ``load_cuda``: ``cuda_begin``, then every file they need,
    each once, in order."""
    return LADDER.source(None if rungs is None else sorted(rungs))


def funcs(rungs=None) -> list:
    """The host functions a build of ``rungs`` exposes: each rung's, and ``fragment_layouts``."""
    rungs = sorted(RUNGS) if rungs is None else sorted(rungs)
    return [FUNCS[r] for r in rungs] + (["tc_async_order"] if 4 in rungs else []) + [LAYOUTS]


def runs_here(rung: int) -> tuple:
    """``(True, "")`` where rung ``rung`` runs here, else ``(False, reason)``, the reason one line. In cpu mode rungs
    1 and 2 run (the emulation runs WMMA); rungs 3 to 6 are inline PTX, which it does not execute. On a GPU, by
    compute capability (:data:`NEEDS`; ``COURSE_FAKE_CC`` pretends), and rungs 5 and 6 on sm_90 only.

    >>> runs_here(1)
    (True, '')
    """
    if rung not in RUNGS:
        raise ValueError(f"runs_here: no rung {rung!r}; the ladder has rungs {sorted(RUNGS)}")
    cc = compute_capability()
    for feature in NEEDS[rung] if cc is not None else ():
        ok, why = supports(feature, cc)
        if not ok:
            return False, f"{RUNGS[rung]}: {why}"
    if not ON_GPU and rung in PTX:   # also where COURSE_FAKE_CC makes the emulation answer as a GPU
        return False, (f"{RUNGS[rung]}: inline PTX ({PTX[rung]}) runs on a GPU only; the CPU emulation runs "
                       f"CUDA C, not PTX")
    if cc is not None and rung in (3, 4, 5, 6):
        ok, why = fits_shared_memory(shared_bytes(rung), RUNGS[rung])
        if not ok:
            return False, why
    return True, ""


def rungs_here(quiet: bool = False) -> dict:
    """:data:`RUNGS` without the rungs that cannot run here (:func:`runs_here`), printing one line for each one
    left out (unless ``quiet``)."""
    return LADDER.rungs_here(quiet)


# The ladder: each rung's files after tc_common.cuh, its host functions, its shapes, where it runs.
LADDER = Ladder("tensor_cores", RUNGS, _rung_files, lambda rungs: funcs(rungs), CONFIGS,
                lambda rung: runs_here(rung), unit=_unit)


def shared_bytes(rung: int, cfg: int = 0) -> int:
    """Dynamic shared memory per block of rung ``rung`` in shape ``cfg`` (rungs 3 to 6; 0 for the others, whose
    shared memory is static).

    >>> [shared_bytes(r) // 1024 for r in (3, 4, 5, 6)]
    [64, 144, 193, 209]
    """
    if rung == 3:
        return 2 * (128 * 64 + 64 * 128) * 2
    if rung == 4:
        bm, bn, stages = [(128, 256, 3), (128, 128, 3), (256, 128, 3), (128, 256, 4), (128, 128, 4)][cfg]
        return stages * (bm + bn) * 64 * 2
    if rung == 5:
        bm, bn, stages = [(128, 256, 4), (128, 128, 5), (128, 256, 4)][cfg]
        return stages * (bm + bn) * 64 * 2 + 1024 + 2 * stages * 8   # + alignment slack + mbarriers
    if rung == 6:
        v = P6_CONFIGS[cfg][0]
        (bn, stages, _), parts = P6_VARIANTS[v], P6_PARTS[v]
        return stages * (128 + bn) * 64 * 2 + 2 * 64 * bn * 2 // parts + 1024 + 2 * stages * 8   # + consumers' results
    return 0


def configs_here(rung: int) -> list:
    """The shapes (cfg numbers) of rung ``rung`` whose shared memory fits a block on this GPU (every shape in cpu
    mode; ``[0]`` for a rung with one shape): an A100 gives a block 163 KB, less than rung 4's cfg 3 needs.

    >>> configs_here(1), len(configs_here(4)) >= 1
    ([0], True)
    """
    if rung not in CONFIGS:
        return [0]
    return [cfg for cfg in range(len(CONFIGS[rung]))
            if fits_shared_memory(shared_bytes(rung, cfg), f"{RUNGS[rung]} cfg {cfg}")[0]]


def build(rungs=None, **load_cuda_kwargs):
    """Build (or load from the cache) ``rungs`` (default: those that run here, :func:`rungs_here`): a module with
    :func:`funcs`. On an sm_90 GPU the split build compiles for sm_90a, which rung 5's wgmma needs."""
    rungs = sorted(rungs_here(quiet=True)) if rungs is None else sorted(rungs)
    return LADDER.build(rungs, **load_cuda_kwargs)


def run(mod, rung: int, m, n, out, cfg: int = 0):
    """``out = m @ n`` by rung ``rung`` of a module from :func:`build` (shape ``cfg`` for rungs 4 to 6; rung 6 with
    its shape's tile order, :func:`unit_table`); returns ``out``."""
    fn = getattr(mod, FUNCS[rung], None)
    if fn is None:
        raise ValueError(f"run: this module has no rung {rung} ({FUNCS[rung]}); build it with build([{rung}])")
    if rung == 6:
        if not 0 <= cfg < len(P6_CONFIGS):
            raise ValueError(f"run: rung 6's shapes are cfg 0..{len(P6_CONFIGS) - 1} (CONFIGS[6]), got cfg={cfg}")
        variant, kind = P6_CONFIGS[cfg]
        return fn(m, n, out, variant, unit_table(m.shape[0], n.shape[1], cfg, kind, m.device), 0)
    if rung in CONFIGS:
        return fn(m, n, out, cfg)
    if cfg:
        raise ValueError(f"run: rung {rung} has one shape only (cfg 0), got cfg={cfg}")
    return fn(m, n, out)


_UNIT_TABLES: dict = {}   # (h, w, cfg, kind, device) -> rung 6's order table on that device


def units(h: int, w: int, cfg: int = 0, kind=None) -> list:
    """Rung 6's units of work for ``out`` (h x w) in shape ``cfg``, in the order its blocks take them (``kind``:
    the shape's own order, or another of :data:`~gpu_course.tile_order.ORDERS`): ``(first tile row, tile column)``
    of each unit, a unit being CLUSTER tiles of 128 x BN one above the other. Grouped by 8 tile rows.

    >>> units(300, 512, cfg=0)[:3]      # 3 tile rows in 2 units of 2, 2 tile columns of 256
    [(0, 0), (2, 0), (0, 1)]
    """
    variant, own = P6_CONFIGS[cfg]
    bn, _, cluster = P6_VARIANTS[variant]
    tile_rows = (h + 127) // 128
    rows, cols = (tile_rows + cluster - 1) // cluster, (w + bn - 1) // bn
    from ..tile_order import unit_order
    return [(r * cluster, c) for r, c in unit_order(rows, cols, kind or own, group=max(1, 8 // cluster))]


def unit_table(h: int, w: int, cfg: int, kind: str, device):
    """:func:`units` as the int32 tensor (units x 2) that ``tc_persistent`` reads, on ``device``, made once per
    shape."""
    key = (h, w, cfg, kind, str(device))
    hit = _UNIT_TABLES.get(key)
    if hit is None:
        import torch
        hit = _UNIT_TABLES[key] = torch.tensor(units(h, w, cfg, kind), dtype=torch.int32, device=device)
    return hit


def tol(k: int) -> dict:
    """Tolerances for checking a product of float16 matrices, summed in float32 and rounded to float16, against
    float64 (keyword arguments of ``utils.check``): ``atol = 4e-6·k + 1e-4``, ``rtol = 2e-3``.

    The products of fp16 numbers are exact in fp32, so the sums differ from float64 by fp32 roundings, as for the fp32
    matmul of notebook 04 (``dot_tol``'s 1e-6·k, here 4x: tensor cores may add in a different order and truncate
    rather than round). Rounding the result to fp16 adds up to 2⁻¹¹ ≈ 4.9e-4 of it: ``rtol`` leaves a 4x margin.
    A wrong tile (a missing 16-step of k, a swapped fragment) is off by whole products, far outside.

    >>> t = tol(4096)
    >>> f"{t['atol']:.4f} {t['rtol']}"
    '0.0165 0.002'
    """
    if k < 1:
        raise ValueError(f"tol: k is the number of products summed, at least 1; got {k}")
    return dict(atol=4e-6 * k + 1e-4, rtol=2e-3)


def flops(h: int, w: int, k: int) -> int:
    """2·h·w·k: a multiply and an add per product."""
    return 2 * h * w * k


def autotune(mod, rung: int, m, n, *, bench=_bench, retune: bool = False) -> Tuned:
    """Check every shape of rung ``rung`` that fits here (:data:`CONFIGS`, :func:`configs_here`) on ``m @ n`` against float64 (:func:`tol`, poisoned
    output), time each (``bench``, default ``utils.bench``: GPU time) and return the fastest with the table, as
    notebook 04's rung 9 does for its tile shapes. Cached per (rung, h, w, k) for this process (``retune=True``
    times again)."""
    if rung not in CONFIGS:
        raise ValueError(f"autotune: rung {rung} has one shape only; rungs with shapes: {sorted(CONFIGS)}")
    return LADDER.autotune(rung, m, n, lambda o, cfg: (run, (mod, rung, m, n, o, cfg)), cfgs=configs_here(rung),
                           tol=tol(m.shape[1]), who="autotune", bench=bench, retune=retune)


def listing(file: str, names: list, *, max_lines=None) -> str:
    """The definitions ``names`` (functions or kernels, each with the comment above it) of ``file`` (under
    ``cuda/tensor_cores/``), in the file's order, with one line saying how many lines were left out between them:
    what the notebook's text reads, where :func:`rung_source` prints the whole file. :func:`gpu_course.kernels.listing`
    under ``tensor_cores/`` (a name may also be a ``(first, last)`` part; ``max_lines`` caps the length).

    >>> print(listing("tc_ptx.cuh", ["smem_addr"]))
    // ... (4 lines left out)
    // The address of a shared-memory variable as PTX's shared-state space counts it (32 bits).
    __device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
    // ... (32 lines left out)
    """
    return _listing(DIR + file, names, max_lines=max_lines)
