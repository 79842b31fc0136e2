"""Build caches: where they are (:func:`cache_dir`), and files in them that can be trusted: written
atomically, sealed with their size and hash, verified before use, and temp files of killed builds
cleaned up. Used by both builds (``gpu_build`` on a GPU, ``emulation.toolchain`` in cpu mode).

A cached module that was cut short (a full disk, a copy interrupted) would otherwise end the
Python process with a Bus error when it is loaded, in every later session; a damaged precompiled
header or runtime object would make every build fail with an error that seems to blame the
learner's source. So each cache file gets a ``<name>.sum`` beside it (size and SHA-256; for files
over 16 MiB, the precompiled headers, the hash covers their first and last MiB, which is what a
cut-short file loses) and :func:`usable` checks it before the file is used:

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> write_atomic(d / "m.so", b"module bytes"); seal(d / "m.so"); usable(d / "m.so", "module")
True
>>> _ = (d / "m.so").write_bytes(b"module")          # cut short
>>> usable(d / "m.so", "module")                     # doctest: +ELLIPSIS
The cached module .../m.so was damaged (its size or hash changed since it was built): rebuilding it.
False
>>> (d / "m.so").exists()
False
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from pathlib import Path

# each build's cache directory, and the environment variable that moves it (README, Troubleshooting)
CACHE_ENV = {"cuda": "COURSE_CUDA_CACHE", "cuda_emu": "CUDA_EMU_CACHE"}


def cache_dir(build: str) -> Path:
    """The cache directory of ``build``: ``"cuda"`` (the GPU build, ``$COURSE_CUDA_CACHE``) or
    ``"cuda_emu"`` (the CPU emulation, ``$CUDA_EMU_CACHE``); without that variable,
    ``gpu-course/<build>`` under ``$XDG_CACHE_HOME`` (default ``~/.cache``). Read at each call."""
    env = os.environ.get(CACHE_ENV[build])
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu-course" / build


_BIG = 16 << 20      # above this, hash the first and last MiB only
_EDGE = 1 << 20
_VERIFIED: dict = {}  # path -> (size, mtime_ns) that matched its seal in this process


def _sum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sum")


def _fingerprint(path: Path) -> str:
    size = path.stat().st_size
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= _BIG:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        else:
            h.update(f.read(_EDGE))
            f.seek(size - _EDGE)
            h.update(f.read(_EDGE))
    return f"{size} {h.hexdigest()}"


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a temp file and a rename: a reader sees the old file or
    the whole new one, never part of it."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(data, str):
            tmp.write_text(data)
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def seal(path: Path) -> None:
    """Record ``path``'s size and hash beside it (``<name>.sum``); call once it is complete."""
    path = Path(path)
    write_atomic(_sum_path(path), _fingerprint(path) + "\n")
    st = path.stat()
    _VERIFIED[str(path)] = (st.st_size, st.st_mtime_ns)


def discard(path: Path) -> None:
    """Remove a cache file and its seal."""
    path = Path(path)
    _VERIFIED.pop(str(path), None)
    path.unlink(missing_ok=True)
    _sum_path(path).unlink(missing_ok=True)


def intact(path: Path) -> bool:
    """Does ``path`` exist and match its seal? (Checked once per process while unchanged.)"""
    path = Path(path)
    try:
        st = path.stat()
        if _VERIFIED.get(str(path)) == (st.st_size, st.st_mtime_ns):
            return True
        ok = _sum_path(path).read_text().strip() == _fingerprint(path)
    except (OSError, ValueError):
        return False
    if ok:
        _VERIFIED[str(path)] = (st.st_size, st.st_mtime_ns)
    return ok


def usable(path: Path, what: str) -> bool:
    """True if the cached ``path`` can be used. If it exists but does not match its seal (or has
    none), it is removed, so the caller rebuilds it; a damaged one is reported in one line."""
    path = Path(path)
    if not path.exists():
        return False
    if intact(path):
        return True
    damaged = _sum_path(path).exists()
    discard(path)
    if damaged:
        print(f"The cached {what} {path} was damaged (its size or hash changed since it was "
              f"built): rebuilding it.")
    return False


def blamed(log: str, root: Path) -> list[Path]:
    """The files under ``root`` (a cache directory) that a failed command's ``log`` names."""
    roots = {str(Path(root)), str(Path(root).resolve())}
    found = []
    pattern = "|".join(re.escape(r) for r in roots)
    for m in re.finditer(rf"(?:{pattern})/[^\s:'\"()]+", log):
        p = Path(m.group(0).rstrip(".,;"))
        if p.is_file() and p not in found:
            found.append(p)
    return found


def clean_temps(directory: Path, min_age_s: float = 24 * 3600) -> None:
    """Remove temp files (``tmp-<pid>.<ext>``, ``<name>.tmp<pid>[.<ext>]``) and ``build-*`` folders that builds
    killed midway left in ``directory``: those of a process that no longer runs, and any older
    than ``min_age_s``."""
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return
    now = time.time()
    for p in entries:
        m = re.search(r"(?:^tmp-|\.tmp)(\d+)(?:\.\w+)?$", p.name)
        if not (m or p.name.startswith("build-")):
            continue
        try:
            old = now - p.stat().st_mtime > min_age_s
        except OSError:
            continue
        dead = False
        if m:
            pid = int(m.group(1))
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                dead = True
            except (PermissionError, OverflowError, OSError):
                pass
            dead = dead and pid != os.getpid()
        if dead or old:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
