"""Looking at builds of CUDA C from a notebook (notebook 03): which translation unit of
``load_cuda``'s split build an edit changes (:func:`show_split`), what a series of builds costs
(:func:`timed_builds`), and the standard ``setup.py`` build of an extension (:func:`build_setup_py`).

>>> src = cuda_begin + '''
... __global__ void twice_k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }
... void twice(torch::Tensor x) { twice_k<<<1, 256>>>(x.data_ptr<float>(), x.numel()); }
... '''
>>> changed_units(src, "void twice(torch::Tensor x);", ["twice"], src.replace("*= 2;", "*= 3;"))
['device']
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..mode import ON_GPU
from . import cuda_begin  # noqa: F401  (used by the doctest)
from . import cache_files, gpu_build
from .language import includes, is_torch_header

UNITS = ("device", "host", "binding")
_COMPILER = {"device": "nvcc", "host": "the host compiler (c++)", "binding": "the host compiler (c++)"}


def torch_headers(unit_text: str) -> list:
    """The torch headers (``torch/``, ``ATen/``, ``c10/``, pybind11's, Python's) a translation unit includes.

    >>> torch_headers("#include <cstdio>\\n#include <ATen/ATen.h>\\n")
    ['ATen/ATen.h']
    """
    return [h for h in includes(unit_text) if is_torch_header(h)]


def changed_units(cuda_src: str, cpp_src: str, funcs: list, edited_src: str) -> list:
    """The units of the split build (device, host, binding) whose text differs between ``cuda_src``
    and ``edited_src``: the ones a rebuild after that edit compiles again (the others come from
    the cache of objects, which is keyed by each unit's text)."""
    before = gpu_build.make_units(cuda_src, cpp_src, funcs)
    after = gpu_build.make_units(edited_src, cpp_src, funcs)
    return [u for u in UNITS if getattr(before, u) != getattr(after, u)]


def show_split(cuda_src: str, cpp_src: str, funcs: list, edits: dict | None = None) -> dict:
    """Print the three units of ``load_cuda``'s GPU build of this source (compiler, torch headers,
    what each holds), then, for each ``{label: edited source}``, the units that edit changes.
    Returns ``{label: [units]}``. Pure Python (the split is text): it runs without a GPU."""
    units = gpu_build.make_units(cuda_src, cpp_src, funcs)
    n_stubs = units.device.count('extern "C" cudaError_t __course_launch_')
    holds = {"device": f"the kernels {', '.join(units.kernels)} and {n_stubs} launch stubs (one per <<<...>>>)",
             "host": "the host functions, each <<<...>>> now a call of its launch stub",
             "binding": f"the Python module for {', '.join(funcs)}, made from cpp_src alone"}
    for u in UNITS:
        heads = ", ".join(torch_headers(getattr(units, u)))
        print(f"{u:<9}compiled by {_COMPILER[u]}, " + (f"includes {heads}" if heads else "includes no torch header"))
        print(f"{'':<9}holds {holds[u]}")
    changed = {}
    if edits:
        print("\nunits an edit changes (only these are compiled again):")
        for label, src in edits.items():
            changed[label] = changed_units(cuda_src, cpp_src, funcs, src)
            print(f"   {label:<28}{', '.join(changed[label]) or 'none'}")
    return changed


def timed_builds(sources: dict, cpp_src: str, funcs: list, check=None, fresh_cache: bool = False) -> dict:
    """Build each ``{label: cuda_src}`` in order with ``load_cuda``, call ``check(module)`` on it
    (counted in the time: a build is done when its module works), print one line per build and
    return ``{label: seconds}``. ``fresh_cache=True`` (GPU build only) builds in an empty,
    temporary cache, removed afterwards, so that the first build is a cold one."""
    from . import load_cuda
    env = cache_files.CACHE_ENV["cuda"]
    saved = os.environ.get(env)
    if fresh_cache:
        if not ON_GPU:
            raise ValueError("timed_builds: fresh_cache is for the GPU build (the emulation has its own cache)")
        os.environ[env] = tempfile.mkdtemp(prefix="cuda-cache-")
    seconds = {}
    try:
        for label, src in sources.items():
            t0 = time.perf_counter()
            mod = load_cuda(src, cpp_src, funcs)
            if check is not None:
                check(mod)
            seconds[label] = time.perf_counter() - t0
            print(f"{label:<40} {seconds[label]:6.2f} s")
    finally:
        if fresh_cache:
            shutil.rmtree(os.environ[env], ignore_errors=True)
            if saved is None:
                os.environ.pop(env)
            else:
                os.environ[env] = saved
    return seconds


@dataclass
class SetupBuild:
    """The result of :func:`build_setup_py`: the exit code, the seconds the build took, the
    imported module (``None`` if the build failed) and the compiler's error lines."""
    returncode: int
    seconds: float
    module: object = None
    errors: str = ""

    def __str__(self):
        line = f"python setup.py build_ext: exit code {self.returncode}, {self.seconds:.1f} s"
        return line if self.module is not None else f"{line}\n{self.errors}"


def build_setup_py(src_dir, name: str, arch_list: str | None = None, timeout: int = 540) -> SetupBuild:
    """Build the extension ``name`` of ``src_dir/setup.py`` (``python setup.py build_ext``) in a
    temporary directory, so that nothing lands in ``src_dir``, and import it. ``arch_list`` sets
    ``TORCH_CUDA_ARCH_LIST`` (default on a GPU: only this GPU's, a faster build). On failure the
    module is ``None`` and ``errors`` holds the compiler's error lines (or the log's last lines)."""
    import importlib.util
    src_dir = Path(src_dir)
    if not (src_dir / "setup.py").exists():
        raise FileNotFoundError(f"build_setup_py: no setup.py in {src_dir}")
    env = dict(os.environ)
    if arch_list is None and ON_GPU:
        import torch
        arch_list = "{}.{}".format(*torch.cuda.get_device_capability())
    if arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = arch_list
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    try:
        shutil.copytree(src_dir, tmp / "src", ignore=shutil.ignore_patterns("build", "*.so", "__pycache__"))
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp / "lib"),
                            "--build-temp", str(tmp / "build")], cwd=tmp / "src", capture_output=True,
                           text=True, env=env, timeout=timeout)
        seconds = time.perf_counter() - t0
        so = next((tmp / "lib").glob(f"{name}*.so"), None) if r.returncode == 0 else None
        if so is None:  # ninja prints the compiler's errors on stdout: those lines first
            lines = (r.stdout + r.stderr).splitlines()
            errors = "\n".join([ln for ln in lines if "error" in ln.lower()][:15] or lines[-15:])
            return SetupBuild(r.returncode, seconds, None, errors)
        spec = importlib.util.spec_from_file_location(name, so)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)   # loaded: the file may go now
        return SetupBuild(r.returncode, seconds, module)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
