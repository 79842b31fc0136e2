"""The Helion kind: a ``@helion.kernel`` function, called as a function; Helion generates a Triton kernel from it and
launches that, so what runs is recorded as a Triton launch. This kind is :class:`.triton.TritonKind` with one change:
a launch is the learner's when its Triton kernel was generated from a Helion kernel the learner wrote (a kernel of
the course, of a library or of the check cell is refused as for Triton), which :meth:`recording` learns by noting
every Helion kernel called during the run and the Triton kernels Helion generated for it. The course's own launch,
the work split and the ``tl.dot`` evidence then read the generated kernel, as for a Triton answer. Helion need not be
installed for the kind to exist: nothing of it is imported until a check records a run."""
from __future__ import annotations

from contextlib import contextmanager

from ..provenance import name_of, provenance_problem, py_function
from . import register
from .python_code import function_tree, is_stub_tree
from .triton import TritonKind


class HelionKind(TritonKind):
    key = "helion"
    label = "Helion"
    syntax = "{k}(...)"
    answer = "Helion kernel (a @helion.kernel function) or the function that calls it"
    libraries = ("helion",)

    @contextmanager
    def recording(self, trial):
        """The Triton launches (as for Triton) and, for each Helion kernel called meanwhile, the generated Triton
        kernels it launches (``trial.generated``: the generated kernel's Python function -> the Helion kernel)."""
        trial.generated = generated = {}
        try:
            from helion import Kernel
        except ImportError:   # no Helion here: no launch can be a Helion kernel's (learner_launches says so)
            with super().recording(trial) as seen:
                yield seen
            return
        original = Kernel.__call__

        def noting(kernel, *args, **kwargs):
            one_config_on_the_cpu(kernel)
            try:
                return original(kernel, *args, **kwargs)
            finally:
                for fn in generated_kernels(kernel, args):
                    generated[fn] = kernel
        Kernel.__call__ = noting
        try:
            with super().recording(trial) as seen:
                yield seen
        finally:
            Kernel.__call__ = original

    def learner_launches(self, trial):
        """The Triton launches whose kernel Helion generated from a Helion kernel the learner wrote."""
        mine, refused = [], []
        for L in trial.seen.of("triton"):
            if not L.finished:
                continue
            source = trial.generated.get(L.fn)
            if source is None:
                refused.append((L, f"{L.name} is a Triton kernel, not one Helion generated: the exercise asks for a "
                                   f"Helion kernel (a @helion.kernel function), called as a function"))
                continue
            if trial.kname is not None and name_of(source) != trial.kname:
                continue
            if trial.kernel_object is not None and py_function(source) is not py_function(trial.kernel_object):
                continue
            why = provenance_problem(source, "Helion kernel", self, trial.scopes)
            (refused if why else mine).append((L, why) if why else L)
        return mine, refused

    def is_stub(self, trial) -> bool:
        sources = {id(s): s for s in trial.generated.values()}.values()
        try:
            return bool(sources) and all(is_stub_tree(function_tree(py_function(s))) for s in sources)
        except (OSError, TypeError, ValueError, SyntaxError):
            return False


def one_config_on_the_cpu(kernel) -> None:
    """Refuse, with the fix, a Helion kernel that would search for its config in cpu mode: Helion times each config
    of a ``configs=[...]`` list (or of its autotuner's search) on the first call, which Triton's interpreter cannot
    do (Helion fails there with a bare AssertionError)."""
    from ...mode import ON_GPU
    if ON_GPU or len(getattr(kernel, "configs", [None])) == 1:
        return
    given = f"{len(kernel.configs)} configs" if kernel.configs else "no config"
    raise ValueError(f"{name_of(kernel)} has {given}: in cpu mode a Helion kernel needs exactly one, "
                     f"@helion.kernel(config=helion.Config(block_sizes=[...])), because Helion would time each "
                     f"config on the first call and Triton's interpreter times nothing")


def generated_kernels(kernel, args) -> list:
    """The Python functions of the Triton kernels Helion generated for ``kernel`` bound to ``args``: the one its
    launcher runs and those of the other configs it compiled (a search on a GPU)."""
    try:
        bound = kernel.bind(tuple(args))
    except Exception:  # noqa: BLE001  arguments Helion refuses: it raised already, nothing was launched
        return []
    runners = [getattr(bound, "_run", None), *getattr(bound, "_compile_cache", {}).values()]
    found = []
    for run in runners:
        for value in getattr(run, "__globals__", {}).values():
            fn = py_function(value)
            if getattr(fn, "__name__", "").startswith("_helion_") and fn is not value and fn not in found:
                found.append(fn)
    return found


register(HelionKind())
