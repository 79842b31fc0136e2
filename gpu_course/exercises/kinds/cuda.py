"""The CUDA C kind: the learner hands in a source whose host function launches a ``__global__`` kernel
with ``<<<blocks, threads>>>``; ``build(source)`` (``load_cuda``) turns it into a module whose launch
counters and log (:mod:`gpu_course.module_launches`) say what ran, and what torch did inside the host
functions is watched (:class:`..host_torch.HostTorch`). The course's own launch is
:func:`..cuda_launch.own_launch` (what executed: the emulation's counts per thread in cpu mode; on a
GPU the SASS, and the same counts from running the answer in the CPU emulation too,
:mod:`..cuda_emulated`), read by the evidence through :mod:`..cuda_evidence`, or, where nothing was
counted or compiled, the kernel's tokens.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import torch

from ... import mode
from . import Kind, SetupError, register

_COURSE_DIR = Path(__file__).resolve().parents[2]  # gpu_course/: where the course's own .cu kernels are
_COURSE_BODIES: dict = {}  # a course file's path -> ((mtime, size), [the token texts of each kernel body])


def kernels_of(source: str) -> dict[str, list]:
    """``{name: body tokens}`` of every ``__global__`` function in CUDA C ``source`` (read once: the
    same parse as ``get_sig`` and ``load_cuda``'s)."""
    from ...cuda.parsed import parse
    return parse(source).kernel_bodies


def kernel_body(source: str, name: str) -> list:
    """The tokens of the body of kernel ``name`` in ``source`` ([] if there is none)."""
    return kernels_of(source).get(name, [])


def course_kernel_bodies(path: Path) -> list:
    """The token texts of each ``__global__`` body in the course file ``path`` (read again only
    when the file changed)."""
    from ...cuda.parsed import ParsedSource
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        if path not in _COURSE_BODIES or _COURSE_BODIES[path][0] != stamp:
            kernels = ParsedSource(path.read_text()).kernel_bodies  # not kept by parse(): only the bodies are
            _COURSE_BODIES[path] = (stamp, [tuple(t.text for t in body) for body in kernels.values()])
    except (OSError, UnicodeDecodeError):
        return []
    return _COURSE_BODIES[path][1]


def course_kernel(source: str, name: str) -> str | None:
    """The course file holding a kernel with the same body as ``name`` in ``source``, if any."""
    body = tuple(t.text for t in kernel_body(source, name))
    if not body:
        return None
    for path in sorted(_COURSE_DIR.rglob("*.cu*")):
        if "emulation" in path.parts or path.suffix not in (".cu", ".cuh"):
            continue
        if body in course_kernel_bodies(path):
            return str(path.relative_to(_COURSE_DIR.parent))
    return None


def _module_name_of(mod) -> str:
    return getattr(mod, "__name__", None) or f"module@{id(mod):x}"


class CudaKind(Kind):
    key = "cuda"
    label = "CUDA C"
    syntax = "{k}<<<blocks, threads>>>(...) in your host function"
    answer = "CUDA C source"
    unit = "blocks"

    def owns(self, obj) -> bool:
        return False  # a CUDA C kernel is not a Python object

    def prepare(self, trial):
        from ..problem import Verdict
        source, kname = trial.answer, trial.kname
        if not isinstance(source, str):
            return (f"hand in your CUDA C source as a string (utils.cuda_begin + r\"\"\"...\"\"\"), "
                    f"not a {type(source).__name__}")
        trial.source = source
        trial.kernels = kernels_of(source)
        if kname is not None and kname not in trial.kernels:
            return f"your source has no __global__ kernel named {kname}: write one (the check looks for its launches)"
        if kname is not None:
            where = course_kernel(source, kname)
            if where:
                return f"{kname} is the course's own kernel from {where}: write your own"
        from ..cuda_launch import build_with_launcher  # cpu mode: the check's launcher in the same build
        build = trial.problem.build
        try:
            trial.module = build(source) if kname is None else build_with_launcher(build, source, kname)
        except Exception as e:  # noqa: BLE001  a build error is the learner's to fix
            lines = str(e).strip().splitlines() or [type(e).__name__]
            return Verdict(False, [f"❌ {trial.problem.title}: not yet: your source does not build:"]
                           + [f"    {ln}" for ln in lines[:12]])
        return None

    @contextmanager
    def recording(self, trial):
        from ...launches import launches
        from ..host_torch import HostTorch
        trial.host_torch = HostTorch()
        count = getattr(trial.module, "_cuda_emu_count", None)   # cpu mode: the learner's launches are counted too
        if count is not None:
            count(True)
        try:
            with trial.host_torch.watching(trial.module), launches(modules=[trial.module], snapshot=True) as seen:
                yield seen
        finally:
            if count is not None:
                from ..cuda_launch import CudaExecution, counted_launches
                trial.learner_counts = CudaExecution(trial.kname or "", counted_launches(trial.module, trial.kname)) \
                    if trial.kname else None
                count(False)

    def run(self, trial):
        return trial.problem.run(trial.module)

    def after_run(self, trial) -> str | None:
        return trial.host_torch.problem(trial.out) if isinstance(trial.out, torch.Tensor) else None

    def inputs_kept(self, trial) -> str | None:
        """Why a tensor given to a host function, other than the output the kernel wrote, changed while the
        answer ran (any kernel, whatever its name), or None."""
        return trial.host_torch.changed_input(trial.out)

    def learner_launches(self, trial):
        name = _module_name_of(trial.module)
        if name in trial.seen.uncounted:
            label = trial.kname or f"your {self.label} kernel"
            why = trial.seen.uncounted[name]
            log = str(getattr(trial.module, "build_log", "") or "")
            if "built as one nvcc unit" in log:   # gpu_build's fallback (load_inline): no launch counters
                reason = log.split("(the split build did not apply: ", 1)[-1].rstrip(")") \
                    if "did not apply" in log else ""
                why = ("your source was built as one nvcc unit by torch's load_inline, which keeps no launch log for "
                       "the check to read" + (f" (the course's split build did not apply: {reason})" if reason else ""))
            return [], [(None, f"cannot tell whether {label} ran: {why}")]
        mine = [L for L in trial.seen.of(self.key) if L.finished and (trial.kname is None or L.name == trial.kname)
                and L.kernel is trial.module and L.name in trial.kernels]
        return mine, []

    def own_launch(self, trial):
        """:func:`..cuda_launch.own_launch`: the launches of the kernel that the learner's last host
        call made, again, on fresh memory (zeroed if the host function zeroed the output)."""
        from ..cuda_launch import CudaLaunchError, own_launch
        from ..runner import first_line
        label = trial.label
        args = (trial.source, label, trial.last, trial.out, trial.inputs, trial.host_torch.zeroed(trial.out))
        try:
            got, execution, mem = own_launch(*args)
        except CudaLaunchError as e:
            return f"the check launches {label} itself and cannot: {e}", None, None
        except Exception as e:  # noqa: BLE001  the learner's kernel may fail in any way
            return (f"the check launched {label} itself (your launch configuration and arguments, on fresh "
                    f"memory) and it raised {first_line(e)}"), None, None
        why = self.replayed_problem(trial, mem, got, "your launch configuration and arguments", "host function")
        if execution is not None and not mode.ON_GPU:   # to launch it again with the products perturbed
            execution.again = lambda: own_launch(*args)[0]
            execution.emulated = (trial.module, trial.module)   # to run the answer on an input of the evidence's
        mine = getattr(trial, "learner_counts", None)
        if execution is not None and mine is not None and mine.launches and execution.launches:
            execution.learner = mine
        if why is None and execution is not None and mode.ON_GPU and trial.kname:
            why = _counted_on_cpu(trial, execution)
        return why, got, execution

    def fresh_output(self, trial):
        """The output of :func:`..cuda_launch.own_launch` once more (:mod:`..fresh`: on the inputs as they are
        now), on this machine's build (no emulated run beside it on a GPU)."""
        from ..cuda_launch import own_launch
        return own_launch(trial.source, trial.label, trial.last, trial.out, trial.inputs,
                          trial.host_torch.zeroed(trial.out))[0]

    def configs(self, attempt, what: str) -> list:
        """Of every launch the learner's host calls made (from the module's launch log)."""
        return [getattr(c, what) for L in attempt.launches for c in L.calls]

    # evidence -------------------------------------------------------------------------------------
    @staticmethod
    def _on_both(a, judge):
        """``judge(execution)`` on the course's own launch, then (cpu mode) on the learner's own launches
        of the kernel, counted while the host function ran: the two must do the same work."""
        why = judge(a.execution)
        mine = getattr(a.execution, "learner", None)
        if why is None and mine is not None:
            mine.elements = a.execution.elements
            why = judge(mine)
            if isinstance(why, str):
                why = (why.replace("in the check's launch of", "in your host function's launch of")
                          .replace("in the check's launch,", "in your host function's launch,")
                          .replace("when the check launched", "when your host function launched")
                          .replace("in the check's launch", "in your host function's launch"))
        return why

    def shared_memory(self, a) -> str | None:
        """Every thread that touched global memory stored into shared memory and loaded from it, and for a
        product the global loads per output element are what tiles imply (emulation: :func:`..cuda_evidence.
        tiled_loads`); the SASS stores to and loads from shared memory (GPU); else a ``__shared__`` token
        in the kernel's body."""
        if a.execution is not None:
            from ..cuda_evidence import shared_used, tiled_loads

            def judge(ex):
                why = shared_used(a.name, ex)
                return tiled_loads(a.name, ex, tuple(a.output.shape)) if why is None else why
            why = self._on_both(a, judge)
            if why is not False:
                return why
        if any(t.text == "__shared__" for t in a.cuda_body()):
            return None
        return f"{a.name} declares no __shared__ array: the exercise asks for tiles staged in shared memory"

    def calls(self, a, names) -> str | None:
        """``__syncthreads``, the ``__shfl_*_sync``, ``wmma::mma_sync`` and ``atomicAdd`` as executed
        (see :mod:`..cuda_evidence`); other names as tokens called in the kernel's body."""
        from .. import cuda_evidence as ce
        rest = []
        for n in names:
            why = False
            if a.execution is not None and n in ce.EXECUTED:
                def judge(ex, n=n):
                    if n == "__syncthreads":
                        return ce.barrier_passed(a.name, ex)
                    if n in ce.SHUFFLES:
                        return ce.shuffled(a.name, ex, n)
                    if n in ce.MMA:
                        why = ce.mma_ran(a.name, ex, n)
                        why = ce.mma_count(a.name, ex, tuple(a.output.shape), n) if why is None else why
                        # the tensor cores' tiles carry the reuse: not a scalar product beside them
                        why = ce.tiled_loads(a.name, ex, tuple(a.output.shape), how=(
                            f"16x16 tiles loaded into fragments, whose products {n} computes, bring it to about "
                            f"2k/16: the product is the tensor cores' work, not a scalar loop's beside them")) \
                            if why is None else why
                        # and their products carry the result (a scalar product from shared tiles beside them does not)
                        return ce.mma_reaches_output(a.name, ex, a.replayed, n) if why is None else why
                    return ce.atomics_ran(a.name, ex, n)
                why = self._on_both(a, judge)
            if why is False:
                rest.append(n)
            elif why:
                return why
        body = a.cuda_body()
        have = {t.text for t, n in zip(body, body[1:]) if n.text == "(" and t.kind == "id"}
        missing = [n for n in rest if n.split("::")[-1].split(".")[-1] not in have]
        if missing:
            return f"{a.name} does not call {', '.join(missing)}: the exercise asks you to use it"
        return None

    def work_split(self, a, share: float, items: int | None, per_thread: int | None) -> str | None:
        """See :func:`..evidence.splits_work`. Where each thread's accesses were counted (the emulation, in
        either mode) they are the evidence of the split, and the number of threads started is not: a grid-stride
        loop over a grid of any size splits the work as well as one thread per element."""
        from ..cuda_evidence import counts_split
        counted = a.execution is not None and counts_split(a.execution)
        if items is not None:
            why = _threads_started(a, items, share, per_thread, fewest=not counted)
            if why:
                return why
        if a.execution is None:
            return None
        from ..cuda_evidence import work_split
        why = self._on_both(a, lambda ex: work_split(a.name, ex, share))
        if why:
            return why
        if per_thread and items is not None and a.execution.launches:
            def wide(ex):
                if not ex.launches:
                    return None
                loads = sum(int(L.field("gload").sum()) for L in ex.launches)
                most = int(1.5 * -(-items // per_thread)) + per_thread
                if loads > most:
                    return (f"in the check's launch, {a.name} made {loads:,} global loads for {items:,} elements: "
                            f"with one {per_thread}-wide load per thread it would make about "
                            f"{-(-items // per_thread):,} (plus the tail)")
                return None
            return self._on_both(a, wide)
        return None

    def shared_atomics(self, a) -> str | None:
        """The atomics go to shared memory (emulation), or the SASS holds ATOMS (GPU)."""
        if a.execution is None:
            return None
        from ..cuda_evidence import shared_atomics as privatized
        why = self._on_both(a, lambda ex: privatized(a.name, ex, a.output.numel()))
        return None if why is False else why

    def same_code(self, a, refs) -> str | None:
        """Why the kernel's body is that of a ``__global__`` kernel of one of ``refs`` (sources)."""
        mine = [t.text for t in a.cuda_body()]
        for ref in refs:
            if not isinstance(ref, str):
                raise SetupError("differs_from takes CUDA C sources (strings) for a CUDA C exercise")
            for name, body in kernels_of(ref).items():
                if [t.text for t in body] == mine:
                    return f"{a.name} is the notebook's {name} under another name: the exercise asks you to change it"
        return None


def _counted_on_cpu(trial, execution) -> str | None:
    """On a GPU, the counts of cpu mode (:func:`..cuda_emulated.counted_run`): the answer run again in the CPU
    emulation, the learner's launch and the course's counted per thread into ``execution`` (whose SASS stays);
    why the emulated runs refuse the answer, or None. Where the emulation cannot build on this machine, nothing
    is counted and ``execution.note`` says why (the verdict shows it)."""
    from ..cuda_emulated import EmulatedRunError, counted_run, toolchain_problem
    problem = toolchain_problem()
    if problem:
        execution.note = (f"(what each thread does was not counted: the check runs your kernel in the CPU emulation "
                          f"for that, and it cannot build on this machine: {problem}; only the compiled kernel's "
                          f"instructions were read)")
        return None
    try:
        counted, learner = counted_run(trial)
    except EmulatedRunError as e:
        return str(e)
    execution.launches, execution.elements = counted.launches, counted.elements
    execution.again, execution.first, execution.emulated = counted.again, counted.first, counted.emulated
    if learner.launches and counted.launches:
        execution.learner = learner
    return None


def _threads_started(a, items: int, share: float, per_thread: int | None, fewest: bool = True) -> str | None:
    """Why the learner's launches started too few (with ``fewest``: what stands for the count of each thread's
    work where nothing counted it) or, with ``per_thread``, too many threads for ``items`` elements, from the
    grids and blocks of the launch log; None when they fit or nothing was logged."""
    configs = [(c.grid, c.block) for L in a.launches for c in L.calls]
    if not configs:
        return None
    count = lambda d: d[0] * d[1] * d[2]  # noqa: E731
    threads = sum(count(g) * count(b) for g, b in configs)
    least = int(items * share)
    if fewest and threads < least:
        return (f"{a.name} was launched with {threads:,} thread{'s' if threads != 1 else ''} in all for {items:,} "
                f"elements (at least "
                f"{least:,} expected): split the work so that each thread handles its own part")
    if per_thread:
        most = int(1.5 * -(-items // per_thread)) + max(count(b) for _, b in configs)
        if threads > most:
            return (f"{a.name} was launched with {threads:,} threads for {items:,} elements: with "
                    f"{per_thread} elements per thread, about {-(-items // per_thread):,} threads are enough")
    return None


register(CudaKind())
