"""The build of one source on a GPU: the split units compiled in parallel (each only when its text
changed), linked with an init unit that names the module, and imported (:func:`build_split`); or,
where the split does not apply, one nvcc unit through ``torch.utils.cpp_extension.load_inline``
(:func:`build_one_unit`). :func:`build` chooses, and is what ``load_cuda`` calls."""
from __future__ import annotations

import os
import subprocess
import warnings
from concurrent.futures import ThreadPoolExecutor

from .. import cache_files
from ..errors import CudaBuildError, format_compile_errors
from ..language import STD_FLAG
from . import cxx_runtime
from .attribution import failure
from .compilers import arch_name, cxx_flags, digest, nvcc_flags, toolchain
from .loading import load_module
from .objects import COMPILE_TIMEOUT_S, cache_dir, compile_unit, unit_dirs
from .splitter import make_units
from .units import SOURCE_NAME, NeedsClassicBuild
from .templates import init_unit


def build(cuda_src: str, cpp_src: str, funcs: list, *, opt: bool = True, verbose: bool = False,
          fast: bool = True, extra_cuda_cflags=(), parsed=None):
    """Build and load ``cuda_src`` on this GPU: the split build, or one nvcc unit where the split
    does not apply (a source it cannot split with certainty, or a unit that failed where one unit
    would not) or with ``fast=False``. The reason for one unit, one sentence, ends the module's
    ``build_log`` (and is printed with ``verbose``). ``parsed``: load_cuda's ParsedSource of ``cuda_src``."""
    reason = "fast=False"
    if fast:
        try:
            return build_split(cuda_src, cpp_src, funcs, opt=opt, extra_cuda_cflags=extra_cuda_cflags,
                               verbose=verbose, parsed=parsed)
        except NeedsClassicBuild as e:
            reason = str(e)
            if verbose:
                print(f"load_cuda: building as one nvcc unit ({reason})")
    return build_one_unit(cuda_src, cpp_src, funcs, opt=opt, verbose=verbose,
                          extra_cuda_cflags=extra_cuda_cflags, reason=reason)


def build_split(cuda_src: str, cpp_src: str, funcs: list, opt: bool = True,
                extra_cuda_cflags=(), verbose: bool = False, _retry: bool = True, parsed=None):
    """Build with the split units (see the package's docstring); return the loaded module, with the
    build log as ``mod.build_log``. Raises :class:`CudaBuildError` (with ``.log``) for the
    learner's errors and :class:`NeedsClassicBuild` for what the split cannot build."""
    units = make_units(cuda_src, cpp_src, funcs, parsed)
    tc = toolchain()
    device_flags = nvcc_flags(tc["nvcc"], tc["arch"], opt, extra_cuda_cflags)
    host_flags = cxx_flags(tc, opt)
    src_dir, obj_dir = unit_dirs()
    jobs = {}
    for kind, text, flags, ext in (("device", units.device, device_flags, "cu"),
                                   ("host", units.host, host_flags, "cpp"),
                                   ("binding", units.binding, host_flags, "cpp")):
        key = digest(kind, text, flags, tc["id"])
        jobs[kind] = (flags, text, src_dir / f"{kind}-{key}.{ext}", obj_dir / f"{kind}-{key}.o")
    so_key = digest(*[j[3].name for j in jobs.values()])
    so_dir = cache_dir() / "lib" / so_key
    module = f"course_cuda_{so_key}"  # unique to this build (see make_units)
    init_text = init_unit(module)
    init_key = digest("init", init_text, host_flags, tc["id"])
    jobs["init"] = (host_flags, init_text, src_dir / f"init-{init_key}.cpp", obj_dir / f"init-{init_key}.o")
    so_path = so_dir / f"{module}.so"
    classic_mark = so_dir / "needs-classic"
    if classic_mark.exists():  # this very source failed to split before: do not compile it again
        raise NeedsClassicBuild(classic_mark.read_text())

    def classic(reason: str, log: str):
        so_dir.mkdir(parents=True, exist_ok=True)
        (so_dir / "build.log").write_text(log)
        classic_mark.write_text(reason)
        return NeedsClassicBuild(reason)

    if not cache_files.usable(so_path, "module"):
        with ThreadPoolExecutor(3) as pool:
            results = {k: pool.submit(compile_unit, *j) for k, j in jobs.items()}
            results = {k: f.result() for k, f in results.items()}
        log = "\n".join(f"== {kind} unit: {'cached' if secs == 0 and obj else f'{secs:.1f} s'}\n{out}"
                        for kind, (obj, out, secs) in results.items())
        for kind in ("device", "host", "binding"):
            obj, out, _ = results[kind]
            if obj is None:
                other = results["host" if kind == "device" else "device"][1]
                err = failure(kind, out, units, cuda_src, cpp_src, other)
                if isinstance(err, NeedsClassicBuild):
                    raise classic(str(err), log)
                err.log = log
                raise err
        so_dir.mkdir(parents=True, exist_ok=True)
        cache_files.clean_temps(so_dir)
        tmp = so_dir / f"{module}.tmp{os.getpid()}.so"
        # -Bsymbolic: the library's own references (its PyInit's module definition, the host functions the
        # binding calls) bind to its own definitions, never to a same-named symbol of a module loaded before
        # (every edit of a source keeps the module's name, so that its binding unit stays cached)
        r = subprocess.run([tc["cxx"], "-shared", "-Wl,-Bsymbolic", *[str(r[0]) for r in results.values()], "-o",
                            str(tmp), *tc["libs"]], capture_output=True, text=True,
                           timeout=COMPILE_TIMEOUT_S)
        log += f"\n== link\n{r.stdout}{r.stderr}"
        if r.returncode == 0 and cxx_runtime.carries_own_runtime(tmp):
            log += "\n" + cxx_runtime.WARNING.format(name=module)
            warnings.warn(cxx_runtime.WARNING.format(name=f"load_cuda's module {module}"), RuntimeWarning, stacklevel=2)
        if r.returncode != 0:  # a learner cannot define a symbol twice without a compile error
            tmp.unlink(missing_ok=True)
            bad = cache_files.blamed(r.stdout + r.stderr, obj_dir)
            if bad and _retry:  # a damaged cached object, not the learner's source
                for p in bad:
                    cache_files.discard(p)
                print(f"The link failed in the cached {', '.join(p.name for p in bad)}: "
                      f"rebuilding {'it' if len(bad) == 1 else 'them'} once.")
                return build_split(cuda_src, cpp_src, funcs, opt, extra_cuda_cflags, verbose,
                                   _retry=False, parsed=parsed)
            raise classic("the units do not link: " + (r.stdout + r.stderr).strip()[-300:], log)
        tmp.replace(so_path)
        cache_files.seal(so_path)
        cache_files.write_atomic(so_dir / "build.log", log)
    else:  # a cache hit: the log of the build that made this library
        log_file = so_dir / "build.log"
        log = (log_file.read_text() if log_file.exists() else "") + f"\n== loaded from cache: {so_path}"
    if verbose:
        print(log)
    try:
        mod = load_module(module, so_path, funcs)
    except NeedsClassicBuild as e:
        so_path.unlink(missing_ok=True)
        raise classic(str(e), log) from None
    except CudaBuildError as e:
        e.log = log
        raise
    mod.build_log = log
    mod._course_kernels = units.kernels
    return mod


# torch's load_inline compiles with __CUDA_NO_HALF_OPERATORS__, __CUDA_NO_HALF_CONVERSIONS__,
# __CUDA_NO_HALF2_OPERATORS__ and __CUDA_NO_BFLOAT16_CONVERSIONS__ defined, which turns off __half's and
# __nv_bfloat16's operators and casts (`(float)h`, `a + b`); nvcc alone, the split build and cpu mode keep
# them, so the one-unit build undefines them again (as FlashAttention's and apex's builds do): one source
# means the same on every path.
HALF_AS_CUDA = ("-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__")


def build_one_unit(cuda_src: str, cpp_src: str, funcs: list, *, opt: bool = True, verbose: bool = False,
                   extra_cuda_cflags=(), reason: str = ""):
    """One nvcc unit through ``load_inline``, as torch builds it, with real optimisation flags, this
    GPU's architecture only and the course's C++ standard; cached under ``inline/`` by content.
    ``reason`` (why the split build did not apply) ends the module's ``build_log``."""
    import torch
    from torch.utils.cpp_extension import load_inline
    flags = (["-O3", "-lineinfo"] if opt else ["-O0", "-G", "-g"]) + list(HALF_AS_CUDA) + list(extra_cuda_cflags)
    runtime = cxx_runtime.link_flags()   # torch's libstdc++, not a copy of it
    key = digest(cuda_src, cpp_src, *funcs, *flags, STD_FLAG, *runtime)
    build_dir = cache_dir() / "inline" / key
    build_dir.mkdir(parents=True, exist_ok=True)
    major, minor = torch.cuda.get_device_capability()
    old = os.environ.get("TORCH_CUDA_ARCH_LIST")
    sm = arch_name(major, minor)   # 9.0a on an H100, as the split build
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}" + sm[len(f"{major}{minor}"):]
    try:
        mod = load_inline(f"course_inline_{key}", cpp_sources=[cpp_src],
                          cuda_sources=[f'#line 1 "{SOURCE_NAME}"\n' + cuda_src],
                          functions=funcs, extra_cuda_cflags=[STD_FLAG, *flags], extra_cflags=[STD_FLAG, "-O2"],
                          extra_ldflags=runtime,
                          build_directory=str(build_dir), verbose=verbose)
    except RuntimeError as e:
        raise CudaBuildError(
            "load_cuda: the CUDA source does not build:\n"
            + format_compile_errors(str(e), {SOURCE_NAME: cuda_src, "cpp_src": cpp_src})
            + "\n(the full compiler output is in utils.last_build_log())"
            + (f"\n(built as one unit by torch's load_inline: {reason})" if reason else ""), log=str(e)) from None
    finally:
        if old is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = old
    mod.build_log = (f"built as one nvcc unit by torch.utils.cpp_extension.load_inline in {build_dir} "
                     f"(the split build did not apply: {reason})")
    return mod
