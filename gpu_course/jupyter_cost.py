"""Does a Jupyter kernel cost the CPU more than a plain Python process for the same call, and why?

:func:`per_call_us` times one call back to back (the CPU's time per call, as a loop sees it: the median of
``rounds`` loops of ``calls`` calls) for two calls: ``torch.add`` of two small tensors on the course's device
(:data:`~gpu_course.mode.DEVICE`, so a CPU-bound torch call in cpu mode and a launch on a GPU) and, as a control,
a Python function that does nothing (what the interpreter itself costs). :func:`in_script` runs it in a fresh
Python process, :func:`in_kernel` in a fresh Jupyter kernel (``nbclient`` executes a small notebook), each
with and without the usual suspects:

* the kernel's threads: IOPub (sends outputs), heartbeat, control, and the thread that forwards the process's
  own stdout/stderr (``IPKernelApp.capture_fd_output``); their wake-ups compete for the GIL, and how often a
  waiting thread may take it is ``sys.getswitchinterval()``;
* Python-level output capture (``sys.stdout`` is the kernel's stream object);
* ``debugpy``, which ipykernel imports for its debugger, and any trace or profile function;

and :func:`compare` gathers them in one table (``python -m gpu_course.jupyter_cost`` prints it).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CALLS = {"torch.add": "a CPU-bound torch call (cpu mode) or a launch (GPU)", "no-op": "a Python function doing nothing",
         "handoff": "a round trip to another Python thread and back (as autograd's worker thread makes)"}


def _noop():
    return None


def per_call_us(calls: int = 20000, rounds: int = 7) -> dict:
    """The CPU's time per call, in µs, of each of :data:`CALLS` in this process: the median of ``rounds``
    back-to-back loops of ``calls`` calls (on a GPU, a synchronize before each loop, none inside).

    >>> sorted(per_call_us(calls=10, rounds=1))
    ['handoff', 'no-op', 'torch.add']
    """
    import torch
    from .mode import DEVICE, synchronize
    import queue
    import threading
    a, b = torch.ones(16, device=DEVICE), torch.ones(16, device=DEVICE)
    to_worker, back = queue.SimpleQueue(), queue.SimpleQueue()

    def worker():
        while to_worker.get() is not None:
            back.put(1)
    threading.Thread(target=worker, daemon=True, name="handoff worker").start()
    fns = {"torch.add": lambda: torch.add(a, b), "no-op": _noop, "handoff": lambda: (to_worker.put(1), back.get())}
    out = {}
    for name, f in fns.items():
        f()
        per = []
        n = calls if name != "handoff" else max(1, calls // 10)   # a handoff takes tens of µs
        for _ in range(rounds):
            synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            per.append((time.perf_counter() - t0) / n * 1e6)
        out[name] = statistics.median(per)
    to_worker.put(None)
    return out


def state() -> dict:
    """What might slow a call here: the switch interval, the threads alive, whether ``sys.stdout`` is the
    process's own, whether debugpy is imported, whether a trace or profile function is set."""
    import threading
    return {"switch interval (s)": sys.getswitchinterval(), "threads": sorted(t.name for t in threading.enumerate()),
            "stdout is the process's own": sys.stdout is sys.__stdout__, "debugpy imported": "debugpy" in sys.modules,
            "trace or profile set": bool(sys.gettrace() or sys.getprofile())}


def measure(variant: str = "as started", calls: int = 20000, rounds: int = 7) -> dict:
    """:func:`per_call_us` after changing one thing in this process (``variant``): ``"as started"``,
    ``"switch interval 1 s"``, ``"stdout, stderr the process's own"``, ``"no trace or profile"``; the change is
    undone after. Returns ``{"variant", "state", **per_call_us}``."""
    import threading
    saved = sys.getswitchinterval(), sys.stdout, sys.stderr, sys.gettrace(), sys.getprofile()
    try:
        if variant == "switch interval 1 s":
            sys.setswitchinterval(1.0)
        elif variant == "stdout, stderr the process's own":
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        elif variant == "no trace or profile":
            sys.settrace(None), sys.setprofile(None), threading.settrace(None), threading.setprofile(None)
        elif variant != "as started":
            raise ValueError(f"measure: unknown variant {variant!r}")
        st = state()
        figures = per_call_us(calls, rounds)
    finally:
        sys.setswitchinterval(saved[0])
        sys.stdout, sys.stderr = saved[1], saved[2]
        sys.settrace(saved[3]), sys.setprofile(saved[4])
    return {"variant": variant, "state": st, **figures}


VARIANTS = ("as started", "switch interval 1 s", "stdout, stderr the process's own", "no trace or profile")
_MARK = "JUPYTER_COST "


def _env(block_debugpy: bool) -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    paths = [root] + ([p] if (p := env.get("PYTHONPATH")) else [])
    if block_debugpy:   # a package named debugpy that cannot be imported, first on the path: ipykernel goes on without it
        d = Path(tempfile.mkdtemp(prefix="no_debugpy_")) / "debugpy"
        d.mkdir()
        (d / "__init__.py").write_text("raise ImportError('debugpy blocked for this measurement')\n")
        paths.insert(0, str(d.parent))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def in_script(variants=("as started", "switch interval 1 s"), calls: int = 20000, rounds: int = 7) -> list:
    """:func:`measure` of each of ``variants`` in a fresh Python process (``python -c``): a list of results."""
    code = ("import json; from gpu_course.jupyter_cost import measure; "
            f"print(json.dumps([measure(v, {calls}, {rounds}) for v in {list(variants)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(False), check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def in_kernel(variants=VARIANTS, capture_fd_output: bool = True, block_debugpy: bool = False, calls: int = 20000,
              rounds: int = 7, timeout: int = 600) -> list:
    """:func:`measure` of each of ``variants`` in a fresh Jupyter kernel (this Python's ``python3`` kernel,
    started by ``nbclient``; ``capture_fd_output=False`` starts it without the thread that forwards the
    process's own output, ``block_debugpy`` without debugpy), one cell each: a list of results."""
    import nbformat
    from nbclient import NotebookClient
    cells = [nbformat.v4.new_code_cell("import json\nfrom gpu_course.jupyter_cost import measure")]
    cells += [nbformat.v4.new_code_cell(f"print({_MARK!r} + json.dumps(measure({v!r}, {calls}, {rounds})))")
              for v in variants]
    nb = nbformat.v4.new_notebook(cells=cells)
    extra = [] if capture_fd_output else ["--IPKernelApp.capture_fd_output=False"]
    NotebookClient(nb, kernel_name="python3", timeout=timeout, extra_arguments=extra).execute(env=_env(block_debugpy))
    out = []
    for cell in nb.cells[1:]:
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
        out += [json.loads(line[len(_MARK):]) for line in text.splitlines() if line.startswith(_MARK)]
    return out


def compare(calls: int = 20000, rounds: int = 7) -> list:
    """Every setting, as rows ``(where, variant, results)``: a script; a kernel as started and with each
    in-process change; a kernel without the output-forwarding thread; one without debugpy."""
    rows = [("script", r["variant"], r) for r in in_script(calls=calls, rounds=rounds)]
    rows += [("kernel", r["variant"], r) for r in in_kernel(calls=calls, rounds=rounds)]
    rows += [("kernel, capture_fd_output=False", r["variant"], r)
             for r in in_kernel(("as started",), capture_fd_output=False, calls=calls, rounds=rounds)]
    rows += [("kernel without debugpy", r["variant"], r)
             for r in in_kernel(("as started",), block_debugpy=True, calls=calls, rounds=rounds)]
    return rows


def table(rows) -> str:
    """The rows of :func:`compare` as text: µs per call of each call, and each over the script's."""
    base = rows[0][2]
    lines = [f"{'where':<32}{'change':<34}" + "".join(f"{c:>12}{'× script':>9}" for c in CALLS)]
    for where, variant, r in rows:
        lines.append(f"{where:<32}{variant:<34}" + "".join(f"{r[c]:>10.3f}µs{r[c] / base[c]:>8.2f}×" for c in CALLS))
    return "\n".join(lines)


def here_vs_script(rounds: int = 3, calls: int = 20000) -> dict:
    """This process (a notebook's kernel, when a notebook calls it) against a fresh Python process, in
    alternating rounds (here, script, here, script, ...): ``{"here": [results], "script": [results]}``, one
    :func:`measure` (``"as started"``) a round each."""
    out = {"here": [], "script": []}
    for _ in range(rounds):
        out["here"].append(measure("as started", calls))
        out["script"].append(in_script(("as started",), calls)[0])
    return out


def report(rounds: int = 3, calls: int = 20000) -> str:
    """What notebook 01 prints: per call of :data:`CALLS`, the CPU's time per call here and in a script (the
    medians of :func:`here_vs_script`'s rounds) and their ratio (median, and the rounds' range); then this
    process's figure with each suspect of :func:`measure` removed, over the script's median; then
    :func:`state`."""
    r = here_vs_script(rounds, calls)
    med = {w: {c: statistics.median(x[c] for x in r[w]) for c in CALLS} for w in r}
    lines = [f"{'call':<10}{'here':>11}{'script':>11}   here / script ({rounds} alternating rounds)"]
    for c in CALLS:
        ratios = sorted(h[c] / s[c] for h, s in zip(r["here"], r["script"]))
        lines.append(f"{c:<10}{med['here'][c]:>9.2f}µs{med['script'][c]:>9.2f}µs   {statistics.median(ratios):.2f}× "
                     f"(rounds {ratios[0]:.2f}-{ratios[-1]:.2f}×)")
    lines.append("\nhere, one suspect removed at a time, over the script's median:")
    for v in VARIANTS:
        m = measure(v, calls)
        lines.append(f"  {v:<36}" + "  ".join(f"{c} {m[c] / med['script'][c]:.2f}×" for c in CALLS))
    st = state()
    own, threads = st["stdout is the process's own"], ", ".join(st["threads"])
    lines.append(f"\nhere: switch interval {st['switch interval (s)']} s, {len(st['threads'])} threads ({threads}), "
                 f"stdout the process's own: {own}, debugpy imported: {st['debugpy imported']}, "
                 f"trace or profile set: {st['trace or profile set']}")
    return "\n".join(lines)


if __name__ == "__main__":
    found = compare()
    print(table(found))
    print("\nthe kernel as started:", json.dumps(next(r for w, v, r in found if w == "kernel")["state"]))
