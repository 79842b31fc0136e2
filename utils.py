"""Helpers shared by every notebook of the course.

Import it first, before numba or triton: it chooses the **execution mode** once.

* ``"gpu"`` when ``torch.cuda.is_available()``: everything runs for real.
* ``"cpu"`` otherwise: Numba runs in its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``),
  Triton in its interpreter (``TRITON_INTERPRET=1``) and CUDA C through the course's CPU
  emulation (see :func:`load_cuda`). Results are checked the same way; timings mean nothing
  about a GPU.

Force a mode with the environment variable ``COURSE_MODE=gpu|cpu`` (set it before starting
Jupyter, or in ``os.environ`` before ``import utils``).

>>> import utils
>>> print(utils.banner())                          # doctest: +SKIP
>>> n = utils.by_mode(gpu=100_000_000, cpu=10_000)  # problem sizes come from the mode
"""
from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from collections import namedtuple
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent
RESULTS_DIR = ROOT / "results"
MODE_ENV = "COURSE_MODE"


# --------------------------------------------------------------------------------------------
# Execution mode: decided once, here, before numba or triton can read their switches.
# --------------------------------------------------------------------------------------------
def _choose_mode(requested: str | None, cuda_available: bool) -> str:
    """Return ``"gpu"`` or ``"cpu"`` from the requested mode and whether CUDA is usable.

    >>> _choose_mode(None, True), _choose_mode("cpu", True), _choose_mode("", False)
    ('gpu', 'cpu', 'cpu')
    """
    req = (requested or "auto").strip().lower()
    if req not in ("auto", "gpu", "cpu"):
        raise ValueError(f"{MODE_ENV}={requested!r}: use 'gpu', 'cpu' or leave it unset (auto).")
    if req == "gpu" and not cuda_available:
        raise RuntimeError(
            f"{MODE_ENV}=gpu but torch sees no CUDA GPU (torch {torch.__version__}, "
            f"built for CUDA {torch.version.cuda}). Unset {MODE_ENV} to run on the CPU.")
    if req == "auto":
        return "gpu" if cuda_available else "cpu"
    return req


def _set_simulator_switches(mode: str) -> None:
    """Set the environment switches numba and triton read at import / decoration time."""
    # The course launches small grids on purpose (to show indexing); numba would warn each time.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    value = "1" if mode == "cpu" else "0"
    for var, module in (("NUMBA_ENABLE_CUDASIM", "numba"), ("TRITON_INTERPRET", "triton")):
        if module in sys.modules and os.environ.get(var, "0") != value:
            warnings.warn(f"{module} was imported before utils, so {var}={value} may not take "
                          f"effect: restart the kernel and import utils first.", stacklevel=3)
        os.environ[var] = value


MODE: str = _choose_mode(os.environ.get(MODE_ENV), torch.cuda.is_available())
ON_GPU: bool = MODE == "gpu"
DEVICE: torch.device = torch.device("cuda" if ON_GPU else "cpu")
_set_simulator_switches(MODE)


def by_mode(gpu, cpu):
    """Pick the value for the current mode: big problems on a GPU, small ones on the CPU.

    >>> by_mode(gpu=4096, cpu=96) == (4096 if ON_GPU else 96)
    True
    """
    return gpu if ON_GPU else cpu


def device_name() -> str:
    """Name of the device timings are taken on: the GPU's name, or ``"CPU (<model>)"``."""
    if ON_GPU:
        return torch.cuda.get_device_name()
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import platform
    return f"CPU ({model or platform.processor() or platform.machine()})"


def banner() -> str:
    """One line saying where this notebook runs and what that means for its numbers."""
    if ON_GPU:
        p = torch.cuda.get_device_properties(0)
        return (f"Mode gpu: {p.name} (sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, "
                f"{p.total_memory / 2**30:.0f} GiB), torch {torch.__version__}. "
                f"Kernels and timings are real.")
    return ("Mode cpu: no GPU in use. CUDA C runs in the course's CPU emulation, Numba in its "
            "CUDA simulator, Triton in its interpreter; results are checked as on a GPU, but "
            f"timings here say nothing about a GPU. (Set {MODE_ENV}=gpu|cpu to force a mode.)")


def versions() -> dict:
    """Versions of the course's tools (``None`` for one that is missing).

    >>> sorted(versions())[:3]
    ['cuda (torch built for)', 'numba', 'numba-cuda']
    """
    from importlib import metadata

    def dist(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    out = {"python": sys.version.split()[0], "torch": torch.__version__,
           "cuda (torch built for)": torch.version.cuda, "triton": dist("triton"),
           "numba": dist("numba"), "numba-cuda": dist("numba-cuda"), "nvcc": None}
    nvcc = shutil.which("nvcc")
    if nvcc:
        try:
            text = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                  timeout=30).stdout
            m = re.search(r"release ([\d.]+)", text)
            out["nvcc"] = m.group(1) if m else "unknown"
        except (OSError, subprocess.SubprocessError):
            pass
    return out


def gpu_properties() -> dict | None:
    """The GPU's properties that matter for this course, or ``None`` in cpu mode."""
    if not ON_GPU:
        return None
    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "compute capability": f"{p.major}.{p.minor}",
            "SMs": p.multi_processor_count, "memory (GiB)": round(p.total_memory / 2**30, 1),
            "L2 cache (MiB)": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
            "max threads per SM": getattr(p, "max_threads_per_multi_processor", None),
            "warp size": getattr(p, "warp_size", 32)}


# --------------------------------------------------------------------------------------------
# Small helpers the kernels use: the same names in Python, CUDA C, Numba and Triton.
# --------------------------------------------------------------------------------------------
dim3 = namedtuple("dim3", ["x", "y", "z"], defaults=(1, 1))
dim3.__doc__ = """A CUDA ``dim3``: ``dim3(16, 16)`` is ``dim3(x=16, y=16, z=1)``."""


def cdiv(a: int, b: int) -> int:
    """Ceiling division: how many blocks of size ``b`` cover ``a`` items.

    >>> cdiv(10, 4), cdiv(8, 4), cdiv(0, 4)
    (3, 2, 0)
    """
    if isinstance(a, bool) or isinstance(b, bool) or not (
            isinstance(a, int) and isinstance(b, int)):
        raise TypeError(f"cdiv needs integers, got {a!r} and {b!r}")
    if b <= 0:
        raise ValueError(f"cdiv: the divisor must be positive, got {b}")
    return -(-a // b)


def get_sig(fname: str, src: str) -> str:
    """The C++ declaration of function ``fname`` defined in ``src``, ready for ``cpp_src``.

    >>> get_sig("square", "torch::Tensor square(torch::Tensor x) {\\n  return x*x;\\n}")
    'torch::Tensor square(torch::Tensor x);'
    """
    pattern = re.compile(
        r"^[ \t]*((?:template\s*<[^;{]*?>\s*)?"  # optional template header
        r"(?:[\w:<>,*&]+[ \t\n]+[*&]*)+?"         # return type (and qualifiers)
        rf"{re.escape(fname)}\s*\([^;{{]*?\))"    # name and parameter list
        r"\s*(?:const\s*)?\{", re.MULTILINE)
    kernels = set()
    for m in pattern.finditer(src):
        sig = " ".join(m.group(1).split())
        if "__global__" in sig or "__device__" in sig:
            kernels.add(fname)  # kernels are not bound to Python: look for the host function
            continue
        return sig + ";"
    if kernels:
        raise ValueError(f"get_sig: {fname!r} is a kernel (__global__/__device__); Python calls "
                         f"the host function that launches it, so ask for that one's signature")
    host = sorted(set(re.findall(r"\b(\w+)\s*\([^;{]*\)\s*\{", src))
                  - {"if", "for", "while", "switch"}
                  - set(re.findall(r"__(?:global|device)__[^;{(]*?\b(\w+)\s*\(", src)))
    raise ValueError(f"get_sig: no definition of {fname!r} found in the source; host functions "
                     f"defined there: {', '.join(host) or 'none'}")


def show_img(x, figsize=(4, 3), title=None, cmap=None, ax=None, **kwargs):
    """Show an image tensor or array (CHW, HWC or HW) with matplotlib and return the axes.

    matplotlib is imported only when this is called. A 2-D image defaults to a grey map.
    """
    import matplotlib.pyplot as plt
    img = x.detach().cpu() if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if img.ndim == 3 and img.shape[0] in (1, 3, 4) and img.shape[-1] not in (1, 3, 4):
        img = img.permute(1, 2, 0)  # CHW -> HWC
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    if img.ndim not in (2, 3):
        raise ValueError(f"show_img expects an image of 2 or 3 dimensions, got shape "
                         f"{tuple(img.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    ax.imshow(img.numpy(), cmap=cmap or ("gray" if img.ndim == 2 else None), **kwargs)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


def sync() -> None:
    """Wait for all queued GPU work (``torch.cuda.synchronize()``); nothing to wait for on the CPU."""
    if ON_GPU:
        torch.cuda.synchronize()


class capture_printf:
    """Show what C code writes to stdout/stderr (``printf`` in a kernel) in the notebook cell.

    Jupyter only forwards Python's ``sys.stdout``; a kernel's printf goes to the process's C-level
    file descriptors. Wrap the launch: the GPU is synchronized (device printf is flushed then) and
    the C output is printed when the block ends. ``.text`` keeps what was captured.

    >>> with capture_printf() as cap:
    ...     _ = os.write(1, b"hello from C\\n")
    hello from C
    >>> cap.text
    'hello from C\\n'
    """

    def __enter__(self):
        self.text = ""
        try:
            import wurlitzer
        except ImportError:  # no wurlitzer (Windows): C output goes to the terminal instead
            self._pipes = None
            print("(capture_printf: wurlitzer is not installed; C output goes to the terminal)")
            return self
        sys.stdout.flush()
        self._pipes = wurlitzer.pipes(stdout=wurlitzer.PIPE, stderr=wurlitzer.STDOUT)
        self._out, _ = self._pipes.__enter__()
        return self

    def __exit__(self, *exc):
        if self._pipes is None:
            return False
        try:
            sync()
        finally:
            self._pipes.__exit__(*exc)
            self.text = self._out.read()
            self._out.close()
        print(self.text, end="")
        return False


def to_numba(t: torch.Tensor):
    """An array view of tensor ``t`` that a Numba CUDA kernel can read and write, sharing memory
    with ``t`` (so what the kernel writes lands in ``t``): a CUDA device array on a GPU, a NumPy
    array in the simulator (which has no ``cuda.as_cuda_array``).

    >>> t = torch.zeros(3, device=DEVICE); to_numba(t).shape
    (3,)
    """
    if ON_GPU:
        from numba import cuda
        return cuda.as_cuda_array(t.detach())
    if t.device.type != "cpu":
        raise ValueError(f"to_numba: in cpu mode the tensor must be on the CPU, not {t.device}")
    return t.detach().numpy()


# --------------------------------------------------------------------------------------------
# CUDA C from a notebook: cuda_begin and load_cuda
# --------------------------------------------------------------------------------------------
cuda_begin = r"""
#include <torch/extension.h>
#include <stdio.h>
#include <c10/cuda/CUDAException.h>

// Checks with messages a learner can act on. They raise a Python RuntimeError, never exit().
#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor (on the GPU): pass x.to(utils.DEVICE)")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous: call .contiguous() on it first")
#define CHECK_INPUT(x) do { CHECK_CUDA(x); CHECK_CONTIGUOUS(x); } while (0)
// Wrap a CUDA runtime call: a failure becomes a Python exception naming the call and the error.
#define CUDA_CHECK(call) do { cudaError_t err_ = (call); TORCH_CHECK(err_ == cudaSuccess, "CUDA error: ", cudaGetErrorString(err_), " in ", #call); } while (0)

inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b; }
"""


def _check_funcs(cpp_src: str, funcs) -> list:
    if isinstance(funcs, str):
        funcs = [funcs]
    funcs = list(funcs)
    if not funcs:
        raise ValueError("load_cuda: funcs is empty: name the functions Python should call")
    for f in funcs:
        if not re.fullmatch(r"[A-Za-z_]\w*", f):
            raise ValueError(f"load_cuda: {f!r} is not a C++ function name")
        if not re.search(rf"\b{f}\s*\(", cpp_src):
            raise ValueError(f"load_cuda: funcs names {f!r} but cpp_src declares no such function; "
                             f"add its declaration, e.g. utils.get_sig({f!r}, cuda_src)")
    return funcs


def load_cuda(cuda_src: str, cpp_src: str, funcs, *, opt: bool = True, verbose: bool = False,
              fast: bool = True, extra_cuda_cflags=()):
    """Compile CUDA C (kernels + torch host functions) and return a module with ``funcs``.

    ``cuda_src`` usually starts with :data:`cuda_begin`; ``cpp_src`` declares each function in
    ``funcs`` (:func:`get_sig` writes a declaration). ``opt=False`` builds for debugging
    (``-O0 -G``). Builds are cached by content: an unchanged source loads instantly, an edited
    kernel recompiles only the kernels.

    * gpu mode: nvcc, with the kernels compiled apart from the torch headers (see cuda_build.py);
      ``fast=False`` uses ``torch.utils.cpp_extension.load_inline`` as one nvcc unit instead.
    * cpu mode: the same source runs through the course's CPU emulation of CUDA (cuda_emu.py).

    A compile error raises with the compiler's own error lines first; the kernel stays alive.
    """
    funcs = _check_funcs(cpp_src, funcs)
    if not ON_GPU:
        import cuda_emu
        return cuda_emu.load(cuda_src, cpp_src, funcs, opt=opt, verbose=verbose)
    import cuda_build
    if fast:
        try:
            return cuda_build.build_split(cuda_src, cpp_src, funcs, opt=opt,
                                          extra_cuda_cflags=extra_cuda_cflags, verbose=verbose)
        except cuda_build.NeedsClassicBuild as e:
            if verbose:
                print(f"load_cuda: building as one nvcc unit ({e})")
    return _load_inline_classic(cuda_src, cpp_src, funcs, opt, verbose, extra_cuda_cflags)


def _load_inline_classic(cuda_src, cpp_src, funcs, opt, verbose, extra_cuda_cflags):
    """One nvcc unit through load_inline, with real optimisation flags and only this GPU's arch."""
    import cuda_build
    from torch.utils.cpp_extension import load_inline
    flags = (["-O3", "-lineinfo"] if opt else ["-O0", "-G", "-g"]) + list(extra_cuda_cflags)
    key = cuda_build._digest(cuda_src, cpp_src, *funcs, *flags)
    build_dir = cuda_build.CACHE / "inline" / key
    build_dir.mkdir(parents=True, exist_ok=True)
    major, minor = torch.cuda.get_device_capability()
    old = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    try:
        return load_inline(f"course_inline_{key}", cpp_sources=[cpp_src],
                           cuda_sources=[f'#line 1 "{cuda_build.SOURCE_NAME}"\n' + cuda_src],
                           functions=funcs, extra_cuda_cflags=flags, extra_cflags=["-O2"],
                           build_directory=str(build_dir), verbose=verbose)
    except RuntimeError as e:
        cuda_build.last_log = str(e)
        raise cuda_build.CudaBuildError(cuda_build.explain_errors(
            str(e), cuda_src, "the CUDA source does not build")) from None
    finally:
        if old is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = old


def last_build_log() -> str:
    """The full compiler output of the last :func:`load_cuda` build in this session."""
    mod = sys.modules.get("cuda_build" if ON_GPU else "cuda_emu")
    return getattr(mod, "last_log", "") or "(no build yet in this session)"


# --------------------------------------------------------------------------------------------
# Checking: compare with a reference, and poison outputs so unwritten elements fail.
# --------------------------------------------------------------------------------------------
class CheckFailed(AssertionError):
    """Raised by :func:`check` when a result does not match its reference."""


@dataclass
class Checked:
    """What :func:`check` found; its printed form is the same on a GPU and on the CPU."""
    name: str
    atol: float
    rtol: float
    max_abs: float
    max_rel: float
    n: int

    def __repr__(self):
        return f"{self.name}: OK (matches the reference within atol={self.atol:g}, rtol={self.rtol:g})"


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` in place with a value no kernel writes by accident (NaN, or the most negative
    integer), so that elements a kernel forgets to write fail :func:`check`."""
    if t.is_floating_point() or t.is_complex():
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        raise TypeError("poison_: a bool tensor has no value to poison with")
    return t.fill_(torch.iinfo(t.dtype).min)


def poisoned(*size, dtype=torch.float32, device=None) -> torch.Tensor:
    """A new tensor filled with poison (see :func:`poison_`), on ``DEVICE`` unless told.

    >>> poisoned(2, 3).isnan().all().item()
    True
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    return poison_(torch.empty(size, dtype=dtype, device=DEVICE if device is None else device))


def check(out, ref, atol: float = 1e-5, rtol: float = 1e-5, name: str = "output") -> Checked:
    """Check ``out`` against ``ref`` elementwise: ``|out - ref| <= atol + rtol * |ref|``.

    Both are compared in float64 on the CPU. NaN in ``out`` (a poisoned element never written)
    always fails. Raises :class:`CheckFailed` with the number of bad elements, the first bad
    index, and the largest absolute and relative errors; returns a :class:`Checked` otherwise.

    >>> check(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]), name="demo")
    demo: OK (matches the reference within atol=1e-05, rtol=1e-05)
    """
    o = torch.as_tensor(out).detach().to("cpu", torch.float64)
    r = torch.as_tensor(ref).detach().to("cpu", torch.float64)
    if o.shape != r.shape:
        raise CheckFailed(f"{name}: shape {tuple(o.shape)} but the reference has "
                          f"{tuple(r.shape)}")
    diff = (o - r).abs()
    bad = ~(diff <= atol + rtol * r.abs())  # NaN anywhere compares False, so it is bad
    bad |= o.isnan() & ~r.isnan()
    bad &= ~(o.isnan() & r.isnan())  # NaN where the reference has NaN is a match
    finite = diff[torch.isfinite(diff)]
    max_abs = finite.max().item() if finite.numel() else 0.0
    rel = diff / r.abs().clamp_min(1e-300)
    rel = rel[torch.isfinite(rel)]
    max_rel = rel.max().item() if rel.numel() else 0.0
    nbad = int(bad.sum())
    if nbad:
        idx = tuple(int(i) for i in bad.nonzero()[0])
        idx_s = idx[0] if len(idx) == 1 else idx
        lines = [f"{name}: {nbad} of {o.numel()} elements differ from the reference "
                 f"(atol={atol:g}, rtol={rtol:g})",
                 f"  first bad index {idx_s}: got {o[idx].item()!r}, expected {r[idx].item()!r}",
                 f"  max abs error {max_abs:.3g}, max rel error {max_rel:.3g} (finite ones)"]
        nnan = int((o.isnan() & ~r.isnan()).sum())
        if nnan:
            lines.append(f"  {nnan} elements are NaN: never written by the kernel? (outputs "
                         f"from utils.poisoned start as NaN)")
        raise CheckFailed("\n".join(lines))
    return Checked(name, atol, rtol, max_abs, max_rel, o.numel())


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------
@dataclass
class Timing:
    """Run times of one callable, in milliseconds. ``str()`` says how they were taken."""
    times_ms: list
    method: str
    device: str
    on_gpu: bool

    @property
    def median(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times_ms)

    @property
    def min(self) -> float:
        return min(self.times_ms)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.times_ms)

    @property
    def n(self) -> int:
        return len(self.times_ms)

    def __str__(self):
        note = "" if self.on_gpu else " (CPU wall clock: says nothing about a GPU)"
        return f"{fmt_ms(self.median)} median of {self.n} runs, {self.method}{note}"


def fmt_ms(ms: float) -> str:
    """Milliseconds in a readable unit.

    >>> fmt_ms(0.0123), fmt_ms(2.5), fmt_ms(1500)
    ('12.3 µs', '2.500 ms', '1.50 s')
    """
    if ms < 1:
        return f"{ms * 1e3:.1f} µs"
    if ms < 1000:
        return f"{ms:.3f} ms"
    return f"{ms / 1e3:.2f} s"


def fmt_num(x: float) -> str:
    """A rate with three significant digits and thousands separators.

    >>> fmt_num(2912.4), fmt_num(38.27), fmt_num(0.1234)
    ('2,912', '38.3', '0.123')
    """
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


_l2_flush_buffer = None


def flush_l2() -> None:
    """Evict the GPU's L2 cache by writing a buffer twice its size (a no-op on the CPU)."""
    global _l2_flush_buffer
    if not ON_GPU:
        return
    if _l2_flush_buffer is None:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 2**20
        _l2_flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device=DEVICE)
    _l2_flush_buffer.zero_()


def bench(fn, *args, warmup: int = 3, reps: int | None = None, budget_ms: float | None = None,
          l2_flush: bool = False, max_reps: int = 1000, **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``: warm up, repeat, and return all run times (use ``.median``).

    On a GPU each run is bracketed by CUDA events on the current stream, so only device work
    is timed; with ``l2_flush=True`` the L2 cache is emptied before each run (outside the timed
    region), which is what a kernel sees when its input is not already cached. On the CPU runs
    are timed with ``time.perf_counter``: fine for torch on the CPU, meaningless for simulators.

    ``reps=None`` repeats until about ``budget_ms`` of run time (300 ms on a GPU, 1 s on the
    CPU) is spent, at least 5 times on a GPU and 3 on the CPU, at most ``max_reps``.

    >>> t = bench(torch.ones, 1000, reps=5)
    >>> t.n, t.median > 0
    (5, True)
    """
    if not callable(fn):
        raise TypeError(f"bench needs a callable, got {type(fn).__name__}")
    if budget_ms is None:
        budget_ms = 300.0 if ON_GPU else 1000.0
    for _ in range(warmup):
        fn(*args, **kwargs)
    if ON_GPU:
        return _bench_gpu(fn, args, kwargs, reps, budget_ms, l2_flush, max_reps)
    return _bench_cpu(fn, args, kwargs, reps, budget_ms, max_reps)


def _bench_gpu(fn, args, kwargs, reps, budget_ms, l2_flush, max_reps):
    torch.cuda.synchronize()
    if reps is None:  # estimate one run from a short burst, then fill the budget
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            fn(*args, **kwargs)
        end.record()
        torch.cuda.synchronize()
        one = max(start.elapsed_time(end) / 3, 1e-3)
        reps = int(min(max_reps, max(5, budget_ms / one)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        if l2_flush:
            flush_l2()
        s.record()
        fn(*args, **kwargs)
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    method = "CUDA events" + (", L2 flushed before each run" if l2_flush else "")
    return Timing(times, method, device_name(), True)


def _bench_cpu(fn, args, kwargs, reps, budget_ms, max_reps):
    times = []
    deadline = None if reps is not None else time.perf_counter() + budget_ms / 1e3
    while True:
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        times.append((time.perf_counter() - t0) * 1e3)
        if reps is not None:
            if len(times) >= reps:
                break
        elif len(times) >= max_reps or (len(times) >= 3 and time.perf_counter() > deadline):
            break
    return Timing(times, "wall clock", device_name(), False)


# --------------------------------------------------------------------------------------------
# Ceilings (measured once per device) and achieved rates
# --------------------------------------------------------------------------------------------
CEILINGS_FILE = RESULTS_DIR / "ceilings.json"
CEILING_LABELS = {
    "copy": "copy bandwidth (bytes read + written)",
    "fp32": "fp32 matmul (TF32 off)",
    "tf32": "fp32 matmul with TF32 tensor cores",
    "fp16": "fp16 matmul",
    "bf16": "bf16 matmul",
}
_ceilings_cache: dict = {}


def _measure_ceilings() -> dict:
    """Measure copy bandwidth (GB/s) and matmul rates (TFLOP/s) of the current device."""
    out = {}
    n_copy = by_mode(gpu=2**28, cpu=2**24)  # 1 GiB or 64 MiB of fp32 per buffer
    src = torch.rand(n_copy, device=DEVICE)
    dst = torch.empty_like(src)
    t = bench(dst.copy_, src)
    out["copy"] = 2 * src.nbytes / (t.median * 1e-3) / 1e9
    del src, dst
    n = by_mode(gpu=8192, cpu=512)
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
              "bf16": torch.bfloat16} if ON_GPU else {"fp32": torch.float32}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for key, dt in dtypes.items():
            torch.backends.cuda.matmul.allow_tf32 = key == "tf32"
            a = torch.randn(n, n, device=DEVICE, dtype=dt)
            b = torch.randn(n, n, device=DEVICE, dtype=dt)
            t = bench(torch.matmul, a, b)
            out[key] = 2 * n**3 / (t.median * 1e-3) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    return out


def ceilings(refresh: bool = False) -> dict:
    """Measured ceilings of this device: ``{"copy": GB/s, "fp32": TFLOP/s, ...}``.

    Measured once per device name. A GPU's are kept in ``results/ceilings.json`` (a few
    seconds to measure; ``refresh=True`` measures again); the CPU's only for this session.
    """
    name = device_name()
    if not refresh and name in _ceilings_cache:
        return _ceilings_cache[name]
    stored = _read_json(CEILINGS_FILE)
    if ON_GPU and not refresh and name in stored:
        _ceilings_cache[name] = stored[name]["ceilings"]
        return _ceilings_cache[name]
    measured = {k: float(f"{v:.4g}") for k, v in _measure_ceilings().items()}
    _ceilings_cache[name] = measured
    if ON_GPU:
        stored[name] = {"ceilings": measured, "measured": _now(), "torch": torch.__version__}
        RESULTS_DIR.mkdir(exist_ok=True)
        CEILINGS_FILE.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    return measured


@dataclass
class Rate:
    """An achieved rate and its share of this device's measured ceiling."""
    value: float       # in GB/s or TFLOP/s
    unit: str          # "GB/s" or "TFLOP/s"
    ceiling: float
    ceiling_key: str

    @property
    def pct(self) -> float:
        return 100 * self.value / self.ceiling

    def __str__(self):
        where = "this GPU's" if ON_GPU else "this CPU's"
        return (f"{fmt_num(self.value)} {self.unit} = {self.pct:.0f} % of {where} measured "
                f"{CEILING_LABELS[self.ceiling_key]} ({fmt_num(self.ceiling)} {self.unit})")


def rate(t, nbytes: int | None = None, flops: int | None = None, kind: str | None = None) -> Rate:
    """Achieved GB/s (give ``nbytes`` moved) or TFLOP/s (give ``flops``) of a :class:`Timing`
    (or a time in ms), with the % of the measured ceiling: ``kind`` is ``"copy"`` for bytes and
    ``"fp32"`` (default), ``"tf32"``, ``"fp16"`` or ``"bf16"`` for flops."""
    if (nbytes is None) == (flops is None):
        raise ValueError("rate: give exactly one of nbytes= or flops=")
    ms = t.median if isinstance(t, Timing) else float(t)
    if not ms > 0:
        raise ValueError(f"rate: the time must be positive, got {ms} ms")
    if nbytes is not None:
        kind = kind or "copy"
        value, unit = nbytes / (ms * 1e-3) / 1e9, "GB/s"
    else:
        kind = kind or "fp32"
        value, unit = flops / (ms * 1e-3) / 1e12, "TFLOP/s"
    ceil = ceilings()
    if kind not in ceil:
        raise ValueError(f"rate: no measured ceiling {kind!r} on this device; have {sorted(ceil)}")
    return Rate(value, unit, ceil[kind], kind)


# --------------------------------------------------------------------------------------------
# Results: every GPU benchmark lands in results/<device>.csv; the README table is built from it.
# --------------------------------------------------------------------------------------------
RESULT_FIELDS = ["when", "notebook", "kernel", "size", "device", "ms", "rate", "unit",
                 "pct_of_ceiling", "ceiling", "baseline", "baseline_ms", "vs_baseline"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _slug(name: str) -> str:
    """File-name-safe form of a device name: ``'NVIDIA H100 80GB HBM3'`` -> ``'nvidia-h100-80gb-hbm3'``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def results_file(device: str | None = None) -> Path:
    """The CSV file that holds the results of ``device`` (default: this one)."""
    return RESULTS_DIR / f"{_slug(device or device_name())}.csv"


def record(notebook: str, kernel: str, size: str, t: Timing, achieved: Rate | None = None,
           baseline: Timing | None = None, baseline_name: str = "torch") -> dict | None:
    """Append one benchmark to this GPU's results file and return the row.

    ``baseline`` is the timing of the torch/cuBLAS version of the same work in the same run;
    ``vs_baseline`` is its time over ours (1.0 = as fast as torch, above 1 = faster). On the CPU
    nothing is written (simulator timings are not results) and ``None`` is returned.
    """
    if not t.on_gpu:
        return None
    row = {"when": _now(), "notebook": notebook, "kernel": kernel, "size": size,
           "device": t.device, "ms": f"{t.median:.5g}",
           "rate": f"{achieved.value:.4g}" if achieved else "",
           "unit": achieved.unit if achieved else "",
           "pct_of_ceiling": f"{achieved.pct:.1f}" if achieved else "",
           "ceiling": achieved.ceiling_key if achieved else "",
           "baseline": baseline_name if baseline else "",
           "baseline_ms": f"{baseline.median:.5g}" if baseline else "",
           "vs_baseline": f"{baseline.median / t.median:.3f}" if baseline else ""}
    path = results_file(t.device)
    RESULTS_DIR.mkdir(exist_ok=True)
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RESULT_FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    return row


def stored_results(device: str | None = None, notebook: str | None = None) -> list:
    """The latest result per (notebook, kernel, size) from a results file, oldest first.

    ``device`` may be a device name or a results file's stem (``"nvidia-h100-80gb-hbm3"``);
    by default every results file is read. On the CPU the notebooks use this to show the numbers
    stored from a real GPU run.
    """
    paths = [results_file(device)] if device else sorted(RESULTS_DIR.glob("*.csv"))
    latest = {}
    for path in paths:
        if not path.exists():
            continue
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                if notebook is None or row["notebook"] == notebook:
                    latest[(row["device"], row["notebook"], row["kernel"], row["size"])] = row
    return list(latest.values())


def results_markdown(rows: list) -> str:
    """A Markdown table of result rows (as from :func:`stored_results`)."""
    head = ("| notebook | kernel | size | device | time | achieved | % of ceiling | "
            "vs baseline |\n|---|---|---|---|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        achieved = f"{fmt_num(float(r['rate']))} {r['unit']}" if r["rate"] else ""
        pct = f"{float(r['pct_of_ceiling']):.0f} % {r['ceiling']}" if r["pct_of_ceiling"] else ""
        vs = f"{float(r['vs_baseline']):.2f}× {r['baseline']}" if r["vs_baseline"] else ""
        cell = {k: str(v).replace("|", "\\|") for k, v in r.items()}  # a | would split a cell
        lines.append(f"| {cell['notebook']} | {cell['kernel']} | {cell['size']} | {cell['device']} | "
                     f"{fmt_ms(float(r['ms']))} | {achieved} | {pct} | {vs} |")
    return "\n".join(lines)


def report(notebook: str, kernel: str, size: str, t: Timing, baseline: Timing | None = None,
           nbytes: int | None = None, flops: int | None = None, kind: str | None = None,
           baseline_name: str = "torch") -> str:
    """Turn a timing into one printed line (time, achieved rate with % of the ceiling, ratio to
    the baseline), record it on a GPU (:func:`record`), and return the line.

    Give ``nbytes`` (bytes the work must move) or ``flops``, as for :func:`rate`.
    """
    achieved = rate(t, nbytes=nbytes, flops=flops, kind=kind) if (nbytes or flops) else None
    record(notebook, kernel, size, t, achieved, baseline, baseline_name)
    parts = [f"{kernel}: {fmt_ms(t.median)}"]
    if achieved:
        parts.append(f"{fmt_num(achieved.value)} {achieved.unit} = {achieved.pct:.0f} % of "
                     f"{kind or ('copy' if nbytes else 'fp32')} ceiling")
    if baseline:
        parts.append(f"{baseline.median / t.median:.2f}× {baseline_name}")
    line = ", ".join(parts) + ("" if t.on_gpu else "  (CPU: not a GPU figure)")
    print(line)
    return line


# --------------------------------------------------------------------------------------------
# Exercises that check themselves
# --------------------------------------------------------------------------------------------
def exercise(title: str, answer, check, hint: str = "") -> None:
    """Check a learner's ``answer`` with ``check(answer)`` and print one line about it.

    ``check`` says no by returning False or raising (its message is shown); a check that returns
    None counts as passed, so assert-style checks work. An ``answer`` of ``None`` means
    "not attempted yet". Never raises itself, so a notebook with open exercises still runs top to
    bottom.

    >>> exercise("blocks for 1000 items", 4, lambda a: a == cdiv(1000, 256))
    ✅ blocks for 1000 items: correct
    """
    if answer is None:
        print(f"⬜ {title}: not answered yet" + (f" (hint: {hint})" if hint else ""))
        return
    try:
        ok = check(answer)
        why = ""
    except Exception as e:  # the learner's answer may fail in any way: report, do not raise
        first_line = (str(e).strip().splitlines() or [""])[0]
        ok, why = False, f"{type(e).__name__}: {first_line}".rstrip(": ")
    if ok is None or ok:
        print(f"✅ {title}: correct")
    else:
        print(f"❌ {title}: not yet" + (f" ({why})" if why else "") + (f"; hint: {hint}" if hint else ""))
