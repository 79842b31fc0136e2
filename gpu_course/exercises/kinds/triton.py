"""The Triton kind: a ``@triton.jit`` kernel launched as ``kernel[grid](...)``, recorded through
:mod:`gpu_course.interpose.triton`'s launch events; the course's own launch counts, per program,
the stores and ``tl.dot`` calls the interpreter executed (cpu mode) or reads the compiled kernel
(GPU)."""
from __future__ import annotations

from . import register
from .python_code import PythonKind


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

    def executed_problem(self, trial, execution) -> str | None:
        """Programs of the course's own launch that stored nothing (cpu mode)."""
        if not execution.counted:
            return None
        idle = execution.programs - sum(1 for n in execution.stored.values() if n > 0)
        if idle:
            return (f"{idle} of the {execution.programs} programs of {trial.label} stored nothing: split the "
                    f"work so that each program computes and stores its own part")
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
        return None
    if ex.compiled:
        if not any(triton_ops(k)["dot"] for k in ex.compiled):
            return (f"the compiled {a.name} holds no dot: the exercise asks for the product as tl.dot on "
                    f"tiles (a tl.dot whose result is not used is removed by the compiler)")
    return None


register(TritonKind())
