"""Building for the emulation: the compiler and flags, the precompiled headers and runtime object
(built once per machine), the build cache (which torch tier a build needs: :mod:`.tiers`).
(Compiler messages are mapped back to the learner's lines by
``gpu_course.cuda.errors.format_compile_errors``, shared with the GPU build.)"""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from .. import cache_files
from ..errors import CudaEmulationError
from ..language import STD_FLAG

HEADER_DIR = Path(__file__).resolve().parent / "include"  # the emulator's C++ (package data)
VERSION = "2"  # bump to invalidate every cached build

def cache_dir() -> Path:
    """Where builds and precompiled headers live: ``$CUDA_EMU_CACHE``, else
    ``gpu-course/cuda_emu`` in the user's cache, next to the GPU builds (:func:`cache_files.cache_dir`)."""
    return cache_files.cache_dir("cuda_emu")


def run(cmd: list[str], cwd: Path | None = None) -> tuple[int, str]:
    env = dict(os.environ, LC_ALL="C", LANG="C")  # plain ASCII quotes in compiler messages
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", env=env)
    return p.returncode, p.stdout


_TOOLCHAIN_CACHE: dict | None = None


def torch_paths() -> tuple[list[str], list[str]]:
    """torch's include directories and library directory for a CPU extension, as
    ``torch.utils.cpp_extension.include_paths()`` and ``library_paths()`` give them, without importing
    cpp_extension (it imports setuptools: ~0.1 s of every process's first ``load_cuda``)."""
    import torch
    root = os.path.dirname(os.path.abspath(torch.__file__))
    include = os.path.join(root, "include")
    return [include, os.path.join(include, "torch", "csrc", "api", "include")], [os.path.join(root, "lib")]


_LINKER: dict = {}


def fast_linker(cxx: list[str]) -> list[str]:
    """``-fuse-ld=lld`` or ``-fuse-ld=gold`` where that linker makes a shared object here, else
    nothing (found once per process, at the first build: a cache hit does not look). A module links
    against torch's libraries: ld.bfd takes ~0.4 s of a trivial kernel's ~1.2 s build, gold ~0.1 s."""
    if sys.platform != "linux" or os.environ.get("CUDA_EMU_LINKER") == "default":
        return []
    key = tuple(cxx)
    if key not in _LINKER:
        _LINKER[key] = []
        import tempfile
        for name in ("lld", "gold"):
            if not shutil.which(f"ld.{name}"):
                continue
            with tempfile.TemporaryDirectory() as d:
                src = Path(d) / "empty.cpp"
                src.write_text("int cuda_emu_link_probe() { return 0; }\n")
                code, _ = run(cxx + [f"-fuse-ld={name}", "-shared", "-fPIC", str(src), "-o", str(Path(d) / "probe.so")])
            if code == 0:
                _LINKER[key] = [f"-fuse-ld={name}"]
                break
    return list(_LINKER[key])


def get_toolchain() -> dict:
    """Compiler, flags and libraries for building against this Python's torch (cached)."""
    global _TOOLCHAIN_CACHE
    if _TOOLCHAIN_CACHE is not None:
        return _TOOLCHAIN_CACHE
    import torch

    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        raise CudaEmulationError("no C++ compiler found (install g++ or set CXX): the CPU "
                                 "emulation of CUDA C compiles with it.")
    cxx = shlex.split(cxx)
    code, version = run(cxx + ["--version"])
    is_gcc = code == 0 and "clang" not in version.lower() and ("gcc" in version.lower() or "g++" in version.lower()
                                                               or "free software foundation" in version.lower())
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    includes = [f"-I{HEADER_DIR / 'shim'}"]
    torch_include, libdirs = torch_paths()
    for d in torch_include:
        includes += ["-isystem", d]
    includes += ["-isystem", sysconfig.get_paths()["include"]]
    # -fstack-clash-protection: a big local array probes page by page, so it hits the guard page
    # below a fiber's stack (a clear error) instead of jumping over it into other memory.
    flags = [STD_FLAG, "-fPIC", "-fno-strict-aliasing", "-fvisibility=hidden",
             "-fvisibility-inlines-hidden", "-fstack-clash-protection", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    if os.environ.get("CUDA_EMU_FIBERS", "") == "ucontext":  # the portable fiber switch (tests)
        flags.append("-DCUDA_EMU_UCONTEXT")
    libs = [f"-L{d}" for d in libdirs] + [f"-Wl,-rpath,{d}" for d in libdirs] + \
        ["-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
    if sys.platform == "darwin":
        libs += ["-undefined", "dynamic_lookup"]
    _TOOLCHAIN_CACHE = dict(cxx=cxx, version=version.splitlines()[0] if version else "?", is_gcc=is_gcc,
                      flags=flags, includes=includes, libs=libs, torch=torch.__version__,
                      torch_dir=os.path.dirname(torch.__file__))
    return _TOOLCHAIN_CACHE


def header_files() -> list[Path]:
    """Every file under include/: cuda_emu.h and its parts (emu/), runtime.cpp and its parts
    (runtime/), the fp16 and wmma headers, torch_api.h and the shims, whatever their names."""
    return sorted(p for p in HEADER_DIR.rglob("*") if p.is_file())


def headers_digest() -> str:
    """Digest of the emulator's C++ files (:func:`header_files`): a change to any of them invalidates
    the precompiled headers and the runtime object (and, through :func:`generator_digest`, every
    module build)."""
    h = hashlib.sha256()
    for p in header_files():
        h.update(str(p.relative_to(HEADER_DIR)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def generator_files() -> list[Path]:
    """The Python files that write what a module build compiles: the code generator (every file of
    source/) and ../counters.py (the names its binding gives the launch counters)."""
    here = Path(__file__).resolve().parent
    return sorted((here / "source").rglob("*.py")) + [here.parent / "counters.py"]


def generator_digest() -> str:
    """What a module build's cache key depends on besides the learner's source: the C++ headers
    and the code generator (:func:`generator_files`). Editing anything else (this file, the loader,
    a comment in them) keeps every learner's cached build."""
    h = hashlib.sha256(headers_digest().encode())
    for p in generator_files():
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


_PRUNE_AFTER_S = 7 * 24 * 3600


def _prune_stale(prefix: str, keep: Path) -> None:
    """Remove other cache entries named prefix* not used for a week (old headers, old torch)."""
    for d in cache_dir().glob(prefix + "*"):
        try:
            if d != keep and time.time() - (d / "last-used").stat().st_mtime > _PRUNE_AFTER_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def prune_modules(root: Path) -> None:
    """Once per process: remove module builds not loaded for a month (each edit makes one)."""
    if root in _TOUCHED:
        return
    _TOUCHED.add(root)
    for d in root.glob("*_*"):
        if d.name.startswith(("pch-", "runtime-")) or not d.is_dir():
            continue
        cache_files.clean_temps(d)  # build-* folders of builds killed a day ago or more
        try:
            used = max(p.stat().st_mtime for p in d.iterdir())
        except (OSError, ValueError):
            continue
        if time.time() - used > 30 * 24 * 3600:
            shutil.rmtree(d, ignore_errors=True)


_TOUCHED: set = set()


def mark_used(d: Path) -> None:
    """Note (once per process) that a precompiled entry is in use, for _prune_stale."""
    if d not in _TOUCHED:
        _TOUCHED.add(d)
        try:
            (d / "last-used").touch()
        except OSError:
            pass


def opt_flags(opt: bool) -> list[str]:
    """The optimisation flags of emulated builds: -O1, or -O0 -g for debugging. -O1 rather than -O2: g++ takes
    20-35 % less time on an emulated module (10.1 s -> 6.6 s for the largest, 2.4 s -> 1.9 s for a typical one,
    with the precompiled header), and a fresh clone's tests are mostly such builds."""
    return ["-O1"] if opt else ["-O0", "-g"]


class _FileLock:
    """An exclusive lock on a file (POSIX), so parallel processes build a PCH once."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.f = open(self.path, "a+")
        try:
            import fcntl
            fcntl.flock(self.f, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover (Windows)
            pass
        return self

    def __exit__(self, *exc):
        self.f.close()


def tier_flags(tier: int) -> list[str]:
    return [f"-DCUDA_EMU_TORCH={tier}"]


def _pch_dir(tc: dict, opt: bool, tier: int) -> Path | None:
    """Directory of the precompiled header for this toolchain/tier/opt, or None if none is used.

    One PCH per torch tier and optimisation level; tier 3 (torch/all.h) has none (too big)."""
    if not tc["is_gcc"] or tier >= 3 or os.environ.get("CUDA_EMU_PCH", "1") == "0":
        return None
    key = hashlib.sha256("\0".join([VERSION, tc["version"], " ".join(tc["cxx"]), tc["torch"], tc["torch_dir"],
                                    sys.version, " ".join(tc["flags"] + tc["includes"] + opt_flags(opt)),
                                    str(tier), headers_digest()]).encode()).hexdigest()[:16]
    return cache_dir() / f"pch-t{tier}{'' if opt else '-O0'}-{key}"


def _pch_path(tc: dict, opt: bool, tier: int) -> Path | None:
    """The PCH stub if it is built already, else None."""
    d = _pch_dir(tc, opt, tier)
    return d / "cuda_emu_pch.h" if d and cache_files.intact(d / "cuda_emu_pch.h.gch") else None


def _first_use(tc: dict, opt: bool, tier: int) -> bool:
    """Is this the cache's first build at torch tier ``tier`` (>= 2)? Then it compiles without a
    PCH: tier 2's PCH takes ~25 s to build and saves ~7 s a build, and few sources need that tier
    (those that include ATen headers themselves, or fail at tier 1), so it is built at the second."""
    d = _pch_dir(tc, opt, tier)
    if tier < 2 or d is None or _pch_path(tc, opt, tier):
        return False
    if (d / "wanted").exists():
        return False
    d.mkdir(parents=True, exist_ok=True)
    (d / "wanted").touch()
    mark_used(d)
    return True


def prebuilt(tc: dict, opt: bool, tier: int, verbose: bool) -> tuple[Path | None, Path]:
    """(PCH stub or None, runtime object), building what is missing, both at once if need be."""
    if _first_use(tc, opt, tier):
        return None, _runtime(tc, verbose)
    if _pch_path(tc, opt, tier) or not _pch_dir(tc, opt, tier):
        return _pch(tc, opt, tier, verbose), _runtime(tc, verbose)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:  # ~6 s instead of ~9 s on two cores, once per machine
        pch, runtime = pool.submit(_pch, tc, opt, tier, verbose), pool.submit(_runtime, tc, verbose)
        return pch.result(), runtime.result()


def _pch(tc: dict, opt: bool, tier: int, verbose: bool) -> Path | None:
    """Path of the precompiled-header stub to ``-include`` (built on first use), or None."""
    d = _pch_dir(tc, opt, tier)
    if d is None:
        return None
    stub, gch = d / "cuda_emu_pch.h", d / "cuda_emu_pch.h.gch"
    if cache_files.usable(gch, "precompiled header"):
        mark_used(d)
        return stub
    d.mkdir(parents=True, exist_ok=True)
    _prune_stale("pch-", d)
    with _FileLock(d / "lock"):
        if cache_files.usable(gch, "precompiled header"):
            return stub
        cache_files.clean_temps(d, 0)  # we hold the lock: a temp file here is a killed build's
        cache_files.write_atomic(stub, f'#include "{HEADER_DIR / "cuda_emu.h"}"\n')
        tmp = d / f"tmp-{os.getpid()}.gch"
        cmd = (tc["cxx"] + tc["flags"] + opt_flags(opt) + tier_flags(tier) + tc["includes"] +
               ["-x", "c++-header", str(stub), "-o", str(tmp)])
        t0 = time.time()
        code, out = run(cmd)
        if verbose:
            print(f"[cuda_emu] precompiled header (torch tier {tier}) built in {time.time() - t0:.1f} s: {gch}")
        if code != 0:
            tmp.unlink(missing_ok=True)
            (d / "pch-error.log").write_text(" ".join(cmd) + "\n\n" + out)
            if verbose:
                print(f"[cuda_emu] could not build the precompiled header (see {d / 'pch-error.log'}); "
                      f"building without it")
            return None
        os.replace(tmp, gch)
        cache_files.seal(gch)
    mark_used(d)
    return stub


def _runtime(tc: dict, verbose: bool) -> Path:
    """The emulator's runtime (include/runtime.cpp) as an object file, compiled on first use."""
    key = hashlib.sha256("\0".join([VERSION, tc["version"], " ".join(tc["cxx"]), tc["torch"], tc["torch_dir"],
                                    sys.version, " ".join(tc["flags"] + tc["includes"]),
                                    headers_digest()]).encode()).hexdigest()[:16]
    d = cache_dir() / f"runtime-{key}"
    obj = d / "runtime.o"
    if cache_files.usable(obj, "emulator runtime"):
        mark_used(d)
        return obj
    d.mkdir(parents=True, exist_ok=True)
    _prune_stale("runtime-", d)
    with _FileLock(d / "lock"):
        if cache_files.usable(obj, "emulator runtime"):
            return obj
        cache_files.clean_temps(d, 0)
        pch = _pch_path(tc, True, 1)  # use the PCH if it is there already, do not wait for it
        pre = ["-include", str(pch)] if pch else []
        tmp = d / f"tmp-{os.getpid()}.o"
        cmd = (tc["cxx"] + tc["flags"] + opt_flags(True) + tier_flags(1) + tc["includes"] + pre +
               ["-c", str(HEADER_DIR / "runtime.cpp"), "-o", str(tmp)])
        t0 = time.time()
        code, out = run(cmd)
        if code != 0:
            tmp.unlink(missing_ok=True)
            raise CudaEmulationError(f"could not compile the emulator's runtime ({' '.join(cmd)}):\n{out[-3000:]}")
        os.replace(tmp, obj)
        cache_files.seal(obj)
        if verbose:
            print(f"[cuda_emu] runtime compiled in {time.time() - t0:.1f} s: {obj}")
    mark_used(d)
    return obj


def warm_cache(tiers=(1, 2), verbose: bool = False) -> None:
    """Build ahead what the first emulated builds of this Python's torch would build: the precompiled
    headers of ``tiers`` (the optimised builds') and the runtime. ``course.py setup`` runs it on the
    core that pip leaves idle while it installs the rest (about 45 s of g++ that a first build, or a
    fresh clone's tests, then do not pay). Tier 2's header is built here although a build would
    build it only at the second use (:func:`_first_use`): here it costs no one's time."""
    tc = get_toolchain()
    _pch(tc, True, tiers[0], verbose)
    _runtime(tc, verbose)   # after tier 1's header, which it uses
    for tier in tiers[1:]:
        _pch(tc, True, tier, verbose)


def cached_module(so: Path) -> bool:
    """Is the module ``so`` in the cache and intact? (A damaged one is removed, and said so.)"""
    return cache_files.usable(so, "module")


def seal_module(so: Path) -> None:
    """Record the size and hash of a module just built, for :func:`cached_module`."""
    cache_files.seal(so)


def discard_blamed(log: str) -> bool:
    """If a failed build's ``log`` names a precompiled header or runtime object of the cache,
    remove them (they are rebuilt at the next try), say so in one line, and return True."""
    bad = [p for p in cache_files.blamed(log, cache_dir())
           if p.name in ("cuda_emu_pch.h.gch", "runtime.o")]
    for p in bad:
        cache_files.discard(p)
    if bad:
        print(f"The build failed in the cache's {', '.join(str(p) for p in bad)}: rebuilding "
              f"{'it' if len(bad) == 1 else 'them'} once.")
    return bool(bad)
