"""Evidence of the method: each function here makes a check that takes an :class:`~.judging.Attempt`
and returns None (it holds) or why not, read from what the course's own launch executed, from the
compiled kernel, or from the code (a Python kernel's AST, a CUDA C kernel's tokens)."""
from __future__ import annotations

import torch

from ..launches import dims3
from . import kinds
from .guard import genuine as _evidence
from .judging import Attempt, mode_on_gpu, same_values
from .kinds import SetupError

__all__ = ["uses_shared_memory", "shared_tiles", "barriers_passed", "threads_per_block", "grid_is", "calls", "dot_work", "dot_inputs",
           "splits_work", "shared_atomics", "launches_at_most", "only_reads", "differs_from", "SetupError",
           "mode_on_gpu"]


def _ask(a: Attempt, method: str, evidence: str, *args):
    """``method`` of the attempt's kind with ``args``; :class:`SetupError` naming the kinds ``evidence``
    applies to when the kind has no such method."""
    kind = kinds.get(a.kind)
    impl = getattr(kind, method, None)
    if impl is None:
        which = " and ".join(k.label for k in kinds.supporting(method))
        raise SetupError(f"{evidence} applies to {which} kernels, not {kind.label if kind else a.kind} ones")
    return impl(a, *args)


def uses_shared_memory():
    """Evidence: the kernel stages data in shared memory, as the course's own launch executed it.
    Numba: every thread of a block wrote a ``cuda.shared.array`` and read it (simulator), the
    compiled kernel loads and stores shared memory (GPU); CUDA C: every thread that touched global
    memory stored into shared memory and loaded from it (an atomic on shared memory counts as both;
    emulation), the compiled kernel's SASS stores to and loads from shared memory (GPU). For a product
    (a 2-D output whose buffers hold h*k + k*w + h*w elements), cpu mode also counts the global loads: at
    most 2k/8 + 2 per output element (per thread where more threads ran), what tiles imply. Where
    nothing was executed or compiled to read, the code's text: a call of ``cuda.shared.array`` in a
    Numba kernel's AST, a ``__shared__`` token in a CUDA C kernel's body."""
    def holds(a: Attempt):
        return _ask(a, "shared_memory", "uses_shared_memory")
    return _evidence(holds)


def shared_tiles(*shapes):
    """Evidence: the Numba kernel stages a tile of each of ``shapes`` in shared memory: a
    ``cuda.shared.array(shape, ...)`` of that shape (numbers, or module-level constants such as
    ``(TH, TW)``) assigned to a name that the kernel both writes (``ms[i, j] = ...``) and reads.
    A shared array declared and never used, or of another shape, does not count.

    >>> ev = shared_tiles((8, 16), (16, 16))   # the m tile and the n tile of a rectangular tiling
    """
    def holds(a: Attempt):
        return _ask(a, "shared_tiles", "shared_tiles", shapes)
    return _evidence(holds)


def barriers_passed(per_thread: int, *, compiled_at_least: int, meaning: str = ""):
    """Evidence: every thread of the Numba kernel passed ``per_thread`` barriers
    (``cuda.syncthreads()``) in the course's own launch (simulator), or the compiled kernel holds
    at least ``compiled_at_least`` barrier instructions (GPU: its PTX, where each barrier of a
    loop's body appears once). For a tiled loop, two per phase: one after the tiles are loaded,
    one before they are overwritten. ``meaning`` says why, in the message."""
    def holds(a: Attempt):
        return _ask(a, "barriers", "barriers_passed", per_thread, compiled_at_least,
                    f" ({meaning})" if meaning else "")
    return _evidence(holds)


def threads_per_block(*dims):
    """Evidence: every launch of the learner's Numba or CUDA C kernel used blocks of ``dims`` threads."""
    want = dims3(dims if len(dims) > 1 else dims[0])

    def holds(a: Attempt):
        kind = kinds.get(a.kind)
        if not kind.threads:
            with_threads = " and ".join(k.label for k in kinds.supporting("configs") if k.threads)
            raise SetupError(f"threads_per_block applies to {with_threads} launches ({kind.label} has no threads)")
        bad = [b for b in kind.configs(a, "block") if b != want]
        if bad:
            return (f"{a.name} was launched with blocks of {_show(bad[0])} threads; the exercise "
                    f"asks for {_show(want)}")
        return None
    return _evidence(holds)


def grid_is(*dims, meaning: str | None = None):
    """Evidence: every launch of the learner's kernel had a grid of ``dims`` (Triton programs,
    Numba or CUDA C blocks), e.g. ``grid_is(h, meaning="one program per row")``."""
    want = dims3(dims if len(dims) > 1 else dims[0])

    def holds(a: Attempt):
        kind = kinds.get(a.kind)
        bad = [g for g in kind.configs(a, "grid") if g != want]
        if bad:
            unit = kind.unit
            lead = f"{meaning}: " if meaning else ""
            return (f"{lead}expected a grid of {_show(want)} {unit}, but {a.name} was launched on "
                    f"{_show(bad[0])}")
        return None
    return _evidence(holds)


def calls(*names: str):
    """Evidence: the kernel calls each of ``names``. For ``tl.dot`` this is what *executed*: in cpu
    mode every program of the course's own launch that stored a result ran ``tl.dot`` (counted by
    the interpreter), on a GPU the compiled kernel holds a dot (its GPU IR, where dead code is
    gone; Triton's compiler also turns ``tl.sum(a[:, :, None] * b[None, :, :], axis=1)`` into a dot,
    which the GPU check therefore accepts and the interpreter's count does not). For other Python names, the kernel's code calls them (its AST: ``"tl.dot"`` matches
    ``tl.dot(...)`` and ``triton.language.dot(...)``). For CUDA C, ``__syncthreads``, the
    ``__shfl_*_sync`` and ``atomicAdd`` as executed by the course's own launch (every thread passed a
    barrier; every block that touched global memory shuffled, no thread reading more values from shared memory than a tree of shuffles needs, at most one global atomic per warp; an atomic ran) or, on a GPU, as
    present in the compiled kernel's SASS (``wmma::mma_sync`` likewise: every thread that stored a result
    executed one, their products reach the output — launched again with every product doubled, the output changes
    — or the SASS holds a tensor-core instruction); other names as calls in the kernel's body (see
    :meth:`.kinds.cuda.CudaKind.calls`)."""
    def holds(a: Attempt):
        return _ask(a, "calls", "calls", names)
    return _evidence(holds)


def dot_work(macs: int):
    """Evidence (Triton): the product goes through ``tl.dot``: the ``tl.dot`` calls of the course's own launch
    that multiply data the kernel loaded (not tiles it made up) do at least ``macs`` multiply-adds in all, the
    product's own count (h × w × k for an h × k by k × w product); counted by the interpreter in cpu mode, where
    a kernel that runs some k-steps through ``tl.dot`` and the others by broadcast sums is refused. On a GPU
    nothing is counted (``calls("tl.dot")`` reads the compiled kernel), and it holds."""
    def holds(a: Attempt):
        return _ask(a, "dot_work", "dot_work", macs)
    return _evidence(holds)


def dot_inputs(*tensors):
    """Evidence (Triton): every product that reads one of ``tensors`` (the check's inputs) goes through
    ``tl.dot``: in the course's own launch, data loaded from each of them was an operand of a ``tl.dot``
    (through casts, transposes, reshapes and ``tl.where``, not through arithmetic: name only inputs a kernel feeds
    to its dots as loaded, K and V in attention, not Q, which kernels often scale first), counted by the
    interpreter in cpu mode. Attention's P·V by a broadcast sum beside Q·Kᵀ by ``tl.dot`` is refused (V never
    reaches a dot). On a GPU it holds."""
    def holds(a: Attempt):
        return _ask(a, "dot_inputs", "dot_inputs", tensors)
    return _evidence(holds)


def splits_work(share: float = 1 / 16, *, items: int | None = None, per_thread: int | None = None):
    """Evidence (CUDA C): the work is split between threads: in the course's own launch and in the
    learner's, no thread made more than ``share`` of the kernel's global memory accesses (loads, stores,
    atomics), counted per thread by the emulation (in cpu mode, and on a GPU by running the answer in the
    emulation too, see :mod:`.cuda_emulated`). A kernel where one thread loops over everything is refused; a
    grid-stride loop, whatever its grid, is a split.

    With ``items`` (the elements the learner's call covers), where nothing was counted (a GPU whose host
    compiler cannot build the emulation): the learner's launches of the kernel started at least
    ``items * share`` threads in all (grid × block, from the module's launch log). With ``per_thread``
    too, in both cases: at most 1.5 threads per ``per_thread`` items (plus one block), and, where the
    emulation counts them, at most 1.5 global loads per ``per_thread`` items (plus ``per_thread``, for a
    tail done one by one): each thread covers ``per_thread`` items with wide loads (a ``float4`` for 4
    floats)."""
    def holds(a: Attempt):
        return _ask(a, "work_split", "splits_work", share, items, per_thread)
    return _evidence(holds)


def shared_atomics():
    """Evidence (CUDA C): privatized counters: the kernel's atomics go to shared memory (at least as
    many as to global memory, and at most counters x blocks to global memory) in the course's own launch
    and the learner's (cpu mode), the compiled kernel holds
    atomics on shared memory, ATOMS (GPU)."""
    def holds(a: Attempt):
        return _ask(a, "shared_atomics", "shared_atomics")
    return _evidence(holds)


def aggregated(items: int, at_most: float = 0.5, no_repeats=None, at_least: float = 0.75):
    """Evidence (CUDA C, for notebook 09's aggregation exercise): the kernel made at most
    ``at_most * items`` atomic updates in shared memory in the course's own launch and in the learner's
    (counted by the emulation, in cpu mode and on a GPU, see :mod:`.cuda_emulated`): a thread that meets a run of
    equal bins counts it in a register and makes one atomic for the run. Where nothing was counted, it holds.

    ``no_repeats``: ``(run, n)``, ``run(m)`` calling the learner's host function on ``n`` bytes where no bin
    repeats within 32 neighbouring bytes (:func:`~gpu_course.lessons.reductions.bytes_without_repeats`): every run
    is one byte there, so aggregating runs (or equal bins among a warp's 32 neighbouring bytes) makes one atomic
    per byte, and the check asks for at least ``at_least * n``. A thread that counts bytes far apart together, in
    a private histogram over its whole share, makes far fewer: that is not aggregating runs."""
    def judge(name, ex):
        if ex is None or not getattr(ex, "launches", None):
            return None
        s = sum(int(L.field("satomic").sum()) for L in ex.launches)
        if s > at_most * items:
            return (f"when the check launched {name}, it made {s:,} atomic updates in shared memory for "
                    f"{items:,} bytes: with aggregation, a run of neighbouring bytes in the same bin costs one "
                    f"atomic, and on this image that is at most {at_most:.0%} of the bytes")
        return None

    def without_runs(a: Attempt):
        emulated = getattr(a.execution, "emulated", None)
        if no_repeats is None or emulated is None:
            return None
        from .cuda_emulated import counted_again
        from .runner import first_line
        run, n = no_repeats
        try:
            counted = counted_again(emulated, run, a.name)
        except Exception as e:  # noqa: BLE001  the learner's kernel may fail in any way
            return (f"the check ran your host function on {n:,} bytes where no bin repeats within 32 neighbours, "
                    f"in the CPU emulation, and it raised {first_line(e)}")
        s = sum(int(L.field("satomic").sum()) for L in counted)
        if counted and s < at_least * n:
            return (f"on {n:,} bytes where no bin repeats within 32 neighbours, {a.name} made {s:,} atomic updates "
                    f"in shared memory: every run is one byte there, so aggregation makes one atomic per byte (the "
                    f"check asks for {at_least:.0%} of them); far fewer means a thread counted bytes that are not "
                    f"neighbours together (a private histogram over its whole share, say), not runs")
        return None

    def holds(a: Attempt):
        if a.execution is None or not getattr(a.execution, "launches", None):
            return None
        from .kinds.cuda import CudaKind   # the course's launch and the learner's own (cpu mode)
        return CudaKind._on_both(a, lambda ex: judge(a.name, ex)) or without_runs(a)
    return _evidence(holds)


def launches_at_most(n: int, why: str = "a fused kernel is one launch"):
    """Evidence: the learner's kernels were launched at most ``n`` times in all: for CUDA C, every kernel
    of the learner's module counts (a helper kernel is a launch too)."""
    def holds(a: Attempt):
        kernels = {id(L.kernel) for L in a.launches}
        mine = [L for L in a.seen.of(a.kind) if L.finished and id(L.kernel) in kernels] if a.kind == "cuda" \
            else a.launches
        total = sum(L.count or 0 for L in mine)
        if total > n:
            names = sorted({str(L.name) for L in mine})
            return (f"{why}: {total} launches of {' and '.join(names)} were recorded, at most {n} expected"
                    if len(names) > 1 else f"{why}: {total} launches of {a.name} were recorded, at most {n} expected")
        return None
    return _evidence(holds)


def only_reads(*inputs: torch.Tensor):
    """Evidence: the learner's kernel was given only the ``inputs`` (or copies of them, equal by
    value) and its output, so it cannot copy a result torch computed beforehand. The ``inputs``
    are also the ones the course's own launch copies (everything else it poisons), and the check
    compares them before and after the learner's code ran."""
    from ..launches import tensor_extent

    def holds(a: Attempt):
        allowed = [(tensor_extent(t), t.device.type) for t in inputs]
        out_lo, out_hi = tensor_extent(a.output)
        for L in a.launches:
            tensors = [v for v in list(L.args) + list(L.kwargs.values()) if isinstance(v, torch.Tensor)]
            for b in L.buffers:
                if b.contains(out_lo, out_hi, a.output.device.type):
                    continue
                if any(b.ptr <= lo and hi <= b.ptr + b.nbytes and dev == b.device
                       or (lo <= b.ptr and b.ptr + b.nbytes <= hi and dev == b.device)
                       for (lo, hi), dev in allowed):
                    continue
                mine = [t for t in tensors if b.contains(*tensor_extent(t), t.device.type)]
                if mine and all(any(same_values(t, i) for i in inputs) for t in mine):
                    continue  # a copy of an input
                return (f"{a.name} was given {b.name}, which is neither an input nor the "
                        f"output: compute from the inputs inside the kernel")
        return None
    holds.inputs = tuple(inputs)
    return _evidence(holds)


def differs_from(*refs):
    """Evidence: the learner's kernel is not one of ``refs``, the notebook's own kernels that the
    exercise starts from or that already solve it (Triton or Numba kernel objects; for CUDA C, a
    source string whose ``__global__`` kernels all count): not the same object, and not the same
    code under another name (the same AST of the body for Python kernels, the same tokens of the
    body for CUDA C)."""
    def holds(a: Attempt):
        return _ask(a, "same_code", "differs_from", refs)
    return _evidence(holds)


def _show(d3: tuple) -> tuple:
    d = tuple(d3)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return d
