"""Notebook 04's missing barrier, checked by tools: ``compute-sanitizer --tool racecheck`` on a GPU (in a fresh
process that loads the build from ``load_cuda``'s cache), and how often the racy kernel still matches torch
without the tool."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

_SCRIPT = """import torch, utils
mod = utils.load_cuda({src!r}, {cpp!r}, {funcs!r})
a, b = torch.randn({h}, {k}, device=utils.DEVICE), torch.randn({k}, {w}, device=utils.DEVICE)
getattr(mod, {func!r})(a, b, torch.empty({h}, {w}, device=utils.DEVICE))
utils.synchronize()
"""


def find_sanitizer() -> str | None:
    """Path of ``compute-sanitizer`` (CUDA toolkit), or None where it is not installed."""
    for cand in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if cand and os.path.exists(cand):
            return cand
    return None


@dataclass
class Racecheck:
    """What racecheck said of one kernel: ``lines``, its report lines (each hazard, and the summary);
    ``hazards``: the count of its summary (None if there was none); ``problem``: why not, if it did not run."""
    lines: list = field(default_factory=list)
    hazards: int | None = None
    problem: str | None = None

    @property
    def summary(self) -> str:
        return next((l for l in self.lines if "RACECHECK SUMMARY" in l), self.problem or "no summary")


def parse_racecheck(text: str) -> Racecheck:
    """The hazard lines (``Race reported ...``, ``and ... access ...``) and the summary of racecheck's output.

    >>> r = parse_racecheck("noise\\n========= Error: Race reported between Write access at k+0x3 in f:27\\n"
    ...                     "=========     and Read access at k+0x9 in f:29 [10 hazards]\\n"
    ...                     "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\\n")
    >>> len(r.lines), r.hazards
    (3, 1)
    """
    keep = [l.rstrip() for l in text.splitlines()
            if "Race reported" in l or re.search(r"^=+\s+and \w+ access", l) or "RACECHECK SUMMARY" in l]
    counts = [int(m.group(1)) for l in keep if (m := re.search(r"RACECHECK SUMMARY:\s*(\d+)", l))]
    return Racecheck(lines=keep, hazards=counts[-1] if counts else None)


def racecheck(src: str, cpp: str, func: str, funcs: list | None = None, shape: tuple = (100, 70, 90),
              timeout: float = 600) -> Racecheck:
    """Run ``func`` of the build ``load_cuda(src, cpp, funcs or [func])`` (loaded from the cache where it was
    built before) once on ``shape`` = (h, k, w) under ``compute-sanitizer --tool racecheck`` in a fresh process.
    Never raises: a missing tool, a failure or a time-out comes back as ``problem``."""
    tool = find_sanitizer()
    if tool is None:
        return Racecheck(problem="compute-sanitizer is not installed here (it comes with the CUDA toolkit)")
    h, k, w = shape
    with tempfile.TemporaryDirectory(prefix="racecheck-") as d:
        script = Path(d) / "race.py"
        script.write_text(_SCRIPT.format(src=src, cpp=cpp, func=func, funcs=list(funcs or [func]), h=h, k=k, w=w))
        try:
            r = subprocess.run([tool, "--tool", "racecheck", sys.executable, str(script)], capture_output=True,
                               text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": _pythonpath()})
        except (OSError, subprocess.SubprocessError) as e:
            return Racecheck(problem=f"compute-sanitizer failed: {type(e).__name__}: {e}")
    out = parse_racecheck(r.stdout + r.stderr)
    if out.hazards is None:
        out.problem = f"compute-sanitizer (exit code {r.returncode}) printed no summary: " + \
            " | ".join((r.stdout + r.stderr).strip().splitlines()[-3:])
    return out


def _pythonpath() -> str:
    """This process's import path first, so that the child imports the same ``utils`` and ``gpu_course``."""
    root = str(Path(__file__).resolve().parents[3])
    return os.pathsep.join([root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])


def match_rate(run, ref, runs: int = 20, **tol) -> int:
    """How many of ``runs`` calls of ``run()`` (returning a fresh output) match ``ref`` within ``tol``
    (``torch.allclose``'s atol/rtol; NaN never matches).

    >>> import torch
    >>> match_rate(lambda: torch.ones(3), torch.ones(3), runs=4, atol=0.0)
    4
    """
    import torch
    return sum(bool(torch.allclose(run(), ref, **tol)) for _ in range(runs))
