"""The Triton kind: a ``@triton.jit`` kernel launched as ``kernel[grid](...)``, recorded through
:mod:`gpu_course.interpose.triton`'s launch events; the course's own launch counts, per program of
every launch, the loads, stores and ``tl.dot`` calls the interpreter executed (cpu mode) or reads the
compiled kernel (GPU). In cpu mode the interpreter's ``tl.dot`` rounds fp32 inputs to TF32 where that
precision is asked for (Triton's default), as the GPU does, while the learner's code and the course's
own launch run."""
from __future__ import annotations

from contextlib import contextmanager

from . import register
from .python_code import PythonKind, _show

BALANCE = 2.0      # within a launch: the busiest program's elements / the mean program's lanes
SPREAD = 4.0       # within a launch of more than 4 programs: the busiest / the mean, both in elements
SCALAR_LOADS = 256  # more one-element tl.loads than this in one program: a Python-level loop over elements, where
                    # the lesson is a block load (a table of a few entries read one by one stays well under it)


class TritonKind(PythonKind):
    key = "triton"
    label = "Triton"
    syntax = "{k}[grid](...)"
    unit = "programs"
    unit_one = "program"
    threads = False
    libraries = ("triton",)

    def launch_again(self, launch, args, kwargs, grid, execution) -> None:
        got = launch.kernel.run(*args, grid=grid, warmup=False, **kwargs)
        if got is not None and hasattr(got, "asm"):
            execution.compiled.append(got)  # gpu mode: what the evidence reads

    @contextmanager
    def recording(self, trial):
        with _tf32(), super().recording(trial) as seen:
            yield seen

    def own_launch(self, trial):
        """:meth:`.PythonKind.own_launch`, TF32 as the GPU computes it; the execution keeps how to
        launch again (``again``), for the check that ``tl.dot``'s products reach the output."""
        from ..replay import replay
        with _tf32():
            why, got, execution = super().own_launch(trial)
        if execution is not None:
            mine, out, inputs = trial.mine, trial.out, trial.inputs

            def again():
                with _tf32():
                    return replay(mine, out, inputs)[0]
            execution.again = again
        return why, got, execution

    def fresh_output(self, trial):
        with _tf32():
            return super().fresh_output(trial)

    def counted_per_program(self, execution) -> bool:
        return bool(execution.counted and execution.grids)

    def combined(self, execution, program) -> bool:
        """cpu mode: every element ``program`` wrote was an atomic update, and another program of its launch
        made atomic updates too; on a GPU: the compiled kernel holds an atomic operation."""
        if execution.counted:
            if program is None:
                return False
            others = [k for k, v in execution.atomics.items() if v and k[0] == program[0] and k != program]
            return bool(others) and execution.atomics.get(program, 0) >= execution.wrote.get(program, 0) > 0
        from ..compiled import triton_ops
        return any(triton_ops(k)["atomic"] for k in execution.compiled)

    def executed_problem(self, trial, execution) -> str | None:
        """What each program of every launch of the course's own launch did (cpu mode): none stored
        nothing, and none did the others' share: within a launch, the busiest program's loads and
        stores (elements) are at most ``BALANCE`` times the mean program's (lanes, masked-off ones
        included, so that a program at the edge is not counted short) and, with more than 4 programs,
        at most ``SPREAD`` times the mean in elements; and no program did more than half of all the
        launches' loads and stores; and no program made more than ``SCALAR_LOADS`` loads of one element."""
        if not execution.counted:
            return None
        grids = execution.grids or []
        several = len(grids) > 1
        for i, g in enumerate(grids):
            programs = [(i, (x, y, z)) for z in range(g[2]) for y in range(g[1]) for x in range(g[0])]
            n = len(programs)
            of = _launch_named(trial, grids, i)
            if n > 2 or several:
                idle = sum(1 for p in programs if execution.wrote.get(p, 0) == 0)
                if idle and (n > 2 or idle == n):
                    return (f"{idle} of the {n} programs of {of} stored nothing: split the "
                            f"work so that each program computes and stores its own part")
            if n <= 2:
                continue
            work = [execution.work.get(p, 0) for p in programs]
            lanes = sum(execution.lanes.get(p, 0) for p in programs) / n
            busiest = max(work)
            mean = sum(work) / n
            if busiest > BALANCE * lanes or (n > 4 and busiest > SPREAD * mean):
                p = programs[work.index(busiest)][1]
                return (f"program {_show(p)} of {of} loaded and stored {busiest:,} elements, "
                        f"{busiest / max(mean, 1):.0f}× the mean program's {mean:,.0f}: each program must "
                        f"do its own share of the work, not loop over the others'")
        for key, calls in execution.scalar_loads.items():
            if calls > SCALAR_LOADS:
                return (f"program {_show(key[1])} of {_launch_named(trial, grids, key[0])} made {calls:,} loads "
                        f"of one element each: "
                        f"load blocks (a tl.load of tl.arange offsets), not one element at a time in a loop")
        total = sum(execution.work.values())
        if execution.programs > 2 and total:
            key, most = max(execution.work.items(), key=lambda kv: kv[1])
            if most > total / 2:
                return (f"program {_show(key[1])} of {_launch_named(trial, grids, key[0])} loaded and stored "
                        f"{most / total:.0%} of "
                        f"all the elements the launches touched: each program must do its own share of the "
                        f"work, not loop over the others'")
        return None

    def calls(self, attempt, names) -> str | None:
        """``tl.dot`` as executed: every program of the course's own launch that stored a result ran
        one (cpu mode, counted by the interpreter), or the compiled kernel holds a dot (GPU); other
        names in the kernel's code."""
        dots = [n for n in names if n.split(".")[-1] == "dot"]
        if dots:
            why = _dot_executed(attempt)
            if why:
                return why
        return super().calls(attempt, [n for n in names if n not in dots])

    def dot_work(self, attempt, macs: int) -> str | None:
        """The ``tl.dot`` calls of the course's own launch that multiply loaded data did at least ``macs``
        multiply-adds in all (cpu mode, counted by the interpreter; on a GPU nothing is counted, and it holds)."""
        ex = attempt.execution
        if ex is None or not ex.counted:
            return None
        done = sum(ex.dot_macs.values())
        if done < macs:
            return (f"{attempt.name}'s tl.dot calls did {done:,} multiply-adds on loaded tiles when the check "
                    f"launched it, fewer than the {macs:,} of the product: every k-step of every tile must go "
                    f"through tl.dot, not only some of them")
        return None

    def dot_inputs(self, attempt, tensors) -> str | None:
        """Each of ``tensors`` (the check's inputs) was loaded into an operand of a ``tl.dot`` in the course's own
        launch (cpu mode; where an input reached the kernel as a copy the check did not follow, or on a GPU, it
        holds)."""
        ex = attempt.execution
        if ex is None or not ex.counted or ex.memory is None:
            return None
        for t in tensors:
            hit = ex.memory.replacement_of(t)
            if hit is None:
                continue
            new, name = hit
            lo = new.untyped_storage().data_ptr()
            hi = lo + new.untyped_storage().nbytes()
            if not any(a < hi and lo < b for a, b in ex.dot_spans):
                what = name.split("'s ", 1)[-1] if name else "one of its inputs"
                return (f"no tl.dot of {attempt.name} multiplied the data of its {what} when the check launched it: "
                        f"the product that reads it must go through tl.dot too, not a broadcast sum")
        return None


@contextmanager
def _tf32():
    from ... import mode
    if mode.ON_GPU:
        yield
        return
    from ...interpose import triton as events
    with events.tf32_rounding():
        yield


def _dot_reaches_output(a) -> str | None:
    """Launched again with every ``tl.dot`` product doubled, the output must change (cpu mode):
    a product of zero tiles, or one thrown away, leaves it as it was."""
    import torch

    from ...interpose import triton as events
    again, base = getattr(a.execution, "again", None), a.replayed
    if again is None or not isinstance(base, torch.Tensor):
        return None
    from ..replay import output_moved
    with events.dots_scaled(2.0):
        got = again()
    if output_moved(base, got):
        return None
    return (f"{a.name}'s tl.dot products do not reach its output: when the check launched it with every "
            f"tl.dot result doubled, the output did not change (a product of zero tiles, or one not used) — "
            f"the exercise asks for the product itself as tl.dot on tiles")


def _dot_executed(a) -> str | None:
    from ..compiled import triton_ops
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
        if not any(ex.dot_macs.values()):
            return (f"{a.name}'s tl.dot calls multiply no loaded data by data: an operand of each is a tile the "
                    f"kernel made up (an identity, say), which moves the other without multiplying it: the "
                    f"exercise asks for the product itself as tl.dot on the loaded tiles")
        return _dot_reaches_output(a)
    if ex.compiled:
        if not any(triton_ops(k)["dot"] for k in ex.compiled):
            return (f"the compiled {a.name} holds no dot: the exercise asks for the product as tl.dot on "
                    f"tiles (a tl.dot whose result is not used is removed by the compiler)")
    return None


register(TritonKind())


def _launch_named(trial, grids, i: int) -> str:
    """The kernel of the replayed launch ``i`` and, where there were several, which launch it was (the course's
    own launch replays the learner's launches in order); the judged kernel's name where they cannot be told."""
    if len(grids) < 2:
        return trial.label
    names = [getattr(L, "name", None) for L in trial.mine]
    name = names[i] if len(names) == len(grids) and names[i] else trial.label
    return f"{name} (its launch {i + 1} of {len(grids)})"
