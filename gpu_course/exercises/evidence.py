"""Evidence of the method: each function here makes a check that takes an :class:`~.judging.Attempt`
and returns None (it holds) or why not, read from what the course's own launch executed, from the
compiled kernel, or from the code (a Python kernel's AST, a CUDA C kernel's tokens)."""
from __future__ import annotations

import ast

import torch

from ..launches import dims3
from .guard import genuine as _evidence
from .judging import (Attempt, _SetupError, _called_names, _cuda_kernels, _dotted, _function_tree,
                      _same_values, mode_on_gpu)
from .provenance import _name_of, _py_function


def uses_shared_memory():
    """Evidence: the kernel stages data in shared memory, as the course's own launch executed it.
    Numba: every thread of a block wrote a ``cuda.shared.array`` and read it (simulator), the
    compiled kernel loads and stores shared memory (GPU); CUDA C: every thread that touched global
    memory stored into shared memory and loaded from it (an atomic on shared memory counts as both;
    emulation), the compiled kernel's SASS stores to and loads from shared memory (GPU). Where
    nothing was executed or compiled to read, the code's text: a call of ``cuda.shared.array`` in a
    Numba kernel's AST, a ``__shared__`` token in a CUDA C kernel's body."""
    def holds(a: Attempt):
        if a.kind == "cuda" and a.execution is not None:
            from .cuda_evidence import shared_used
            why = shared_used(a.name, a.execution)
            if why is not False:
                return why
        if a.kind == "numba" and a.execution is not None:
            why = _numba_shared_executed(a, None)
            if why is not False:
                return why
        if a.kind == "numba":
            for fn in a.functions():
                if any(c == "shared.array" or c.endswith(".shared.array")
                       for c in _called_names(a.tree(fn))):
                    return None
            return (f"{a.name} does not use shared memory: the exercise asks for tiles staged in "
                    f"cuda.shared.array(...)")
        if a.kind == "cuda":
            if any(t.text == "__shared__" for t in a.cuda_body()):
                return None
            return (f"{a.name} declares no __shared__ array: the exercise asks for tiles staged in "
                    f"shared memory")
        raise _SetupError("uses_shared_memory applies to Numba and CUDA C kernels; Triton places "
                          "shared memory itself")
    return _evidence(holds)


def shared_tiles(*shapes):
    """Evidence: the Numba kernel stages a tile of each of ``shapes`` in shared memory: a
    ``cuda.shared.array(shape, ...)`` of that shape (numbers, or module-level constants such as
    ``(TH, TW)``) assigned to a name that the kernel both writes (``ms[i, j] = ...``) and reads.
    A shared array declared and never used, or of another shape, does not count.

    >>> ev = shared_tiles((8, 16), (16, 16))   # the m tile and the n tile of a rectangular tiling
    """
    from collections import Counter
    want = Counter(_as_shape(s) for s in shapes)

    def holds(a: Attempt):
        if a.kind != "numba":
            raise _SetupError("shared_tiles applies to Numba kernels (CUDA C: uses_shared_memory; "
                              "Triton places shared memory itself)")
        if a.execution is not None:
            for shape in want:
                why = _numba_shared_executed(a, shape)
                if why is False:
                    break
                if why:
                    return (f"{a.name} stages no {_show_shape(shape)} tile in shared memory that every thread "
                            f"writes and reads ({why}): the exercise asks for tiles of "
                            f"{', '.join(_show_shape(s) for s in want)}")
            else:
                return None
        have = Counter()
        for fn in a.functions():
            have.update(_staged_shared_shapes(a.tree(fn), getattr(fn, "__globals__", {})))
        missing = want - have
        if missing:
            shape = next(iter(missing))
            return (f"{a.name} stages no {_show_shape(shape)} tile in shared memory (a "
                    f"cuda.shared.array of that shape that the kernel writes and reads): the "
                    f"exercise asks for tiles of {', '.join(_show_shape(s) for s in want)}")
        return None
    return _evidence(holds)


def barriers_passed(per_thread: int, *, compiled_at_least: int, meaning: str = ""):
    """Evidence: every thread of the Numba kernel passed ``per_thread`` barriers
    (``cuda.syncthreads()``) in the course's own launch (simulator), or the compiled kernel holds
    at least ``compiled_at_least`` barrier instructions (GPU: its PTX, where each barrier of a
    loop's body appears once). For a tiled loop, two per phase: one after the tiles are loaded,
    one before they are overwritten. ``meaning`` says why, in the message."""
    def holds(a: Attempt):
        if a.kind != "numba":
            raise _SetupError("barriers_passed applies to Numba kernels (CUDA C: calls('__syncthreads'))")
        why = f" ({meaning})" if meaning else ""
        ex = a.execution
        if ex is not None and ex.counted:
            seen = dict(ex.barriers)
            if not seen or len(seen) < len(ex.blocks) * ex.threads or any(n != per_thread for n in seen.values()):
                got = sorted(set(seen.values())) or [0]
                return (f"in the check's launch, threads of {a.name} passed {', '.join(map(str, got))} "
                        f"barrier(s); each should pass {per_thread}{why}")
            return None
        if (ex is not None and ex.compiled) or mode_on_gpu():
            from .compiled import numba_ptx, ptx_ops
            try:
                ptx = "\n".join(numba_ptx(L.kernel) for L in a.launches)
            except Exception:  # noqa: BLE001
                return None
            n = ptx_ops(ptx)["barrier"]
            if n < compiled_at_least:
                return (f"the compiled {a.name} holds {n} barrier(s); the exercise needs "
                        f"{compiled_at_least}{why}")
            return None
        return None
    return _evidence(holds)


def _numba_shared_executed(a: Attempt, shape):
    """Executed evidence of shared memory in a Numba kernel (optionally of one ``shape``): None if
    it holds, why not, or False when nothing was counted (no course launch to read)."""
    ex = a.execution
    if ex.counted:
        blocks, threads = ex.blocks, ex.threads
        uses = [u for u in ex.shared.values() if shape is None or u.shape == shape]
        if not uses:
            return ("no cuda.shared.array of that shape was created" if shape else
                    "no cuda.shared.array was created when the check launched it")
        for u in uses:
            if all(len({w for w in u.writers if w[0] == b}) == threads
                   and len({r for r in u.readers if r[0] == b}) == threads for b in blocks):
                return None
        u = max(uses, key=lambda u: len(u.writers) + len(u.readers))
        return (f"in the check's launch, {len(u.writers)} (block, thread) pairs wrote the shared array "
                f"and {len(u.readers)} read it, of {len(blocks) * threads}: every thread of a block loads "
                f"its part of the tile and reads the tile back")
    if ex.compiled or mode_on_gpu():
        from .compiled import numba_ptx, ptx_ops, ptx_shared_elements
        try:
            ptx = "\n".join(numba_ptx(L.kernel) for L in a.launches)
        except Exception:  # noqa: BLE001
            return False
        ops = ptx_ops(ptx)
        if not (ops["shared_load"] and ops["shared_store"]):
            return "the compiled kernel has no shared-memory loads and stores"
        if shape is not None:
            n = 1
            for v in shape:
                n *= v
            if not any(n in counts for counts in ptx_shared_elements(ptx)):
                return "the compiled kernel declares no shared array of that many elements"
        return None
    return False


def _as_shape(s) -> tuple:
    return tuple(int(v) for v in s) if isinstance(s, (tuple, list)) else (int(s),)


def _show_shape(shape: tuple) -> str:
    return " × ".join(str(v) for v in shape)


def _constant(node, names: dict):
    """The value of a shape expression made of ints, module-level int constants, tuples and
    + - * //, or None."""
    import operator
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv}
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        v = names.get(node.id)
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(node, (ast.Tuple, ast.List)):
        vals = [_constant(e, names) for e in node.elts]
        return None if any(v is None for v in vals) else tuple(vals)
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        lo, hi = _constant(node.left, names), _constant(node.right, names)
        if isinstance(lo, int) and isinstance(hi, int):
            return ops[type(node.op)](lo, hi)
    return None


def _staged_shared_shapes(tree, names: dict) -> list:
    """Shapes of the shared arrays of a Numba kernel's AST that are both written and read."""
    arrays = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and (_dotted(node.value.func) == "shared.array"
                     or _dotted(node.value.func).endswith(".shared.array"))):
            call = node.value
            arg = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg == "shape"), None)
            shape = _constant(arg, names) if arg is not None else None
            for t in node.targets:
                if isinstance(t, ast.Name) and shape is not None:
                    arrays[t.id] = _as_shape(shape)
    used = {"load": set(), "store": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            used["store" if isinstance(node.ctx, ast.Store) else "load"].add(node.value.id)
    return [shape for name, shape in arrays.items()
            if name in used["load"] and name in used["store"]]


def _configs(a: Attempt, what: str) -> list:
    """The grids or blocks (``what``) of the learner's launches: for CUDA C, of every launch its host
    calls made (from the module's launch log)."""
    if a.kind == "cuda":
        return [getattr(c, what) for L in a.launches for c in L.calls]
    return [getattr(L, what) for L in a.launches]


def threads_per_block(*dims):
    """Evidence: every launch of the learner's Numba or CUDA C kernel used blocks of ``dims`` threads."""
    want = dims3(dims if len(dims) > 1 else dims[0])

    def holds(a: Attempt):
        if a.kind == "triton":
            raise _SetupError("threads_per_block applies to Numba and CUDA C launches (Triton has no threads)")
        bad = [b for b in _configs(a, "block") if b != want]
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
        bad = [g for g in _configs(a, "grid") if g != want]
        if bad:
            unit = "programs" if a.kind == "triton" else "blocks"
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
    barrier; every thread that touched global memory shuffled; an atomic ran) or, on a GPU, as
    present in the compiled kernel's SASS (``wmma::mma_sync`` likewise: every thread that stored a result
    executed one, or the SASS holds a tensor-core instruction); other names as calls in the kernel's body (see
    :func:`_cuda_calls`)."""
    def holds(a: Attempt):
        if a.kind == "cuda":
            return _cuda_calls(a, names)
        executed = [n for n in names if n.split(".")[-1] == "dot" and a.kind == "triton"]
        for n in executed:
            why = _dot_executed(a)
            if why:
                return why
        rest = [n for n in names if n not in executed]
        have = set().union(*(_called_names(a.tree(fn)) for fn in a.functions())) if rest else set()
        last = {c.split(".")[-1] for c in have}
        missing = [n for n in rest if n not in have and n.split(".")[-1] not in last]
        if missing:
            return f"{a.name} does not call {', '.join(missing)}: the exercise asks you to use it"
        return None
    return _evidence(holds)


def _dot_executed(a: Attempt) -> str | None:
    from .compiled import triton_ops
    ex = a.execution
    if ex is None:
        return None
    if ex.counted:
        storing = [p for p, n in ex.stored.items() if n > 0]
        idle = [p for p in storing if ex.dots.get(p, 0) == 0]
        if not storing or idle:
            return (f"{a.name} did not execute tl.dot when the check launched it (in {len(idle)} of the "
                    f"{len(storing)} programs that stored a result): the exercise asks for the product "
                    f"as tl.dot on tiles")
        return None
    if ex.compiled:
        if not any(triton_ops(k)["dot"] for k in ex.compiled):
            return (f"the compiled {a.name} holds no dot: the exercise asks for the product as tl.dot on "
                    f"tiles (a tl.dot whose result is not used is removed by the compiler)")
    return None


def _cuda_calls(a: Attempt, names) -> str | None:
    """CUDA C: ``__syncthreads``, the ``__shfl_*_sync`` and ``atomicAdd`` as executed (see
    :mod:`.cuda_evidence`); other names as tokens called in the kernel's body."""
    from . import cuda_evidence as ce
    rest = []
    for n in names:
        why = False
        if a.execution is not None and n in ce.EXECUTED:
            if n == "__syncthreads":
                why = ce.barrier_passed(a.name, a.execution)
            elif n in ce.SHUFFLES:
                why = ce.shuffled(a.name, a.execution, n)
            elif n in ce.MMA:
                why = ce.mma_ran(a.name, a.execution, n)
            else:
                why = ce.atomics_ran(a.name, a.execution, n)
        if why is False:
            rest.append(n)
        elif why:
            return why
    names = rest
    body = a.cuda_body()
    have = {t.text for t, n in zip(body, body[1:]) if n.text == "(" and t.kind == "id"}
    missing = [n for n in names if n.split("::")[-1].split(".")[-1] not in have]
    if missing:
        return f"{a.name} does not call {', '.join(missing)}: the exercise asks you to use it"
    return None


def splits_work(share: float = 1 / 16, *, items: int | None = None, per_thread: int | None = None):
    """Evidence (CUDA C): the work is split between threads: in the course's own launch no thread
    made more than ``share`` of the kernel's global memory accesses (loads, stores, atomics),
    counted per thread by the emulation (cpu mode; on a GPU there is no count to read, and it
    holds). A kernel where one thread loops over everything is refused.

    With ``items`` (the elements the learner's call covers), in both modes: the learner's launches
    of the kernel started at least ``items * share`` threads in all (grid × block, from the module's
    launch log; on a GPU the evidence of the split). With ``per_thread`` too: at most 1.5 threads per
    ``per_thread`` items (plus one block), and, where the emulation counts them (cpu mode), at most
    1.5 global loads per ``per_thread`` items (plus ``per_thread``, for a tail done one by one):
    each thread covers ``per_thread`` items with wide loads (a ``float4`` for 4 floats)."""
    def holds(a: Attempt):
        if a.kind != "cuda":
            raise _SetupError("splits_work applies to CUDA C kernels (Triton and Numba: the course's own "
                              "launch with a single program or block shows it)")
        if items is not None:
            why = _threads_started(a, items, share, per_thread)
            if why:
                return why
        if a.execution is None:
            return None
        from .cuda_evidence import work_split
        why = work_split(a.name, a.execution, share)
        if why:
            return why
        if per_thread and items is not None and a.execution.launches:
            loads = sum(int(L.field("gload").sum()) for L in a.execution.launches)
            most = int(1.5 * -(-items // per_thread)) + per_thread
            if loads > most:
                return (f"in the check's launch, {a.name} made {loads:,} global loads for {items:,} elements: "
                        f"with one {per_thread}-wide load per thread it would make about "
                        f"{-(-items // per_thread):,} (plus the tail)")
        return None
    return _evidence(holds)


def _threads_started(a: Attempt, items: int, share: float, per_thread: int | None) -> str | None:
    """Why the learner's launches started too few (or, with ``per_thread``, too many) threads for
    ``items`` elements, from the grids and blocks of the launch log; None when they fit or nothing
    was logged."""
    configs = [(c.grid, c.block) for L in a.launches for c in L.calls]
    if not configs:
        return None
    count = lambda d: d[0] * d[1] * d[2]
    threads = sum(count(g) * count(b) for g, b in configs)
    least = int(items * share)
    if threads < least:
        return (f"{a.name} was launched with {threads:,} threads in all for {items:,} elements (at least "
                f"{least:,} expected): split the work so that each thread handles its own part")
    if per_thread:
        most = int(1.5 * -(-items // per_thread)) + max(count(b) for _, b in configs)
        if threads > most:
            return (f"{a.name} was launched with {threads:,} threads for {items:,} elements: with "
                    f"{per_thread} elements per thread, about {-(-items // per_thread):,} threads are enough")
    return None


def shared_atomics():
    """Evidence (CUDA C): privatized counters: the kernel's atomics go to shared memory (at least as
    many as to global memory) in the course's own launch (cpu mode), the compiled kernel holds
    atomics on shared memory, ATOMS (GPU)."""
    def holds(a: Attempt):
        if a.kind != "cuda":
            raise _SetupError("shared_atomics applies to CUDA C kernels")
        if a.execution is None:
            return None
        from .cuda_evidence import shared_atomics as privatized
        why = privatized(a.name, a.execution)
        if why is False:
            return None
        return why
    return _evidence(holds)


def launches_at_most(n: int, why: str = "a fused kernel is one launch"):
    """Evidence: the learner's kernels were launched at most ``n`` times in all."""
    def holds(a: Attempt):
        total = sum(L.count or 0 for L in a.launches)
        if total > n:
            return f"{why}: {total} launches of {a.name} were recorded, at most {n} expected"
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
                if mine and all(any(_same_values(t, i) for i in inputs) for t in mine):
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
        if a.kind == "cuda":
            mine = [t.text for t in a.cuda_body()]
            for ref in refs:
                if not isinstance(ref, str):
                    raise _SetupError("differs_from takes CUDA C sources (strings) for a CUDA C "
                                      "exercise")
                for name, body in _cuda_kernels(ref).items():
                    if [t.text for t in body] == mine:
                        return (f"{a.name} is the notebook's {name} under another name: the "
                                f"exercise asks you to change it")
            return None
        for fn in a.functions():
            for ref in refs:
                if isinstance(ref, str):
                    raise _SetupError("differs_from takes kernel objects for a Triton or Numba "
                                      "exercise")
                other = _py_function(ref)
                if fn is other or _body_dump(a.tree(fn)) == _body_dump(_function_tree(other)):
                    return (f"{_name_of(fn)} is the notebook's {_name_of(other)}"
                            + ("" if fn is other else " under another name")
                            + ": the exercise asks you to change it")
        return None
    return _evidence(holds)


def _body_dump(tree: ast.FunctionDef) -> str:
    """The body of a function (without its docstring) as an AST dump: equal for the same code."""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _show(d3: tuple) -> tuple:
    d = tuple(d3)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return d
