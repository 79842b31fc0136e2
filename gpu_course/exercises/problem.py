"""One kernel exercise as an object (:class:`KernelProblem`, as GPU-Puzzles' ``CudaProblem``): what it
asks (its title, the kind of kernel, the kernel's name), how it runs (``run``, ``build``, the inputs
it names), its reference and tolerance, and the evidence of the method it requires. ``judge(answer)``
returns a :class:`Verdict`; ``check(answer)`` prints it (what :func:`.judging.kernel_exercise` does).

>>> p = KernelProblem("a fused kernel", kind="triton", run=None, reference=None)
>>> p.check(None)
⬜ a fused kernel: not answered yet
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["KernelProblem", "Verdict"]


@dataclass
class Verdict:
    """What a check found: ``ok`` is True (passed), False (refused) or None (not answered);
    ``lines`` are what :func:`kernel_exercise` prints."""
    ok: bool | None
    lines: list[str]

    def __str__(self):
        return "\n".join(self.lines)


@dataclass
class KernelProblem:
    """A kernel exercise (see :func:`.judging.kernel_exercise` for each field's meaning): ``title``,
    ``kind`` ("triton", "numba", "cuda", or any registered in :mod:`.kinds`), ``run`` (runs the
    exercise on the check's inputs), ``reference`` (a tensor or a function returning one), ``kernel``
    (its name or object), ``build`` (CUDA C: source -> module), ``atol`` / ``rtol``, ``evidence``,
    ``hint``, ``name`` (in the value check's message), ``inputs`` (tensors the kernel only reads)."""
    title: str
    kind: str
    run: Callable | None
    reference: Any
    kernel: Any = None
    build: Callable | None = None
    atol: float = 1e-5
    rtol: float = 1e-5
    evidence: tuple = ()
    hint: str | None = None
    name: str | None = None
    inputs: tuple = field(default_factory=tuple)

    def judge(self, answer, scopes=None) -> Verdict:
        """The verdict on ``answer`` (see :func:`.judging.judge`); ``scopes``: the code running the
        check (default: the caller's, see :func:`.provenance.check_scopes`)."""
        from .judging import judge
        from .provenance import check_scopes
        return judge(self, answer, check_scopes() if scopes is None else scopes)

    def check(self, answer, scopes=None) -> None:
        """Print the verdict on ``answer``; never raises."""
        from .provenance import check_scopes
        from .runner import first_line
        try:
            verdict = self.judge(answer, check_scopes() if scopes is None else scopes)
        except Exception as e:  # noqa: BLE001  never raise from a check
            verdict = Verdict(False, [f"❌ {self.title}: the check itself failed ({first_line(e)})"])
        print(verdict)
