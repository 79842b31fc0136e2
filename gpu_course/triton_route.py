"""C++ routes to compiled Triton kernels: a small torch extension whose function checks its inputs, allocates
the output and launches a kernel that Triton compiled (through Python, on a shape's first call) with the CUDA
driver's ``cuLaunchKernel``, so that a later call spends in Python one look-up and one call into C++
(:class:`~gpu_course.triton_launch.Launcher`'s direct path still runs Python for the key, the grid and
the launcher's arguments). Five routes use it: notebook 10's LayerNorm node
(``kernels/cuda/layer_norm/node.cpp``), notebook 07's matmul (``kernels/cuda/triton_route/matmul.cpp``),
notebook 06's softmax and means (``kernels/cuda/triton_route/softmax_mean.cpp``), notebook 11's attention
forward (``kernels/cuda/triton_route/attention.cpp``, which fills its descriptor kernel's TMA tensor maps) and
notebook 15's k-major int4 GEMV (``kernels/cuda/triton_route/quant_gemv.cpp``, which keeps a workspace per
stream), all but the first through a :class:`Route`; each includes ``kernels/cuda/triton_route/launch.h``, the driver's entry points
(``cuLaunchKernel``, ``cuTensorMapEncodeTiled``) and the kernels' registry.

* :func:`build` compiles a route's extension (once; later sessions load it from the course's build cache);
* :func:`kernel_layout` says how ``cuLaunchKernel`` takes a compiled kernel's arguments, or None where a
  launch from C++ would not be the launch Triton makes; :func:`register` gives the route its id;
* :class:`Route` holds one route's state for the Python wrapper in front of a launcher: the extension, whether
  it is on, and what each kind of call (a key) maps to.

>>> kernel_layout(_Ck(["*fp16", "i32", "constexpr", "fp32"], {}), 4)
('pi-f', 0)
>>> kernel_layout(_Ck(["*fp16", "fp16"], {}), 2) is None          # an fp16 scalar: not a type the route passes
True
"""
from __future__ import annotations

import contextlib
import functools
import re
from pathlib import Path
from types import SimpleNamespace

from .mode import ON_GPU
from .triton_launch import direct_allowed

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
    pointer, ``i`` i32, ``l`` i64, ``f`` fp32, ``-`` compiled in; a host tensor descriptor as Triton's launcher
    passes it, ``T`` its tensor map and then its shape's and strides' letters), and how many null scratch pointers
    Triton appends, as ``(layout, scratch)``; None where a launch through ``cuLaunchKernel`` would not be the
    launch Triton makes (another argument type; scratch memory in use; a cluster of programs, a cooperative grid or
    a programmatic dependent launch; a trailing argument that is not a constexpr).

    >>> kernel_layout(_Ck(["tensordesc<fp16[64, 64]>", "*fp32", "i32"], {}, [{"swizzle": 3}]), 3)
    ('Tiillpi', 0)
    """
    meta, sig = ck.metadata, list(ck.src.signature.values())
    if (getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0)
            or getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "launch_cooperative_grid", False)
            or getattr(meta, "launch_pdl", False) or len(sig) < nargs
            or any(t != "constexpr" for t in sig[nargs:])):
        return None
    words = _expanded(sig[:nargs], getattr(meta, "tensordesc_meta", None))
    if words is None:
        return None
    layout = "".join(_letter(t) for t in words)
    if "?" in layout:
        return None
    return layout, 2 if hasattr(meta, "profile_scratch_size") else 1 if hasattr(meta, "global_scratch_size") else 0


def _letter(t) -> str:
    if not isinstance(t, str):
        return "?"
    return "p" if t.startswith("*") else "T" if t == "nvTmaDesc" else _CODES.get(t, "?")


def _expanded(sig, tensordesc_meta):
    """The kernel's parameters as ``cuLaunchKernel`` takes them: ``sig`` itself without tensor descriptors; with
    them, as this Triton's NVIDIA launcher expands the whole signature (``expand_signature``: a 2-D tiled host
    descriptor becomes ``nvTmaDesc, i32, i32, i64, i64``: the map, the shape, the strides). None where that is not
    the expansion a route makes (a Triton without descriptor metadata, another rank, im2col or fp4 descriptors).

    >>> _expanded(["tensordesc<fp16[64, 64]>", "*fp32"], [{"swizzle": 3}])
    ['nvTmaDesc', 'i32', 'i32', 'i64', 'i64', '*fp32']
    >>> _expanded(["tensordesc<fp16[8, 64, 64]>"], [{"swizzle": 3}]) is None   # a 3-D box
    True
    """
    is_desc = [isinstance(t, str) and t.startswith("tensordesc") for t in sig]
    if not any(is_desc):
        return sig
    metas = list(tensordesc_meta or [])
    two_d = re.compile(r"tensordesc<[^[>]*\[\s*\d+\s*,\s*\d+\s*\]>")   # the route encodes 2-D tiled maps only
    if (len(metas) != sum(is_desc) or any(m.get("is_im2col") or m.get("fp4_padded") for m in metas)
            or any(d and not two_d.fullmatch(t) for t, d in zip(sig, is_desc))):
        return None
    want = []   # the expansion a route makes
    for t, d in zip(sig, is_desc):
        want += ["nvTmaDesc", "i32", "i32", "i64", "i64"] if d else [t]
    try:
        try:
            from triton.backends.driver import expand_signature
            out = expand_signature(list(sig), metas, "nvTmaDesc")
        except ImportError:   # a Triton whose NVIDIA driver expands them itself (3.5)
            from triton.backends.nvidia.driver import expand_signature
            out = expand_signature(list(sig), metas)
    except ImportError:   # Triton 3.6 names no expansion: its launcher passes the map, the shape and the strides
        return want       # (make_tensordesc_arg), which is this one (checked bit for bit on an H100)
    except (TypeError, AssertionError, AttributeError):
        return None
    return list(out) if list(out) == want else None


def register(mod, ck, nargs: int):
    """Compiled kernel ``ck`` registered with route ``mod`` (its ``add_kernel``): its id, or None where
    :func:`kernel_layout` says the route cannot launch it."""
    how = kernel_layout(ck, nargs)
    if how is None:
        return None
    return mod.add_kernel(ck.function, 32 * ck.metadata.num_warps, ck.metadata.shared, *how)


class Route:
    """One C++ route, as the wrapper in front of a Python launcher uses it: ``mod``, the extension once
    :meth:`build` has built it (``why`` says why not, until then); ``on``, cleared by :meth:`off` for comparisons;
    ``entries``, a call's key -> the route's arguments for it (kernel ids and the like), or None where the route
    cannot launch that key's kernel (every such call keeps the Python path). :meth:`front` puts it in front of a
    launcher: where :meth:`ready`, a key found in ``entries`` goes through ``mod``; any other call goes through the
    launcher, after which the key's entry is made from the kernels it launched (once).

    >>> r = Route("demo", ROUTE_DIR / "demo.cpp"); r.ready(), r.why
    (False, 'not built yet: build() builds it')
    >>> with r.off():
    ...     r.on
    False
    """

    def __init__(self, name: str, source: Path):
        self.name, self.source = name, source
        self.mod, self.why, self.on = None, "not built yet: build() builds it", True
        self.entries: dict = {}

    def build(self, verbose: bool = False) -> bool:
        """Build the extension (once; :func:`build`) and turn the route on: True when it is ready, else False
        and ``why`` says why."""
        if self.mod is None:
            self.mod, self.why = build(self.name, self.source, verbose)
        return self.mod is not None

    def ready(self) -> bool:
        """Whether a call may take the route here and now: built, on, and a launch that may bypass
        ``kernel[grid]`` (:func:`~gpu_course.triton_launch.direct_allowed`)."""
        return self.mod is not None and self.on and direct_allowed()

    def taken(self, key, *args) -> bool:
        """Whether the call whose key is ``key(*args)`` goes through the extension now: :meth:`ready` (checked first,
        so a key that only a GPU can compute is not asked for elsewhere), and an entry the route can launch made
        for that key."""
        return self.ready() and self.entries.get(key(*args)) is not None

    def register(self, *kernels):
        """The kernel ids of ``kernels`` (each a ``(CompiledKernel, number of runtime arguments)``), registered with
        the extension, or None where any of them is missing or the route cannot launch it (:func:`register`)."""
        ids = []
        for ck, nargs in kernels:
            kid = register(self.mod, ck, nargs) if ck is not None else None
            if kid is None:
                return None
            ids.append(kid)
        return tuple(ids)

    def front(self, launcher, key, call, entry):
        """``launcher`` with this route in front. Each of ``key``, ``call`` and ``entry`` takes a call's arguments as
        ``launcher`` does: ``key(*a, **kw)`` is the call's key, or None where the call must keep the Python path (a
        configuration or an output of the caller's); ``call(mod, hit, *a, **kw)`` makes the call through the
        extension with the key's entry ``hit``; ``entry(*a, **kw)``, after the launcher has run, is the key's entry
        (from the kernels the launcher launched), or None where the route cannot launch them."""
        @functools.wraps(launcher)
        def routed(*args, **kwargs):
            k = key(*args, **kwargs) if self.ready() else None
            hit = self.entries.get(k) if k is not None else None
            if hit is not None:
                return call(self.mod, hit, *args, **kwargs)
            out = launcher(*args, **kwargs)
            if k is not None and k not in self.entries:
                self.entries[k] = entry(*args, **kwargs)
            return out
        return routed

    @contextlib.contextmanager
    def off(self):
        """``with route.off():`` calls take the Python path even where the route is built: what a call costs
        without it, for comparisons."""
        was, self.on = self.on, False
        try:
            yield self
        finally:
            self.on = was


_ROUTES: dict = {}   # extension name -> its Route


def route(name: str, source: Path) -> Route:
    """The one :class:`Route` of extension ``name``, made on first use: modules whose kernels share an extension
    (the softmax and the means) share its state.

    >>> route("demo", ROUTE_DIR / "demo.cpp") is route("demo", ROUTE_DIR / "demo.cpp")
    True
    """
    hit = _ROUTES.get(name)
    if hit is None:
        hit = _ROUTES[name] = Route(name, source)
    return hit


class StandIn:
    """Stands in for a built route extension in cpu-mode tests (with :func:`~gpu_course.launch_paths.fake_gpu`):
    ``add_kernel`` records each kernel's number of runtime arguments and returns its id; a subclass adds the
    route's own functions, appending what each call received to ``calls``."""

    def __init__(self):
        self.calls, self.kernels = [], []

    def add_kernel(self, ck, nargs):
        self.kernels.append(nargs)
        return len(self.kernels) - 1


def _Ck(signature, meta, tensordesc_meta=None):
    """A stand-in for a CompiledKernel in the doctests: its signature's types and metadata."""
    return SimpleNamespace(src=SimpleNamespace(signature=dict(enumerate(signature))),
                           metadata=SimpleNamespace(num_ctas=1, tensordesc_meta=tensordesc_meta, **meta))
