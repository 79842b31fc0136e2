"""Evidence of the method of a CUDA C kernel, read from what the course's own launch executed
(:class:`.cuda_launch.CudaExecution`): the emulation's counts per thread (in cpu mode, and on a GPU from
running the answer in the emulation too, :mod:`.cuda_emulated`), and on a GPU the compiled kernel's SASS as
well (where the counts hold, the SASS must hold the instructions too). Each function takes the kernel's
name and the execution and returns None (the evidence holds), a sentence saying what the kernel did not
do, or False when nothing was counted or read (the caller then falls back on the source's text).

In cpu mode code that does not run leaves no count: a ``__shared__`` array declared and never
used, a ``__syncthreads()`` under ``#if 0`` or in an ``if`` that is never true, a shuffle in a
branch no thread takes. On a GPU the compiler removes dead code (unused arrays, ``#if 0``,
branches it can prove untaken); a branch whose condition depends on the arguments stays in the
SASS, so the SASS's evidence is that the instructions are there, not that they ran: what ran, and
the split of the work between threads, is the emulation's count (on a GPU whose host compiler cannot
build the emulation, the SASS alone is read).

>>> import torch
>>> from .cuda_launch import CountedLaunch, CudaExecution
>>> F = ("gload", "gstore", "gatomic", "sload", "sstore", "satomic", "barrier", "shfl_idx", "shfl_up",
...      "shfl_down", "shfl_xor", "warp_other")
>>> c = torch.zeros(1, 4, len(F), dtype=torch.int64); c[0, :, 0] = 1; c[0, :, 4] = 16  # load x, store tiles
>>> ex = CudaExecution("k", [CountedLaunch("k", (1, 1, 1), (4, 1, 1), c, F)])
>>> shared_used("k", ex)
'k never read back from shared memory when the check launched it: thread 0 of block 0 stored 16 values and loaded 0'
"""
from __future__ import annotations

import torch

SHUFFLES = {"__shfl_sync": "shfl_idx", "__shfl_up_sync": "shfl_up", "__shfl_down_sync": "shfl_down",
            "__shfl_xor_sync": "shfl_xor"}
_SASS_SHUFFLE = {"shfl_idx": "SHFL.IDX", "shfl_up": "SHFL.UP", "shfl_down": "SHFL.DOWN", "shfl_xor": "SHFL.BFLY"}
MMA = {"wmma::mma_sync", "nvcuda::wmma::mma_sync", "mma_sync"}  # a tensor-core product (WMMA)
EXECUTED = {"__syncthreads", "atomicAdd", *SHUFFLES, *MMA}  # calls whose execution calls() checks
_GLOBAL = ("gload", "gstore", "gatomic")
# Fewer global accesses than this in a launch say nothing about how its work was split (a few scalar ones,
# with the bulk of the work done where the emulation does not count it); the number of threads started stands
# for the split then.
MIN_COUNTED = 64


def _first(mask: torch.Tensor):
    """(block, thread) of the first True of a (blocks, threads) mask."""
    flat = int(mask.reshape(-1).nonzero()[0, 0])
    return divmod(flat, mask.shape[1])


def _n(count: int, what: str) -> str:
    """``1 value``, ``3 values``."""
    return f"{count} {what}{'' if count == 1 else 's'}"


def _not_run(name: str) -> str:
    return ("when the check launched it (code that does not run, e.g. under #if 0 or in an if that is never "
            "true, does not count)")


def shared_used(name: str, ex) -> str | None | bool:
    """Every thread that touched global memory stored into shared memory and loaded from it (an
    atomic on shared memory counts as both); GPU: the SASS stores to and loads from shared memory."""
    if ex.launches:
        for L in ex.launches:
            st = L.field("sstore", "satomic")
            ld = L.field("sload", "satomic")
            work = L.field(*_GLOBAL)
            if int(st.sum()) == 0:
                return f"{name} never stored into shared memory {_not_run(name)}"
            if int(ld.sum()) == 0:
                b, t = _first(st > 0)
                return (f"{name} never read back from shared memory when the check launched it: "
                        f"{L.where(b, t)} stored {_n(int(st[b, t]), 'value')} and loaded 0")
            bad = (work > 0) & ((st == 0) | (ld == 0))
            if bool(bad.any()):
                b, t = _first(bad)
                return (f"in the check's launch, {L.where(b, t)} of {name} accessed global memory "
                        f"{_n(int(work[b, t]), 'time')}, stored {_n(int(st[b, t]), 'value')} into shared memory "
                        f"and loaded {int(ld[b, t])}: every thread stages its part in shared memory and reads "
                        f"it back from there")
        if ex.sass is None:
            return None
    if ex.sass is not None:
        s = ex.sass
        if not (s["shared_store"] or s["shared_atomic"]):
            return f"the compiled {name} never stores into shared memory (an unused __shared__ array is removed)"
        if not (s["shared_load"] or s["shared_atomic"]):
            return f"the compiled {name} never loads from shared memory: it stores there and never reads it back"
        return None
    return False


def barrier_passed(name: str, ex) -> str | None | bool:
    """Every thread passed at least one ``__syncthreads()``; GPU: the SASS holds a barrier."""
    if ex.launches:
        for L in ex.launches:
            bar = L.field("barrier")
            if bool((bar == 0).any()):
                b, t = _first(bar == 0)
                if int(bar.sum()) == 0:
                    return f"{name} passed no __syncthreads() {_not_run(name)}"
                return f"{L.where(b, t)} of {name} passed no __syncthreads() when the check launched it"
        if ex.sass is None:
            return None
    if ex.sass is not None:
        return None if ex.sass["barrier"] else f"the compiled {name} holds no __syncthreads() (BAR.SYNC)"
    return False


def shuffled(name: str, ex, call: str) -> str | None | bool:
    """Shuffle ``call`` executed, in every block that touched global memory, and the shuffles carry the
    combining (:func:`combined_by_shuffles`); GPU: the SASS holds that shuffle."""
    fld = SHUFFLES[call]
    if ex.launches:
        for L in ex.launches:
            n = L.field(fld)
            if int(n.sum()) == 0:
                return f"{name} executed no {call} {_not_run(name)}"
            work = L.field(*_GLOBAL)
            # per block: a shared-memory tree down to 32 values, finished by one warp's shuffles, is one
            bad = (work > 0) & (n.sum(1) == 0)[:, None]
            if bool(bad.any()):
                b, t = _first(bad)
                return (f"in the check's launch, {L.where(b, t)} of {name} accessed global memory "
                        f"{_n(int(work[b, t]), 'time')} and no thread of its block executed {call}: every "
                        f"block combines its threads' values with shuffles")
        why = combined_by_shuffles(name, ex, call)
        if why or ex.sass is None:
            return why
    if ex.sass is not None:
        return None if ex.sass[fld] else f"the compiled {name} holds no {call} ({_SASS_SHUFFLE[fld]})"
    return False


def combined_by_shuffles(name: str, ex, call: str) -> str | None:
    """The shuffles carry the combining (cpu mode, what a shuffle reduction or scan needs at most): no
    thread reads more values from shared memory than it shuffled plus two per level of a tree over its
    block (a shared-memory tree down to 32 values, finished by one warp's shuffles, fits); at most one
    global atomic per warp; global loads at most twice the elements of the kernel's buffers (each input
    read about once: O(n) work, not a serial pass per thread)."""
    shfl = tuple(SHUFFLES.values())
    for L in ex.launches:
        nb, nt = L.counts.shape[0], L.counts.shape[1]
        levels = max(1, (nt - 1).bit_length())
        warp_levels = min(5, levels)              # the steps a warp's shuffles take (32 lanes: 5)
        sl, sh = L.field("sload"), L.field(*shfl)
        # a tree over the block may go through shared memory down to one warp's values (2 reads a level,
        # own value kept in a register); the last levels, within a warp, are the shuffles'
        bad = sl > sh + 2 * (levels - warp_levels) + 2
        if bool(bad.any()):
            b, t = _first(bad)
            return (f"in the check's launch, {L.where(b, t)} of {name} read {_n(int(sl[b, t]), 'value')} from "
                    f"shared memory and executed {_n(int(sh[b, t]), 'shuffle')}: the values combine through "
                    f"{call} (a shuffle per step of the tree, at least the last {warp_levels} steps, within a "
                    f"warp), not by threads reading the others' values from shared memory")
        warps = nb * -(-nt // 32)
        ga = int(L.field("gatomic").sum())
        if ga > warps:
            return (f"in the check's launch, {name} made {ga:,} atomic updates in global memory for {warps:,} "
                    f"warps: a warp combines its values with {call} first, then at most one atomic per warp")
        work = L.field(*_GLOBAL).sum(1) > 0
        few = work & (sh.max(1).values < warp_levels)
        if bool(few.any()):
            b = int(few.nonzero()[0, 0])
            return (f"in the check's launch, no thread of block {b} of {name} executed more than "
                    f"{_n(int(sh[b].max()), 'shuffle')}: combining 32 lanes' values with {call} takes "
                    f"{warp_levels} steps (offsets 16, 8, 4, 2, 1 or 1, 2, 4, 8, 16)")
    loads = sum(int(L.field("gload").sum()) for L in ex.launches)
    if ex.elements and loads > 2 * ex.elements + 64:
        return (f"in the check's launch, {name} made {loads:,} global loads for {ex.elements:,} elements of its "
                f"buffers: a shuffle reduction or scan reads each input about once (O(n) work), the shuffles "
                f"carry the partial results between threads")
    return None


def matmul_k(ex, out_shape) -> int | None:
    """The inner size k of a product whose 2-D output has ``out_shape`` (h, w), read from the elements of
    the buffers the launches were given (h*k + k*w + h*w); None where they are not a product's."""
    if not ex.launches or len(out_shape) != 2 or not ex.elements:
        return None
    h, w = int(out_shape[0]), int(out_shape[1])
    k, rest = divmod(ex.elements - h * w, h + w)
    return k if not rest and k >= 1 else None


def tiled_loads(name: str, ex, out_shape, tile: int = 8, how: str | None = None) -> str | None:
    """Tiles carry the reuse (cpu mode): for a product (see :func:`matmul_k`), the launch made at most
    (2k/``tile`` + 2) global loads per output element (per thread, where more threads than outputs ran),
    what tiles of ``tile`` or more imply (a naive kernel makes 2k)."""
    k = matmul_k(ex, out_shape)
    if k is None or k < 2 * tile:
        return None
    outs = int(out_shape[0]) * int(out_shape[1])
    loads = sum(int(L.field("gload").sum()) for L in ex.launches)
    threads = sum(L.counts.shape[0] * L.counts.shape[1] for L in ex.launches)   # those past the edge load too
    most = max(outs, threads) * (2 * k / tile + 2)
    if loads > most:
        return (f"when the check launched {name} for a {out_shape[0]}x{k} by {k}x{out_shape[1]} product, it made "
                f"{loads / outs:.1f} global loads per output element: a naive kernel makes 2k = {2 * k}; "
                + (how or "tiles of T x T, each loaded once into shared memory and read T times from there, bring it "
                   "to about 2k/T")
                + f" (at most {most / outs:.1f} here, with the threads past the edge, for tiles of {tile} or more)")
    return None


def mma_count(name: str, ex, out_shape, call: str = "wmma::mma_sync") -> str | None:
    """Tensor cores do the whole product (cpu mode): the warps executed ``call`` exactly tiles x k-steps
    times, for a 2-D output of ``out_shape`` (h, w) whose inner size k is read from the buffers the
    launches were given (h*k + k*w + h*w elements). None where the shape cannot be read."""
    k = matmul_k(ex, out_shape)
    if k is None:
        return None
    h, w = int(out_shape[0]), int(out_shape[1])
    want = -(-h // 16) * -(-w // 16) * -(-k // 16)
    got = sum(int(L.field("mma").sum()) for L in ex.launches) / 32   # each lane of a warp counts its call
    if got != want:
        return (f"when the check launched {name} on a {h}x{k} by {k}x{w} product, its warps executed "
                f"{got:g} {call} for the {-(-h // 16) * -(-w // 16)} tiles of 16x16 times {-(-k // 16)} "
                f"k-steps = {want}: the tensor cores compute every product of the tiles, one mma_sync per tile "
                f"and k-step")
    return None


def mma_reaches_output(name: str, ex, first, call: str = "wmma::mma_sync") -> str | None:
    """The products of ``call`` carry the result (cpu mode, the course's own launch, whose output was ``first``):
    launched again with every product doubled (the emulation's ``CUDA_EMU_WMMA_SCALE``), the output must change;
    ``mma_sync`` on zero fragments beside a product computed otherwise leaves it as it was. None where it cannot be
    launched again."""
    again = getattr(ex, "again", None)
    first = ex.first if getattr(ex, "first", None) is not None else first   # on a GPU: the emulation's output
    if again is None or not isinstance(first, torch.Tensor) or not ex.launches:
        return None
    from ..hardware import temporary_env
    with temporary_env("CUDA_EMU_WMMA_SCALE", "2"):
        got = again()
    from .replay import output_moved
    if output_moved(first, got):
        return None
    return (f"{name}'s {call} products do not reach its output: when the check launched it with every product "
            f"doubled, the output did not change ({call} on zero fragments beside a product computed otherwise?) — "
            f"the tensor cores must compute the product itself")


def mma_ran(name: str, ex, call: str = "wmma::mma_sync") -> str | None | bool:
    """Tensor cores did the products: every thread that stored to global memory executed ``wmma::mma_sync``
    (counted by the emulation, field ``mma``); GPU: the SASS holds a tensor-core instruction (HMMA, HGMMA...)."""
    if ex.launches:
        for L in ex.launches:
            if "mma" not in L.fields:
                return False
            n = L.field("mma")
            if int(n.sum()) == 0:
                return f"{name} executed no {call} {_not_run(name)}"
            stored, ran = L.field("gstore").sum(1) > 0, n.sum(1) > 0   # per block: a warp may skip its tile
            bad = (L.field("gstore") > 0) & ~ran[:, None]
            if bool((stored & ~ran).any()):
                b, t = _first(bad)
                return (f"in the check's launch, {L.where(b, t)} of {name} stored results and executed no {call}: "
                        f"the products are computed by the tensor cores, through wmma::mma_sync")
        if ex.sass is None:
            return None
    if ex.sass is not None:
        return None if ex.sass["mma"] else f"the compiled {name} holds no tensor-core instruction ({call}: HMMA)"
    return False


def atomics_ran(name: str, ex, call: str = "atomicAdd") -> str | None | bool:
    """An atomic operation executed; GPU: the SASS holds one."""
    if ex.launches:
        if sum(int(L.field("gatomic", "satomic").sum()) for L in ex.launches) == 0:
            return f"{name} executed no {call} {_not_run(name)}"
        if ex.sass is None:
            return None
    if ex.sass is not None:
        return None if (ex.sass["atomic"] or ex.sass["shared_atomic"]) else \
            f"the compiled {name} holds no atomic operation ({call})"
    return False


def shared_atomics(name: str, ex, bins: int | None = None) -> str | None | bool:
    """Privatized updates: atomics in shared memory, at least as many as in global memory, and with
    ``bins`` (the output's counters) at most bins x blocks global atomics; GPU: the SASS holds atomics
    on shared memory (ATOMS)."""
    if ex.launches:
        s = sum(int(L.field("satomic").sum()) for L in ex.launches)
        g = sum(int(L.field("gatomic").sum()) for L in ex.launches)
        if s == 0 or s < g:
            return (f"when the check launched {name}, it made {g} atomic updates in global memory and {s} in "
                    f"shared memory: privatized counters take the many atomics in shared memory, and global "
                    f"memory gets one update per counter and block")
        blocks = sum(L.counts.shape[0] for L in ex.launches)
        if bins and g > bins * blocks:
            return (f"when the check launched {name} ({blocks} block{'s' if blocks != 1 else ''}), it made {g:,} "
                    f"atomic updates in global memory for {bins} counters: privatized counters are counted in "
                    f"shared memory, and each block adds each of its counters to global memory once "
                    f"(at most {bins * blocks:,})")
        if ex.sass is None:
            return None
    if ex.sass is not None:
        return None if ex.sass["shared_atomic"] else \
            f"the compiled {name} holds no atomic on shared memory (ATOMS): the counters are not privatized"
    return False


def counts_split(ex) -> bool:
    """Whether a launch of ``ex`` counted enough global accesses (:data:`MIN_COUNTED`) to judge the split of
    its work by them.

    >>> from .cuda_launch import CountedLaunch, CudaExecution
    >>> F = ("gload", "gstore", "gatomic")
    >>> tail = torch.zeros(1, 1, 3, dtype=torch.int64); tail[0, 0, :2] = 3   # 3 loads and 3 stores
    >>> counts_split(CudaExecution("k", [CountedLaunch("k", (1, 1, 1), (1, 1, 1), tail, F)]))
    False
    >>> counts_split(CudaExecution("k", [CountedLaunch("k", (1, 1, 1), (1, 1, 1), tail * 20, F)]))
    True
    """
    return any(int(L.field(*_GLOBAL).sum()) >= MIN_COUNTED for L in ex.launches)


def work_split(name: str, ex, share: float = 1 / 16) -> str | None | bool:
    """No thread made more than ``share`` of the launch's global memory accesses (counted when
    there are at least 64). Where nothing was counted and the SASS was read (a GPU whose host compiler cannot
    build the emulation), it holds (None)."""
    if not ex.launches:
        return None if ex.sass is not None else False
    for L in ex.launches:
        w = L.field(*_GLOBAL)
        total = int(w.sum())
        if total < MIN_COUNTED:
            continue
        top = int(w.max())
        if top > total * share:
            b, t = _first(w == top)
            nb = L.counts.shape[0]
            return (f"in the check's launch of {name} ({nb} block{'s' if nb != 1 else ''} of "
                    f"{L.counts.shape[1]} thread{'s' if L.counts.shape[1] != 1 else ''}), {L.where(b, t)} made {top} of the {total} global memory "
                    f"accesses: split the work so that each thread handles its own part")
        # within each block too: one thread doing its block's part while the others idle is no split
        nt = L.counts.shape[1]
        per_block = w.sum(1)
        tops = w.max(1).values
        bad = (per_block >= 256) & (tops * 4 > per_block) & (nt >= 32)
        if bool(bad.any()):
            b = int(bad.nonzero()[0, 0])
            t = int((w[b] == tops[b]).nonzero()[0, 0])
            idle = int((w[b] == 0).sum())
            return (f"in the check's launch of {name}, {L.where(b, t)} made {int(tops[b])} of the "
                    f"{int(per_block[b])} global memory accesses of its block ({idle} of its {nt} threads made "
                    f"none): the threads of a block share its part of the work")
    return None
