"""Results: every GPU benchmark lands in ``results/<device>.csv``; the README table is made from
those files (``python3 course.py results``), never typed by hand."""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path

from .device_ceilings import Throughput, spec_peak, throughput
from . import mode
from .mode import device_name
from .paths import RESULTS_DIR, now
from .timing import Timing, fmt_ms, fmt_num
from .user_timing import UserTiming, compare

SAVE_ENV = "COURSE_SAVE_RESULTS"  # "1": save_result writes (set by `python3 course.py execute`)


def saving_results() -> bool:
    """Whether :func:`save_result` writes to ``results/``: only when ``COURSE_SAVE_RESULTS=1``, which
    ``python3 course.py execute`` sets while it runs notebooks to store their GPU outputs, and a script
    of ``bench/`` on a GPU unless given ``--no-record`` (:func:`bench_recording`). A learner's own run
    of a notebook therefore never changes the course's tracked files.
    """
    return os.environ.get(SAVE_ENV) == "1"

RESULT_FIELDS = ["when", "notebook", "kernel", "size", "device", "ms", "rate", "unit",
                 "pct_of_ceiling", "ceiling", "baseline", "baseline_ms", "vs_baseline",
                 # what a caller in a Python loop gets (from a UserTiming; empty for a plain Timing)
                 "loop_ms", "cpu_ms", "baseline_loop_ms", "vs_baseline_loop", "pct_of_spec"]


def _slug(name: str) -> str:
    """File-name-safe form of a device name: ``'NVIDIA H100 80GB HBM3'`` -> ``'nvidia-h100-80gb-hbm3'``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def results_file(device: str | None = None) -> Path:
    """The CSV file that holds the results of ``device`` (default: this one)."""
    return RESULTS_DIR / f"{_slug(device or device_name())}.csv"


def _stored(x: float) -> str:
    """A figure as the results file keeps it: 12 significant digits (the float itself, for every table's
    purpose), so that a table made from the file rounds once, as the printed line did, and shows what the
    line showed (a figure stored already rounded, then rounded again for the table, can differ in the last
    digit: 0.192448 ms printed 192.4 µs, stored as 0.19245, tabled 192.5 µs).

    >>> _stored(0.95), _stored(0.192448), _stored(2), _stored(0.2 * 2 / 1.0000000000000002)
    ('0.95', '0.192448', '2', '0.4')
    """
    return f"{float(x):.12g}"


def save_result(notebook: str, kernel: str, size: str, t: Timing, achieved: Throughput | None = None,
           baseline: Timing | None = None, baseline_name: str = "torch") -> dict | None:
    """The results row of one GPU benchmark, appended to this GPU's results file when results are
    being saved (:func:`saving_results`: during ``python3 course.py execute``), and returned.

    ``baseline`` is the timing of the torch/cuBLAS version of the same work in the same run;
    ``vs_baseline`` is its time over ours (1.0 = as fast as torch, above 1 = faster). On the CPU
    there is no row (simulator timings are not results) and ``None`` is returned. Figures are kept
    exact (:func:`_stored`), so that :func:`results_markdown` rounds them once, as the printed line did.
    """
    if not t.on_gpu:
        return None
    user, base_user = isinstance(t, UserTiming), isinstance(baseline, UserTiming)
    row = {"when": now(), "notebook": notebook, "kernel": kernel, "size": size,
           "device": t.device, "ms": _stored(t.median),
           "rate": _stored(achieved.value) if achieved else "",
           "unit": achieved.unit if achieved else "",
           "pct_of_ceiling": _stored(achieved.pct) if achieved else "",
           "ceiling": achieved.ceiling_key if achieved else "",
           "baseline": baseline_name if baseline else "",
           "baseline_ms": _stored(baseline.median) if baseline else "",
           "vs_baseline": _stored(baseline.median / t.median) if baseline else "",
           "loop_ms": _stored(t.loop_ms) if user else "",
           "cpu_ms": _stored(t.cpu_ms) if user else "",
           "baseline_loop_ms": _stored(baseline.loop_ms) if base_user else "",
           "vs_baseline_loop": _stored(baseline.loop_ms / t.loop_ms) if user and base_user else "",
           "pct_of_spec": _stored(achieved.pct_spec) if achieved and achieved.spec else ""}
    if not saving_results():
        return row
    path = results_file(t.device)
    RESULTS_DIR.mkdir(exist_ok=True)
    _upgrade_header(path)
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RESULT_FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    return row


def _upgrade_header(path: Path) -> None:
    """Rewrite a results file written with fewer columns than :data:`RESULT_FIELDS` (an older
    course) with today's header, the old rows' new columns empty, so appended rows line up."""
    if not path.exists():
        return
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames == RESULT_FIELDS:
            return
        rows = list(reader)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RESULT_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) or "" for k in RESULT_FIELDS})


def stored_results(device: str | None = None, notebook: str | None = None) -> list:
    """The latest result per (notebook, kernel, size) from a results file, oldest first.

    ``device`` may be a device name or a results file's stem (``"nvidia-h100-80gb-hbm3"``);
    by default every results file is read, except for a ``notebook``: there the default is one GPU's
    file, so that a notebook's table never mixes GPUs under one heading: on a GPU, this GPU's file if
    it holds rows of the notebook (a run stored here), else, as on the CPU, the file of the GPU the
    notebook's stored outputs name (:func:`~gpu_course.session.stored_device`, from its metadata);
    every file only where neither holds a row of the notebook.
    """
    if device is None and notebook is not None:
        from .session import stored_device
        for gpu in ([mode.device_name()] if mode.ON_GPU else []) + [stored_device(notebook)]:
            rows = stored_results(gpu, notebook) if gpu else []
            if rows:
                return rows
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


def fmt_ratio(x: float) -> str:
    """A time ratio as every results line and table prints it: two decimals, or two significant
    digits below 0.1, so that a small ratio keeps its size (0.0047×, not 0.00×).

    >>> fmt_ratio(1.0649), fmt_ratio(0.0047), fmt_ratio(0.0712)
    ('1.06×', '0.0047×', '0.071×')
    """
    return f"{x:.2f}×" if x >= 0.1 else f"{x:.2g}×"


def results_markdown(rows: list) -> str:
    """A Markdown table of result rows (as from :func:`stored_results`)."""
    head = ("| notebook | kernel | size | device | GPU time | loop/step | CPU/call | achieved | "
            "% of spec-sheet peak | vs baseline (GPU) | vs baseline (loop) |\n"
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        get = lambda k: r.get(k) or ""  # noqa: E731  (rows of older files lack the newer columns)
        achieved = f"{fmt_num(float(r['rate']))} {r['unit']}" if r["rate"] else ""
        # the share the run printed (pct_of_spec, unrounded rate); rows of older files lack it: from the rate
        spec = spec_peak(r["ceiling"], r["device"]) if r["rate"] and r["ceiling"] and not get("pct_of_spec") else None
        pct = (f"{float(r['pct_of_spec']):.0f} % {r['ceiling']}" if get("pct_of_spec")
               else f"{100 * float(r['rate']) / spec:.0f} % {r['ceiling']}" if spec else "")
        vs = f"{fmt_ratio(float(r['vs_baseline']))} {r['baseline']}" if r["vs_baseline"] else ""
        vs_loop = fmt_ratio(float(get("vs_baseline_loop"))) if get("vs_baseline_loop") else ""
        loop = fmt_ms(float(get("loop_ms"))) if get("loop_ms") else ""
        cpu = fmt_ms(float(get("cpu_ms"))) if get("cpu_ms") else ""
        cell = {k: str(v).replace("|", "\\|") for k, v in r.items()}  # a | would split a cell
        lines.append(f"| {cell['notebook']} | {cell['kernel']} | {cell['size']} | {cell['device']} | "
                     f"{fmt_ms(float(r['ms']))} | {loop} | {cpu} | {achieved} | {pct} | {vs} | {vs_loop} |")
    return "\n".join(lines)


def report(notebook: str, kernel: str, size: str, t: Timing, baseline: Timing | None = None,
           nbytes: int | None = None, flops: int | None = None, kind: str | None = None,
           baseline_name: str = "torch") -> str:
    """Turn a timing into one printed line (time, achieved rate with % of the ceiling, ratio to
    the baseline), record it on a GPU (:func:`save_result`), and return the line.

    Give ``nbytes`` (bytes the work must move) or ``flops``, as for :func:`throughput`. ``t`` and
    ``baseline`` may be :class:`UserTiming` s (from ``bench_user`` / ``compare``): the line and the
    results row then carry the time per step in a loop and the CPU time per call too.
    """
    achieved = throughput(t, nbytes=nbytes, flops=flops, kind=kind) if (nbytes or flops) else None
    save_result(notebook, kernel, size, t, achieved, baseline, baseline_name)
    parts = [f"{kernel}: {fmt_ms(t.median)}"]
    if isinstance(t, UserTiming):
        parts = [f"{kernel}: GPU {fmt_ms(t.median)}, loop {fmt_ms(t.loop_ms)} a step, CPU {fmt_ms(t.cpu_ms)} a call"]
    if achieved and t.on_gpu:
        key = achieved.ceiling_key
        measured = achieved.vs_measured(f"the {key} rate measured here")
        if achieved.spec:
            parts.append(f"{fmt_num(achieved.value)} {achieved.unit} = {achieved.pct_spec:.0f} % of the "
                         f"spec-sheet {key} peak, {measured}")
        else:
            parts.append(f"{fmt_num(achieved.value)} {achieved.unit} = {measured}")
    if baseline:
        parts.append(f"{fmt_ratio(baseline.median / t.median)} {baseline_name}")
        if isinstance(t, UserTiming) and isinstance(baseline, UserTiming):
            parts.append(f"{fmt_ratio(baseline.loop_ms / t.loop_ms)} in a loop")
    line = ", ".join(parts) + ("" if t.on_gpu else "  (CPU: not a GPU figure)")
    print(line)
    return line


# ------------------------------------------------------------ the bench/ scripts' records
def record_flag(parser):
    """Give a bench script's ``argparse`` parser the ``--no-record`` flag (``args.record``: True
    unless given), and return the parser. See :func:`bench_recording`.

    >>> import argparse
    >>> p = record_flag(argparse.ArgumentParser())
    >>> p.parse_args([]).record, p.parse_args(["--no-record"]).record
    (True, False)
    """
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="do not append this run's rows to results/<device>.csv (on a GPU they are by default)")
    return parser


def bench_recording(record: bool = True) -> str:
    """Decide, for the rest of this process, whether :func:`save_result` writes: on a GPU with
    ``record`` (a bench script's default) it does, and without it it does not, whatever the
    environment said; on the CPU nothing is recorded anyway (simulator times are not results).
    Returns one line that says which, for the script to print.
    """
    if not mode.ON_GPU:
        return "results: nothing recorded (cpu mode: these times say nothing about a GPU)"
    if not record:
        os.environ.pop(SAVE_ENV, None)
        return "results: not recorded (--no-record)"
    os.environ[SAVE_ENV] = "1"
    return f"results: each row compared with the library is appended to {results_file()}"


def record_comparison(notebook: str, size: str, times: dict, baseline: str, nbytes: int | None = None,
                      flops: int | None = None, kind: str | None = None, baseline_name: str | None = None,
                      prefix: str = "", include_baseline: bool = True) -> list:
    """Record one comparison table through :func:`save_result`: ``times`` is ``{name: UserTiming}``
    (as from :func:`~gpu_course.user_timing.compare`), ``baseline`` the library's name among them. Each
    row's kernel is ``prefix + name``; the baseline's row is recorded alone (``include_baseline``),
    every other row against it under ``baseline_name`` (default: ``baseline``), each with its time per
    step in a loop and CPU time per call, and its rate from ``nbytes`` or ``flops`` (with ``kind``, as
    for :func:`~gpu_course.device_ceilings.throughput`). Returns the rows (none on the CPU; written
    only while :func:`saving_results`).

    >>> cpu = UserTiming(Timing([1.0], "wall clock", "CPU", False), 1.0, 0.1)
    >>> record_comparison("bench/x", "n", {"torch": cpu, "ours": cpu}, "torch")
    []
    """
    if baseline not in times:
        raise ValueError(f"record_comparison: baseline {baseline!r} is not one of {list(times)}")
    plain = [name for name, t in times.items() if not isinstance(t, UserTiming)]
    if plain:
        raise TypeError(f"record_comparison: {plain} timed on the GPU alone: a row compared with a library "
                        "carries the loop and CPU figures too (time it with bench_user)")
    base, rows = times[baseline], []
    for name, t in times.items():
        if name == baseline and not include_baseline:
            continue
        achieved = throughput(t, nbytes=nbytes, flops=flops, kind=kind) if (nbytes or flops) and t.on_gpu else None
        row = save_result(notebook, prefix + name, size, t, achieved, None if name == baseline else base,
                          baseline_name or baseline)
        if row is not None:
            rows.append(row)
    return rows


def compare_and_record(notebook: str, size: str, fns: dict, *args, baseline: str | None = None,
                       nbytes: int | None = None, flops: int | None = None, kind: str | None = None,
                       baseline_name: str | None = None, prefix: str = "", **kwargs) -> dict:
    """:func:`~gpu_course.user_timing.compare` (time each of ``fns`` three ways, print the table), then
    :func:`record_comparison` of its rows. Returns ``{name: UserTiming}``."""
    times = compare(fns, *args, baseline=baseline, **kwargs)
    record_comparison(notebook, size, times, baseline if baseline is not None else next(iter(fns)),
                      nbytes=nbytes, flops=flops, kind=kind, baseline_name=baseline_name, prefix=prefix)
    return times


def matmul_size(h: int, k: int, w: int) -> str:
    """How results name the size of an ``(h, k) @ (k, w)`` product.

    >>> matmul_size(4096, 4096, 4096), matmul_size(5120, 256, 5120)
    ('4096³', '5120×256×5120')
    """
    return f"{h}³" if h == k == w else f"{h}×{k}×{w}"
