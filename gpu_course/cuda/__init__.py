"""CUDA C from a notebook: ``cuda_begin`` (the prelude every source starts with), ``get_sig``
(a function's declaration for ``cpp_src``) and ``load_cuda`` (build and load), in both modes.

How a source reaches the hardware:

* gpu mode: :mod:`.gpu_build` splits it into device, host and binding units built by nvcc and g++
  (one nvcc unit through ``torch.utils.cpp_extension.load_inline`` where the split cannot work);
* cpu mode: :mod:`.emulation` rewrites it into C++ that runs the kernels on the CPU.

Both read C++ through :mod:`.cxx` (so does :func:`get_sig`), check ``funcs`` with
:func:`check_funcs`, and raise the errors of :mod:`.errors`; the last build's log is kept here
(:func:`last_build_log`). Every module counts its launches and logs the latest ones, in both modes,
under the names of :mod:`.counters`: read them with :func:`launch_counts` and :func:`launch_log`
(:func:`gpu_course.launches.launches` ties them to the host calls that made them).

One switch changes what ``load_cuda`` builds, and only inside a ``with`` block: :func:`appending`
(an exercise check compiles its own launcher of the learner's kernel into the learner's build). It is
the only state that another layer sets here; outside such a block ``load_cuda`` builds what it is given.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

from ..mode import ON_GPU
from . import cxx
from .counters import launch_counts, launch_log, reset_launches
from .errors import CudaBuildError, CudaEmulationError
from .files import COMMON, cuda_source
from .parsed import check_funcs, parse, prepare

__all__ = ["cuda_begin", "get_sig", "load_cuda", "last_build_log", "check_funcs", "launch_counts", "launch_log",
           "reset_launches", "appending", "CudaBuildError", "CudaEmulationError"]

# The prelude (includes, the CHECK_* macros, cdiv): the text of gpu_course/kernels/cuda/common.cuh inside its
# include guard. Every .cu file of the course includes that header, so it is written once, in C++.
cuda_begin = cuda_source(COMMON)


_last_log = {"log": ""}  # the one store of the last build's log (see last_build_log)
_BUILT: dict = {}  # the modules load_cuda returned in this session, by _build_key
# what else decides a build: the emulation's switches (CUDA_EMU_*), the compilers found and the GPU targets
_BUILD_ENV = ("PATH", "CXX", "CUDA_HOME", "TORCH_CUDA_ARCH_LIST")
_APPENDED: list = []  # (source, code, declaration, function) of the open appending() blocks, innermost last


@contextmanager
def appending(source: str, code: str, decl: str, fn: str):
    """Inside the block, a ``load_cuda`` of exactly ``source`` also compiles ``code`` (after it) and
    exports its host function ``fn`` (declared by ``decl``): an exercise check adds its own launcher
    of the learner's kernel to the learner's build, one build instead of two (in cpu mode, where a
    build is an emulated compile; see gpu_course/exercises/cuda_launch.py). Any other source, a
    ``cpp_src`` that is not one string, ``funcs`` given as one string or already naming ``fn``, is
    built as given. Blocks nest, each matching the source as the blocks opened before it left it. The build is cached under the text it
    compiled, so the same source outside the block is another build.

    >>> with appending("int k;", "int f() { return 1; }", "int f();", "f"):
    ...     _with_appended("int k;", "", ["g"])
    ('int k;\\nint f() { return 1; }', '\\nint f();', ['g', 'f'])
    >>> _with_appended("int k;", "", ["g"])
    ('int k;', '', ['g'])
    """
    _APPENDED.append((source, code, decl, fn))
    try:
        yield
    finally:
        _APPENDED.pop()


def _with_appended(cuda_src, cpp_src, funcs):
    """``(cuda_src, cpp_src, funcs)`` with what the open :func:`appending` blocks add to this source."""
    for source, code, decl, fn in _APPENDED:
        if cuda_src == source and isinstance(cpp_src, str) and not isinstance(funcs, str) and fn not in funcs:
            cuda_src, cpp_src, funcs = cuda_src + "\n" + code, cpp_src + "\n" + decl, [*funcs, fn]
    return cuda_src, cpp_src, funcs


def load_cuda(cuda_src: str, cpp_src: str, funcs, *, opt: bool = True, verbose: bool = False,
              fast: bool = True, extra_cuda_cflags=(), racecheck=None):
    """Compile CUDA C (kernels + torch host functions) and return a module with ``funcs``.

    ``cuda_src`` usually starts with :data:`cuda_begin`; ``cpp_src`` declares each function in
    ``funcs`` (:func:`get_sig` writes a declaration). ``opt=False`` builds for debugging
    (``-O0 -G``). Builds are cached by content: an unchanged source loads instantly (in this
    session without reading the source again), an edited kernel recompiles only the kernels.

    * gpu mode: nvcc, with the kernels compiled apart from the torch headers (see gpu_build/);
      sources the split cannot handle, and ``fast=False``, are built as one nvcc unit by
      ``torch.utils.cpp_extension.load_inline`` instead.
    * cpu mode: the same source runs through the course's CPU emulation of CUDA (emulation/).
      ``racecheck`` (default on; False, or "warn" to warn instead of raising) makes a data race on
      ``__shared__`` memory, or a non-atomic ``+=`` on one global word from several threads, an
      error there. On a GPU it is ignored: run ``compute-sanitizer --tool racecheck`` instead.

    A compile error raises with the compiler's own error lines first; the kernel stays alive.
    The module has ``build_log`` (also :func:`last_build_log`) and the names of its kernels in
    ``_course_kernels``; :func:`launch_counts` and :func:`launch_log` read what it launched (a module
    built by ``load_inline`` counts nothing), ``utils.launches(modules=[mod])`` records which of its
    kernels a call launched.
    """
    cuda_src, cpp_src, funcs = _with_appended(cuda_src, cpp_src, funcs)  # inside an appending() block
    key = _build_key(cuda_src, cpp_src, funcs, opt, fast, extra_cuda_cflags, racecheck)
    mod = None if verbose or key is None else _BUILT.get(key)
    if mod is not None:  # built in this session: nothing to read, parse or compile
        _last_log["log"] = getattr(mod, "build_log", "")
        return mod
    sources = prepare(cuda_src, cpp_src, funcs)  # parsed once, for the back end and _course_kernels
    if not sources.funcs:
        raise ValueError("load_cuda: funcs is empty: name the functions Python should call")
    try:
        mod = _build(sources, opt, verbose, fast, extra_cuda_cflags, racecheck)
    except (CudaBuildError, CudaEmulationError) as e:
        _last_log["log"] = getattr(e, "log", "") or str(e)
        raise
    _last_log["log"] = getattr(mod, "build_log", "")
    mod._course_kernels = sources.cuda.kernels
    if key is not None:
        _BUILT[key] = mod
    return mod


def _build_key(cuda_src, cpp_src, funcs, opt, fast, extra_cuda_cflags, racecheck):
    """What names one build: the texts, the arguments, the mode and the environment that decides
    a build (the back end's cache directory too: a build in a fresh one is a new build);
    None when an argument cannot be a key (load_cuda then builds, and reports a bad one)."""
    env = tuple((k, v) for k, v in os.environ.items() if k.startswith("CUDA_EMU_") or k in _BUILD_ENV)
    try:
        key = (cuda_src, cpp_src, funcs if isinstance(funcs, str) else tuple(funcs), bool(opt), bool(fast),
               tuple(extra_cuda_cflags), racecheck, ON_GPU, _cache_root(), env)
        hash(key)
    except TypeError:
        return None
    return key


def _cache_root() -> str:
    """The directory the back end of this mode caches its builds in."""
    from .cache_files import cache_dir
    return str(cache_dir("cuda" if ON_GPU else "cuda_emu"))


def _build(sources, opt, verbose, fast, extra_cuda_cflags, racecheck):
    cuda_src, cpp_src, funcs = sources.cuda.text, sources.cpp.text, list(sources.funcs)
    if not ON_GPU:
        from . import emulation
        return emulation.load(cuda_src, cpp_src, funcs, opt=opt, verbose=verbose, racecheck=racecheck,
                              sources=sources)
    from . import gpu_build
    return gpu_build.build(cuda_src, cpp_src, funcs, opt=opt, verbose=verbose, fast=fast,
                           extra_cuda_cflags=extra_cuda_cflags, parsed=sources.cuda)


def last_build_log() -> str:
    """The full compiler output of the last :func:`load_cuda` build in this session (successful
    or not; also ``mod.build_log`` of a module and ``.log`` of a build error)."""
    return _last_log["log"] or "(no build yet in this session)"


def get_sig(fname: str, src: str) -> str:
    """The C++ declaration of function ``fname`` defined in ``src``, ready for ``cpp_src``.

    >>> get_sig("square", "torch::Tensor square(torch::Tensor x) {\\n  return x*x;\\n}")
    'torch::Tensor square(torch::Tensor x);'

    A function defined in a namespace is declared in it and brought to file scope, where the
    binding looks for it:

    >>> get_sig("f", "namespace ops { int f(int a) { return a; } }")
    'namespace ops { int f(int a); } using ops::f;'
    """
    p = parse(src)
    toks = p.toks
    kernel, host = False, set()
    for s, d in p.declarations:
        if d.kind != "function" or d.body is None:
            continue
        if d.specifiers & {"__global__", "__device__"}:
            kernel |= d.name == fname  # kernels are not bound to Python: look for the host function
            continue
        host.add(d.name)
        if d.name != fname:
            continue
        sig = cxx.text_of(toks, s.a, d.head_end).rstrip() + ";"
        if any(n.startswith("extern") for n in s.scope) and not sig.startswith("extern"):
            sig = 'extern "C" ' + sig
        ns = [n for n in s.scope if not n.startswith("extern")]
        if "" in ns:
            raise ValueError(f"get_sig: {fname!r} is in an anonymous namespace, so no other file "
                             f"(cpp_src) can call it; move it out of the namespace")
        if ns:
            path = "::".join(ns)
            return f"namespace {path} {{ {sig} }} using {path}::{fname};"
        return sig
    if kernel:
        raise ValueError(f"get_sig: {fname!r} is a kernel (__global__/__device__); Python calls "
                         f"the host function that launches it, so ask for that one's signature")
    problem = cxx.unbalanced(toks, src)
    if problem:
        raise ValueError(f"get_sig: {problem}, so the functions of the source cannot be read; "
                         f"add the missing one.")
    raise ValueError(f"get_sig: no definition of {fname!r} found in the source; host functions "
                     f"defined there: {', '.join(sorted(host)) or 'none'}")
