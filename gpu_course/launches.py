"""Record the kernel launches made inside a ``with`` block: which kernel ran, with what grid and
which memory, in every kind the course teaches, on a GPU and in cpu mode alike.

>>> with launches() as seen:
...     pass
>>> len(seen), seen.summary()
(0, 'no kernel launches recorded')

What is recorded, only while a block is open (nothing happens at import, and triton / numba are
never imported here):

* Triton and Numba CUDA: the ``launch`` / ``launched`` events of :mod:`gpu_course.interpose.triton`
  and :mod:`gpu_course.interpose.numba` (``kernel[grid](...)``, ``kernel[blocks, threads](...)``,
  on a GPU and in the interpreter / simulator; autotuning's benchmark launches too), subscribed to
  while a block is open, so the libraries run unpatched outside one.
* CUDA C (modules from ``load_cuda``, passed as ``modules=``): the modules' launch counters
  (:func:`gpu_course.cuda.launch_counts`, ``{kernel name: launches}``), read before and after
  the block and around each call of the module's public functions (wrapped while recording), so a
  launch is tied to the host call and the tensors it was given and returned. A module without
  counters is listed in ``LaunchLog.uncounted`` with the reason: nothing is guessed. The modules'
  launch logs (grid, block, shared bytes and arguments of each launch) give each recorded launch
  its :class:`KernelCall` list, ``Launch.calls``.

With ``snapshot=True`` the memory of every array argument is copied right after each launch, so
that :meth:`LaunchLog.changed_since_launch` can tell whether something (torch, say) overwrote a
kernel's output afterwards.

The parts: :mod:`.launch_records` (what a launch is made of), :mod:`.module_launches` (what a CUDA C
module says about its launches).
"""
from __future__ import annotations

import threading

import torch

from .launch_records import Buffer, KernelCall, Launch, buffers_of, dims3, read_bytes, tensor_extent
from .cuda.counters import launch_counts
from .module_launches import by_kernel, host_call_recorder, module_launch_log, module_name

__all__ = ["launches", "recording", "LaunchLog", "Launch", "Buffer", "KernelCall",
           "module_launch_log", "dims3", "tensor_extent"]


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
            name = module_name(mod)
            before = self._before.get(id(mod))
            after = launch_counts(mod)
            if before is None or after is None:
                continue
            diff = by_kernel({k: n - before.get(k, 0) for k, n in after.items()
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

    # -- recording (called by the recorders)
    def record(self, launch: Launch) -> None:
        """Append ``launch`` to the log."""
        self.launches.append(launch)

    def take_snapshot(self, buffers: list) -> None:
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
                b.snapshot = read_bytes(b.ptr, b.nbytes, b.device)
                self._latest[key] = b

    # -- CUDA C modules
    def _watch_module(self, mod) -> None:
        name = module_name(mod)
        counters = launch_counts(mod)
        if counters is None:
            self.uncounted[name] = ("the module has no launch counters: it was built by a course version "
                                    "that does not count launches")
        else:
            self._before[id(mod)] = counters
        for attr in dir(mod):
            if attr.startswith("_"):
                continue
            f = getattr(mod, attr)
            if callable(f) and not isinstance(f, type):
                wrapper = host_call_recorder(self, mod, name, attr, f, counters is not None)
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


# ----------------------------------------------------------------------------------------------
# Triton's and Numba's launches: subscribed to while at least one log is open

_LOCK = threading.RLock()
_ACTIVE: list[LaunchLog] = []
_SUBSCRIPTIONS: list = []


def recording() -> bool:
    """Whether a :func:`launches` block is open (anywhere in the process).

    >>> recording()
    False
    """
    return bool(_ACTIVE)


def _on_launch(ev) -> None:
    """A ``launch`` event: a :class:`Launch` for every open log (kept on the event for its end)."""
    fn = ev.fn
    L = Launch(ev.kind, ev.kernel, fn, getattr(fn, "__name__", None), getattr(fn, "__module__", "") or "",
               grid=None if ev.grid is None or callable(ev.grid) else dims3(ev.grid),
               block=None if ev.block is None else dims3(ev.block), args=ev.args, kwargs=dict(ev.kwargs))
    names = ev.arg_names
    L.arg_names = tuple(names or ())
    for i, a in enumerate(ev.args):
        buffers_of(a, names[i] if i < len(names) else f"argument {i}", L.buffers)
    for k, a in L.kwargs.items():
        buffers_of(a, k, L.buffers)
    ev.recorded = L
    for log in list(_ACTIVE):
        log.record(L)


def _on_launched(ev) -> None:
    """A ``launched`` event: the launch's grid (a callable grid resolved), finished or raised, and
    its memory copied for the logs that keep snapshots."""
    L = getattr(ev, "recorded", None)
    if L is None:
        return
    if L.grid is None and ev.grid is not None and not callable(ev.grid):
        L.grid = dims3(ev.grid)
    if ev.error is not None:
        L.error = ev.error
        return
    L.finished = True
    if ev.synchronize is not None and any(log.snapshot for log in _ACTIVE):
        ev.synchronize()  # numba's stream may not be torch's: finish before copying
    for log in list(_ACTIVE):
        log.take_snapshot(L.buffers)


def _activate(log: LaunchLog) -> None:
    with _LOCK:
        if not _ACTIVE:
            from .interpose import numba as numba_events
            from .interpose import triton as triton_events
            try:
                for bus in (triton_events, numba_events):
                    _SUBSCRIPTIONS.append((bus, bus.subscribe("launch", _on_launch)))
                    _SUBSCRIPTIONS.append((bus, bus.subscribe("launched", _on_launched)))
            except BaseException:
                _unsubscribe_all()
                raise
        _ACTIVE.append(log)


def _unsubscribe_all() -> None:
    while _SUBSCRIPTIONS:
        bus, sub = _SUBSCRIPTIONS.pop()
        bus.unsubscribe(sub)


def _deactivate(log: LaunchLog) -> None:
    with _LOCK:
        if log in _ACTIVE:
            _ACTIVE.remove(log)
        if not _ACTIVE:
            _unsubscribe_all()
