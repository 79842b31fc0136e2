"""CUDA C from a notebook: ``cuda_begin`` (the prelude every source starts with), ``get_sig``
(a function's declaration for ``cpp_src``) and ``load_cuda`` (build and load), in both modes.

How a source reaches the hardware:

* gpu mode: :mod:`.gpu_build` splits it into device, host and binding units built by nvcc and g++
  (one nvcc unit through ``torch.utils.cpp_extension.load_inline`` where the split cannot work);
* cpu mode: :mod:`.emulation` rewrites it into C++ that runs the kernels on the CPU.

Both read C++ through :mod:`.cxx` (so does :func:`get_sig`), check ``funcs`` with
:func:`check_funcs`, and raise the errors of :mod:`.errors`; the last build's log is kept here
(:func:`last_build_log`). :func:`kernel_launches` says which kernels a call launched (for
exercise checks), in both modes.
"""
from __future__ import annotations

import os
import re

import torch

from ..mode import ON_GPU
from . import cxx
from .errors import CudaBuildError, CudaEmulationError

__all__ = ["cuda_begin", "get_sig", "load_cuda", "last_build_log", "kernel_launches", "check_funcs",
           "CudaBuildError", "CudaEmulationError"]

cuda_begin = r"""
#include <torch/extension.h>
#include <stdio.h>
#include <c10/cuda/CUDAException.h>

// Checks with messages a learner can act on. They raise a Python RuntimeError, never exit().
#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor (on the GPU): pass x.to(utils.DEVICE)")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous: call .contiguous() on it first")
#define CHECK_INPUT(x) do { CHECK_CUDA(x); CHECK_CONTIGUOUS(x); } while (0)
// Wrap a CUDA runtime call: a failure becomes a Python exception naming the call and the error.
#define CUDA_CHECK(call) do { cudaError_t err_ = (call); TORCH_CHECK(err_ == cudaSuccess, "CUDA error: ", cudaGetErrorString(err_), " in ", #call); } while (0)

inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b; }
"""


def check_funcs(cpp_src: str, funcs, error=ValueError) -> list:
    """``funcs`` as a list, after checking that each is a C++ name that ``cpp_src`` declares
    (the binding to Python sees only cpp_src, on the GPU as in the emulation); raises ``error``.

    >>> check_funcs("torch::Tensor square(torch::Tensor x);", "square")
    ['square']
    >>> check_funcs("torch::Tensor square(torch::Tensor x);", ["sqaure"])
    Traceback (most recent call last):
    ...
    ValueError: load_cuda: funcs lists 'sqaure', but cpp_src declares no such function; add its declaration, e.g. utils.get_sig('sqaure', cuda_src)
    """
    funcs = [funcs] if isinstance(funcs, str) else list(funcs)
    toks = cxx.tokenize(cpp_src)
    called = {toks[k].text for k in range(len(toks) - 1) if toks[k].kind == "id" and toks[k + 1].text == "("}
    for f in funcs:
        if not isinstance(f, str) or not re.fullmatch(r"[A-Za-z_]\w*", f):
            raise error(f"load_cuda: funcs lists {f!r}, which is not a C++ function name")
        if f not in called:
            raise error(f"load_cuda: funcs lists {f!r}, but cpp_src declares no such function; "
                        f"add its declaration, e.g. utils.get_sig({f!r}, cuda_src)")
    return funcs


_last_log = {"log": ""}  # the one store of the last build's log (see last_build_log)


def load_cuda(cuda_src: str, cpp_src: str, funcs, *, opt: bool = True, verbose: bool = False,
              fast: bool = True, extra_cuda_cflags=(), racecheck=None):
    """Compile CUDA C (kernels + torch host functions) and return a module with ``funcs``.

    ``cuda_src`` usually starts with :data:`cuda_begin`; ``cpp_src`` declares each function in
    ``funcs`` (:func:`get_sig` writes a declaration). ``opt=False`` builds for debugging
    (``-O0 -G``). Builds are cached by content: an unchanged source loads instantly, an edited
    kernel recompiles only the kernels.

    * gpu mode: nvcc, with the kernels compiled apart from the torch headers (see gpu_build.py);
      sources the split cannot handle, and ``fast=False``, are built as one nvcc unit by
      ``torch.utils.cpp_extension.load_inline`` instead.
    * cpu mode: the same source runs through the course's CPU emulation of CUDA (emulation/).
      ``racecheck`` (default on; False, or "warn" to warn instead of raising) makes a data race on
      ``__shared__`` memory, or a non-atomic ``+=`` on one global word from several threads, an
      error there. On a GPU it is ignored: run ``compute-sanitizer --tool racecheck`` instead.

    A compile error raises with the compiler's own error lines first; the kernel stays alive.
    The module has ``build_log`` (also :func:`last_build_log`) and the names of its kernels in
    ``_course_kernels``; see :func:`kernel_launches` for counting launches.
    """
    funcs = check_funcs(cpp_src, funcs)
    if not funcs:
        raise ValueError("load_cuda: funcs is empty: name the functions Python should call")
    try:
        mod = _build(cuda_src, cpp_src, funcs, opt, verbose, fast, extra_cuda_cflags, racecheck)
    except (CudaBuildError, CudaEmulationError) as e:
        _last_log["log"] = getattr(e, "log", "") or str(e)
        raise
    _last_log["log"] = getattr(mod, "build_log", "")
    toks = cxx.tokenize(cuda_src)
    mod._course_kernels = tuple(sorted({f.name for f in cxx.find_functions(
        toks, cxx.match_brackets(toks), ("__global__",))}))
    return mod


def _build(cuda_src, cpp_src, funcs, opt, verbose, fast, extra_cuda_cflags, racecheck):
    if not ON_GPU:
        from . import emulation
        return emulation.load(cuda_src, cpp_src, funcs, opt=opt, verbose=verbose, racecheck=racecheck)
    from . import gpu_build
    reason = "fast=False"
    if fast:
        try:
            return gpu_build.build_split(cuda_src, cpp_src, funcs, opt=opt,
                                          extra_cuda_cflags=extra_cuda_cflags, verbose=verbose)
        except gpu_build.NeedsClassicBuild as e:
            reason = str(e)
            if verbose:
                print(f"load_cuda: building as one nvcc unit ({reason})")
    return _load_inline_classic(cuda_src, cpp_src, funcs, opt, verbose, extra_cuda_cflags, reason)


def _load_inline_classic(cuda_src, cpp_src, funcs, opt, verbose, extra_cuda_cflags, reason=""):
    """One nvcc unit through load_inline, with real optimisation flags and only this GPU's arch."""
    from . import gpu_build
    from .errors import format_compile_errors
    from torch.utils.cpp_extension import load_inline
    flags = (["-O3", "-lineinfo"] if opt else ["-O0", "-G", "-g"]) + list(extra_cuda_cflags)
    key = gpu_build._digest(cuda_src, cpp_src, *funcs, *flags)
    build_dir = gpu_build.CACHE / "inline" / key
    build_dir.mkdir(parents=True, exist_ok=True)
    major, minor = torch.cuda.get_device_capability()
    old = os.environ.get("TORCH_CUDA_ARCH_LIST")
    sm = gpu_build.arch_name(major, minor)   # 9.0a on an H100, as the split build
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}" + sm[len(f"{major}{minor}"):]
    try:
        mod = load_inline(f"course_inline_{key}", cpp_sources=[cpp_src],
                          cuda_sources=[f'#line 1 "{gpu_build.SOURCE_NAME}"\n' + cuda_src],
                          functions=funcs, extra_cuda_cflags=flags, extra_cflags=["-O2"],
                          build_directory=str(build_dir), verbose=verbose)
    except RuntimeError as e:
        raise CudaBuildError(
            "load_cuda: the CUDA source does not build:\n"
            + format_compile_errors(str(e), {gpu_build.SOURCE_NAME: cuda_src, "cpp_src": cpp_src})
            + "\n(the full compiler output is in utils.last_build_log())", log=str(e)) from None
    finally:
        if old is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = old
    mod.build_log = (f"built as one nvcc unit by torch.utils.cpp_extension.load_inline in {build_dir} "
                     f"(the split build did not apply: {reason})")
    return mod


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
    toks = cxx.tokenize(src)
    match = cxx.match_brackets(toks)
    kernel, host = False, set()
    for s in cxx.statements(toks, match):
        if s.kind != "decl":
            continue
        d = cxx.analyze(toks, match, s)
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


def kernel_launches(module, fn, *args, **kwargs) -> dict:
    """Which kernels of ``module`` the call ``fn(*args, **kwargs)`` launched, and how often:
    ``{kernel name: launches}``, for exercise checks that the learner's kernel really ran.

    The contract: names are the kernel's own name, without namespace or template arguments
    (``matmul_k<16>`` counts as ``matmul_k``); only kernels with at least one launch appear;
    ``fn`` is called once and its result dropped. How the launches are counted:

    * modules of the GPU split build count every launch in their launch stubs
      (``module._course_launches()`` / ``module._course_reset_launches()``);
    * modules of the CPU emulation count them in the emulator
      (``module._cuda_emu_launches()`` / ``module._cuda_emu_reset_launches()``);
    * modules built as one nvcc unit (the split's fallback) have no counters: the call runs under
      ``torch.profiler`` and its CUDA kernels are counted by name, keeping the kernels
      ``cuda_src`` defines (``module._course_kernels``) when the module says which they are
      (without that list, torch's own kernels, e.g. the fill of ``torch::zeros``, count too).

    >>> class Mod:                                   # a stand-in with the emulation's counters
    ...     counts = {}
    ...     def _cuda_emu_reset_launches(self): self.counts = {}
    ...     def _cuda_emu_launches(self): return self.counts
    ...     def square(self, n): self.counts["square_k"] = self.counts.get("square_k", 0) + n
    >>> m = Mod()
    >>> kernel_launches(m, m.square, 2)
    {'square_k': 2}
    """
    for get, reset in (("_course_launches", "_course_reset_launches"),
                       ("_cuda_emu_launches", "_cuda_emu_reset_launches")):
        if hasattr(module, get) and hasattr(module, reset):
            getattr(module, reset)()
            fn(*args, **kwargs)
            return _by_kernel(getattr(module, get)().items())
    if not ON_GPU or not torch.cuda.is_available():
        raise RuntimeError("kernel_launches: this module has no launch counters (it was not built "
                           "by load_cuda), and without a GPU there is no profiler to ask")
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args, **kwargs)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA
             and not e.name.startswith(("Memcpy", "Memset"))]
    counts = _by_kernel((n, 1) for n in names)
    known = getattr(module, "_course_kernels", None)
    return {k: v for k, v in counts.items() if k in known} if known else counts


def _by_kernel(items) -> dict:
    """Sum (name, count) pairs by :func:`cxx.kernel_base_name`, keeping counts above 0."""
    out = {}
    for name, count in items:
        if count:
            base = cxx.kernel_base_name(name)
            out[base] = out.get(base, 0) + int(count)
    return dict(sorted(out.items()))
