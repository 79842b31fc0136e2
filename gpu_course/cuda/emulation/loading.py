"""Build one source for the emulation and import it (:func:`load`, what ``load_cuda`` calls in cpu mode):
the cache key, the build (rewritten source, precompiled header, runtime object, the nvcc check
alongside), the escalation when a build fails (unchecked pointers, more of torch), the import, and
the learner's messages for a failed compile or link. What the emulation does is told in the
package's docstring (gpu_course/cuda/emulation/__init__.py)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..errors import CudaEmulationError, format_compile_errors
from ..parsed import Sources, prepare
from .nvcc_check import finish_nvcc, start_nvcc
from .source import binding, check_supported, transform
from .tiers import FRONTEND_ONLY, first_tier, needs_more_torch, needs_unchecked
from .toolchain import (HEADER_DIR, VERSION, cache_dir, fast_linker, generator_digest, get_toolchain, mark_used,
                        opt_flags, prebuilt, prune_modules, run, tier_flags)
from .toolchain import cached_module, discard_blamed, seal_module  # the cache's integrity

__all__ = ["load", "race_mode"]


_LOADED: dict[str, object] = {}


def _import(so: Path, modname: str, funcs: list[str]):
    """Import the built extension; translate an undefined symbol into a learner's message."""
    key = str(so)
    if key in _LOADED:
        return _LOADED[key]
    spec = importlib.util.spec_from_file_location(modname, so)
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except ImportError as e:
        msg = str(e)
        m = re.search(r"undefined symbol: (\S+)", msg)
        so.unlink(missing_ok=True)  # keep only loadable modules in the cache
        if m:
            sym = m.group(1)
            code, dem = run(["c++filt", sym]) if shutil.which("c++filt") else (1, sym)
            dem = dem.strip() if code == 0 else sym
            raise CudaEmulationError(
                f"link error: {dem} is declared (e.g. in cpp_src) and used, but never defined in "
                f"cuda_src; check its name and parameter types.\n({msg})") from None
        raise CudaEmulationError(f"could not load the built module {so}: {msg}") from None
    _LOADED[key] = mod
    return mod


def _annotate(mod, moddir: Path, races: int):
    """Record on the module how it was built: ``mod.cuda_emu_info`` = {checked, tier, build_dir, racecheck}."""
    info = {"build_dir": str(moddir)}
    try:
        for kv in (moddir / "build-info.txt").read_text().split():
            k, v = kv.split("=")
            info[k] = int(v)
    except OSError:
        pass
    info["checked"] = bool(info.get("checked", 1))
    info["racecheck"] = {0: False, 1: True, 2: "warn"}[races] if info["checked"] else False
    mod.cuda_emu_info = info
    return mod


def _clean_flags(extra_cflags) -> list[str]:
    """Each flag its own element; -O levels are the emulation's choice (they must match the PCH)."""
    out = []
    for f in extra_cflags or ():
        for x in shlex.split(str(f)):
            if re.match(r"-O\d?$|-Os$|-Ofast$|-g\d?$", x) or not x.startswith("-") or x.startswith("--"):
                continue  # optimisation levels, and nvcc-only flags such as --use_fast_math
            out.append(x)
    return out


_RACE_MODES = {"0": 0, "off": 0, "false": 0, "1": 1, "on": 1, "true": 1, "error": 1, "warn": 2}


def race_mode(racecheck) -> int:
    """0 (off), 1 (a race raises) or 2 (a race warns) from ``racecheck`` (None: $CUDA_EMU_RACECHECK, else on).

    >>> race_mode(True), race_mode(False), race_mode("warn")
    (1, 0, 2)
    """
    if racecheck is None:
        racecheck = os.environ.get("CUDA_EMU_RACECHECK", "1")
    key = str(racecheck).strip().lower()
    if key not in _RACE_MODES:
        raise CudaEmulationError(f"racecheck={racecheck!r}: use True (a race raises), 'warn' or False")
    return _RACE_MODES[key]


def load(cuda_src: str, cpp_src: str, funcs: list[str], *, name: str | None = None,
         opt: bool = True, extra_cflags=(), verbose: bool = False, build_dir=None,
         checked: bool | None = None, nvcc_check: bool | None = None, racecheck: bool | str | None = None,
         sources: Sources | None = None):
    """Build ``cuda_src`` (CUDA C + torch host wrappers) for the CPU and return the Python module
    exposing ``funcs`` (declared in ``cpp_src``), like ``torch.utils.cpp_extension.load_inline``.

    ``name`` prefixes the module name; ``opt=False`` builds with -O0 -g; ``extra_cflags`` are
    extra compiler flags (-D, -I, -W, -f ...; -O levels and nvcc flags are ignored);
    ``build_dir`` overrides the cache directory; ``checked`` (default: $CUDA_EMU_CHECKED or True)
    turns the bounds checks on; ``nvcc_check`` (default: True unless $CUDA_EMU_NVCC is "0") also
    compiles the device part with nvcc for a real GPU when nvcc is on PATH; ``racecheck``
    (default: $CUDA_EMU_RACECHECK or True; needs ``checked``) finds races on ``__shared__`` memory
    and non-atomic ``+=`` on global memory: True raises :class:`CudaEmulationError`, "warn" warns,
    False turns it off.  Raises :class:`CudaEmulationError` for unsupported features, compile and
    link errors.  ``sources``: these sources parsed, with ``funcs`` checked (what ``load_cuda``
    hands over, :func:`gpu_course.cuda.parsed.prepare`); made here when None.

    The module also has ``cuda_emu_info`` = {"checked", "tier", "build_dir", "racecheck"}: how it
    was built; ``build_log``: the compiler's command and output (a build error has it as ``.log``);
    and the launch counters and log that :mod:`gpu_course.cuda.counters` reads.

    >>> m = load(cuda_src, "torch::Tensor square(torch::Tensor x);", ["square"])  # doctest: +SKIP
    """
    t0 = time.time()
    if sources is None:
        sources = prepare(cuda_src, cpp_src, funcs, CudaEmulationError)
    cuda_src, cpp_src, funcs = sources.cuda.text, sources.cpp.text, list(sources.funcs)
    if checked is None:
        checked = os.environ.get("CUDA_EMU_CHECKED", "1") != "0"
    if nvcc_check is None:
        nvcc_check = os.environ.get("CUDA_EMU_NVCC", "1") != "0"
    races = race_mode(racecheck) if checked else 0
    tc = get_toolchain()
    flags = _clean_flags(extra_cflags)
    nvcc_check = bool(nvcc_check and shutil.which("nvcc"))
    digest = hashlib.sha256("\0".join([VERSION, cuda_src, cpp_src, ",".join(funcs), str(opt), str(checked),
                                       str(nvcc_check), f"race{races}",
                                       " ".join(flags), " ".join(tc["flags"]), tc["version"], tc["torch"],
                                       tc["torch_dir"],
                                       sys.version, generator_digest()]).encode()).hexdigest()[:16]
    base = re.sub(r"\W", "_", name or "cuda_emu")[:40]
    modname = f"{base}_{digest}" if re.match(r"[A-Za-z_]", base) else f"m_{base}_{digest}"
    root = Path(build_dir).expanduser() if build_dir else cache_dir()
    moddir = root / modname
    so = moddir / f"{modname}.so"
    if cached_module(so):  # present, and its size and hash are those recorded at build time
        mod = _import(so, modname, funcs)
        mod._cuda_emu_set_error_type(CudaEmulationError)
        mark_used(moddir)
        if verbose:
            print(f"[cuda_emu] {modname}: loaded from cache in {time.time() - t0:.2f} s")
        log_file = moddir / "build.log"
        mod.build_log = (log_file.read_text() if log_file.exists() else "") + f"\n(loaded from cache: {so})"
        return _annotate(mod, moddir, races)

    check_supported(sources.cuda, "cuda_src")
    check_supported(sources.cpp, "cpp_src")

    prune_modules(root)
    moddir.mkdir(parents=True, exist_ok=True)
    chk, tier, nvcc_error, retried = checked, first_tier(cuda_src + "\n" + cpp_src), None, False
    while True:  # escalate: unchecked pointers if the checked types get in the way, more torch
        code, log, cmd, nvcc_result = _build(tc, moddir, modname, so, sources, opt, chk, tier,
                                             flags, verbose, nvcc_check, races)
        nvcc_error = nvcc_result if nvcc_check else nvcc_error
        build_log = " ".join(cmd) + "\n\n" + log
        if code == 0:
            if nvcc_error:
                so.unlink(missing_ok=True)  # not cached: the next load checks again
                raise CudaEmulationError(
                    "the CUDA source builds for the CPU emulation, but nvcc rejects it for a real "
                    "GPU:\n" + nvcc_error + "\n(set CUDA_EMU_NVCC=0 to skip this check)", log=build_log)
            (moddir / "build.log").write_text(build_log)
            break
        nvcc_check = False  # checked once is enough
        if chk and needs_unchecked(log):
            chk = False
        elif tier < 3 and needs_more_torch(log):
            tier = 3 if FRONTEND_ONLY.search(log) else tier + 1
        elif not retried and discard_blamed(log):  # a damaged cache file, not the source
            retried = True
        else:
            (moddir / "build.log").write_text(build_log)
            raise CudaEmulationError(
                "the CUDA source did not compile (CPU emulation):\n" +
                format_compile_errors(log, {"cuda_src": cuda_src, "cpp_src": cpp_src}) +
                f"\n(full compiler output: {moddir / 'build.log'})", log=build_log)
    mod = _import(so, modname, funcs)
    mod._cuda_emu_set_error_type(CudaEmulationError)
    if verbose:
        print(f"[cuda_emu] {modname}: built in {time.time() - t0:.1f} s -> {so}")
    mod.build_log = build_log
    return _annotate(mod, moddir, races)


def _build(tc, moddir, modname, so, sources: Sources, opt, checked, tier, flags, verbose, nvcc_check,
           races=0):
    """One compile+link attempt (with the nvcc check alongside if asked); returns
    (exit code, compiler output, command, nvcc error message or None)."""
    cuda_t = transform(sources.cuda, checked=checked, origin="cuda_src").text
    cpp_t = transform(sources.cpp, checked=checked, origin="cpp_src").text
    text = "\n".join([f"// generated by gpu_course/cuda/emulation for {modname}", '#line 1 "cpp_src"', cpp_t,
                      '#line 1 "cuda_src"', cuda_t, binding(modname, list(sources.funcs), sources.cpp),
                      f"static const bool cuda_emu_race_mode = ::cuda_emu::set_race_mode({races if checked else 0});",
                      ""])
    tmpdir = Path(tempfile.mkdtemp(prefix="build-", dir=moddir))
    try:
        src = tmpdir / "main.cpp"
        src.write_text(text)
        pch, runtime = prebuilt(tc, opt, tier, verbose)
        pre = ["-include", str(pch), "-Winvalid-pch"] if pch else ["-include", str(HEADER_DIR / "cuda_emu.h")]
        out = tmpdir / f"{modname}.so"
        cmd = (tc["cxx"] + tc["flags"] + opt_flags(opt) + tier_flags(tier) + tc["includes"] + pre + flags +
               ["-fdiagnostics-color=never", "-fmax-errors=30", str(src), str(runtime), "-shared",
                "-o", str(out)] + fast_linker(tc["cxx"]) + tc["libs"])
        t0 = time.time()
        nvcc = start_nvcc(sources.cuda, tmpdir) if nvcc_check else None
        code, log = run(cmd, cwd=tmpdir)
        nvcc_error = finish_nvcc(nvcc, sources.cuda.text, verbose)
        if verbose:
            what = ("checked" if checked else "unchecked") + f", torch tier {tier}"
            print(f"[cuda_emu] compile ({what}, {'PCH' if pch else 'no PCH'}) {time.time() - t0:.1f} s, exit {code}")
            if code == 0 and log.strip():
                print(log)
        shutil.copyfile(src, moddir / "main.cpp")  # the generated source, for reading / debugging
        if code == 0:
            (moddir / "build-info.txt").write_text(f"checked={int(checked)} tier={tier}\n")
            os.replace(out, so)
            seal_module(so)
        return code, log, cmd, nvcc_error
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
