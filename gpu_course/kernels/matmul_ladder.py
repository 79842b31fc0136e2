"""Notebook 04's fp32 matmul ladder in CUDA C: one idea per rung, one file per rung
(``cuda/matmul/01_naive.cu`` ... ``10_async_pipeline.cu``, as in siboehm's SGEMM worklog),
and one dispatcher, ``cuda/matmul/matmul_rung.cu``, that Python calls:

* ``matmul_rung(m, n, out, rung)``: rung 1..10 in the shape the notebook teaches;
* ``matmul_rung_cfg(m, n, out, rung, cfg)``: one of the rung's compiled tile shapes
  (:data:`RUNG_CONFIGS`; cfg 0 is the default);
* ``matmul_tiled(m, n, out, tw)``: rung 3's templated shared-memory kernel for tw = 8, 16 or 32;
* ``transposed_padded(m)``: the transposition rung 10 starts with (``m.T`` with rows padded to 4 floats).
* ``matmul_rung10_order(m, n, out, group)``: rung 10 with its blocks launched in row order (``group=0``)
  or in groups of ``group`` rows of blocks (``matmul_rung`` uses 8; notebook 04 times both).

Rung 9 is rung 8's kernel in the tile shapes of :data:`RUNG9_SHAPES`; :func:`autotune_rung9` times
them all on given operands and remembers the fastest per size. The tile shapes are written once, in the
CUDA C (the launches of the dispatcher and of rungs 9 and 10): this module reads them (:func:`launches`).

Rung 10 needs what an older GPU lacks: ``cp.async`` (compute capability 8.0; before it the copies run as
plain loads and stores, so the rung would not be what it says) and, in its default shape, 120 KB of
shared memory per block (a T4 gives 64 KB, an L4 99 KB). :func:`runs_here` says whether a rung's shape
runs on this GPU and :func:`rungs_here` gives the rungs that do, saying why it leaves any out.

``out`` (h x w) = ``m`` (h x k) @ ``n`` (k x w), row-major fp32, any sizes. Notebook 04 prints each
rung's file (:func:`rung_source`) and builds :func:`source` together with its own kernels; notebook 05
builds rung 3 alone; ``bench/matmul_ladder.py`` builds it all (:func:`build`).

>>> RUNGS[7]
'rung 7 conflict-free + prefetch'
>>> rung_file(3)
'matmul/03_smem_tiles.cu'
>>> RUNG_CONFIGS[9][0]
'128x128x16 w64x64 4x2*4x4 128t'
"""
from __future__ import annotations

import functools
from typing import NamedTuple

from ..checking import dot_tol
from ..cuda import cxx
from ..hardware import fits_shared_memory, gpu_supports
from ..timing import bench as _bench
from . import cuda_ints, cuda_source
from .ladder import Ladder, Tuned, numbered

# The name each rung is reported under (notebook 04 records its results with these).
RUNGS = {1: "rung 1 naive, x->row", 2: "rung 2 coalesced", 3: "rung 3 smem tiles 32x32",
         4: "rung 4 1D blocktiling", 5: "rung 5 2D blocktiling", 6: "rung 6 float4 loads",
         7: "rung 7 conflict-free + prefetch", 8: "rung 8 warptiling", 9: "rung 9 autotuned warptiling",
         10: "rung 10 cp.async pipeline"}


class WarpTile(NamedTuple):
    """The template arguments of rung 8's ``mm_warp_k`` (08_warptiling.cu), in its order."""
    BM: int      # block tile: BM rows x BN columns of out, BK columns of m (rows of n) per phase
    BN: int
    BK: int
    WM: int      # warp tile: WM x WN of out per warp
    WN: int
    WNITER: int  # sub-tiles across a warp tile (WMITER down it follows from the rest)
    TM: int      # patch per lane and sub-tile: TM x TN outputs
    TN: int
    NT: int      # threads per block (NT / 32 warp tiles)

    @property
    def WMITER(self) -> int:
        return self.WM * self.WN // (32 * self.TM * self.TN * self.WNITER)

    @property
    def name(self) -> str:
        """Block tile, warp tile, WMITER x WNITER patches of TM x TN per thread, threads per block."""
        return (f"{self.BM}x{self.BN}x{self.BK} w{self.WM}x{self.WN} {self.WMITER}x{self.WNITER}*{self.TM}x{self.TN} "
                f"{self.NT}t")


DISPATCHER = "matmul/matmul_rung.cu"
FUNCS = ["matmul_tiled", "matmul_rung", "matmul_rung_cfg", "transposed_padded", "matmul_rung10_order", "matmul_rung9_mt"]


def rung_file(rung: int) -> str:
    """The file (under ``gpu_course/kernels/cuda/``) that holds rung ``rung``'s kernels."""
    return LADDER.rung_file(rung)


def launches(name: str, kernel: str) -> list:
    """Each launch of ``kernel`` in the file ``name`` (under ``cuda/``), in source order, as ``(template
    arguments, block)``: ``mm_vec_k<64, 64, 16, 4, 4><<<grid, 256>>>`` gives ``((64, 64, 16, 4, 4),
    (256,))``; ``block`` is None where it is not written as numbers. The tile shapes below are read this
    way from the CUDA C, where they are written once (a switch lists its cases in cfg order, its
    default last).

    >>> launches(DISPATCHER, "mm_rows_k")
    [((), (16, 16))]
    """
    out = [(targs, block) for k, targs, block in _all_launches(name) if k == kernel]
    if not out:
        raise ValueError(f"launches: {name} launches no kernel {kernel!r}")
    if any(targs is None for targs, _ in out):
        raise ValueError(f"launches: {name} launches {kernel} with template arguments that are not numbers")
    return out


@functools.lru_cache(maxsize=None)
def _all_launches(name: str) -> tuple:
    """``(kernel, template arguments, block)`` of every launch in the file ``name`` (read once)."""
    toks = cxx.tokenize(cuda_source(name))
    out = []
    for launch in cxx.find_launches(toks, cxx.match_brackets(toks)):
        targs = () if launch.template_args is None else _ints(
            cxx.text_of(toks, launch.template_args[0] + 1, launch.template_args[1]))
        out.append((launch.name, targs, _ints(cxx.text_of(toks, *launch.config[1]))))
    return tuple(out)


def _ints(text: str):
    """``128, 128, 8`` -> (128, 128, 8); ``dim3(16, 16)`` -> (16, 16); None unless all are numbers."""
    text = text.strip()
    if text.startswith("dim3(") and text.endswith(")"):
        text = text[5:-1]
    parts = [p.strip() for p in text.split(",")]
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


# Rung 9's instantiations, by cfg index: the cases of 09_autotuned.cu in order. cfg 0 is rung 8's shape
# (08_warptiling.cu says why it is the default).
RUNG9_SHAPES = [WarpTile(*targs) for targs, _ in launches("matmul/09_autotuned.cu", "mm_warp_k")]

# Rung 10's instantiations (10_async_pipeline.cu's cfgs in order): the warp tile, and the pipeline's depth.
RUNG10_SHAPES = [(WarpTile(*targs[:9]), targs[9]) for targs, _ in launches("matmul/10_async_pipeline.cu", "mm_async_k")]


def _tile(bm, bn, bk, tm, tn) -> str:
    """The name of a block tile BM x BN x BK with TM x TN outputs per thread (rungs 5 to 7)."""
    return f"{bm}x{bn}x{bk} {tm}x{tn}"


# Each rung's compiled tile shapes, by cfg index (matmul_rung_cfg); index 0 is the one RUNGS names.
RUNG_CONFIGS = {
    1: [f"{b[0]}x{b[1]} threads" for _, b in launches(DISPATCHER, "mm_rows_k")],
    2: [f"{b[0]}x{b[1]} threads" for _, b in launches(DISPATCHER, "mm_cols_k")],
    3: [f"TW={tw}" for tw in cuda_ints(DISPATCHER, "RUNG3_TW")],
    4: [f"{t[0]}x{t[1]}x{t[2]} TM={t[3]}" for t, _ in launches(DISPATCHER, "mm_tile1d_k")],
    5: [_tile(*t[:5]) + ("" if t[5] == 1 else f", __launch_bounds__({t[0] * t[1] // (t[3] * t[4])}, {t[5]})")
        for t, _ in launches(DISPATCHER, "mm_tile2d_k")],   # cfg 1: two blocks per SM asked of the compiler
    6: [_tile(*t) for t, _ in launches(DISPATCHER, "mm_vec_k")],
    7: [_tile(*t, 8, 8) for t, _ in launches(DISPATCHER, "mm_pipe_k")],   # 8 x 8 per thread: its layout
    8: [WarpTile(*t).name for t, _ in launches(DISPATCHER, "mm_warp_k")],
    9: [s.name for s in RUNG9_SHAPES],
    10: [f"{s.name} {stages} stages" for s, stages in RUNG10_SHAPES]}


def rung10_shared_bytes(cfg: int) -> int:
    """The dynamic shared memory of rung 10's shape ``cfg`` per block: STAGES tiles of m and of n, fp32.

    >>> [rung10_shared_bytes(c) // 1024 for c in range(len(RUNG10_SHAPES))]   # KB
    [120, 48, 64]
    """
    shape, stages = RUNG10_SHAPES[cfg]
    return stages * shape.BK * (shape.BM + shape.BN) * 4


def grid_global_loads(h: int, w: int, k: int, bm: int, bn: int) -> int:
    """Floats a grid of BM x BN block tiles loads from global memory for ``out = m @ n`` (m h x k, n k x w),
    each block loading its strip of m and of n once and nothing outside the matrices (partial tiles at the
    edges): every row of m is loaded once per column of blocks, every column of n once per row of blocks.
    The reference of notebook 04's exercise 1.

    >>> grid_global_loads(4096, 4096, 4096, 128, 128) == 32 * 32 * 4096 * (128 + 128)
    True
    >>> grid_global_loads(100, 90, 70, 64, 32)   # 3 columns of blocks read m, 2 rows of blocks read n
    33600
    """
    return k * (h * -(-w // bn) + w * -(-h // bm))


def runs_here(rung: int, cfg: int = 0) -> tuple:
    """``(True, "")`` where rung ``rung`` in its shape ``cfg`` runs on this GPU, else ``(False, reason)``,
    the reason one line. Rungs 1 to 9 run anywhere (at most 48 KB of static shared memory); rung 10 needs
    ``cp.async`` and its shape's shared memory (:func:`rung10_shared_bytes`). In cpu mode every rung runs,
    unless ``COURSE_FAKE_CC`` makes the emulation answer as a GPU of that compute capability.

    >>> runs_here(3)
    (True, '')
    """
    if rung not in RUNGS or not 0 <= cfg < len(RUNG_CONFIGS[rung]):
        raise ValueError(f"runs_here: no rung {rung!r} with cfg {cfg!r}; see matmul_ladder.RUNG_CONFIGS")
    if rung != 10:
        return True, ""
    ok, why = gpu_supports("cp_async")
    if not ok:
        return False, f"{RUNGS[10]}: {why}"
    return fits_shared_memory(rung10_shared_bytes(cfg), f"{RUNGS[10]} ({RUNG_CONFIGS[10][cfg]})")


def _funcs(rungs) -> list:
    """The host functions of a build: :data:`FUNCS` for the whole ladder, ``matmul_tiled`` for rung 3 alone."""
    if rungs is None:
        return list(FUNCS)
    if list(rungs) == [3]:
        return ["matmul_tiled"]
    raise ValueError(f"matmul_ladder: build the whole ladder, or rung 3 alone; got rungs {rungs!r}")


# The ladder: rung r is cuda/matmul/0r_*.cu; the whole ladder is the dispatcher, which includes every rung.
LADDER = Ladder("matmul_ladder", RUNGS, numbered("matmul"), _funcs, RUNG_CONFIGS, runs_here,
                whole=lambda: [DISPATCHER])
# How print shows autotune_rung9's result.
TUNED_STYLE = dict(shapes="every tile shape", cfg_width=2, name_width=38,
                    cpu_note="cpu mode: cfg {best} took {t}; the emulation picked it, a GPU may not")


def rungs_here() -> dict:
    """:data:`RUNGS` without the rungs whose default shape cannot run on this GPU (:func:`runs_here`),
    printing one line for each one left out (nothing where all run, as on an H100 or in cpu mode).

    >>> set(rungs_here()) <= set(RUNGS)   # all ten on an H100, rungs 1 to 9 on a T4
    True
    """
    return LADDER.rungs_here()


def rung_source(rung: int) -> str:
    """The CUDA C of one rung, as notebook 04 prints it."""
    return LADDER.rung_source(rung)


def source(rungs=None) -> str:
    """The whole ladder, ready for ``load_cuda``: the dispatcher with what it includes (``cuda_begin``,
    then every rung's file in order; :func:`cuda_unit`). ``rungs=[3]`` gives rung 3 alone
    (``matmul_tiled``, no dispatcher), with the files it includes."""
    return LADDER.source(rungs)


def build(**load_cuda_kwargs):
    """Build (or load from the cache) the whole ladder: a module with :data:`FUNCS`."""
    return LADDER.build(**load_cuda_kwargs)


def autotune_rung9(m, n, out=None, *, mod=None, bench=_bench, retune: bool = False) -> Tuned:
    """Time every tile shape of rung 9 on ``m`` (h x k) @ ``n`` (k x w) and return the fastest cfg
    and the table (a :class:`Tuned`; ``print`` it). Each shape is first checked against the product
    in float64 (tolerance :func:`dot_tol`, poisoned output), so a wrong kernel cannot win. The choice
    is cached per (h, w, k) for this process: a second call returns it without timing
    (``retune=True`` times again).

    ``mod`` is a module built from :func:`source` (default: :func:`build`); ``out`` (h x w) is
    written by the timed runs (default: a new tensor); ``bench(fn, *args)`` returns a
    :class:`Timing` (default ``utils.bench``; on the CPU one run each, since emulation times say
    nothing about a GPU: the cpu-mode table says so).
    """
    h, k = m.shape
    w = n.shape[1]
    if n.shape[0] != k:
        raise ValueError(f"autotune_rung9: m (h x k) and n (k x w) do not fit: {tuple(m.shape)} and {tuple(n.shape)}")
    built = []

    def call(o, cfg):
        if not built:
            built.append(build() if mod is None else mod)
        return built[0].matmul_rung_cfg, (m, n, o, 9, cfg)
    return LADDER.autotune(9, m, n, call, cfgs=range(len(RUNG9_SHAPES)), tol=dot_tol(k), who="autotune_rung9",
                           out=out, bench=bench, retune=retune, style=TUNED_STYLE)
