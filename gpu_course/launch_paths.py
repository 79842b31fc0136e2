"""Notebook 07's comparison of launch paths: what one call of a Triton kernel costs the CPU on the normal path
(``kernel[grid]``: the autotuner's and ``JITFunction.run``'s Python) and on the direct path
(:class:`gpu_course.triton_launch.Launcher`, the compiled kernel's own launcher), beside cuBLAS.

* :func:`normal_path` wraps a function so that its launches take ``kernel[grid]`` (what a call cost before),
  :func:`python_path` so that the matmul's C++ route (:func:`~gpu_course.kernels.triton_matmul.build_route`)
  stands aside and the direct path launches;
* :func:`call_profile` / :func:`profile_call` is a cProfile of one call, kept to the calling thread's
  functions: which functions the time goes to;
* :func:`paths_rounds` times cuBLAS and the paths in interleaved rounds (GPU time, time per step of a
  back-to-back loop, CPU per call; :mod:`gpu_course.rounds`), :func:`paths_table` prints them with the
  rounds' range of each loop ratio, :func:`loop_ratios` and :func:`cpu_us` give a claim its figures;
* :func:`fake_gpu` (cpu mode) makes the Launchers of given kernels act as on a GPU whose compiled kernels
  launch nothing: what the direct path's own Python costs, measurable without a GPU.
"""
from __future__ import annotations

import contextlib
import cProfile
import importlib.util
import io
import os
import pstats
import statistics
import sys
import threading
from dataclasses import dataclass

import torch

from . import triton_launch
from .rounds import interleaved_rounds
from .timing import fmt_ms
from .user_timing import bench_user

PATHS = ("cuBLAS", "Triton, kernel[grid]", "Triton, direct", "Triton, C++ route")


def normal_path(fn):
    """``fn`` with every :class:`~gpu_course.triton_launch.Launcher` inside it taking ``kernel[grid]``."""
    def through(*args, **kwargs):
        with triton_launch.through_jit():
            return fn(*args, **kwargs)
    return through


def python_path(fn):
    """``fn`` with the matmul's C++ route turned off: its launches take the Launcher's direct path (or
    ``kernel[grid]`` where that steps aside), whether or not the route is built."""
    from .kernels.triton_matmul import without_route

    def python(*args, **kwargs):
        with without_route():
            return fn(*args, **kwargs)
    return python


KEEP = ("triton", "torch", "gpu_course")  # where Python cannot tell threads apart: the call's own packages


def _package_dirs(names) -> tuple:
    """The directories of the importable packages among ``names`` (each ending with a separator)."""
    dirs = []
    for name in names:
        spec = importlib.util.find_spec(name)
        for d in (spec.submodule_search_locations or []) if spec else []:
            dirs.append(os.path.join(os.path.realpath(d), ""))
    return tuple(dirs)


def _one_call(fn, args, kwargs):
    """The profiled call's own frame: what it calls is the call."""
    return fn(*args, **kwargs)


@contextlib.contextmanager
def _this_threads_functions():
    """A set that fills, inside the block, with the (file, line, name) of each Python function started on this
    thread (``sys.monitoring``'s PY_START, Python 3.12 on); None where that cannot be asked: before 3.12 (there
    cProfile sees the thread that enabled it only), or when no monitoring tool id is free."""
    mon = getattr(sys, "monitoring", None)
    tool = next((t for t in (3, 4) if mon.get_tool(t) is None), None) if mon else None
    if tool is None:
        yield None
        return
    me, seen = threading.get_ident(), set()

    def started(code, offset):
        if threading.get_ident() == me:
            seen.add((code.co_filename, code.co_firstlineno, code.co_name))
    mon.use_tool_id(tool, "gpu_course.launch_paths")
    try:
        mon.register_callback(tool, mon.events.PY_START, started)
        mon.set_events(tool, mon.events.PY_START)
        yield seen
    finally:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)


@dataclass(frozen=True)
class CallProfile:
    """The functions of one profiled call (:func:`call_profile`): ``rows`` of (calls, own s, cumulative s,
    name, where), the most own time first; ``left_out``, how many other functions the profiler saw."""
    rows: tuple
    left_out: int

    def table(self, top: int = 8) -> str:
        """The count, the total own time and the ``top`` rows, one line each."""
        total = sum(r[1] for r in self.rows)
        n, out = len(self.rows), self.left_out
        lines = [f"{n} function{'s' * (n != 1)} ran in this call, on the calling thread "
                 f"({out} other{'s' * (out != 1)} that the profiler saw left out)",
                 f"{total * 1e6:.0f} µs under the profiler; the {min(top, n)} with the most own time:",
                 f"{'calls':>6} {'own µs':>8} {'cum µs':>8}  function"]
        for ncalls, tt, ct, name, where in self.rows[:top]:
            lines.append(f"{ncalls:>6} {tt * 1e6:>8.1f} {ct * 1e6:>8.1f}  {name} ({where})")
        return "\n".join(lines)


def call_profile(fn, *args, keep: tuple = KEEP, **kwargs) -> CallProfile:
    """cProfile of one call of ``fn(*args, **kwargs)``, after two warm-up calls (the first compiles or
    tunes), kept to the calling thread's functions. Since Python 3.12 cProfile listens through
    ``sys.monitoring`` and sees every thread (in a notebook, Jupyter's messaging runs beside the call, notably
    while Triton's launch lets go of Python's lock): the Python functions kept are those that started on the
    calling thread, and the built-ins those called. Where that cannot be asked (no monitoring tool id free),
    the functions defined in the packages ``keep`` stand in, with what they called. cProfile's own
    bookkeeping inflates every figure: read the count and the names more than the times."""
    for _ in range(2):
        fn(*args, **kwargs)
    prof = cProfile.Profile()
    with _this_threads_functions() as ours:
        prof.enable()
        _one_call(fn, args, kwargs)
        prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO()).stats
    if ours is None and sys.version_info < (3, 12):   # cProfile saw this thread only
        ours = {f for f in stats if f[0] != "~"}
    return _call_rows(stats, ours, _package_dirs(keep))


def _call_rows(stats: dict, ours, dirs: tuple = ()) -> CallProfile:
    """:func:`call_profile`'s filter, on ``pstats.Stats.stats`` (func -> (cc, nc, tt, ct, callers), a caller's
    value (nc, cc, tt, ct)). The Python functions of ``ours`` (the calling thread's; but :func:`_one_call`, the
    call's frame), and the built-ins they called, counted from those calls only. With ``ours`` None: the
    functions defined under ``dirs``, and, grown from them, every function they called, counted from those
    calls only; through a Python function the growth goes on, through a built-in it stops (another thread's
    function that starts while the call waits in a built-in is recorded under it)."""
    root = next((f for f in stats if f[2] == "_one_call" and f[0].endswith("launch_paths.py")), None)
    python = {f for f in stats if f != root and f[0] != "~"}
    own = python & set(ours) if ours is not None else {f for f in python if os.path.realpath(f[0]).startswith(dirs)}
    figures = {f: stats[f][1:4] for f in own}          # calls, own s, cumulative s
    callers_ok = own | {root}
    profiler = {f for f in stats if f[0] == "~" and "_lsprof.Profiler" in f[2]}   # its own disable()
    grown = True
    while grown:                                       # what the call's functions called, from those calls only
        grown = False
        for f, (_cc, _nc, _tt, _ct, callers) in stats.items():
            edges = [v for c, v in callers.items() if c in callers_ok]
            if f in figures or f == root or f in profiler or not edges or (ours is not None and f in python):
                continue
            figures[f] = tuple(sum(v[i] for v in edges) for i in (0, 2, 3))
            if f[0] != "~":                            # a Python function: its callees are the call's too
                callers_ok.add(f)
            grown = True
    rows = []
    for (file, line, name), (nc, tt, ct) in figures.items():
        where = "built-in" if file == "~" else "/".join(file.rsplit("/", 2)[-2:]) + f":{line}"
        rows.append((nc, tt, ct, name, where))
    rows.sort(key=lambda r: -r[1])
    return CallProfile(tuple(rows), len(set(stats) - set(figures) - {root} - profiler))


def profile_call(fn, *args, top: int = 8, keep: tuple = KEEP, **kwargs) -> str:
    """:func:`call_profile`'s table: the count of the call's functions and the ``top`` by own time."""
    return call_profile(fn, *args, keep=keep, **kwargs).table(top)


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


def paced_ratios(taken: dict, name: str) -> list:
    """Per round, ``name``'s time per loop step over the slower of its GPU time and its CPU time per call: near 1
    where a loop of calls runs at the pace of whichever of the two is slower (the GPU's, or the launches')."""
    return [t.loop_ms / max(t.median, t.cpu_ms) for t in taken[name]]


def _med(values):
    return statistics.median(values)


def paths_table(taken: dict, baseline: str = "cuBLAS") -> str:
    """One line per function: the medians over the rounds of its GPU time, time per loop step and CPU per
    call, and ``baseline``'s loop time over its own (median, and the rounds' range)."""
    width = max(len(n) for n in taken) + 2
    lines = [f"{'':<{width}}{'GPU time':>11}{'loop/step':>12}{'CPU/call':>11}   × {baseline} in a loop (rounds)"]
    for name, ts in taken.items():
        r = sorted(loop_ratios(taken, name, baseline))
        lines.append(f"{name:<{width}} {fmt_ms(_med([t.median for t in ts])):>10}"
                     f" {fmt_ms(_med([t.loop_ms for t in ts])):>11} {fmt_ms(_med([t.cpu_ms for t in ts])):>10}"
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
