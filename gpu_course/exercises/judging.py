"""Judging a kernel exercise (:func:`judge`, printed by :func:`kernel_exercise`) as a list of steps,
:data:`STEPS`, each a small function of the :class:`Trial` under way that returns a reason (a string:
"not yet: <reason>"; or a :class:`.problem.Verdict` where the line differs) or None; the judge runs them
in order and reports the first reason. In order: the check is set up rightly, the answer is there and
is the learner's own, the learner's kernel of the asked kind ran (recorded by
:mod:`gpu_course.launches`), its inputs are unchanged, the result is memory it wrote, the other tensors it
was given kept their values (whatever kernel the answer launched), the result
matches the reference, the course's own launch of the kernel on fresh memory computes it too, and again on
inputs with new values (:mod:`.fresh`), and each
evidence (:mod:`.evidence`) holds for the :class:`Attempt`. What differs between kinds of kernel is
asked of the kind (:mod:`.kinds`), never tested here."""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field

import torch

from ..checking import CheckFailed, check
from ..launches import Launch, LaunchLog
from . import guard, kinds
from .kinds import SetupError
from .kinds.cuda import kernel_body
from .kinds.python_code import function_tree
from .problem import KernelProblem, Verdict
from .provenance import check_scopes, name_of, provenance_problem, rebound
from .runner import first_line, hint_note

__all__ = ["Attempt", "Trial", "Verdict", "KernelProblem", "STEPS", "judge", "judge_kernel", "kernel_exercise",
           "same_values", "same_bytes", "mode_on_gpu"]


@dataclass
class Attempt:
    """What evidence checks look at: the learner's ``launches`` (of the asked ``kind``) of the
    kernel ``name``, the whole ``seen`` log, the CUDA C ``source`` (CUDA C only), the
    ``output``."""
    kind: str
    name: str
    launches: list[Launch]
    seen: LaunchLog
    output: torch.Tensor
    source: str | None = None
    execution: object = None  # what ran in the course's own launch (replay.Execution, cuda_launch.CudaExecution)
    replayed: torch.Tensor | None = None  # the output of the course's own launch
    trees: dict = field(default_factory=dict)

    def functions(self) -> list:
        """The learner's launched kernels as Python functions (Triton, Numba), once each."""
        return kinds.get(self.kind).functions(self)

    def tree(self, fn) -> ast.FunctionDef:
        """The AST of kernel function ``fn`` (its source from ``inspect.getsource``)."""
        if fn not in self.trees:
            self.trees[fn] = function_tree(fn)
        return self.trees[fn]

    def cuda_body(self) -> list:
        """Tokens of the body of CUDA C kernel ``name`` in ``source``."""
        return kernel_body(self.source or "", self.name)


@dataclass
class Trial:
    """One judging under way: the ``problem``, the ``answer``, the ``scopes`` running the check, and
    what the steps found so far (each step reads what the ones before it set)."""
    problem: KernelProblem
    answer: object
    scopes: list
    kind: kinds.Kind | None = None
    kname: str | None = None          # the kernel's name, when the problem names it
    kernel_object: object = None      # the kernel object, when the problem gives one
    source: str | None = None         # CUDA C
    module: object = None             # CUDA C: the built module
    kernels: dict = field(default_factory=dict)
    host_torch: object = None         # CUDA C: what torch did in the host functions
    ref: object = None
    inputs: list = field(default_factory=list)
    seen: LaunchLog | None = None
    out: object = None
    mine: list = field(default_factory=list)
    last: Launch | None = None
    label: str = ""
    execution: object = None
    replayed: object = None

    @property
    def value_name(self) -> str:
        return self.problem.name or self.label


def _set_up(t: Trial):
    p = t.problem
    t.kind = kinds.get(p.kind)
    if t.kind is None:
        return Verdict(False, [f"❌ {p.title}: the check is set up wrongly: kind={p.kind!r}, not one of "
                               f"{', '.join(kinds.names())}"])
    t.kname = p.kernel if isinstance(p.kernel, str) else (name_of(p.kernel) if p.kernel is not None else None)
    t.kernel_object = None if isinstance(p.kernel, str) else p.kernel
    return None


def _answered(t: Trial):
    if t.answer is None:
        return Verdict(None, [f"⬜ {t.problem.title}: not answered yet{hint_note(t.problem.title, t.problem.hint)}"])
    return rebound()


def _evidence_is_genuine(t: Trial):
    for ev in t.problem.evidence:
        if not guard.is_genuine(ev) and not any(s.holds(ev) for s in t.scopes):
            return (f"{name_of(ev)} is not evidence the course made, nor a function of the check cell: "
                    f"the check's evidence comes from utils (utils.grid_is(...), ...)")
    return None


def _learners_own(t: Trial):
    """Where the answer and the named kernel come from."""
    why = provenance_problem(t.answer, t.kind.answer, t.kind, t.scopes, t.problem.reference)
    if why is None and t.kernel_object is not None:
        why = provenance_problem(t.kernel_object, "kernel", t.kind, t.scopes)
    return why


def _prepared(t: Trial):
    return t.kind.prepare(t)


def _reference(t: Trial):
    ref = t.problem.reference
    try:
        t.ref = ref() if callable(ref) and not isinstance(ref, torch.Tensor) else ref
    except Exception as e:  # noqa: BLE001
        return Verdict(False, [f"❌ {t.problem.title}: the check is set up wrongly (its reference raised "
                               f"{first_line(e)})"])
    return None


def _ran(t: Trial):
    """Run it, recording launches, with the inputs the check names kept by value."""
    t.inputs = list(t.problem.inputs) + [x for ev in t.problem.evidence for x in getattr(ev, "inputs", ())]
    before = [(x, x.detach().clone()) for x in t.inputs]
    try:
        with t.kind.recording(t) as seen:
            t.seen = seen
            t.out = t.kind.run(t)
    except Exception as e:  # noqa: BLE001  the learner's code may fail in any way
        return f"running it raised {first_line(e)}"
    why = t.kind.after_run(t)
    if why:
        return why
    for i, (x, was) in enumerate(before):
        if not same_bytes(x, was):
            return (f"running it changed input {i + 1} of the check (a {_describe(x)}): a kernel reads its "
                    f"inputs and writes only its output")
    return None


def _learners_launches(t: Trial):
    """The learner's launches of the asked kind."""
    kind, kname = t.kind, t.kname
    label = kname or f"your {kind.label} kernel"
    syntax = kind.syntax.format(k=kname or "your_kernel")
    t.mine, refused = kind.learner_launches(t)
    if t.mine:
        t.label = kname or t.mine[0].name or label
        return None
    if refused:
        return refused[0][1]
    others = [L for L in t.seen if L.kind != kind.key and L.finished]
    if others:
        o = others[0]
        other = kinds.get(o.kind)
        return (f"only a {other.label if other else o.kind} kernel ({o.name}) was launched: this exercise asks "
                f"for a {kind.label} kernel, launched as {syntax}")
    if kname is not None and t.seen.of(kind.key):
        ran = ", ".join(sorted({str(L.name) for L in t.seen.of(kind.key)}))
        return f"no launch of {kname} was recorded ({ran} ran instead): launch it with {syntax}"
    return (f"no launch of {label} was recorded: the result came from somewhere else — "
            f"launch the kernel with {syntax}")


def _output_written(t: Trial):
    """The output is memory the learner's kernel wrote, unchanged since."""
    label, seen = t.label, t.seen
    np = sys.modules.get("numpy")
    if np is not None and isinstance(t.out, np.ndarray):
        t.out = torch.from_numpy(t.out)
    if not isinstance(t.out, torch.Tensor):
        return (f"the result is a {type(t.out).__name__}, not a tensor: return the output tensor "
                f"that {label} wrote")
    if t.out.numel() == 0:
        return "the result is an empty tensor"
    if not seen.writers_of(t.out, among=t.mine):
        other = [L for L in seen.writers_of(t.out) if L.kind == t.kind.key and L.name and L.name != t.kname]
        if t.kname and other:   # another kernel of the learner's wrote the result: say which, not "torch?"
            return (f"the returned tensor was written by {other[-1].name}, and this exercise judges {t.kname}: "
                    f"the result must be what {t.kname} writes (the check launches {t.kname} itself, without "
                    f"the rest of your function)")
        return (f"the returned tensor is not memory {label} was given: it was computed "
                f"afterwards (by torch?) — return the output tensor you passed to {label}")
    t.last = seen.writers_of(t.out)[-1]
    if t.last not in t.mine:
        return f"after {label}, {t.last.name} was given the output too: the result must be what {label} wrote"
    if seen.changed_since_launch(t.out, t.last):
        return (f"the output changed after {label} wrote it: something (torch?) overwrote it "
                f"afterwards — return what the kernel wrote")
    t.label = t.kname or t.last.name or label  # the kernel that wrote the result, among several of the learner's
    return None


def _inputs_kept(t: Trial):
    """The tensors the answer was given, other than the output, keep their values (where the kind can tell:
    a CUDA C host function's arguments), whichever kernel wrote into them."""
    kept = getattr(t.kind, "inputs_kept", None)
    return kept(t) if kept is not None else None


def _not_a_stub(t: Trial):
    if t.kind.is_stub(t):
        return Verdict(None, [f"⬜ {t.problem.title}: not answered yet: {t.label}'s body is still the "
                              f"starter's `pass`{hint_note(t.problem.title, t.problem.hint)}"])
    return None


def _values_match(t: Trial):
    p = t.problem
    try:
        check(t.out, t.ref, atol=p.atol, rtol=p.rtol, name=t.value_name)
    except CheckFailed as e:
        lines = str(e).splitlines()
        return Verdict(False, [f"❌ {p.title}: not yet: {lines[0]}"] + [f"    {ln.strip()}" for ln in lines[1:]])
    except Exception as e:  # noqa: BLE001  a shape or dtype the check cannot compare
        return f"the result cannot be compared with the reference ({first_line(e)})"
    return None


def _own_launch(t: Trial):
    """The course launches the learner's kernel itself, on fresh memory."""
    why, t.replayed, t.execution = t.kind.own_launch(t)
    return why


def _fresh_values(t: Trial):
    """The course launches it once more on the check's inputs with new values: the result must follow them
    (:mod:`.fresh`)."""
    from .fresh import fresh_problem
    return fresh_problem(t)


def _method(t: Trial):
    """Each evidence holds for the :class:`Attempt`."""
    attempt = Attempt(t.kind.key, t.label, t.mine, t.seen, t.out, t.source, execution=t.execution,
                      replayed=t.replayed)
    for ev in t.problem.evidence:
        try:
            why = ev(attempt)
        except SetupError as e:
            return Verdict(False, [f"❌ {t.problem.title}: the check is set up wrongly ({e})"])
        except Exception as e:  # noqa: BLE001  e.g. no source to read
            return f"the method could not be checked ({first_line(e)})"
        if why:
            return why
    return None


STEPS = [_set_up, _answered, _evidence_is_genuine, _learners_own, _prepared, _reference, _ran,
         _learners_launches, _output_written, _inputs_kept, _not_a_stub, _values_match, _own_launch, _fresh_values,
         _method]


def judge(problem: KernelProblem, answer, scopes) -> Verdict:
    """Run :data:`STEPS` on ``answer`` to ``problem``; the first reason is the verdict, else ✅."""
    t = Trial(problem, answer, scopes)
    for step in STEPS:
        why = step(t)
        if isinstance(why, Verdict):
            return why
        if why:
            return Verdict(False, [f"❌ {problem.title}: not yet: {why}"] + _notes(t))
    return Verdict(True, [f"✅ {problem.title}: correct (your {t.kind.label} kernel {t.label} wrote the result)"]
                   + _notes(t))


def _notes(t: Trial) -> list[str]:
    """What the verdict adds about how it was reached (on a GPU without the emulation's counts: why)."""
    note = getattr(t.execution, "note", "")
    return [f"    {note}"] if note else []


def judge_kernel(title: str, answer, *, kind: str, run, reference, kernel=None, build=None,
                 atol: float = 1e-5, rtol: float = 1e-5, evidence=(), hint: str | None = None,
                 name: str | None = None, inputs=(), scopes=None) -> Verdict:
    """The verdict of :func:`kernel_exercise` (same arguments), without printing it."""
    problem = KernelProblem(title, kind, run, reference, kernel, build, atol, rtol, tuple(evidence), hint, name,
                            tuple(inputs))
    return judge(problem, answer, check_scopes() if scopes is None else scopes)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype, device and bytes (False where they cannot be compared)."""
    try:
        return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and same_bytes(a, b)
    except Exception:  # noqa: BLE001
        return False


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype and bytes (so NaN equals NaN, and -0.0 is not 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    raw = lambda x: x.detach().contiguous().view(torch.uint8) if x.dim() else x.detach().reshape(1).view(torch.uint8)  # noqa: E731
    return torch.equal(raw(a), raw(b))


def _describe(t: torch.Tensor) -> str:
    return f"{'×'.join(str(n) for n in t.shape) or 'scalar'} {str(t.dtype).replace('torch.', '')} tensor"


def kernel_exercise(title: str, answer, *, kind: str, run, reference, kernel=None, build=None,
                    atol: float = 1e-5, rtol: float = 1e-5, evidence=(), hint: str | None = None,
                    name: str | None = None, inputs=()) -> None:
    """Check a kernel exercise for its method as well as its numbers; print ⬜/✅/❌ and a
    sentence that says what to do. Never raises. (The exercise as an object: :class:`KernelProblem`.)

    * ``answer``: what the learner hands in: a function that launches their kernel and returns
      its output (``add_relu``), a kernel (``matmul_rect_numba``), or for ``kind="cuda"`` the
      CUDA C source, which ``build(source)`` turns into a module. None: not answered yet.
    * ``kind``: "triton", "numba" or "cuda" (or another kind registered in :mod:`.kinds`): the kind
      of kernel that must run.
    * ``run(answer)`` (``run(module)`` for CUDA C): runs the exercise on the check's inputs and
      returns the output; outputs it allocates should come from ``utils.poisoned``.
    * ``reference``: the expected output (a tensor, or a function of no arguments returning one),
      compared with ``utils.check`` within ``atol`` / ``rtol``.
    * ``kernel``: the kernel's name (a string: the safest, it cannot be rebound to another
      kernel) or object; None accepts any kernel of that kind written by the learner.
    * ``evidence``: checks of the technique, e.g. ``[uses_shared_memory()]``.
    * ``hint``: registered for :func:`hint`, never printed by the check.

    It passes only if (a) the learner's kernel of that kind was launched while ``run`` ran: not
    a kernel of the course package, of a library, or defined inside the check cell; (b) the
    returned tensor is memory one of those launches was given, and nothing changed it after the
    learner's last launch; (c) it matches the reference; (d) every ``evidence`` holds. An answer
    that is the reference itself, a torch function, or a function defined in the check cell is
    refused; a kernel whose body is still ``pass`` counts as not answered.

    >>> kernel_exercise("a fused kernel", None, kind="triton", run=None, reference=None)
    ⬜ a fused kernel: not answered yet
    """
    KernelProblem(title, kind, run, reference, kernel, build, atol, rtol, tuple(evidence), hint, name,
                  tuple(inputs)).check(answer, check_scopes())


def mode_on_gpu() -> bool:
    """Whether the course runs on a GPU (read when asked: tests switch it)."""
    from .. import mode
    return mode.ON_GPU
