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


def run_ncu_script(args: list, script: str, build: dict, timeout: float = 300) -> tuple:
    """Run ``ncu *args python3 script.py build.json`` in a temporary folder, where ``script`` (Python source) reads
    ``build`` (a dict, written as JSON) from the path in its ``sys.argv[1]``: ``(the completed process, None)``, or
    ``(None, why)`` where ncu is not installed or could not be run."""
    import json
    import tempfile
    ncu = find_ncu()
    if ncu is None:
        return None, "ncu not found: Nsight Compute comes with the CUDA toolkit; put its ncu on PATH."
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "build.json").write_text(json.dumps(build))
        (Path(d) / "script.py").write_text(script)
        try:
            return subprocess.run([ncu, *args, sys.executable, str(Path(d) / "script.py"), str(Path(d) / "build.json")],
                                  capture_output=True, text=True, timeout=timeout), None
        except (OSError, subprocess.SubprocessError) as e:
            return None, f"ncu failed: {type(e).__name__}: {e}"


def ncu_missing(r, what: str) -> str:
    """Why an ncu run ``r`` (a completed process) gave no metrics for ``what``: its exit code and its first error
    lines."""
    errs = [l for l in (r.stdout + r.stderr).splitlines() if "ERR" in l or "rror" in l][:5]
    return "\n  ".join([f"ncu ran (exit code {r.returncode}) but reported no metrics for {what}:", *errs])


def ncu_counted(args: list, shown: str, script: str, build: dict, parse, wanted: int, what: str, empty,
                timeout: float = 300):
    """:func:`run_ncu_script`'s run read by ``parse`` (stdout -> an object with ``values``, ``command`` and
    ``problem``, raising ValueError on text it cannot read): that object with ``command = shown``; ``empty()`` where
    ncu is missing, fails or gives text ``parse`` refuses; ``problem`` says why wherever fewer than ``wanted``
    entries (``what``) came back."""
    r, why = run_ncu_script(args, script, build, timeout)
    if r is None:
        out = empty()
        out.problem, out.command = why, shown if why.startswith("ncu failed") else ""
        return out
    try:
        out = parse(r.stdout)
    except ValueError:
        out = empty()
    out.command = shown
    if len(out.values) != wanted:
        out.problem = ncu_missing(r, what)
    return out


_CELL_FILE = re.compile(r"/tmp/ipykernel_\d+/\d+\.py")
_ADDRESS = re.compile(r"[_ ]at[_ ]0x[0-9a-f]+")


def readable_frames(stack: str) -> str:
    """A Python stack as the profiler writes it, with a notebook cell's temporary file shown as
    ``<cell>`` and object addresses dropped (they change on every run).

    >>> readable_frames("/tmp/ipykernel_663/2205229206.py(2):_f;<built-in_method_square_of_type_object_at_0x7f5e81>")
    '<cell>(2):_f;<built-in_method_square_of_type_object>'
    """
    return _ADDRESS.sub("", _CELL_FILE.sub("<cell>", stack))


def operator_folded(prof, through: str, metric: str = "self_cpu_time_total") -> dict:
    """Folded stacks of a ``with_stack=True`` profile that each end at an operator: for every ``aten::`` event
    whose Python stack passes through a frame holding ``through``, the frames from that one down, then the
    operators that called it and its own name (``three_squares;...;aten::square;aten::pow``), with the event's
    ``metric`` (``self_cuda_time_total`` is read as the device time), summed over the events that share the
    stack: ``{stack: µs}``, largest first. ``export_stacks``'s file has one line per event and ends each stack
    at the innermost Python frame, which names no operator where Python calls C directly (``a * a``)."""
    attr = metric.replace("cuda", "device")
    sums: dict = {}
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        frames = [readable_frames(f) for f in reversed(e.stack or [])]   # outermost first
        value = float(getattr(e, attr))
        if value <= 0 or not any(through in f for f in frames):
            continue
        ops, parent = [e.name], e.cpu_parent
        while parent is not None and parent.name.startswith("aten::"):
            ops.insert(0, parent.name)
            parent = parent.cpu_parent
        key = frames_from(";".join(frames + ops), through)
        sums[key] = sums.get(key, 0.0) + value
    return dict(sorted(sums.items(), key=lambda kv: -kv[1]))


def frames_from(stack: str, name: str, sep: str = ";") -> str:
    """The frames of ``stack`` (outermost first, joined by ``sep``) from the innermost one that
    holds ``name`` down; the whole stack if none does.

    >>> frames_from("<module>;run;three_squares;pow", "three_squares")
    'three_squares;pow'
    """
    frames = stack.split(sep)
    hits = [i for i, f in enumerate(frames) if name in f]
    return sep.join(frames[hits[-1]:] if hits else frames)


# ---- Nsight Compute's raw metrics, and what limits a kernel -----------------------------------------------
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
_PER_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
# ncu's units (it scales them unless told --print-units base) to bytes, cycles, % and, for time, µs
TO_BASE_UNITS = {"": 1.0, "%": 1.0, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "cycle": 1.0,
                 "Kcycle": 1e3, "Mcycle": 1e6, **_PER_US}


def ncu_raw_rows(text: str) -> list:
    """The kernels of ``ncu --import REPORT --csv --page raw``: one dict per profiled launch, in launch order,
    ``{metric: (value, unit)}`` (values as floats where they are numbers, thousands separators removed), plus
    ``"Kernel Name"`` and the other identifying columns as plain strings.

    >>> rows = ncu_raw_rows('"ID","Kernel Name","gpu__time_duration.sum"\\n"","","usecond"\\n"0","k(int)","1,234.5"\\n')
    >>> rows[0]["Kernel Name"], rows[0]["gpu__time_duration.sum"]
    ('k(int)', (1234.5, 'usecond'))
    """
    import csv
    import io
    table = [r for r in csv.reader(io.StringIO(text)) if r]
    if len(table) < 2 or "Kernel Name" not in table[0]:
        raise ValueError("ncu_raw_rows: not the output of `ncu --csv --page raw` (no 'Kernel Name' column)")
    header, units = table[0], table[1]
    out = []
    for r in table[2:]:
        row = {}
        for name, unit, value in zip(header, units, r):
            if not unit and not name.count("__"):
                row[name] = value
                continue
            try:
                row[name] = (float(value.replace(",", "")), unit)
            except ValueError:
                row[name] = (value, unit)
        out.append(row)
    return out


def limiters(row: dict, stalls: int = 3) -> dict:
    """What says why a kernel runs at the speed it does, from one row of :func:`ncu_raw_rows` (``ncu --set full``):

    * ``time_us``: its duration under ncu (which locks the clocks at base: longer than a normal run);
    * ``tensor_pct``: % of the elapsed cycles the tensor pipe (mma.sync, WMMA and wgmma alike) was busy;
    * ``issue_pct``: % of cycles a scheduler issued an instruction; ``warps_pct``: active warps, % of the SM's 64;
    * ``registers`` per thread and ``blocks_per_sm``: how many blocks fit on an SM (the tightest of the limits by
      registers, shared memory, warps and blocks);
    * ``ld_conflicts``, ``st_conflicts``: shared-memory bank conflicts of loads (ldmatrix included) and stores;
      ``ld_wavefronts``: the passes shared-memory loads took (one per conflict-free request);
    * ``stalls``: the ``stalls`` largest reasons a warp waited, as (reason, warps per issued instruction).

    A metric the row lacks comes back as None.
    """
    def val(name):
        v = row.get(name)
        return v[0] if isinstance(v, tuple) and isinstance(v[0], float) else None
    t = row.get("gpu__time_duration.sum")
    time_us = t[0] * _PER_US.get(t[1], float("nan")) if isinstance(t, tuple) and isinstance(t[0], float) else None
    limits = [val(f"launch__occupancy_limit_{k}") for k in ("registers", "shared_mem", "warps", "blocks")]
    reasons = sorted(((v[0], m.group(1)) for k, v in row.items() if (m := _STALL.match(k))
                      and isinstance(v, tuple) and isinstance(v[0], float)), reverse=True)
    return dict(
        time_us=time_us,
        tensor_pct=val("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
        issue_pct=val("smsp__issue_active.avg.pct_of_peak_sustained_active"),
        warps_pct=val("sm__warps_active.avg.pct_of_peak_sustained_active"),
        registers=val("launch__registers_per_thread"),
        blocks_per_sm=min((x for x in limits if x is not None), default=None),
        ld_conflicts=val("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
        st_conflicts=val("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        ld_wavefronts=val("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
        stalls=[(name, v) for v, name in reasons[:stalls]],
    )


def write_limiter_csv(rows: list, fields: tuple, path, about: str) -> None:
    """Store rows of :func:`limiters` (with identifying ``fields`` first, ``stalls`` last) as CSV at ``path``, the
    first line a comment saying where they come from (GPU, ncu version, date)."""
    import csv
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        f.write(f"# {about}\n")
        w = csv.DictWriter(f, fields)
        w.writeheader()
        for r in rows:
            w.writerow({**r, "stalls": " ".join(f"{n}:{v:.2f}" for n, v in r["stalls"])})


def read_limiter_csv(path, texts=(), ints=()) -> tuple:
    """``(rows, about)`` from a file of :func:`write_limiter_csv`: the columns in ``texts`` as strings, those in
    ``ints`` as int, ``stalls`` as a list of (reason, warps per issued instruction), every other as a float (None
    where empty)."""
    import csv
    lines = Path(path).read_text().splitlines()
    about = lines[0][2:] if lines and lines[0].startswith("# ") else ""
    rows = []
    for r in csv.DictReader(lines[1:] if about else lines):
        row = {}
        for k, v in r.items():
            if k == "stalls":
                row[k] = [(x.split(":")[0], float(x.split(":")[1])) for x in v.split()]
            elif k in texts:
                row[k] = v
            elif k in ints:
                row[k] = int(v)
            else:
                row[k] = float(v) if v not in ("", "None") else None
        rows.append(row)
    return rows, about


# --- the references of notebook 02's exercises (the checks compare the learner's answers with these) ---

def _cpu_profile(fn):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return p.events()


def operators_under(fn, op: str) -> set:
    """Names of the ``aten::`` operators that run inside operator ``op``, at any depth, during one call
    of ``fn()`` (CPU activity: no CUDA runtime rows)."""
    found = set()

    def walk(e):
        for c in e.cpu_children:
            if c.name.startswith("aten::"):
                found.add(c.name)
            walk(c)
    for e in _cpu_profile(fn):
        if e.name == op:
            walk(e)
    return found


def callers_of(fn, op: str) -> dict:
    """``{caller: calls}`` for the calls of operator ``op`` during one call of ``fn()``: each call's caller is the
    nearest ``aten::`` operator above it in the call tree (``record_function`` ranges and other rows skipped), or
    ``"Python"`` where no operator encloses it (the table's ``# of Calls`` lumps them all together)."""
    counts: dict = {}
    for e in _cpu_profile(fn):
        if e.name != op:
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        who = parent.name if parent is not None else "Python"
        counts[who] = counts.get(who, 0) + 1
    return counts


def steps_a_schedule_records(wait: int, warmup: int, active: int, repeat: int) -> list:
    """The step numbers (from 0, one ``prof.step()`` per step) whose operators a profile with
    ``schedule(wait, warmup, active, repeat)`` keeps, in a loop longer than all its cycles (every
    cycle's events collected by ``on_trace_ready``)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
    kept: list = []

    def collect(p):
        kept.extend(int(e.name.split()[1]) for e in p.events() if e.name.startswith("step "))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=[ProfilerActivity.CPU], on_trace_ready=collect,
                     schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)) as p:
            for step in range(repeat * (wait + warmup + active) + 2):
                with record_function(f"step {step}"):
                    torch.ones(1)
                p.step()
    return sorted(set(kept))
