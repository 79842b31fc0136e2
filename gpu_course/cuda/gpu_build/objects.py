"""The cache of compiled units: objects named by a hash of their unit's text and flags, so an edit
recompiles only the units whose text it changed; sealed (:mod:`..cache_files`) so that a damaged
object is rebuilt, not linked. Under ``cache_files.cache_dir("cuda")``: ``src/`` (the units' text),
``obj/``, ``lib/<key>/`` (a linked module and its build log) and ``inline/`` (one-unit builds)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from .. import cache_files

COMPILE_TIMEOUT_S = 600


def cache_dir() -> Path:
    """The GPU build's cache (``$COURSE_CUDA_CACHE``, else ``gpu-course/cuda`` in the user's cache)."""
    return cache_files.cache_dir("cuda")


_CLEANED: set = set()


def unit_dirs() -> tuple:
    """``(src_dir, obj_dir)`` of the cache, made if need be; the first time in a process, temp
    files of builds that were killed are removed from ``obj_dir``."""
    root = cache_dir()
    src_dir, obj_dir = root / "src", root / "obj"
    obj_dir.mkdir(parents=True, exist_ok=True)
    src_dir.mkdir(parents=True, exist_ok=True)
    if obj_dir not in _CLEANED:
        _CLEANED.add(obj_dir)
        cache_files.clean_temps(obj_dir)
    return src_dir, obj_dir


def compile_unit(cmd: list, src_text: str, src_path: Path, obj: Path) -> tuple:
    """Compile one unit unless its object is cached; return (obj, log, seconds), obj None if the
    compiler failed (seconds 0.0 for a cached object)."""
    if cache_files.usable(obj, "object file"):  # present, with the size and hash it was built with
        return obj, "", 0.0
    src_path.write_text(src_text)
    t0 = time.perf_counter()
    tmp = obj.with_suffix(f".tmp{os.getpid()}.o")
    try:
        r = subprocess.run(cmd + ["-c", str(src_path), "-o", str(tmp)], capture_output=True,
                           text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"compiler timed out after {COMPILE_TIMEOUT_S} s: {' '.join(cmd[:2])}", 0.0
    if r.returncode != 0:
        return None, r.stdout + r.stderr, time.perf_counter() - t0
    tmp.replace(obj)
    cache_files.seal(obj)
    return obj, r.stdout + r.stderr, time.perf_counter() - t0
