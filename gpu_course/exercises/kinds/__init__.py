"""The kinds of kernel an exercise can ask for, one module each (:mod:`.triton`, :mod:`.numba`,
:mod:`.cuda`), registered here by name. A kind is an object with the interface of :class:`Kind`: how
the learner's kernel is handed in and launched, which recorded launches are the learner's, the
course's own launch of it (what executed), and where it differs, how the evidence of the method
reads it. The judge (:mod:`..judging`) and the evidence (:mod:`..evidence`) ask the kind and never
test its name.

Adding a kind (Helion, Gluon ...) is one module with a subclass of :class:`Kind` (or of
:class:`.python_code.PythonKind` for a kernel written as a Python function) and one
``register(MyKind())``; evidence that needs a method the kind does not have says, for the check's
author, which kinds it applies to.
"""
from __future__ import annotations

from contextlib import contextmanager

__all__ = ["Kind", "SetupError", "register", "unregister", "get", "names", "supporting", "kind_of", "result_problem"]


class SetupError(Exception):
    """Evidence that does not apply to the exercise's kind: the check's fault, not the learner's."""


def result_problem(trial, got) -> str | None:
    """The first line of what :func:`...checking.check` finds wrong with ``got`` against ``trial``'s reference, at
    the exercise's tolerances (the exception's name where it says nothing), or None when ``got`` matches: what
    every run of an answer the check makes (its launch, the emulation's, the simulator's) is held to."""
    from ...checking import check
    try:
        check(got, trial.ref, atol=trial.problem.atol, rtol=trial.problem.rtol, name=trial.value_name)
    except Exception as e:  # noqa: BLE001
        return (str(e).strip().splitlines() or [type(e).__name__])[0]
    return None


def scratch_note(mem, rest: str) -> str:
    """For a refusal of the check's own launch: where that launch gave a kernel argument poison because the buffer
    is neither an input nor the output (a scratch buffer, or a tensor the learner's code made from the inputs with
    torch, which the check does not reproduce), a sentence that says so; else ''.

    >>> from types import SimpleNamespace as N
    >>> scratch_note(N(regions={1: (None, "scratch", "add_relu_kernel's b_ptr")}), "function")[:60]
    " (add_relu_kernel's b_ptr was given poison there, as every b"
    >>> scratch_note(N(regions={1: (None, "input", "x_ptr")}), "function")
    ''
    """
    names = [name for _, role, name in getattr(mem, "regions", {}).values() if role == "scratch"]
    if not names:
        return ""
    return (f" ({names[0]} was given poison there, as every buffer that is neither an input nor the output is: if "
            f"your {rest} filled it from the inputs with torch (an expanded or reshaped copy, say), have the kernel "
            f"read the inputs themselves)")


class Kind:
    """One kind of kernel. Class attributes: ``key`` (what ``kind=`` says), ``label`` (in messages),
    ``syntax`` (how a launch is written, ``{k}`` the kernel's name), ``answer`` (what the learner
    hands in), ``unit`` (what a grid counts), ``threads`` (whether a launch has blocks of threads),
    ``libraries`` (top-level modules whose objects are kernels of this kind).

    The judge calls, in order: :meth:`prepare` (check the answer, build it), :meth:`recording` around
    :meth:`run`, :meth:`after_run`, :meth:`learner_launches`, :meth:`is_stub`, :meth:`own_launch`.
    Evidence may call the optional methods ``shared_memory``, ``shared_tiles``, ``barriers``,
    ``calls``, ``work_split``, ``shared_atomics``, ``same_code`` and always :meth:`configs`.
    """
    key = ""
    label = ""
    syntax = "{k}(...)"
    answer = "function or kernel"
    unit = "blocks"
    threads = True
    libraries: tuple = ()

    def owns(self, obj) -> bool:
        """Whether ``obj`` is a kernel object of this kind (by the library its class comes from)."""
        return any(klass.__module__.split(".")[0] in self.libraries for klass in type(obj).__mro__)

    def prepare(self, trial) -> object:
        """Check the handed-in answer and make what :meth:`run` needs (``trial.module`` for a built
        source); a reason (string or Verdict) when it cannot be judged, else None."""
        if not callable(trial.answer):
            return f"hand in the {self.answer} itself, not a {type(trial.answer).__name__}: the check runs it"
        return None

    @contextmanager
    def recording(self, trial):
        """Around the learner's run: record the launches (a :class:`~gpu_course.launches.LaunchLog`)."""
        from ...launches import launches
        with launches(snapshot=True) as seen:
            yield seen

    def run(self, trial):
        """Run the exercise on the check's inputs: the output it returns."""
        return trial.problem.run(trial.answer)

    def after_run(self, trial) -> str | None:
        """Why what the learner's code did besides launching is not allowed, or None."""
        return None

    def learner_launches(self, trial) -> tuple[list, list]:
        """``(mine, refused)``: the recorded launches that are the learner's, and ``(launch, why)``
        of those refused."""
        raise NotImplementedError

    def is_stub(self, trial) -> bool:
        """Whether the learner's kernel is still the starter (a body of ``pass``)."""
        return False

    def own_launch(self, trial) -> tuple:
        """The course's own launch of the learner's kernel on fresh memory: ``(why not or None, the
        output it wrote, what executed)``."""
        return None, None, None

    def replayed_problem(self, trial, mem, got, launched: str, rest: str) -> str | None:
        """Why the course's own launch (``launched``: what of the learner's it reused, ``rest``: what
        it left out) does not count, or None: it wrote into an input, or its output ``got`` is not
        the reference's."""
        label = trial.label
        changed = mem.changed_inputs()
        if changed:
            return (f"{label} wrote into its input ({changed[0]}) when the check launched it: a kernel reads "
                    f"its inputs and writes only its output")
        first = result_problem(trial, got)
        if first:
            return (f"the check launched {label} itself ({launched}, on fresh memory, without the rest of your "
                    f"{rest}) and it did not compute the result: {first}{scratch_note(mem, rest)}")
        return None

    def functions(self, attempt) -> list:
        """The learner's launched kernels as Python functions ([] for a kernel that is not one)."""
        return []

    def configs(self, attempt, what: str) -> list:
        """The grids or blocks (``what``) of the learner's launches, 3 ints each."""
        return [getattr(L, what) for L in attempt.launches]


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Make ``kind`` available as ``kind=kind.key`` (replacing one of that key)."""
    _KINDS[kind.key] = kind
    return kind


def unregister(key: str) -> None:
    """Remove the kind ``key`` (a test's own kind, say)."""
    _KINDS.pop(key, None)


def get(key: str) -> Kind | None:
    """The kind registered as ``key``, or None."""
    return _KINDS.get(key)


def names() -> list[str]:
    """The registered kinds' keys, in order of registration."""
    return list(_KINDS)


def supporting(method: str) -> list[Kind]:
    """The kinds that have ``method`` (an optional method of :class:`Kind`)."""
    return [k for k in _KINDS.values() if callable(getattr(k, method, None))]


def kind_of(obj) -> Kind | None:
    """The kind whose kernel object ``obj`` is, or None (not a kernel)."""
    return next((k for k in _KINDS.values() if k.owns(obj)), None)


# the course's kinds register themselves, in this order (messages list them so)
from . import triton  # noqa: E402,F401,I001
from . import numba  # noqa: E402,F401,I001
from . import cuda  # noqa: E402,F401,I001
from . import helion  # noqa: E402,F401,I001
