"""C++ routes to compiled Triton kernels: a small torch extension whose function checks its inputs, allocates
the output and launches a kernel that Triton compiled (through Python, on a shape's first call) with the CUDA
driver's ``cuLaunchKernel``, so that a later call spends in Python one look-up and one call into C++
(:class:`~gpu_course.triton_launch.Launcher`'s direct path still runs Python for the key, the grid and
the launcher's arguments). Two routes use it: notebook 10's LayerNorm node
(``kernels/cuda/layer_norm/node.cpp``) and notebook 07's matmul (``kernels/cuda/triton_route/matmul.cpp``);
both include ``kernels/cuda/triton_route/launch.h``, the driver's entry points and the kernels' registry.

* :func:`build` compiles a route's extension (once; later sessions load it from the course's build cache);
* :func:`kernel_layout` says how ``cuLaunchKernel`` takes a compiled kernel's arguments, or None where a
  launch from C++ would not be the launch Triton makes; :func:`register` gives the route its id.

>>> kernel_layout(_Ck(["*fp16", "i32", "constexpr", "fp32"], {}), 4)
('pi-f', 0)
>>> kernel_layout(_Ck(["*fp16", "fp16"], {}), 2) is None          # an fp16 scalar: not a type the route passes
True
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from .mode import ON_GPU

ROUTE_DIR = Path(__file__).parent / "kernels" / "cuda" / "triton_route"
_CODES = {"i32": "i", "i64": "l", "fp32": "f", "constexpr": "-"}


def build(name: str, source: Path, verbose: bool = False):
    """``(module, None)`` once the extension ``name`` is built from ``source`` (about a minute the first
    time: torch's ``cpp_extension``), else ``(None, why)``: cpu mode (a route launches compiled GPU kernels
    through the CUDA driver), or a failed build (its first error lines). Never raises for a failed build."""
    if not ON_GPU:
        return None, "cpu mode: a C++ route launches compiled GPU kernels through the CUDA driver"
    from torch.utils.cpp_extension import load
    from .cuda.cache_files import cache_dir
    out = cache_dir("cuda") / name
    out.mkdir(parents=True, exist_ok=True)
    try:
        mod = load(name=f"gpu_course_{name}", sources=[str(source)], extra_cflags=["-O2"], extra_ldflags=["-ldl"],
                   build_directory=str(out), verbose=verbose)
    except Exception as e:  # a compiler's error: say it, keep the Python path
        return None, "the build failed: " + " ".join(str(e).split())[:300]
    return mod, None


def kernel_layout(ck, nargs: int):
    """How a route passes compiled kernel ``ck``'s ``nargs`` runtime arguments (one letter each: ``p`` a
    pointer, ``i`` i32, ``l`` i64, ``f`` fp32, ``-`` compiled in), and how many null scratch pointers Triton
    appends, as ``(layout, scratch)``; None where a launch through ``cuLaunchKernel`` would not be the launch
    Triton makes (another argument type; scratch memory in use; a cluster of programs; a trailing argument
    that is not a constexpr)."""
    meta, sig = ck.metadata, list(ck.src.signature.values())
    if (getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0)
            or getattr(meta, "num_ctas", 1) != 1 or len(sig) < nargs or any(t != "constexpr" for t in sig[nargs:])):
        return None
    layout = "".join("p" if t.startswith("*") else _CODES.get(t, "?") for t in sig[:nargs])
    if "?" in layout:
        return None
    return layout, 2 if hasattr(meta, "profile_scratch_size") else 1 if hasattr(meta, "global_scratch_size") else 0


def register(mod, ck, nargs: int):
    """Compiled kernel ``ck`` registered with route ``mod`` (its ``add_kernel``): its id, or None where
    :func:`kernel_layout` says the route cannot launch it."""
    how = kernel_layout(ck, nargs)
    if how is None:
        return None
    return mod.add_kernel(ck.function, 32 * ck.metadata.num_warps, ck.metadata.shared, *how)


def _Ck(signature, meta):
    """A stand-in for a CompiledKernel in the doctests: its signature's types and metadata."""
    return SimpleNamespace(src=SimpleNamespace(signature=dict(enumerate(signature))),
                           metadata=SimpleNamespace(num_ctas=1, **meta))
