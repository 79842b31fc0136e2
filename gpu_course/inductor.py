"""Reading what ``torch.compile`` generates: torch's logs captured into a string (``capture_logs``),
the kernels and library calls of Inductor's output code (``kernels_in``, ``extern_calls``), and paths
shown without this machine's user name or temporary files (``shown_path``)."""
from __future__ import annotations

import contextlib
import getpass
import io
import logging
import os
import re
import tempfile
from pathlib import Path

from .profiling import readable_frames

# "V1121 20:19:30.315000 4009 torch/_inductor/graph.py:2045] [0/0] [__output_code] " before each line
_LOG_PREFIX = re.compile(r"^[DIVWEC]\d{4} [\d:.]+\s+\d+ \S+:\d+\] (?:\[[^\]]*\] ?)*")
_KERNEL_SRC = re.compile(r"^(\w+) = async_compile\.\w+\(.*?'''(.*?)'''", re.S | re.M)


class Captured:
    """What :func:`capture_logs` caught: ``.text`` (raw, with logging prefixes) and ``.clean``."""
    text = ""

    @property
    def clean(self) -> str:
        return clean_log(self.text)


@contextlib.contextmanager
def capture_logs(**kinds):
    """Turn on torch's logs of ``kinds`` (the keywords of ``torch._logging.set_logs``, the in-process
    form of ``TORCH_LOGS``: ``output_code=True``, ``recompiles=True``...) and send them to a string
    instead of the terminal for the ``with`` block; the logs are back to the default after it.

    >>> with capture_logs(recompiles=True) as cap:
    ...     pass
    >>> cap.text
    ''
    """
    import torch
    torch._logging.set_logs(**kinds)
    buf, swapped = io.StringIO(), []
    for name in [n for n in logging.root.manager.loggerDict if n == "torch" or n.startswith("torch.")]:
        for h in logging.getLogger(name).handlers:
            if type(h) is logging.StreamHandler and h not in [s for s, _ in swapped]:
                swapped.append((h, h.setStream(buf)))
    cap = Captured()
    try:
        yield cap
    finally:
        for h, old in swapped:
            h.setStream(old)
        torch._logging.set_logs()
        cap.text = buf.getvalue()


def clean_log(text: str) -> str:
    """torch's log lines without their prefixes (level, date, time, process, file, [frame] [artifact]),
    with a notebook cell's temporary file shown as ``<cell>``.

    >>> clean_log("V1123 09:03:52.649000 4009 torch/_dynamo/guards.py:4760] [5/1] [__recompiles] Recompiling "
    ...           "function <lambda> in /tmp/ipykernel_4009/1015473912.py:3")
    'Recompiling function <lambda> in <cell>:3'
    """
    return "\n".join(readable_frames(_LOG_PREFIX.sub("", line)) for line in text.splitlines())


def kernels_in(log_text: str) -> dict:
    """``{kernel name: source}`` of every kernel in captured output code (``output_code=True``), in
    order: the strings passed to ``async_compile.triton(...)`` (GPU) or ``cpp_pybinding`` (CPU)."""
    return {name: src.strip("\n") for name, src in _KERNEL_SRC.findall(clean_log(log_text))}


def extern_calls(log_text: str) -> list:
    """The library calls in captured output code, in order: ``['addmm', 'mm', ...]`` for each
    ``extern_kernels.<name>(`` (cuBLAS on a GPU, the CPU's BLAS on a CPU).

    >>> extern_calls("buf1 = ...\\n        extern_kernels.addmm(b, x, w, alpha=1, beta=1, out=buf1)")
    ['addmm']
    """
    return re.findall(r"extern_kernels\.(\w+)\(", clean_log(log_text))


def inductor_cache_dir() -> Path:
    """Where Inductor keeps its generated modules: ``$TORCHINDUCTOR_CACHE_DIR``, by default
    ``/tmp/torchinductor_<user>``."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:  # older torch
        from torch._inductor.codecache import cache_dir
    return Path(cache_dir())


def shown_path(path) -> str:
    """``path`` as a learner's machine would show it: inside Inductor's cache it starts with
    ``$TORCHINDUCTOR_CACHE_DIR`` (when that is set) or the default ``/tmp/torchinductor_<user>``, inside the
    home folder with ``~``; this machine's user name never appears.

    >>> shown = shown_path(Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}" / "ji" / "c.py")
    >>> shown.endswith("/ji/c.py") and getpass.getuser() not in shown
    True
    """
    path = Path(path)
    user = getpass.getuser()
    env = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    anchors = [(Path(env), "$TORCHINDUCTOR_CACHE_DIR")] if env else []
    anchors += [(Path(tempfile.gettempdir()) / f"torchinductor_{user}", "/tmp/torchinductor_<user>"),
                (Path.home(), "~")]
    for base, label in anchors:
        if path == base or path.is_relative_to(base):
            rel = path.relative_to(base).as_posix()
            return label if rel == "." else f"{label}/{rel}"
    return path.as_posix().replace(user, "<user>")


def slice_loads(offset: int, n: int, handle=None) -> tuple:
    """The global loads each thread of notebook 08's ``gelu_kernel`` (BLOCK 1024 over 4 warps: 8 fp32
    values a thread) executes on ``x[offset:offset + n]``, ``x`` an fp32 tensor from torch's allocator,
    as ``(instruction, count)``. From the compiled kernel's PTX when ``handle`` (what the launch
    returned) is given; else by Triton's specialization rule: a 16-byte vector load needs a pointer
    argument that is a multiple of 16 bytes and a length that is a multiple of 16 (the mask
    ``offs < n`` is known constant only over as many elements as ``n``'s divisibility allows).

    >>> slice_loads(0, 4096), slice_loads(1, 4096), slice_loads(0, 4095)
    (('ld.global.v4.b32', 2), ('ld.global.b32', 8), ('ld.global.b32', 8))
    """
    if handle is not None:
        loads = re.findall(r"ld\.global(?:\.\w+)*", handle.asm["ptx"])
        kinds = sorted(set(loads))
        return (kinds[0], len(loads)) if len(kinds) == 1 else tuple(kinds)
    vector = offset % 4 == 0 and n % 16 == 0
    return ("ld.global.v4.b32", 2) if vector else ("ld.global.b32", 8)


def global_accesses(ptx: str) -> dict:
    """The global loads and stores of a PTX listing, each as its instruction (``ld.global.v4.b32``...),
    in the order of the listing: ``{"loads": [...], "stores": [...]}``.

    >>> global_accesses("@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];\\n st.global.b32 [ %rd3 ], %r9;")
    {'loads': ['ld.global.v4.b32'], 'stores': ['st.global.b32']}
    """
    return {"loads": re.findall(r"ld\.global(?:\.\w+)*", ptx), "stores": re.findall(r"st\.global(?:\.\w+)*", ptx)}


def fmt_config(config) -> str:
    """A Triton ``Config`` as one line: its block sizes, then ``num_warps`` (``XBLOCK=1024, num_warps=4``)."""
    kwargs = ", ".join(f"{k}={v}" for k, v in sorted(getattr(config, "kwargs", {}).items()))
    return f"{kwargs}, num_warps={getattr(config, 'num_warps', '?')}"


def _loaded_modules() -> list:
    """The modules of generated code that Inductor has loaded in this process (its ``PyCodeCache``)."""
    from torch._inductor.codecache import PyCodeCache

    mods = getattr(PyCodeCache, "modules", [])
    mods = list(mods.values()) if isinstance(mods, dict) else list(mods)
    extra = getattr(PyCodeCache, "modules_no_attr", {})
    return mods + (list(extra.values()) if isinstance(extra, dict) else [])


def _ptx_of(result=None, launcher=None, name: str = "") -> str | None:
    """The PTX of one compiled variant: from its compile result, else from the launcher's binary, else
    from the file Triton wrote for it in its cache (the folder named by the launcher's ``cache_hash``)."""
    for owner in (getattr(result, "kernel", None), getattr(launcher, "bin", None)):
        asm = getattr(owner, "asm", None)
        if asm and "ptx" in asm:
            return asm["ptx"]
    keys = [getattr(launcher, "cache_hash", None)]
    triton_hash = getattr(getattr(result, "kernel", None), "hash", None)   # torch's statically launched kernels
    if triton_hash:
        try:
            from torch._inductor.runtime.triton_heuristics import triton_hash_to_path_key
            keys.append(triton_hash_to_path_key(triton_hash))
        except ImportError:
            pass
    paths = [cache / key / f"{name}.ptx" for cache in _triton_caches() for key in keys if key]
    return next((p.read_text() for p in paths if p.exists()), None)


def _triton_caches() -> list:
    """Where Triton may have written a kernel's files: ``$TRITON_CACHE_DIR``, Triton's default (``~/.triton/cache``),
    and the folder Inductor gives the worker processes that compile its kernels (``triton_cache_dir(device)``, under
    Inductor's own cache: its autotuner sets ``TRITON_CACHE_DIR`` there in the workers only)."""
    caches = [Path(os.environ["TRITON_CACHE_DIR"])] if os.environ.get("TRITON_CACHE_DIR") else []
    caches.append(Path.home() / ".triton" / "cache")
    try:
        from torch._inductor.runtime.cache_dir_utils import triton_cache_dir
        import torch
        devices = range(torch.cuda.device_count()) if torch.cuda.is_available() else [0]
        caches += [Path(triton_cache_dir(d)) for d in devices]
    except (ImportError, TypeError):
        pass
    return list(dict.fromkeys(caches))


def compiled_variants(kernel_name: str) -> list:
    """The variants Inductor compiled, in this process, for the generated kernel ``kernel_name`` (one per
    config its heuristics tried, or only the kept one once the others are dropped), found through the
    loaded module of generated code (``PyCodeCache``), not by searching the cache folders: a list of
    ``{"config": "XBLOCK=..., num_warps=...", "kept": True if the launches use it, "ptx": str or None}``.
    Empty if no loaded module defines the kernel (on the CPU, Inductor generates C++: there is none).

    >>> compiled_variants("no_such_kernel")
    []
    """
    kernel = next((getattr(m, kernel_name) for m in _loaded_modules()
                   if hasattr(getattr(m, kernel_name, None), "launchers")), None)
    if kernel is None:
        return []
    launchers = list(kernel.launchers)
    kept = {fmt_config(l.config) for l in launchers} if len(launchers) == 1 else set()
    by_config = {fmt_config(l.config): l for l in launchers}
    results = list(getattr(kernel, "compile_results", []) or [])
    configs = [fmt_config(r.config) for r in results] or list(by_config)
    out = []
    for i, cfg in enumerate(configs):
        result = results[i] if results else None
        out.append({"config": cfg, "kept": cfg in kept,
                    "ptx": _ptx_of(result, by_config.get(cfg), kernel_name)})
    return out


def eager_op_bytes(fn, itemsize: int = 4) -> list:
    """``(operation, bytes per element)`` of each operation eager PyTorch runs for the elementwise ``fn`` of one
    tensor (traced with ``torch.fx``): each reads its tensor inputs and writes one output, ``itemsize`` bytes each.

    >>> import math, torch
    >>> eager_op_bytes(lambda x: torch.tanh(x * 2.0) + x)
    [('mul', 8), ('tanh', 8), ('add', 12)]
    """
    import torch.fx
    out = []
    for node in torch.fx.symbolic_trace(fn).graph.nodes:
        if node.op in ("call_function", "call_method"):
            tensors = sum(isinstance(a, torch.fx.Node) for a in node.args)
            out.append((getattr(node.target, "__name__", str(node.target)), itemsize * (tensors + 1)))
    return out
