"""Record the kernel launches made inside a ``with`` block: which kernel ran, with what grid and
which memory, in every kind the course teaches, on a GPU and in cpu mode alike.

>>> with launches() as seen:
...     pass
>>> len(seen), seen.summary()
(0, 'no kernel launches recorded')

What is hooked, only while a block is open (put back on exit, also when the block raises; nothing
happens at import, and triton / numba are never imported here: a library not imported yet has no
kernels to record):

* Triton: ``JITFunction.run`` (gpu mode) and ``InterpretedFunction.run`` (``TRITON_INTERPRET=1``),
  the method ``kernel[grid](...)`` calls, and that ``@triton.autotune`` / ``@triton.heuristics``
  wrappers call for the kernel they wrap (so autotuning's benchmark launches are recorded too).
  ``__getitem__`` of both classes is routed to ``run`` while recording, in case a build has a fast
  launch path that skips it. A callable grid is wrapped to see the grid it resolves to. Checked
  on triton 3.6 and 3.9; a triton whose interpreter has no ``InterpretedFunction.run`` method
  (before 3.3) raises a clear error.
* Numba CUDA: ``numba.cuda.dispatcher._LaunchConfiguration.__call__`` on a GPU (the object
  ``kernel[blocks, threads]`` returns; numba's built-in target and numba-cuda 0.2x-0.30 have it)
  and ``numba.cuda.simulator.kernel.FakeCUDAKernel.__call__`` in the simulator
  (``NUMBA_ENABLE_CUDASIM=1``), where a device function's call is not a launch.
* CUDA C (modules from ``load_cuda``, passed as ``modules=``): the modules' launch counters,
  read by :func:`gpu_course.cuda.launch_counts` in both modes, each a
  ``{kernel name: launches}``, read before and after the block and around each call of the
  module's public functions (wrapped while recording), so a launch is tied to the host call and
  the tensors it was given and returned. A module without counters is listed in
  ``LaunchLog.uncounted`` with the reason: nothing is guessed. The modules' launch logs
  (:func:`gpu_course.cuda.launch_log`: grid, block, shared bytes and arguments of
  each launch) give each recorded launch its :class:`KernelCall` list, ``Launch.calls``.

With ``snapshot=True`` the memory of every array argument is copied right after each launch, so
that :meth:`LaunchLog.changed_since_launch` can tell whether something (torch, say) overwrote a
kernel's output afterwards.
"""
from __future__ import annotations

import ctypes
import inspect
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from .cuda.counters import launch_counts, launch_log

__all__ = ["launches", "recording", "LaunchLog", "Launch", "Buffer", "KernelCall", "module_counters", "module_launch_log"]


@dataclass(eq=False)
class Buffer:
    """Memory a launch was given: bytes ``[ptr, ptr + nbytes)`` on ``device`` (a tensor argument
    counts with its whole storage, so views of it are inside), and a copy of those bytes taken
    right after the launch when snapshots are on."""
    name: str
    ptr: int
    nbytes: int
    device: str  # "cpu" or "cuda"
    snapshot: torch.Tensor | None = None  # uint8, the bytes after the launch

    def contains(self, lo: int, hi: int, device: str) -> bool:
        return device == self.device and self.ptr <= lo and hi <= self.ptr + self.nbytes


@dataclass(frozen=True)
class KernelCall:
    """One CUDA C launch as the host code made it, from a module's launch log: the kernel's name,
    grid and block (3 numbers each), dynamic shared bytes, and its arguments as ``(kind, value)``:
    kind ``"p"`` (a pointer; value its address), ``"i"`` / ``"u"`` (an integer), ``"f"`` (a
    floating-point number), ``"b"`` (a bool), ``"?"`` (anything else; value None)."""
    name: str
    grid: tuple
    block: tuple
    smem: int
    args: tuple

    @staticmethod
    def from_log(entry) -> "KernelCall":
        """From one entry of :func:`gpu_course.cuda.launch_log`:
        ``(seq, name, grid, block, smem, ((kind, size, bits), ...))``.

        >>> import struct
        >>> bits = struct.unpack("<Q", struct.pack("<d", 2.5))[0]
        >>> KernelCall.from_log((0, "k", (2, 1, 1), (256, 1, 1), 0, (("p", 8, 4096), ("i", 4, 2**64 - 1),
        ...                                                           ("f", 4, bits)))).args
        (('p', 4096), ('i', -1), ('f', 2.5))
        """
        import struct
        _, name, grid, block, smem, raw = entry
        args = []
        for kind, _size, bits in raw:
            bits = int(bits) & (2 ** 64 - 1)
            if kind == "i":
                value = bits - 2 ** 64 if bits >= 2 ** 63 else bits
            elif kind == "f":
                value = struct.unpack("<d", struct.pack("<Q", bits))[0]
            elif kind == "b":
                value = bool(bits)
            elif kind in ("p", "u"):
                value = bits
            else:
                value = None
            args.append((str(kind), value))
        return KernelCall(str(name), tuple(int(v) for v in grid), tuple(int(v) for v in block), int(smem),
                          tuple(args))


@dataclass(eq=False)
class Launch:
    """One recorded launch (a CUDA C host call that launched a kernel ``count`` times is one).

    ``kind`` is "triton", "numba" or "cuda"; ``kernel`` the launched object (a Triton
    ``JITFunction`` / ``InterpretedFunction``, a Numba dispatcher / simulator kernel, a CUDA C
    module); ``fn`` the kernel's Python function (None for CUDA C); ``grid`` the programs
    (Triton) or blocks (Numba), ``block`` the threads per block (Numba), each as 3 numbers.
    """
    kind: str
    kernel: Any
    fn: Any
    name: str | None
    module: str
    grid: tuple | None = None
    block: tuple | None = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    buffers: list = field(default_factory=list)
    count: int | None = 1
    host_function: str | None = None  # CUDA C: the module function whose call launched it
    finished: bool = False
    error: str | None = None
    result: Any = None  # CUDA C: what the host function returned
    calls: list = field(default_factory=list)  # CUDA C: its KernelCall of each launch, when logged

    def __repr__(self):
        where = f"{self.module}.{self.name}" if self.module else str(self.name)
        cfg = []
        if self.grid is not None:
            cfg.append(f"grid={_short(self.grid)}")
        if self.block is not None:
            cfg.append(f"block={_short(self.block)}")
        if self.kind == "cuda":
            cfg.append(f"via {self.host_function}()" if self.host_function else "outside a host call")
            cfg.append(f"{self.count}x" if self.count is not None else "count unknown")
        state = "" if self.finished else (f", raised {self.error}" if self.error else ", unfinished")
        return f"<{self.kind} launch of {where}{' ' if cfg else ''}{', '.join(cfg)}{state}>"


def _short(dims: tuple) -> tuple:
    """``(40, 1, 1)`` -> ``(40,)``: trailing ones dropped, as a learner writes a grid."""
    dims = tuple(dims)
    while len(dims) > 1 and dims[-1] == 1:
        dims = dims[:-1]
    return dims


def dims3(d) -> tuple:
    """A grid or block as 3 ints, as CUDA counts it.

    >>> dims3(40), dims3((2, 3)), dims3([1, 2, 3])
    ((40, 1, 1), (2, 3, 1), (1, 2, 3))
    """
    if hasattr(d, "x") and hasattr(d, "y"):  # utils.dim3 or a numba Dim3
        d = (d.x, d.y, getattr(d, "z", 1))
    if not isinstance(d, (tuple, list)):
        d = (d,)
    d = tuple(int(v) for v in d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"a grid or block has 1 to 3 dimensions, not {len(d)}: {d}")
    return d + (1,) * (3 - len(d))


# ----------------------------------------------------------------------------------------------
# Memory of arguments

def _extent(ptr: int, shape, strides, itemsize: int) -> tuple[int, int]:
    """Bytes ``[lo, hi)`` an array with ``strides`` in bytes touches from ``ptr``."""
    lo = hi = 0
    for n, s in zip(shape, strides):
        if n == 0:
            return ptr, ptr
        lo += min(0, (n - 1) * s)
        hi += max(0, (n - 1) * s)
    return ptr + lo, ptr + hi + itemsize


def tensor_extent(t: torch.Tensor) -> tuple[int, int]:
    """Bytes ``[lo, hi)`` tensor ``t``'s elements occupy."""
    item = t.element_size()
    return _extent(t.data_ptr(), t.shape, [s * item for s in t.stride()], item)


def _array_buffer(obj, name: str) -> Buffer | None:
    """The memory of a NumPy / CUDA array interface object (a Numba argument)."""
    sim = getattr(obj, "_ary", None)  # the simulator's device array wraps a NumPy array
    if sim is not None and hasattr(sim, "__array_interface__"):
        obj = sim
    for attr, device in (("__cuda_array_interface__", "cuda"), ("__array_interface__", "cpu")):
        try:
            iface = getattr(obj, attr, None)
        except Exception:  # noqa: BLE001  some objects raise instead of lacking it
            iface = None
        if not iface:
            continue
        ptr = int(iface["data"][0] or 0)
        shape = tuple(iface["shape"])
        itemsize = int(iface["typestr"][2:])
        strides = iface.get("strides")
        if strides is None:  # C-contiguous
            strides, acc = [], itemsize
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= n
        lo, hi = _extent(ptr, shape, strides, itemsize)
        return Buffer(name, lo, hi - lo, device)
    return None


def _buffers(value, name: str, out: list) -> None:
    """Append the memory of every array inside ``value`` (tensors, arrays, tuples of them)."""
    if isinstance(value, torch.Tensor):
        st = value.untyped_storage()
        out.append(Buffer(name, st.data_ptr(), st.nbytes(), value.device.type))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _buffers(v, f"{name}[{i}]", out)
    elif isinstance(getattr(value, "base", None), torch.Tensor) and not hasattr(value, "__array_interface__"):
        _buffers(value.base, f"{name}.base", out)  # a Triton TensorDescriptor
    else:
        b = _array_buffer(value, name)
        if b is not None:
            out.append(b)


class _RawMemory:
    """An array interface over raw bytes, for copying memory of any origin into a tensor."""

    def __init__(self, ptr: int, nbytes: int, device: str):
        iface = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}
        setattr(self, "__cuda_array_interface__" if device == "cuda" else "__array_interface__", iface)


def _read_bytes(ptr: int, nbytes: int, device: str) -> torch.Tensor:
    """A copy of bytes ``[ptr, ptr + nbytes)`` as a uint8 tensor on ``device``."""
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8, device=device)
    if device == "cuda":
        return torch.as_tensor(_RawMemory(ptr, nbytes, device), device="cuda").clone()
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
    return torch.frombuffer(raw, dtype=torch.uint8).clone()


# ----------------------------------------------------------------------------------------------
# The log

class LaunchLog:
    """The launches recorded inside one ``with launches(...)`` block (see :func:`launches`).

    ``launches`` in order; ``counts[module][kernel]``: CUDA C launches counted by each module in
    the block; ``uncounted[module]``: why a module's launches could not be counted.
    """

    def __init__(self, modules=(), snapshot: bool = False, snapshot_limit: int = 256 << 20):
        self.modules = list(modules)
        self.snapshot = snapshot
        self.snapshot_budget = snapshot_limit
        self.launches: list[Launch] = []
        self.counts: dict[str, dict[str, int]] = {}
        self.uncounted: dict[str, str] = {}
        self._before: dict[int, dict] = {}
        self._wrapped: list[tuple] = []
        self._latest: dict[tuple, Buffer] = {}
        self._open = False

    # -- the with block
    def __enter__(self) -> "LaunchLog":
        if self._open:
            raise RuntimeError("this launch log is already recording")
        for mod in self.modules:
            self._watch_module(mod)
        try:
            _activate(self)
        except BaseException:
            self._unwrap_modules()
            raise
        self._open = True
        return self

    def __exit__(self, *exc) -> None:
        self._open = False
        _deactivate(self)
        self._unwrap_modules()
        for mod in self.modules:
            name = _module_name(mod)
            before = self._before.get(id(mod))
            after = module_counters(mod)
            if before is None or after is None:
                continue
            diff = _by_kernel({k: n - before.get(k, 0) for k, n in after.items()
                               if n - before.get(k, 0) > 0})
            self.counts[name] = diff
            # launches made through a reference taken before the block (not the wrapper)
            seen = {}
            for L in self.launches:
                if L.kind == "cuda" and L.module == name and L.count:
                    seen[L.name] = seen.get(L.name, 0) + L.count
            for k, n in diff.items():
                if n > seen.get(k, 0):
                    self.launches.append(Launch("cuda", mod, None, k, name, count=n - seen.get(k, 0),
                                                finished=True))

    # -- reading it
    def __len__(self) -> int:
        return len(self.launches)

    def __iter__(self):
        return iter(self.launches)

    def __repr__(self):
        return f"<LaunchLog: {len(self.launches)} launches>"

    def of(self, kind: str | None = None, name: str | None = None) -> list[Launch]:
        """The launches of one ``kind`` ("triton", "numba", "cuda") and/or kernel ``name``."""
        return [L for L in self.launches
                if (kind is None or L.kind == kind) and (name is None or L.name == name)]

    def summary(self) -> str:
        """One line per launch (a CUDA C module without counters says so)."""
        lines = [repr(L) for L in self.launches]
        lines += [f"<cuda module {m}: launches not counted: {why}>" for m, why in self.uncounted.items()]
        return "\n".join(lines) or "no kernel launches recorded"

    def writers_of(self, t: torch.Tensor, among=None) -> list[Launch]:
        """The launches (of ``among``, default all) that were given the memory of tensor ``t``."""
        lo, hi = tensor_extent(t)
        return [L for L in (self.launches if among is None else among)
                if any(b.contains(lo, hi, t.device.type) for b in L.buffers)]

    def changed_since_launch(self, t: torch.Tensor, launch: Launch) -> bool | None:
        """Whether ``t``'s bytes differ now from what they were right after ``launch`` (its
        snapshot); None when that cannot be told (snapshots off or over their size limit)."""
        lo, hi = tensor_extent(t)
        item = t.element_size()
        for b in launch.buffers:
            if b.snapshot is None or not b.contains(lo, hi, t.device.type):
                continue
            off = t.data_ptr() - b.ptr
            if off % item:
                return None
            usable = b.snapshot[: b.snapshot.numel() // item * item].view(t.dtype)
            then = usable.as_strided(t.shape, t.stride(), off // item)
            now_bytes = t.detach().contiguous().reshape(-1).view(torch.uint8)
            return not torch.equal(then.contiguous().reshape(-1).view(torch.uint8), now_bytes)
        return None

    # -- recording (called by the hooks)
    def _record(self, launch: Launch) -> None:
        self.launches.append(launch)

    def _snapshot(self, buffers: list) -> None:
        """Copy ``buffers`` now; only the latest copy of each memory range is kept (an
        autotuner's hundreds of launches do not pile up), within the size budget."""
        if not self.snapshot:
            return
        for b in buffers:
            key = (b.device, b.ptr, b.nbytes)
            older = self._latest.pop(key, None)
            if older is not None and older.snapshot is not None:
                older.snapshot = None
                self.snapshot_budget += older.nbytes
            if b.nbytes <= self.snapshot_budget:
                self.snapshot_budget -= b.nbytes
                b.snapshot = _read_bytes(b.ptr, b.nbytes, b.device)
                self._latest[key] = b

    # -- CUDA C modules
    def _watch_module(self, mod) -> None:
        name = _module_name(mod)
        counters = module_counters(mod)
        if counters is None:
            self.uncounted[name] = ("the module has no launch counters (gpu_course.cuda.launch_counts): "
                                    "it was built by load_inline or by a course version "
                                    "that does not count launches")
        else:
            self._before[id(mod)] = counters
        for attr in dir(mod):
            if attr.startswith("_"):
                continue
            f = getattr(mod, attr)
            if callable(f) and not isinstance(f, type):
                wrapper = _host_call_recorder(self, mod, name, attr, f, counters is not None)
                self._wrapped.append((mod, attr, attr in getattr(mod, "__dict__", {}), f))
                setattr(mod, attr, wrapper)

    def _unwrap_modules(self) -> None:
        while self._wrapped:
            mod, attr, had_own, f = self._wrapped.pop()
            if had_own:
                setattr(mod, attr, f)
            else:
                delattr(mod, attr)


def launches(*, modules=(), snapshot: bool = False, snapshot_limit: int = 256 << 20) -> LaunchLog:
    """Record the kernel launches made inside a ``with`` block.

    ``modules``: CUDA C modules (from ``utils.load_cuda``) whose launch counters to read;
    ``snapshot``: copy each launch's array arguments right after it (at most ``snapshot_limit``
    bytes in all), so that a later change of a kernel's output can be seen.

    >>> with launches() as seen:
    ...     x = torch.ones(3) * 2   # torch's own kernels are not recorded
    >>> seen.of("triton")
    []
    """
    return LaunchLog(modules, snapshot, snapshot_limit)


def module_counters(mod) -> dict[str, int] | None:
    """A CUDA C module's ``{kernel name: launches}`` so far, or None when it counts nothing.

    >>> import types
    >>> m = types.SimpleNamespace(_course_launches=lambda: {"relu_k": 2})
    >>> module_counters(m), module_counters(types.SimpleNamespace())
    ({'relu_k': 2}, None)
    """
    return launch_counts(mod)


def module_launch_log(mod, since: int = 0):
    """A CUDA C module's launch log: ``(launches so far, [KernelCall of each logged launch numbered
    since ``since`` or later])``, or None when the module keeps none (only the latest launches are
    kept: 256).

    >>> import types
    >>> m = types.SimpleNamespace(_course_launch_log=lambda since: (1, [(0, "k", (1, 1, 1), (32, 1, 1), 0, ())]))
    >>> module_launch_log(m)
    (1, [KernelCall(name='k', grid=(1, 1, 1), block=(32, 1, 1), smem=0, args=())])
    """
    got = launch_log(mod, since)
    return None if got is None else (got[0], [KernelCall.from_log(e) for e in got[1]])


def _by_kernel(counts: dict[str, int]) -> dict[str, int]:
    """Counts by kernel name: a templated kernel's instantiations (``matmul_k<16>``), counted
    also under the plain name, are dropped where the plain name is there.

    >>> _by_kernel({"matmul_k": 2, "matmul_k<16>": 1, "matmul_k<32>": 1, "other<8>": 1})
    {'matmul_k': 2, 'other<8>': 1}
    """
    return {k: n for k, n in counts.items() if "<" not in k or k.split("<")[0] not in counts}


def cxx_base_name(name: str) -> str:
    """``ns::k<16>`` -> ``k``: a kernel's name as the launch counts spell it."""
    return name.split("<")[0].split("::")[-1].strip()


def _module_name(mod) -> str:
    return getattr(mod, "__name__", None) or f"module@{id(mod):x}"


def _host_call_recorder(log: LaunchLog, mod, modname: str, attr: str, f, counted: bool):
    """``f`` (a CUDA C module's function), recording the kernels each call launches."""
    def host_call(*args, **kwargs):
        before = module_counters(mod) if counted else None
        logged = module_launch_log(mod, 1 << 62) if counted else None  # (launches so far, [])
        result = f(*args, **kwargs)
        buffers: list[Buffer] = []
        for i, a in enumerate(args):
            _buffers(a, f"{attr} argument {i}", buffers)
        for k, a in kwargs.items():
            _buffers(a, f"{attr} argument {k}", buffers)
        _buffers(result, f"{attr} result", buffers)
        if counted:
            after = module_counters(mod)
            fired = _by_kernel({k: n - before.get(k, 0) for k, n in after.items()
                                if n - before.get(k, 0) > 0})
        else:
            fired = {None: None}
        if fired and log.snapshot:
            if any(b.device == "cuda" for b in buffers):
                torch.cuda.synchronize()  # the module may launch on a stream torch does not order
            log._snapshot(buffers)
        calls = module_launch_log(mod, logged[0])[1] if logged is not None else []
        for k, n in fired.items():
            mine = [c for c in calls if k is not None and cxx_base_name(c.name) == k]
            L = Launch("cuda", mod, None, k, modname, args=args, kwargs=kwargs, buffers=buffers, count=n,
                       host_function=attr, finished=True, result=result, calls=mine)
            if mine:
                L.grid, L.block = mine[-1].grid, mine[-1].block
            log._record(L)
        return result
    host_call.__name__ = attr
    host_call.__wrapped__ = f
    return host_call


# ----------------------------------------------------------------------------------------------
# Hooks: installed while at least one log is open, put back when the last one closes

_LOCK = threading.RLock()
_ACTIVE: list[LaunchLog] = []
_INSTALLED: dict[tuple, tuple] = {}  # (id(owner), attr) -> (owner, attr, had_own, original)


def _to_all(record: Launch, phase: str) -> None:
    for log in list(_ACTIVE):
        if phase == "start":
            log._record(record)
        else:
            log._snapshot(record.buffers)


def _patch(owner, attr: str, make) -> None:
    key = (id(owner), attr)
    if key in _INSTALLED:
        return
    had_own = attr in vars(owner)
    original = getattr(owner, attr)
    _INSTALLED[key] = (owner, attr, had_own, original)
    setattr(owner, attr, make(original))


def _restore_all() -> None:
    for owner, attr, had_own, original in reversed(list(_INSTALLED.values())):
        if had_own:
            setattr(owner, attr, original)
        else:
            delattr(owner, attr)
    _INSTALLED.clear()


def recording() -> bool:
    """Whether a :func:`launches` block is open (anywhere in the process): launchers with a faster
    path than ``kernel[grid]`` (``gpu_course.triton_launch``) take the recorded one meanwhile.

    >>> recording()
    False
    """
    return bool(_ACTIVE)


def _activate(log: LaunchLog) -> None:
    with _LOCK:
        try:
            _install_hooks()
        except BaseException:
            if not _ACTIVE:
                _restore_all()
            raise
        _ACTIVE.append(log)


def _deactivate(log: LaunchLog) -> None:
    with _LOCK:
        if log in _ACTIVE:
            _ACTIVE.remove(log)
        if not _ACTIVE:
            _restore_all()


def _install_hooks() -> None:
    """Patch the launch paths of the libraries already imported (see the module docstring)."""
    jit = sys.modules.get("triton.runtime.jit")
    if jit is not None and hasattr(jit, "JITFunction"):
        _patch_triton(jit.JITFunction)
    interp = sys.modules.get("triton.runtime.interpreter")
    if interp is not None and hasattr(interp, "InterpretedFunction"):
        if "run" not in vars(interp.InterpretedFunction):
            raise RuntimeError("launches(): this triton's interpreter has no InterpretedFunction.run "
                               "to record launches with (triton >= 3.3 has it)")
        _patch_triton(interp.InterpretedFunction)
    disp = sys.modules.get("numba.cuda.dispatcher")
    if disp is not None and hasattr(disp, "_LaunchConfiguration"):
        _patch(disp._LaunchConfiguration, "__call__", _numba_gpu_hook)
    sim = sys.modules.get("numba.cuda.simulator.kernel")
    if sim is not None and hasattr(sim, "FakeCUDAKernel"):
        _patch(sim.FakeCUDAKernel, "__call__", lambda orig: _numba_sim_hook(orig, sim))


def _triton_getitem(original):
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)
    return __getitem__


def _patch_triton(cls) -> None:
    _patch(cls, "run", _triton_run_hook)
    _patch(cls, "__getitem__", _triton_getitem)


def _triton_run_hook(original):
    def run(self, *args, **kwargs):
        if kwargs.get("warmup") or not _ACTIVE:
            return original(self, *args, **kwargs)
        fn = getattr(self, "fn", None)
        names = list(getattr(self, "arg_names", None) or [])
        launch = Launch("triton", self, fn, getattr(fn, "__name__", None),
                        getattr(fn, "__module__", "") or "", args=args,
                        kwargs={k: v for k, v in kwargs.items() if k not in ("grid", "warmup")})
        for i, a in enumerate(args):
            _buffers(a, names[i] if i < len(names) else f"argument {i}", launch.buffers)
        for k, a in launch.kwargs.items():
            _buffers(a, k, launch.buffers)
        grid = kwargs.get("grid")
        if callable(grid):
            def resolving_grid(meta, _grid=grid):
                g = _grid(meta)
                launch.grid = dims3(g)
                return g
            kwargs["grid"] = resolving_grid
        elif grid is not None:
            launch.grid = dims3(grid)
        return _recorded(launch, lambda: original(self, *args, **kwargs))
    run.__wrapped__ = original
    return run


def _recorded(launch: Launch, call, finish=None):
    """Run ``call()`` as ``launch``: the open logs see its start and, if it did not raise, its end
    (``finish()`` runs just before the end, e.g. to wait for the kernel before outputs are copied);
    a launch that raises is marked with the exception's name."""
    _to_all(launch, "start")
    try:
        result = call()
    except BaseException as e:
        launch.error = type(e).__name__
        raise
    launch.finished = True
    if finish is not None:
        finish()
    _to_all(launch, "end")
    return result


def _numba_launch(kernel, fn, grid, block, args) -> Launch:
    launch = Launch("numba", kernel, fn, getattr(fn, "__name__", None),
                    getattr(fn, "__module__", "") or "", grid=dims3(grid), block=dims3(block),
                    args=args)
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    for i, a in enumerate(args):
        _buffers(a, names[i] if i < len(names) else f"argument {i}", launch.buffers)
    return launch


def _numba_gpu_hook(original):
    def __call__(self, *args):
        if not _ACTIVE:
            return original(self, *args)
        d = self.dispatcher
        launch = _numba_launch(d, getattr(d, "py_func", None), self.griddim, self.blockdim, args)

        def finish():
            if any(log.snapshot for log in _ACTIVE):
                from numba import cuda  # already imported: this is its launch path
                cuda.synchronize()  # numba's stream may not be torch's: finish before copying
        return _recorded(launch, lambda: original(self, *args), finish)
    __call__.__wrapped__ = original
    return __call__


def _numba_sim_hook(original, sim_module):
    def __call__(self, *args):
        if not _ACTIVE or getattr(self, "_device", False) or getattr(sim_module, "_kernel_context", None):
            return original(self, *args)  # a device function, or a call from inside a kernel
        if self.grid_dim is None or self.block_dim is None:
            return original(self, *args)  # numba raises its own "launch configuration" error
        launch = _numba_launch(self, getattr(self, "fn", None), self.grid_dim, self.block_dim, args)
        return _recorded(launch, lambda: original(self, *args))
    __call__.__wrapped__ = original
    return __call__
