"""On a GPU, the counts of cpu mode: a CUDA C answer is also run through the course's CPU emulation.

The compiled kernel's SASS says which instructions it holds, not what each thread executed: a kernel whose
thread 0 loops over the whole array (through ``memcpy``, a helper, a pointer kept in a ``__device__``
variable ...) holds the same instructions as one that splits the work, and a tiled kernel whose threads
park their own value in shared memory holds the loads and stores of one that shares tiles. So on a GPU,
after the GPU run and the course's own GPU launch (which decide the result and read the SASS),
:func:`counted_run` builds the learner's source again through the emulation (g++ and torch's headers,
:mod:`gpu_course.cuda.emulation`; the check's launcher in the same build, as in cpu mode) and

* runs the check's ``run`` on it, each CUDA tensor handed to a host function replaced by a CPU copy
  (views of one storage stay views of one copy, :class:`CpuCopies`): the learner's launch, counted per
  thread, with what torch did in the host function watched, and its output compared with the reference;
* launches the kernel itself there, the same launch of it on fresh memory (:func:`.cuda_launch.own_launch`
  on the emulated module): the course's launch, counted per thread, with the inputs compared afterwards.

The evidence then reads these counts as in cpu mode (and, where they hold, the GPU's SASS too). A GPU
machine whose host compiler cannot build the emulation (probed once, :func:`toolchain_problem`) is judged on
the SASS alone, and the verdict says why nothing was counted.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["emulated_builds", "emulating", "toolchain_problem", "CpuCopies", "counted_run", "EmulatedRunError"]

_STATE = {"emulating": 0}
_PROBE: dict = {}
PROBE_SOURCE = r"""
__global__ void course_probe_k(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.0f * x[i];
}
void course_probe(torch::Tensor x) {
    course_probe_k<<<cdiv(x.numel(), 32), 32>>>(x.data_ptr<float>(), (int)x.numel());
}
"""


class EmulatedRunError(Exception):
    """The emulated run refuses the answer (the message says why, to the learner)."""


@contextmanager
def emulated_builds():
    """Inside the block, ``load_cuda`` builds through the CPU emulation, on a GPU too (its builds are cached
    apart from the GPU's: the mode is part of a build's key), without the emulation's nvcc check of the device
    code on a GPU (the GPU build has just compiled it)."""
    from .. import cuda, mode
    from ..hardware import temporary_env
    old = cuda.ON_GPU
    cuda.ON_GPU = False
    _STATE["emulating"] += 1
    try:
        if mode.ON_GPU:
            with temporary_env("CUDA_EMU_NVCC", "0"):
                yield
        else:
            yield
    finally:
        _STATE["emulating"] -= 1
        cuda.ON_GPU = old


def emulating() -> bool:
    """Whether an :func:`emulated_builds` block is open."""
    return _STATE["emulating"] > 0


def toolchain_problem() -> str | None:
    """Why the CPU emulation cannot build here (no host compiler, torch's headers missing ...), or None:
    probed once per process by building and running a small kernel."""
    if "why" not in _PROBE:
        _PROBE["why"] = _probe()
    return _PROBE["why"]


def _probe() -> str | None:
    from ..cuda import cuda_begin, get_sig, load_cuda
    from .runner import first_line
    src = cuda_begin + PROBE_SOURCE
    try:
        with emulated_builds():
            mod = load_cuda(src, get_sig("course_probe", src), ["course_probe"])
        x = torch.ones(40)
        mod.course_probe(x)
        if not bool((x == 2).all()):
            return "a test kernel computed a wrong result in it"
    except Exception as e:  # noqa: BLE001  no g++, no headers, a broken toolchain
        return first_line(e)
    return None


class CpuCopies:
    """A CPU copy of each CUDA storage handed to the emulated host functions, made once: a tensor becomes a
    view of its storage's copy with the same offset, shape and strides (so an input and the output that
    share memory, or two views of one buffer, still do)."""

    def __init__(self):
        self.storages: dict = {}   # (device, data_ptr) of a storage -> its bytes on the CPU (uint8)

    def cpu(self, v):
        """``v`` with every CUDA tensor in it (lists, tuples, dicts too) replaced by its CPU copy."""
        if isinstance(v, torch.Tensor):
            return v if v.device.type == "cpu" else self.copy(v)
        if isinstance(v, (list, tuple)):
            return type(v)(self.cpu(x) for x in v) if not hasattr(v, "_fields") else type(v)(*[self.cpu(x) for x in v])
        if isinstance(v, dict):
            return {k: self.cpu(x) for k, x in v.items()}
        return v

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` as a view of the CPU copy of its storage (copied at the first of its views)."""
        from .replay import _raw
        key = (t.device.type, t.untyped_storage().data_ptr())
        if key not in self.storages:
            self.storages[key] = _raw(t).to("cpu", copy=True)
        raw = self.storages[key]
        return torch.empty(0, dtype=t.dtype).set_(raw.untyped_storage(), t.storage_offset(), t.shape, t.stride())


class _OnCpu:
    """The emulated module as the check's ``run`` sees it: each host function takes the CUDA tensors the
    check gives it, and runs on their CPU copies."""

    def __init__(self, mod, copies: CpuCopies):
        self._mod, self._copies = mod, copies

    def __getattr__(self, name):
        f = getattr(self._mod, name)
        if name.startswith("_") or not callable(f) or isinstance(f, type):
            return f
        copies = self._copies

        def host_call(*args, **kwargs):
            return getattr(self._mod, name)(*copies.cpu(list(args)), **copies.cpu(dict(kwargs)))
        host_call.__name__ = name
        return host_call


_WHERE = "in the CPU emulation, where the check counts what each thread does"


def counted_run(trial):
    """The emulated runs of a CUDA C answer on a GPU (see the module's docstring): ``(course's launch,
    learner's launch)``, each a :class:`.cuda_launch.CudaExecution` counted per thread, the first with
    ``again`` and ``first`` set. Raises :class:`EmulatedRunError` for what refuses the answer there; errors
    of the toolchain propagate (the caller has probed it)."""
    from ..cuda import appending
    from ..launches import launches
    from .cuda_launch import CudaExecution, CudaLaunchError, counted_launches, launcher_source, own_launch
    from .host_torch import HostTorch
    from .kinds import result_problem
    from .runner import first_line
    source, kname, label = trial.source, trial.kname, trial.label
    try:
        code, decl, fn = launcher_source(source, kname)
    except CudaLaunchError as e:
        raise EmulatedRunError(f"the check launches {label} itself and cannot: {e}") from None
    try:
        with emulated_builds(), appending(source, code, decl, fn):
            mod = trial.problem.build(source)
    except Exception as e:  # noqa: BLE001  what the GPU builds and the emulation does not
        lines = str(e).strip().splitlines() or [type(e).__name__]
        raise EmulatedRunError(f"your source builds for the GPU, but not for the CPU emulation, where the check "
                               f"counts what each thread does: {lines[0]}") from None
    if not hasattr(mod, fn) or not hasattr(mod, "_cuda_emu_count"):
        raise EmulatedRunError("your source built for the CPU emulation without the check's launcher: "
                               "the check cannot count what each thread does")
    copies = CpuCopies()
    host = HostTorch()
    mod._cuda_emu_count(True)
    try:
        with host.watching(mod), launches(modules=[mod]) as seen:
            result = trial.problem.run(_OnCpu(mod, copies))
        learner = CudaExecution(kname, counted_launches(mod, kname))
    except Exception as e:  # noqa: BLE001  an out-of-bounds access, a race ... as in cpu mode
        raise EmulatedRunError(f"your host function raised {first_line(e)} when the check ran it {_WHERE}") from None
    finally:
        mod._cuda_emu_count(False)
    if not isinstance(result, torch.Tensor):
        raise EmulatedRunError(f"when the check ran your host function {_WHERE}, the result was a "
                               f"{type(result).__name__}, not a tensor (on the GPU it was)")
    out = copies.cpu(result)   # the emulated kernel's output: the CPU copy of what the check's run returned
    why = host.problem(out) or host.changed_input(out)
    if why:
        raise EmulatedRunError(f"{why} (when the check ran it {_WHERE})")
    writers = seen.writers_of(out)
    if not writers or writers[-1].name != kname:
        raise EmulatedRunError(f"when the check ran your host function {_WHERE}, {kname} did not write the "
                               f"output last (it does on the GPU): the same code must do the same work on both")
    first = result_problem(trial, out)
    if first:
        raise EmulatedRunError(f"when the check ran your host function {_WHERE}, the result differed: {first}")
    inputs = [copies.cpu(x) for x in trial.inputs]
    args = (source, kname, writers[-1], out, inputs, host.zeroed(out))
    try:
        got, execution, mem = own_launch(*args, module=(mod, fn))
    except CudaLaunchError as e:
        raise EmulatedRunError(f"the check launches {label} itself and cannot: {e}") from None
    except Exception as e:  # noqa: BLE001
        raise EmulatedRunError(f"the check launched {label} itself {_WHERE} (your launch configuration and "
                               f"arguments, on fresh memory) and it raised {first_line(e)}") from None
    why = trial.kind.replayed_problem(trial, mem, got, f"{_WHERE}: your launch configuration and arguments",
                                      "host function")
    if why:
        raise EmulatedRunError(why)
    execution.again = lambda: own_launch(*args, module=(mod, fn))[0]
    execution.first = got
    execution.emulated = (mod, _OnCpu(mod, CpuCopies()))   # for evidence that runs the answer on inputs of its own
    return execution, learner


def counted_again(emulated, run, kname: str) -> list:
    """``run(m)`` once more, ``m`` the learner's module built for the CPU emulation (``emulated``: ``(module, what
    run is given)``, as :func:`counted_run` and cpu mode's check keep it), with every thread counted: the counted
    launches of ``kname``. For evidence that needs the answer run on an input of its own."""
    from .cuda_launch import counted_launches
    mod, given = emulated
    mod._cuda_emu_count(True)
    try:
        run(given)
        return counted_launches(mod, kname)
    finally:
        mod._cuda_emu_count(False)
