"""The Numba kind: a ``@cuda.jit`` kernel launched as ``kernel[blocks, threads](...)``, recorded through
:mod:`gpu_course.interpose.numba`'s launch events; the course's own launch records, in the simulator,
which threads of which block wrote and read each shared array and the barriers each thread passed
(cpu mode; on a GPU by launching it again in the simulator, :mod:`..numba_simulated`), or reads the
compiled kernel's PTX (GPU, where the simulator cannot run it). Its evidence: shared memory (executed, or in
the kernel's AST), the shapes of the tiles staged there, and the barriers passed.
"""
from __future__ import annotations

import ast
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import replace

from ... import mode
from . import register
from .python_code import PythonKind, called_names, dotted

_YOURS = (("in the check's launch", "in your function's launch"), ("when the check launched", "when your function launched"))


@contextmanager
def _no_host_copies_in_kernels():
    """While open, a simulated thread that copies a device array to the host (``copy_to_host``) raises: in the
    simulator a kernel is Python and could hand its arrays to NumPy, uncounted; on a GPU that does not compile."""
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    except ImportError:   # numba-cuda without the simulator: nothing to guard
        yield
        return
    from ...interpose.numba import _who   # (block, thread) of the simulated thread running, or (None, None)
    original = FakeCUDAArray.copy_to_host

    def guarded(self, *args, **kwargs):
        if _who()[0] is not None:   # a thread of a simulated block
            raise RuntimeError("the kernel copied a device array to the host (copy_to_host): a kernel's threads "
                               "read their arrays element by element; on a GPU this does not compile")
        return original(self, *args, **kwargs)

    FakeCUDAArray.copy_to_host = guarded
    try:
        yield
    finally:
        FakeCUDAArray.copy_to_host = original


class NumbaKind(PythonKind):
    key = "numba"
    label = "Numba"
    syntax = "{k}[blocks, threads](...)"
    unit = "blocks"
    unit_one = "block"
    libraries = ("numba", "numba_cuda")

    def run(self, trial):
        """Run the exercise; a plain function handed in where the check launches a kernel
        (``kernel[blocks, threads](...)``) is told so, instead of Python's "not subscriptable"."""
        try:
            return super().run(trial)
        except TypeError as e:
            if "not subscriptable" not in str(e) or hasattr(trial.answer, "__getitem__"):
                raise
            name = trial.kname or getattr(trial.answer, "__name__", "it")
            raise TypeError(f"{name} is a plain function, and the check launches it as {name}[blocks, threads](...):"
                            f" hand in the Numba kernel itself (a @cuda.jit function)") from None

    def launch_again(self, launch, args, kwargs, grid, execution) -> None:
        b = launch.block
        execution.threads = b[0] * b[1] * b[2]
        with _no_host_copies_in_kernels():
            launch.kernel[grid, b](*args)
        execution.blocks.update((x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2]))

    @contextmanager
    def recording(self, trial):
        """Record the launches; in cpu mode also count, as the course's own launch is counted
        (:func:`..replay.counting`), what the learner's own launches of the kernel executed
        (``trial.learner_execution``): the evidence must hold on both."""
        with super().recording(trial) as seen:
            if mode.ON_GPU:
                trial.learner_execution = None
                yield seen
                return
            with learner_counting(trial.kname) as ex:
                trial.learner_execution = ex
                yield seen

    def own_launch(self, trial):
        why, got, execution = super().own_launch(trial)
        mine = getattr(trial, "learner_execution", None)
        if execution is not None and mine is not None and mine.counted and mine.blocks:
            execution.learner = mine
        if why is None and execution is not None and mode.ON_GPU:
            why = _counted_in_simulator(trial, execution)
        return why, got, execution

    @staticmethod
    def _on_both(a, judge):
        """``judge(attempt)`` on the course's own launch, then (cpu mode) on the learner's own launches of
        the kernel: the two must show the same method."""
        why = judge(a)
        mine = getattr(a.execution, "learner", None) if a.execution is not None else None
        if why is None and mine is not None:
            why = judge(replace(a, execution=mine))
            if isinstance(why, str):
                for old, new in _YOURS:
                    why = why.replace(old, new)
        return why

    def finish_launches(self) -> None:
        if mode.ON_GPU:
            from numba import cuda
            cuda.synchronize()  # numba's stream may not be torch's

    def shared_memory(self, a) -> str | None:
        """Every thread of a block wrote a ``cuda.shared.array`` and read it (simulator), the compiled
        kernel loads and stores shared memory (GPU); where nothing was executed or compiled, a call of
        ``cuda.shared.array`` in the kernel's AST."""
        if a.execution is not None:
            def judge(a):
                why = shared_executed(a, None)
                return tiled_loads(a) if why is None else why
            why = self._on_both(a, judge)
            if why is not False:
                return why
        for fn in self.functions(a):
            if any(c == "shared.array" or c.endswith(".shared.array") for c in called_names(a.tree(fn))):
                return None
        return (f"{a.name} does not use shared memory: the exercise asks for tiles staged in "
                f"cuda.shared.array(...)")

    def shared_tiles(self, a, shapes) -> str | None:
        """A tile of each of ``shapes`` staged in shared memory, written and read by every thread of a
        block (executed), else a ``cuda.shared.array`` of that shape the kernel's AST writes and reads."""
        want = Counter(as_shape(s) for s in shapes)

        def judge(a):
            for shape in want:
                why = shared_executed(a, shape)
                if why is False:
                    return False
                if why:
                    return (f"{a.name} stages no {show_shape(shape)} tile in shared memory that every thread "
                            f"writes and reads ({why}): the exercise asks for tiles of "
                            f"{', '.join(show_shape(s) for s in want)}")
            return tiled_loads(a)
        if a.execution is not None:
            why = self._on_both(a, judge)
            if why is not False:
                return why
        have = Counter()
        for fn in self.functions(a):
            have.update(staged_shared_shapes(a.tree(fn), getattr(fn, "__globals__", {})))
        missing = want - have
        if missing:
            shape = next(iter(missing))
            return (f"{a.name} stages no {show_shape(shape)} tile in shared memory (a "
                    f"cuda.shared.array of that shape that the kernel writes and reads): the "
                    f"exercise asks for tiles of {', '.join(show_shape(s) for s in want)}")
        return None

    def barriers(self, a, per_thread: int, compiled_at_least: int, why: str) -> str | None:
        """Every thread passed ``per_thread`` barriers (simulator), or the compiled kernel's PTX holds
        at least ``compiled_at_least`` (GPU)."""
        ex = a.execution
        if ex is not None and ex.counted:
            def judge(a):
                ex = a.execution
                seen = dict(ex.barriers)
                if not seen or len(seen) < len(ex.blocks) * ex.threads or any(n != per_thread for n in seen.values()):
                    got = sorted(set(seen.values())) or [0]
                    return (f"in the check's launch, threads of {a.name} passed {', '.join(map(str, got))} "
                            f"barrier(s); each should pass {per_thread}{why}")
                return None
            return self._on_both(a, judge)
        if (ex is not None and ex.compiled) or mode.ON_GPU:
            from ..compiled import numba_ptx, ptx_ops
            try:
                ptx = "\n".join(numba_ptx(L.kernel) for L in a.launches)
            except Exception:  # noqa: BLE001
                return None
            n = ptx_ops(ptx)["barrier"]
            if n < compiled_at_least:
                return (f"the compiled {a.name} holds {n} barrier(s); the exercise needs "
                        f"{compiled_at_least}{why}")
        return None


def _counted_in_simulator(trial, execution) -> str | None:
    """On a GPU, the counts of cpu mode (:func:`..numba_simulated.simulated_run`): the course's launch made again in
    Numba's simulator, counted into ``execution``; why it refuses the answer, or None. Where the simulator cannot run
    the kernel, nothing is counted (the PTX is read) and ``execution.note`` says why (the verdict shows it)."""
    from ..numba_simulated import SimulatedRunError, simulated_run
    from ..runner import first_line
    try:
        simulated_run(trial, execution)
    except SimulatedRunError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001  what the simulator does not run (the GPU did)
        execution.note = (f"(what each thread does was not counted: the check launches your kernel in Numba's CUDA "
                          f"simulator for that, and there it raised {first_line(e)}; only the compiled kernel's "
                          f"instructions were read)")
    return None


class _GlobalArrays:
    """A simulator kernel's argument extension (``prepare_args``): each NumPy array argument becomes a device
    array over the same memory whose element reads are ``access`` events of a ("global", ...) site, as in
    the course's own launch (:meth:`..replay.Memory.array`); ``elements`` counts the distinct arrays'
    elements."""

    def __init__(self):
        self.seen = {}

    def prepare_args(self, ty, val, stream=0, retr=None):
        import numpy as np
        if type(val) is not np.ndarray or val.ndim == 0:
            return ty, val
        try:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            from ...interpose.numba import _Reported
        except ImportError:
            return ty, val
        key = (val.__array_interface__["data"][0], val.shape, val.strides)
        self.seen.setdefault(key, val.size)
        arr = val.view(_Reported)
        arr._site = ("global", f"argument {len(self.seen)}")
        return ty, FakeCUDAArray(arr)


@contextmanager
def learner_counting(kname):
    """While open (cpu mode), the learner's launches of Numba kernel ``kname`` (any, if None) are counted
    into an :class:`..replay.Execution`, as the course's own launch is: shared arrays, barriers, global
    loads, the blocks and threads that ran."""
    from ...interpose import numba as numba_events
    from ..replay import Execution, counting
    ex = Execution()
    stack = ExitStack()
    under_way = []

    def launch(ev):
        fn = getattr(ev, "fn", None)
        if ev.kind != "numba" or (kname is not None and getattr(fn, "__name__", None) != kname) \
                or not isinstance(getattr(ev.kernel, "extensions", None), list):
            return
        g, b = tuple(ev.grid) + (1,) * (3 - len(tuple(ev.grid))), tuple(ev.block) + (1,) * (3 - len(tuple(ev.block)))
        ext = _GlobalArrays()
        ev.kernel.extensions.append(ext)
        under_way.append((ev, ext))
        ex.threads = b[0] * b[1] * b[2]
        ex.programs += g[0] * g[1] * g[2]
        ex.blocks.update((x, y, z) for x in range(g[0]) for y in range(g[1]) for z in range(g[2]))
        stack.enter_context(counting(ex))

    def launched(ev):
        for i, (e, ext) in enumerate(under_way):
            if e is ev:
                del under_way[i]
                if ext in ev.kernel.extensions:
                    ev.kernel.extensions.remove(ext)
                ex.elements = max(ex.elements, sum(ext.seen.values()))
                stack.close()
                break
    with numba_events.subscribed("launch", launch), numba_events.subscribed("launched", launched):
        try:
            yield ex
        finally:
            for e, ext in under_way:
                if ext in e.kernel.extensions:
                    e.kernel.extensions.remove(ext)
            stack.close()
    ex.counted = ex.counted and bool(ex.blocks)


def tiled_loads(a, tile: int = 8) -> str | None:
    """For a product (a 2-D output of h x w whose arrays hold h*k + k*w + h*w elements), the simulator's
    global loads per output element are at most 2k/``tile`` + 2: what tiles of ``tile`` or more imply (a
    naive kernel makes 2k). None where nothing was counted or the arrays are not a product's."""
    ex, out = a.execution, a.output
    if ex is None or not ex.counted or not ex.elements or out.dim() != 2:
        return None
    h, w = out.shape
    k, rest = divmod(ex.elements - h * w, h + w)
    if rest or k < 2 * tile:
        return None
    most = max(h * w, len(ex.blocks) * ex.threads) * (2 * k / tile + 2)   # the threads past the edge load too
    if ex.gloads > most:
        return (f"when the check launched {a.name} for a {h}x{k} by {k}x{w} product, it made {ex.gloads / (h * w):.1f} "
                f"global loads per output element: a naive kernel makes 2k = {2 * k}; tiles loaded once into shared "
                f"memory and read from there bring it to about 2k/T (at most {most / (h * w):.1f} here, with the threads "
                f"past the edge, for tiles of {tile} or more)")
    return None


def shared_executed(a, shape):
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
    if ex.compiled or mode.ON_GPU:
        from ..compiled import numba_ptx, ptx_ops, ptx_shared_elements
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


def as_shape(s) -> tuple:
    return tuple(int(v) for v in s) if isinstance(s, (tuple, list)) else (int(s),)


def show_shape(shape: tuple) -> str:
    return " × ".join(str(v) for v in shape)


def constant(node, names: dict):
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
        vals = [constant(e, names) for e in node.elts]
        return None if any(v is None for v in vals) else tuple(vals)
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        lo, hi = constant(node.left, names), constant(node.right, names)
        if isinstance(lo, int) and isinstance(hi, int):
            return ops[type(node.op)](lo, hi)
    return None


def staged_shared_shapes(tree, names: dict) -> list:
    """Shapes of the shared arrays of a Numba kernel's AST that are both written and read."""
    arrays = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and (dotted(node.value.func) == "shared.array"
                     or dotted(node.value.func).endswith(".shared.array"))):
            call = node.value
            arg = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg == "shape"), None)
            shape = constant(arg, names) if arg is not None else None
            for t in node.targets:
                if isinstance(t, ast.Name) and shape is not None:
                    arrays[t.id] = as_shape(shape)
    used = {"load": set(), "store": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            used["store" if isinstance(node.ctx, ast.Store) else "load"].add(node.value.id)
    return [shape for name, shape in arrays.items()
            if name in used["load"] and name in used["store"]]


register(NumbaKind())
