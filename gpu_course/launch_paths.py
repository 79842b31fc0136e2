"""Notebook 07's comparison of launch paths: what one call of a Triton kernel costs the CPU on the normal path
(``kernel[grid]``: the autotuner's and ``JITFunction.run``'s Python) and on the direct path
(:class:`gpu_course.triton_launch.Launcher`, the compiled kernel's own launcher), beside cuBLAS.

* :func:`normal_path` wraps a function so that its launches take ``kernel[grid]`` (what a call cost before);
* :func:`profile_call` is a cProfile of one call: which Python functions the time goes to;
* :func:`paths_rounds` times cuBLAS and both paths in interleaved rounds (GPU time, time per step of a
  back-to-back loop, CPU per call; :mod:`gpu_course.rounds`), :func:`paths_table` prints them with the
  rounds' range of each loop ratio, :func:`loop_ratios` and :func:`cpu_us` give a claim its figures;
* :func:`fake_gpu` (cpu mode) makes the Launchers of given kernels act as on a GPU whose compiled kernels
  launch nothing: what the direct path's own Python costs, measurable without a GPU.
"""
from __future__ import annotations

import contextlib
import cProfile
import io
import pstats
import statistics

import torch

from . import triton_launch
from .rounds import interleaved_rounds
from .timing import fmt_ms
from .user_timing import bench_user

PATHS = ("cuBLAS", "Triton, kernel[grid]", "Triton, direct")


def normal_path(fn):
    """``fn`` with every :class:`~gpu_course.triton_launch.Launcher` inside it taking ``kernel[grid]``."""
    def through(*args, **kwargs):
        with triton_launch.through_jit():
            return fn(*args, **kwargs)
    return through


def profile_call(fn, *args, top: int = 8, **kwargs) -> str:
    """The ``top`` functions by own time (cProfile) of one call of ``fn(*args, **kwargs)``, after two
    warm-up calls (the first compiles or tunes); one line each: calls, own µs, cumulative µs, name.
    cProfile's own bookkeeping inflates every figure: read the shares, not the totals."""
    for _ in range(2):
        fn(*args, **kwargs)
    prof = cProfile.Profile()
    prof.enable()
    fn(*args, **kwargs)
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    total = sum(v[2] for v in stats.stats.values())
    lines = [f"{len(stats.stats)} Python functions, {total * 1e6:.0f} µs under the profiler; the {top} "
             "with the most own time:", f"{'calls':>6} {'own µs':>8} {'cum µs':>8}  function"]
    for (file, line, name), (_cc, ncalls, tt, ct, _callers) in rows:
        where = file.rsplit("/", 2)[-2:] if "/" in file else [file]
        lines.append(f"{ncalls:>6} {tt * 1e6:>8.1f} {ct * 1e6:>8.1f}  {name} ({'/'.join(where)}:{line})")
    return "\n".join(lines)


def paths_rounds(fns: dict, rounds: int = 5) -> dict:
    """:func:`~gpu_course.user_timing.bench_user` of each of ``fns`` (name -> function of no arguments) in
    ``rounds`` interleaved rounds (A B C, C B A, ...), after two warm-up calls each (the autotuner's first
    call tunes): ``{name: [UserTiming, one a round]}``."""
    for f in fns.values():
        f()
        f()
    return interleaved_rounds(fns, rounds=rounds, timer=bench_user)


def loop_ratios(taken: dict, name: str, baseline: str = "cuBLAS") -> list:
    """Per round, ``baseline``'s time per loop step over ``name``'s (above 1: ``name`` is the faster)."""
    return [b.loop_ms / t.loop_ms for b, t in zip(taken[baseline], taken[name])]


def cpu_us(taken: dict, name: str) -> list:
    """Per round, ``name``'s CPU time per call in µs."""
    return [t.cpu_ms * 1e3 for t in taken[name]]


def _med(values):
    return statistics.median(values)


def paths_table(taken: dict, baseline: str = "cuBLAS") -> str:
    """One line per function: the medians over the rounds of its GPU time, time per loop step and CPU per
    call, and ``baseline``'s loop time over its own (median, and the rounds' range)."""
    width = max(len(n) for n in taken) + 2
    lines = [f"{'':<{width}}{'GPU time':>10}{'loop/step':>11}{'CPU/call':>10}   × {baseline} in a loop (rounds)"]
    for name, ts in taken.items():
        r = sorted(loop_ratios(taken, name, baseline))
        lines.append(f"{name:<{width}}{fmt_ms(_med([t.median for t in ts])):>10}"
                     f"{fmt_ms(_med([t.loop_ms for t in ts])):>11}{fmt_ms(_med([t.cpu_ms for t in ts])):>10}"
                     f"   {_med(r):.2f}× ({r[0]:.2f}-{r[-1]:.2f}×)")
    return "\n".join(lines)


# ----------------------------------------------------------------------- cpu mode: the direct path's Python
class _FakeCompiled:
    """A CompiledKernel whose launcher (Triton 3.x's signature) does nothing."""
    packed_metadata, function = None, None

    def run(self, gridX, gridY, gridZ, stream, function, *args):
        return None


class _FakeKernel:
    """Stands in for a kernel (or an autotuner) in its Launcher: ``kernel[grid](...)`` launches nothing and
    returns a :class:`_FakeCompiled`; an autotuner 'chooses' its first configuration."""

    def __init__(self, kernel):
        self.real, self.arg_names = kernel, kernel.arg_names
        self.ck = _FakeCompiled()

    def __getattr__(self, name):   # the autotuner's own attributes (keys, hooks): the real one's
        return getattr(self.real, name)

    def __getitem__(self, grid):
        def launch(*args, **constexprs):
            if hasattr(self.real, "configs"):
                self.best_config = self.real.configs[0]
            return self.ck
        return launch


@contextlib.contextmanager
def fake_gpu(*kernels):
    """cpu mode: inside the block the Launchers of ``kernels`` act as on a GPU (device 0, no hooks) whose
    compiled kernels launch nothing, so that timing a wrapper measures its own Python, the key and the
    direct path's dispatch, without the driver's launch. Restores everything on exit."""
    if torch.cuda.is_available():
        raise RuntimeError("fake_gpu is for cpu mode: on a GPU, time the real launches")
    saved = [(launcher := triton_launch.direct(k), launcher.kernel, dict(launcher._compiled)) for k in kernels]
    patches = [(triton_launch, "ON_GPU", True), (torch._C, "_cuda_getDevice", lambda: 0),
               (torch._C, "_cuda_getCurrentRawStream", lambda d: 0)]
    missing = object()
    old = [(obj, name, getattr(obj, name, missing)) for obj, name, _ in patches]
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        for launcher, kernel, _ in saved:
            launcher.kernel = _FakeKernel(kernel)
            launcher._compiled.clear()
        yield
    finally:
        for obj, name, value in old:
            if value is missing:
                delattr(obj, name)
            else:
                setattr(obj, name, value)
        for launcher, kernel, compiled in saved:
            launcher.kernel = kernel
            launcher._compiled.clear()
            launcher._compiled.update(compiled)
