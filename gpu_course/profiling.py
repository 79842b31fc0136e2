"""Reading what the profilers report: Nsight Compute's text output (``run_ncu`` / ``parse_ncu``), the
rows the PyTorch profiler adds for its own work (``PROFILER_ROWS``), and the kernels of a profile
(``kernel_times``)."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

# Rows of a torch.profiler table that are the profiler's own work, not the program's: CUPTI (the
# library that collects the kernels) asking for a buffer to store its records.
PROFILER_ROWS = ("Activity Buffer Request",)

_NCU_ROW = re.compile(r"^\s*(DRAM Throughput|Memory Throughput|Duration|Elapsed Cycles|DRAM Frequency|"
                      r"SM Frequency|L1/TEX Hit Rate|L2 Hit Rate|Mem Busy|Max Bandwidth|"
                      r"Compute \(SM\) Throughput)\s+(\S+)\s+([\d.,]+)\s*$")
_TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
_RATE = {"Gbyte/s": 1e9, "Tbyte/s": 1e12, "Mbyte/s": 1e6}


def kernel_times(prof) -> dict:
    """The CUDA kernels a ``torch.profiler`` profile saw: ``{name: (calls, total GPU µs)}``, empty
    without CUDA activity. The profiler's own rows (:data:`PROFILER_ROWS`) are left out.

    >>> kernel_times(type("P", (), {"key_averages": lambda self: []})())
    {}
    """
    import torch
    out = {}
    for e in prof.key_averages():
        if (e.device_type == torch.autograd.DeviceType.CUDA and e.self_device_time_total > 0
                and e.key not in PROFILER_ROWS):
            out[e.key] = (e.count, e.self_device_time_total)
    return out


def gpu_kernels(fn, *args, **kwargs) -> list:
    """Names of the GPU kernels one call of ``fn(*args, **kwargs)`` runs, in the order they started,
    recorded by ``torch.profiler`` (memory copies and fills left out). ``fn`` is called once first, so
    that compiling, autotuning and allocation stay out of the profiled call. Needs a GPU."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn(*args, **kwargs)
    torch.cuda.synchronize()
    with warnings.catch_warnings():  # torch says once that its profiler clears events each cycle: one cycle here
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn(*args, **kwargs)
            torch.cuda.synchronize()
        events = prof.events()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset"))]
    return [e.name for e in sorted(kernels, key=lambda e: e.time_range.start)]


def find_ncu() -> str | None:
    """Path of Nsight Compute's command-line tool ``ncu``, or ``None`` where it is not installed."""
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu",
                 *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))):
        if cand and os.path.exists(cand):
            return cand
    return None


@dataclass
class NcuReport:
    """What ncu reported for one kernel: ``rows`` of (metric, unit, value as printed), the line naming
    the kernel, and ``problem``: why there are no rows (no ncu, no permission to read counters...)."""
    rows: list = field(default_factory=list)
    kernel: str | None = None
    command: str = ""
    problem: str | None = None

    def metric(self, name: str, units: dict) -> float | None:
        """The value of the first row called ``name`` whose unit is in ``units``, times its factor.

        >>> parse_ncu("    Duration     us     262.34").metric("Duration", {"us": 1.0})
        262.34
        """
        return next((float(v.replace(",", "")) * units[u] for n, u, v in self.rows if n == name and u in units),
                    None)

    @property
    def duration_us(self):
        """The kernel's ``Duration`` in µs (``None`` if not reported)."""
        return self.metric("Duration", _TIME_US)

    @property
    def bytes_per_s(self):
        """``Memory Throughput`` in bytes per second (the memory section's row, not the % one)."""
        return self.metric("Memory Throughput", _RATE)

    @property
    def dram_pct(self):
        """``DRAM Throughput``: achieved DRAM bandwidth as a % of the hardware's peak."""
        return self.metric("DRAM Throughput", {"%": 1.0})

    @property
    def sm_pct(self):
        """``Compute (SM) Throughput`` as a % of the SMs' peak."""
        return self.metric("Compute (SM) Throughput", {"%": 1.0})

    def __str__(self):
        lines = [f"$ {self.command}"] if self.command else []
        if self.problem:
            return "\n".join(lines + [self.problem])
        lines.append(f"kernel: {(self.kernel or '?')[:120]}")
        lines += [f"  {name:<23} {value:>12} {unit}" for name, unit, value in self.rows]
        return "\n".join(lines)


def parse_ncu(text: str, returncode: int = 0) -> NcuReport:
    """Read the metrics of ncu's text output (``--section SpeedOfLight --section
    MemoryWorkloadAnalysis``) into an :class:`NcuReport`.

    >>> r = parse_ncu("==PROF== Profiling \\"vectorized_elementwise_kernel\\": 100%\\n"
    ...               "    DRAM Throughput      %     88.65\\n    Memory Throughput  Tbyte/s   2.97")
    >>> r.dram_pct, r.bytes_per_s, r.kernel.startswith("==PROF==")
    (88.65, 2970000000000.0, True)
    """
    lines = text.splitlines()
    rows = [m.groups() for m in map(_NCU_ROW.match, lines) if m]
    kernel = next((l.strip() for l in lines if "==PROF== Profiling" in l), None)
    report = NcuReport(rows=rows, kernel=kernel)
    if not rows:
        errs = [l.strip() for l in lines if "ERR" in l or "rror" in l][:5]
        report.problem = "\n  ".join([f"ncu ran (exit code {returncode}) but reported no metrics:", *errs])
        if any("ERR_NVGPUCTRPERM" in e for e in errs):
            report.problem += ("\nERR_NVGPUCTRPERM means this user may not read GPU counters: see "
                               "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    return report


def run_ncu(script, kernel_regex: str, sections=("SpeedOfLight", "MemoryWorkloadAnalysis"),
            save_to=None, timeout: float = 300, root=None) -> NcuReport:
    """Profile the first kernel whose name matches ``kernel_regex`` in ``python3 script`` with Nsight
    Compute, reading ``sections``; the full text goes to ``save_to`` if given. Never raises: a missing
    ncu, a failure or a time-out comes back as the report's ``problem``. ``root``: paths in the command
    shown are printed relative to it."""
    script = Path(script)
    shown = script.relative_to(root) if root and script.is_relative_to(root) else script
    ncu = find_ncu()
    if ncu is None:
        return NcuReport(problem="skipped: ncu (Nsight Compute) is not installed here (Colab has none); it comes "
                                 "with the CUDA toolkit: put it on PATH to run this.")
    cmd = [ncu, "--kernel-name", f"regex:{kernel_regex}", "--launch-count", "1"]
    for s in sections:
        cmd += ["--section", s]
    command = " ".join(["ncu", *cmd[1:], "python3", str(shown)])
    try:
        r = subprocess.run(cmd + [sys.executable, str(script)], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return NcuReport(command=command, problem=f"ncu failed: {type(e).__name__}: {e}")
    if save_to is not None:
        Path(save_to).write_text(r.stdout + r.stderr)
    report = parse_ncu(r.stdout + ("" if r.stdout.strip() else r.stderr), r.returncode)
    report.command = command
    return report


_CELL_FILE = re.compile(r"/tmp/ipykernel_\d+/\d+\.py")
_ADDRESS = re.compile(r"_at_0x[0-9a-f]+")


def readable_frames(stack: str) -> str:
    """A Python stack as the profiler writes it, with a notebook cell's temporary file shown as
    ``<cell>`` and object addresses dropped (they change on every run).

    >>> readable_frames("/tmp/ipykernel_663/2205229206.py(2):_f;<built-in_method_square_of_type_object_at_0x7f5e81>")
    '<cell>(2):_f;<built-in_method_square_of_type_object>'
    """
    return _ADDRESS.sub("", _CELL_FILE.sub("<cell>", stack))
