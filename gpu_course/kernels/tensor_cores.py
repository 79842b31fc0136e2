"""Notebook 12's tensor-core ladder in CUDA C: ``out = m @ n`` with float16 ``m`` (h x k), ``n`` (k x w) and ``out``
(h x w), all row-major, products summed in float32, one idea per rung, one file per rung under
``cuda/tensor_cores/`` (``tc_common.cuh`` first, what they share):

* rung 1 ``01_wmma.cu``: WMMA (``nvcuda::wmma``), one warp per 16x16 tile of out, tiles straight from global memory;
* rung 2 ``02_wmma_shared.cu``: WMMA on tiles staged in shared memory by blocks of 8 warps (any size);
* rung 3 ``03_mma_ldmatrix.cu``: ``mma.sync.m16n8k16`` and ``ldmatrix`` (inline PTX, ``tc_ptx.cuh``) on XOR-swizzled
  shared tiles, fragments double-buffered in registers;
* rung 4 ``04_cp_async.cu``: rung 3's warps fed by ``cp.async`` through a multistage pipeline;
* rung 5 ``05_wgmma_tma.cu``: Hopper's ``wgmma.mma_async`` on tiles that TMA copies, an mbarrier pipeline and
  warp specialisation (sm_90 only).

Each rung has one host function (:data:`FUNCS`); rungs 4 and 5 take a ``cfg`` too, one of their compiled shapes
(:data:`CONFIGS`). :func:`run` calls any of them; :func:`build` compiles the rungs that run here
(:func:`rungs_here`: rungs 3 to 5 are inline PTX, which the CPU emulation refuses, and need sm_80, sm_80 and sm_90).
``fragment_layouts`` (tc_common.cuh) gives the lane layouts notebook 12 draws (:func:`draw_layout`).

>>> RUNGS[3]
'rung 3 mma.sync + ldmatrix, swizzled'
>>> files(4)
['tensor_cores/tc_common.cuh', 'tensor_cores/tc_ptx.cuh', 'tensor_cores/03_mma_ldmatrix.cu', 'tensor_cores/04_cp_async.cu']
>>> tol(4096)["atol"] > tol(256)["atol"]
True
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

from ..checking import check, poisoned
from ..cuda import cuda_begin, get_sig, load_cuda
from ..hardware import compute_capability, fits_shared_memory, supports
from ..mode import ON_GPU
from ..timing import Timing, bench as _bench, fmt_ms
from . import cuda_source, listing as _listing

# The name each rung is reported under (notebook 12 records its results with these).
RUNGS = {1: "rung 1 WMMA, tiles from global memory", 2: "rung 2 WMMA, shared-memory tiles",
         3: "rung 3 mma.sync + ldmatrix, swizzled", 4: "rung 4 cp.async pipeline",
         5: "rung 5 wgmma + TMA (Hopper)"}
DIR = "tensor_cores/"
COMMON = DIR + "tc_common.cuh"
# Each rung's files after tc_common.cuh, in the order they build (a later file uses what an earlier one defines).
_FILES = {1: ["01_wmma.cu"], 2: ["02_wmma_shared.cu"], 3: ["tc_ptx.cuh", "03_mma_ldmatrix.cu"],
          4: ["tc_ptx.cuh", "03_mma_ldmatrix.cu", "04_cp_async.cu"], 5: ["tc_ptx.cuh", "05_wgmma_tma.cu"]}
FUNCS = {1: "tc_wmma_global", 2: "tc_wmma_shared", 3: "tc_mma", 4: "tc_async", 5: "tc_wgmma"}
LAYOUTS = "fragment_layouts"   # tc_common.cuh: the lane layouts notebook 12 draws
# The compiled shapes of the rungs that take a cfg (the cases of their host functions, in order; cfg 0 is the
# default): block tile, warp tile, pipeline stages.
CONFIGS = {4: ["128x256x64 w64x64 3 stages", "128x128x64 w64x64 3 stages", "256x128x64 w64x64 3 stages",
               "128x256x64 w64x64 4 stages", "128x128x64 w64x32 4 stages"],
           5: ["128x256x64, 2 consumer warpgroups, 4 stages", "128x128x64, 2 consumer warpgroups, 5 stages",
               "128x256x64, 4 stages, n transposed first (K-major)"]}
# What each rung needs: the hardware feature gates (gpu_course.hardware.FEATURES) it uses.
NEEDS = {1: ("wmma",), 2: ("wmma",), 3: ("mma_fp16",), 4: ("mma_fp16", "cp_async"), 5: ("sm90a",)}
PTX = {3: "ldmatrix, mma.sync", 4: "ldmatrix, mma.sync, cp.async", 5: "wgmma, TMA, mbarrier"}   # inline PTX


def files(rung: int) -> list:
    """The files (under ``gpu_course/kernels/cuda/``) that rung ``rung`` builds from, in order."""
    if rung not in RUNGS:
        raise ValueError(f"tensor_cores: no rung {rung!r}; the ladder has rungs {sorted(RUNGS)}")
    return [COMMON] + [DIR + f for f in _FILES[rung]]


def rung_source(rung: int) -> str:
    """The CUDA C of rung ``rung``'s own file, as notebook 12 prints it."""
    return cuda_source(files(rung)[-1]).rstrip()


def source(rungs=None) -> str:
    """The CUDA C of ``rungs`` (default: all), ready for ``load_cuda``: ``cuda_begin``, then every file they need,
    each once, in order."""
    rungs = sorted(RUNGS) if rungs is None else sorted(rungs)
    names = list(dict.fromkeys(f for r in rungs for f in files(r)))
    return cuda_begin + cuda_source(*names)


def funcs(rungs=None) -> list:
    """The host functions a build of ``rungs`` exposes: each rung's, and ``fragment_layouts``."""
    rungs = sorted(RUNGS) if rungs is None else sorted(rungs)
    return [FUNCS[r] for r in rungs] + (["tc_async_order"] if 4 in rungs else []) + [LAYOUTS]


def runs_here(rung: int) -> tuple:
    """``(True, "")`` where rung ``rung`` runs here, else ``(False, reason)``, the reason one line. In cpu mode rungs
    1 and 2 run (the emulation runs WMMA); rungs 3 to 5 are inline PTX, which it does not execute. On a GPU, by
    compute capability (:data:`NEEDS`; ``COURSE_FAKE_CC`` pretends), and rung 5 on sm_90 only.

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
    if cc is not None and rung in (3, 4, 5):
        ok, why = fits_shared_memory(shared_bytes(rung), RUNGS[rung])
        if not ok:
            return False, why
    return True, ""


def rungs_here(quiet: bool = False) -> dict:
    """:data:`RUNGS` without the rungs that cannot run here (:func:`runs_here`), printing one line for each one
    left out (unless ``quiet``)."""
    out = {}
    for rung, name in RUNGS.items():
        ok, why = runs_here(rung)
        if ok:
            out[rung] = name
        elif not quiet:
            print(why)
    return out


def shared_bytes(rung: int, cfg: int = 0) -> int:
    """Dynamic shared memory per block of rung ``rung`` in shape ``cfg`` (rungs 3 to 5; 0 for the others, whose
    shared memory is static).

    >>> [shared_bytes(r) // 1024 for r in (3, 4, 5)]
    [64, 144, 193]
    """
    if rung == 3:
        return 2 * (128 * 64 + 64 * 128) * 2
    if rung == 4:
        bm, bn, stages = [(128, 256, 3), (128, 128, 3), (256, 128, 3), (128, 256, 4), (128, 128, 4)][cfg]
        return stages * (bm + bn) * 64 * 2
    if rung == 5:
        bm, bn, stages = [(128, 256, 4), (128, 128, 5), (128, 256, 4)][cfg]
        return stages * (bm + bn) * 64 * 2 + 1024 + 2 * stages * 8   # + alignment slack + mbarriers
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
    src = source(rungs)
    fs = funcs(rungs)
    return load_cuda(src, "\n".join(get_sig(f, src) for f in fs), fs, **load_cuda_kwargs)


def run(mod, rung: int, m, n, out, cfg: int = 0):
    """``out = m @ n`` by rung ``rung`` of a module from :func:`build` (shape ``cfg`` for rungs 4 and 5); returns
    ``out``."""
    fn = getattr(mod, FUNCS[rung], None)
    if fn is None:
        raise ValueError(f"run: this module has no rung {rung} ({FUNCS[rung]}); build it with build([{rung}])")
    if rung in CONFIGS:
        return fn(m, n, out, cfg)
    if cfg:
        raise ValueError(f"run: rung {rung} has one shape only (cfg 0), got cfg={cfg}")
    return fn(m, n, out)


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


class Tuned(NamedTuple):
    """What :func:`autotune` found for one rung at one size: the fastest cfg and every cfg's row."""
    rung: int
    size: tuple        # (h, w, k)
    best: int          # the cfg to pass to run(mod, rung, m, n, out, cfg)
    table: list        # one (cfg, name, Timing) per shape of CONFIGS[rung] that fits here (configs_here), in order

    def __str__(self):
        h, w, k = self.size
        lines = [f"rung {self.rung} at h={h}, w={w}, k={k}: every shape checked against float64, then timed"]
        for cfg, name, t in self.table:
            rate = f"{flops(h, w, k) / t.median / 1e9:8.1f} TFLOP/s" if t.on_gpu else ""
            lines.append(f"{'*' if cfg == self.best else ' '} cfg {cfg} {name:46s} {fmt_ms(t.median):>10s} {rate}")
        best = next(row for row in self.table if row[0] == self.best)
        lines.append(f"best: cfg {self.best} ({best[1]})")
        if not best[2].on_gpu:
            lines.append(f"cpu mode: the emulation picked cfg {self.best}; its times say nothing about a GPU")
        return "\n".join(lines)


_TUNED: dict = {}  # (rung, h, w, k) -> Tuned, for this process


def autotune(mod, rung: int, m, n, *, bench=_bench, retune: bool = False) -> Tuned:
    """Check every shape of rung ``rung`` that fits here (:data:`CONFIGS`, :func:`configs_here`) on ``m @ n`` against float64 (:func:`tol`, poisoned
    output), time each (``bench``, default ``utils.bench``: GPU time) and return the fastest with the table, as
    notebook 04's rung 9 does for its tile shapes. Cached per (rung, h, w, k) for this process (``retune=True``
    times again)."""
    if rung not in CONFIGS:
        raise ValueError(f"autotune: rung {rung} has one shape only; rungs with shapes: {sorted(CONFIGS)}")
    h, k = m.shape
    w = n.shape[1]
    key = (rung, h, w, k)
    if key in _TUNED and not retune:
        return _TUNED[key]
    if not ON_GPU and bench is _bench:
        bench = functools.partial(_bench, warmup=0, reps=1)
    ref = m.double() @ n.double()
    out = poisoned(h, w, dtype=m.dtype, device=m.device)
    table = []
    for cfg in configs_here(rung):
        name = CONFIGS[rung][cfg]
        check(run(mod, rung, m, n, poisoned(h, w, dtype=m.dtype, device=m.device), cfg), ref, **tol(k),
              name=f"rung {rung} cfg {cfg} ({name})")
        t = bench(run, mod, rung, m, n, out, cfg)
        if not isinstance(t, Timing):
            raise TypeError(f"autotune: bench must return a Timing, got {type(t).__name__}")
        table.append((cfg, name, t))
    best = min(table, key=lambda row: row[2].median)[0]
    _TUNED[key] = Tuned(rung, (h, w, k), best, table)
    return _TUNED[key]


# ---- what notebook 12 draws and asks about --------------------------------------------------------------------

def layout_grids(mod, like) -> dict:
    """The lane layouts that ``fragment_layouts`` (tc_common.cuh) measures, as ``{name: (lane grid, element grid)}``
    of int tensors on the CPU: the WMMA accumulator (16 x 16), and mma.m16n8k16's A (16 x 16), B (16 x 8) and C
    (16 x 8). ``like`` is any tensor on the device to run on."""
    names = ["WMMA accumulator 16x16 (float)", "mma.sync m16n8k16: A 16x16", "mma.sync m16n8k16: B 16x8",
             "mma.sync m16n8k16: C 16x8"]
    out = {}
    for name, grid in zip(names, mod.fragment_layouts(like)):
        g = grid.cpu().to(dtype=grid.dtype).round().long()
        if bool((g < 0).any()):
            raise RuntimeError(f"layout_grids: no lane wrote some elements of {name}")
        out[name] = (g // 16, g % 16)
    return out


def draw_layouts(grids: dict, title: str = ""):
    """Draw :func:`layout_grids`' tiles side by side, each element coloured by the lane that holds it and labelled
    with that lane's number (and, small, the element's index in the lane's fragment). Returns the figure."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(grids), figsize=(4.2 * len(grids), 4.6),
                             gridspec_kw={"width_ratios": [g[0].shape[1] for g in grids.values()]})
    for ax, (name, (lanes, elems)) in zip(axes, grids.items()):
        ax.imshow(lanes.numpy(), cmap="tab20b", vmin=0, vmax=31)
        for r in range(lanes.shape[0]):
            for c in range(lanes.shape[1]):
                ax.text(c, r - 0.12, str(int(lanes[r, c])), ha="center", va="center", fontsize=6.5, color="white")
                ax.text(c, r + 0.3, str(int(elems[r, c])), ha="center", va="center", fontsize=4.5, color="white")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(lanes.shape[1]))
        ax.set_yticks(range(lanes.shape[0]))
        ax.tick_params(labelsize=6)
        ax.set_xlabel("column")
    axes[0].set_ylabel("row")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def ldmatrix_rows(r0: int, c0: int) -> list:
    """(row, 16-byte piece) that each lane of a warp gives ``ldmatrix.x4`` when it loads an A fragment (16 x 16
    halves) whose top left is row ``r0``, piece ``c0`` of a tile of 128-byte rows, as rung 3 does: lane l gives row
    r0 + l % 16, piece c0 + l / 16. The hardware reads the rows of lanes 8j .. 8j + 7 (matrix j) in one pass.

    >>> ldmatrix_rows(0, 0)[:3], ldmatrix_rows(0, 0)[16]
    ([(0, 0), (1, 0), (2, 0)], (0, 1))
    """
    return [(r0 + lane % 16, c0 + lane // 16) for lane in range(32)]


def banks_of(row: int, piece: int, row_bytes: int = 128) -> set:
    """The 4 shared-memory banks (of 32, 4 bytes each) that the 16 bytes at (row, piece) of a tile with rows
    ``row_bytes`` long occupy, the tile starting at a bank-0 address.

    >>> sorted(banks_of(0, 1)), sorted(banks_of(1, 0))
    ([4, 5, 6, 7], [0, 1, 2, 3])
    """
    start = (row * row_bytes + piece * 16) // 4
    return {(start + i) % 32 for i in range(4)}


def ldmatrix_conflicts(swizzle, r0: int = 0, c0: int = 0, row_bytes: int = 128) -> list:
    """The bank conflicts of an ``ldmatrix.x4`` from a tile with rows ``row_bytes`` long (128: rung 3's 64 halves; 64:
    a tile 32 halves wide) whose piece p of row r is stored at piece ``swizzle(r, p)`` of that row: a list of
    (matrix j, lane a, lane b, shared banks) for each pair of lanes of one matrix (one pass of the hardware) whose 16
    bytes share a bank. Empty: conflict-free.

    >>> len(ldmatrix_conflicts(lambda r, p: p)) > 0, ldmatrix_conflicts(lambda r, p: p ^ (r % 8))
    (True, [])
    >>> len(ldmatrix_conflicts(lambda r, p: p, row_bytes=64)) > 0
    True
    """
    rows = ldmatrix_rows(r0, c0)
    found = []
    for j in range(4):
        lanes = range(8 * j, 8 * j + 8)
        banks = {lane: banks_of(rows[lane][0], swizzle(*rows[lane]), row_bytes) for lane in lanes}
        for a in lanes:
            for b in lanes:
                if a < b and banks[a] & banks[b]:
                    found.append((j, a, b, sorted(banks[a] & banks[b])))
    return found



def smallest_square_tile(flop_per_clock: float, bytes_per_clock: float) -> int:
    """The side ``b`` (a multiple of 16) of the smallest square block tile with which an SM receiving
    ``bytes_per_clock`` bytes of fp16 ``m`` and ``n`` a clock keeps its tensor cores at ``flop_per_clock`` FLOP a
    clock: a k-step of ``bk`` brings ``2 b bk 2`` bytes for ``2 b² bk`` FLOP, ``b / 2`` FLOP per byte (``bk``
    cancels), which must reach ``flop_per_clock / bytes_per_clock``: ``b >= 2 flop_per_clock / bytes_per_clock``.

    >>> smallest_square_tile(4096, 64), smallest_square_tile(4096, 48)
    (128, 176)
    """
    need = 2 * flop_per_clock / bytes_per_clock        # the side that does exactly the FLOP per byte asked
    return 16 * max(1, math.ceil(need / 16 - 1e-9))


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


# ---- the ladder, timed against cuBLAS fp16 (notebook 12, section 10) -----------------------------------------------

CUBLAS = "cuBLAS fp16 (torch.matmul)"
# FLOP per byte of m and n that a block tile loads from global memory, BM BN / (BM + BN), per rung in its default shape
# (cfg 0; the autotuner may run another: notebook 12's table)
INTENSITY = {1: 16 * 16 / 32, 2: 128 * 128 / 256, 3: 128 * 128 / 256, 4: 128 * 256 / 384, 5: 128 * 256 / 384}


def time_ladder(mod, rungs: dict, sizes: dict, notebook: str) -> tuple:
    """Time cuBLAS fp16 and every rung of ``rungs`` at each of ``sizes`` (``{label: (h, w, k)}``) with ``bench_user``,
    printing and recording one line each (rungs 4 and 5 first autotuned, their tables printed): ``(ladder,
    rung_ms)``, ``ladder`` a list of rows (kernel, size, TFLOP/s, ratio to cuBLAS fp16), ``rung_ms`` ``{(size, rung):
    median GPU time in ms}``. GPU only."""
    import torch
    from ..mode import DEVICE
    from ..results import report
    from ..timing import bench_user
    ladder, rung_ms = [], {}
    for size, (h, w, k) in sizes.items():
        m, n = torch.randn(h, k, device=DEVICE).half(), torch.randn(k, w, device=DEVICE).half()
        o = torch.empty(h, w, device=DEVICE, dtype=torch.float16)
        fl = flops(h, w, k)
        t_cublas = bench_user(torch.matmul, m, n, out=o)   # GPU time, loop, CPU per call
        report(notebook, CUBLAS, size, t_cublas, flops=fl, kind="fp16")
        ladder.append(dict(kernel=CUBLAS, size=size, tflops=fl / t_cublas.median / 1e9, vs=1.0))
        for rung, name in rungs.items():
            cfg = 0
            if rung in CONFIGS:
                tuned = autotune(mod, rung, m, n)      # checks, then times, every shape of the rung
                print(tuned, end="\n\n")
                cfg = tuned.best
            t = bench_user(run, mod, rung, m, n, o, cfg)
            rung_ms[size, rung] = t.median
            report(notebook, name, size, t, baseline=t_cublas, flops=fl, kind="fp16", baseline_name="cuBLAS fp16")
            ladder.append(dict(kernel=name, size=size, tflops=fl / t.median / 1e9, vs=t_cublas.median / t.median))
        print()
    return ladder, rung_ms


def ladder_rows(ladder: list, sizes: dict, notebook: str) -> tuple:
    """``(rows, source)``: this run's ``ladder`` on a GPU; on the CPU the stored GPU results of ``notebook`` at
    ``sizes`` (``([], None)`` where none are stored)."""
    from ..mode import device_name
    from ..results import stored_results
    if ON_GPU:
        return ladder, device_name() + " (this run)"
    rows = [r for r in stored_results(notebook=notebook) if r["size"] in sizes]
    out = [dict(kernel=r["kernel"], size=r["size"], tflops=float(r["rate"]),
                vs=float(r["vs_baseline"]) if r["vs_baseline"] else 1.0) for r in rows]
    return out, (f"stored results from {rows[0]['device']}, not this machine" if rows else None)


def ladder_table(rows: list, source: str, sizes, spec: float | None) -> str:
    """The ladder's table: per kernel its intensity (:data:`INTENSITY`, of each rung's default shape), and at each size
    its TFLOP/s, % of the spec-sheet peak ``spec`` (left out where ``spec`` is None: no sheet for this GPU) and ratio
    to cuBLAS fp16."""
    about = f"% of the spec-sheet peak ({spec} TFLOP/s)" if spec else "no spec sheet for this GPU"
    lines = [f"fp16 tensor-core ladder: {source}; {about}\n",
             f"{'kernel':40s} {'FLOP/B':>6s}" + "".join(f"{s:>29s}" for s in sizes)]
    for name in [RUNGS[r] for r in sorted(RUNGS)] + [CUBLAS]:
        rung = next((r for r, nm in RUNGS.items() if nm == name), None)
        cells = []
        for s in sizes:
            r = next((r for r in rows if r["kernel"] == name and r["size"] == s), None)
            pct = f"{100 * r['tflops'] / spec:3.0f} %" if r and spec else "  - %"
            cells.append(f"{r['tflops']:6.0f} TFLOP/s {pct} {r['vs']:5.2f}×" if r else "")
        lines.append(f"{name:40s} " + (f"{INTENSITY[rung]:6.0f}" if rung else " " * 6) + "".join(f"{c:>29s}" for c in cells))
    return "\n".join(lines)

# ---- what limits each rung: Nsight Compute's counters, measured once on a GPU and stored ---------------------------

# What bench/tensor_cores_ncu.py launches under ncu, in order: every shape of rungs 2 to 5 as the notebook builds them
# ("swizzled"), then rungs 3 and 4 built with -DTC_NO_SWIZZLE (every piece in place: the bank conflicts back).
PROFILED = {"swizzled": [(r, c) for r in (2, 3, 4, 5) for c in range(len(CONFIGS.get(r, [None])))],
            "not swizzled": [(r, c) for r in (3, 4) for c in range(len(CONFIGS.get(r, [None])))]}
NO_SWIZZLE_FLAGS = ["-DTC_NO_SWIZZLE"]
LIMITER_FIELDS = ("variant", "rung", "cfg", "time_us", "tensor_pct", "issue_pct", "warps_pct", "registers",
                  "blocks_per_sm", "ld_conflicts", "st_conflicts", "ld_wavefronts", "stalls")


def limiter_rows(raw_by_variant: dict) -> list:
    """One dict per profiled launch (:data:`PROFILED`) from ``{variant: ncu --csv --page raw text}``: the variant,
    rung, cfg and ``gpu_course.profiling.limiters`` of its kernel."""
    from ..profiling import limiters, ncu_raw_rows
    out = []
    for variant, text in raw_by_variant.items():
        kernels = ncu_raw_rows(text)
        order = PROFILED[variant]
        if len(kernels) != len(order):
            raise ValueError(f"limiter_rows: {variant}: ncu profiled {len(kernels)} kernels, expected {len(order)} "
                             f"({order})")
        for (rung, cfg), row in zip(order, kernels):
            want = {2: "wmma_shared_k", 3: "mma_ldmatrix_k", 4: "mma_async_k", 5: "wgmma_tma_k"}[rung]
            if want not in row["Kernel Name"]:
                raise ValueError(f"limiter_rows: {variant}: expected {want} for rung {rung} cfg {cfg}, ncu has "
                                 f"{row['Kernel Name'][:60]}")
            out.append(dict(variant=variant, rung=rung, cfg=cfg, **limiters(row)))
    return out


def write_limiters(rows: list, path, about: str) -> None:
    """Store :func:`limiter_rows` as CSV at ``path``, the first line a comment saying where they come from."""
    from ..profiling import write_limiter_csv
    write_limiter_csv(rows, LIMITER_FIELDS, path, about)


def read_limiters(path) -> tuple:
    """``(rows, about)`` from a file of :func:`write_limiters` (numbers back as int/float, stalls as a list of
    (reason, warps per issued instruction))."""
    from ..profiling import read_limiter_csv
    return read_limiter_csv(path, texts=("variant",), ints=("rung", "cfg"))


def limiters_file(device: str = "nvidia-h100-80gb-hbm3"):
    """Where bench/tensor_cores_ncu.py stores what it measured on ``device`` (a results file's stem)."""
    from .. import paths
    return paths.RESULTS_DIR / "profiles" / f"ncu_tensor_cores_{device}.csv"


def limiter_table(rows: list) -> str:
    """The rows of :func:`read_limiters` as a table: per rung and shape, the time under ncu, how busy the tensor pipe
    and the schedulers were, the warps, registers and blocks per SM, the shared-memory bank conflicts and load
    passes (millions), and the three largest stall reasons."""
    head = (f"{'kernel':30s} {'µs':>6s} {'tc%':>4s} {'iss%':>4s} {'wrp%':>4s} {'regs':>4s} {'blk':>3s} "
            f"{'ld cfl':>7s} {'st cfl':>7s} {'ld pass':>7s}  largest stalls (warps per issued instruction)")
    lines = [head]
    for r in rows:
        name = f"rung {r['rung']}" + (f" cfg {r['cfg']}" if r["rung"] in CONFIGS else "") + \
            ("" if r["variant"] == "swizzled" else ", not swizzled")
        m = lambda v: f"{v / 1e6:7.2f}" if v is not None else f"{'':>7s}"  # noqa: E731
        stalls = ", ".join(f"{n} {v:.1f}" for n, v in r["stalls"])
        lines.append(f"{name:30s} {r['time_us']:6.0f} {r['tensor_pct']:4.0f} {r['issue_pct']:4.0f} {r['warps_pct']:4.0f} "
                     f"{r['registers']:4.0f} {r['blocks_per_sm']:3.0f} {m(r['ld_conflicts'])} {m(r['st_conflicts'])} "
                     f"{r['ld_wavefronts'] / 1e6:7.1f}  {stalls}")
    lines.append("µs: time under ncu (clocks locked at base); tc%: tensor pipe busy, % of cycles; iss%: cycles a scheduler "
                 "issued; wrp%: active warps, % of the SM's 64; regs: registers a thread; blk: blocks an SM holds; "
                 "ld/st cfl: shared-memory bank conflicts of loads and stores, ld pass: passes of shared loads "
                 "(millions)")
    return "\n".join(lines)
