"""Every place the course reaches into Numba's CUDA target and its simulator: the patch points, their
version check and undo, and the events they emit (see :mod:`gpu_course.interpose` for the subscribe
API). Checked on numba 0.61-0.62 (built-in target) and numba-cuda 0.2x; nothing is patched at import,
and neither numba nor torch is imported here (a fresh simulator process loads this module alone).

Events and their fields:

* ``launch`` / ``launched``: ``kernel[blocks, threads](...)``: on a GPU
  ``numba.cuda.dispatcher._LaunchConfiguration.__call__``, in the simulator
  ``FakeCUDAKernel.__call__`` (a device function's call, or a call from inside a kernel, is not a
  launch). ``kind`` ("numba"), ``kernel``, ``fn`` (its Python function), ``args``, ``kwargs`` ({}),
  ``grid``, ``block``, ``arg_names``, ``synchronize`` (waits for the GPU's kernels; None in the
  simulator); after the launch ``error`` (the exception's class name, or None).
* ``configure``: the simulator's ``kernel[blocks, threads]``: ``grid``, ``block`` (3 ints each).
* ``shared``: a thread of the simulator declared a block's ``cuda.shared.array``: ``site`` ((file,
  line) of the declaration), ``shape``, ``array``, ``block``, ``thread``, ``new`` (True for the thread
  that allocated it, the block's first; None for dynamic shared memory, allocated at the launch).
* ``access``: a simulator thread read (``op`` "load") or wrote ("store") a shared array: ``site``,
  ``block``, ``thread`` (tuples); each thread reports its first read and its first write of each
  shared array (see ``_Reported``). Only arrays allocated while ``access`` had a subscriber report.
* ``barrier``: a simulator thread passed ``cuda.syncthreads()``: ``block``, ``thread``.

The simulator's ``BlockManager.run`` (one block: a Python thread per CUDA thread, released from each
barrier once all have reached it) is replaced by :func:`install` too, with :func:`block_run`: the same
semantics, but the threads count themselves in at a barrier and out at their end, and the last to arrive
wakes the block's loop, where numba's loop polls them (spinning on the interpreter's lock, which the
threads it waits for need to get on; the exercise checks' counted launches ran about three times slower
under it, and still a few times slower under a poll that slept between rounds).

The simulator's ``cuda.shared.array`` is replaced once, by :func:`install` (``mode`` installs it in
cpu mode, through ``simulator_fix``): the look-up of a block's array and its allocation under one
lock (:func:`block_array`), which the simulator's own method does not hold (see ``simulator_fix``).
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from . import Bus, Event, Patches, UnknownVersion, loaded, patch_when_imported

__all__ = ["subscribe", "unsubscribe", "subscribed", "listening", "install", "uninstall", "block_array",
           "shared_array", "KERNELAPI", "KERNEL", "DISPATCHER"]

KERNELAPI = "numba.cuda.simulator.kernelapi"
KERNEL = "numba.cuda.simulator.kernel"
DISPATCHER = "numba.cuda.dispatcher"
_PATCHES = Patches()
_FIXED = [False]     # install() was called: the shared array stays replaced
_LOCK = threading.Lock()


def _refresh() -> None:
    """Install the patch points some subscriber needs, put back the others."""
    launch = _BUS.listening("launch", "launched")
    wanted = {DISPATCHER: launch, KERNEL: _FIXED[0] or launch or _BUS.listening("configure", "barrier"),
              KERNELAPI: _FIXED[0] or _BUS.listening("shared", "access")}
    for name, want in wanted.items():
        if want and name not in sys.modules:
            patch_when_imported(name, lambda _m: _refresh())
    disp = loaded(DISPATCHER)
    if disp is not None and hasattr(disp, "_LaunchConfiguration"):
        _set(disp._LaunchConfiguration, "__call__", launch, gpu_launch_hook)
    kern = loaded(KERNEL)
    if kern is not None:
        if any((launch, _BUS.listening("configure"))) and not hasattr(kern, "FakeCUDAKernel"):
            raise UnknownVersion("numba's simulator has no FakeCUDAKernel: the course's interposition knows "
                                 "numba 0.61-0.62 and numba-cuda 0.2x")
        if hasattr(kern, "FakeCUDAKernel"):
            _set(kern.FakeCUDAKernel, "__call__", launch, lambda orig: _sim_launch_hook(orig, kern))
            _set(kern.FakeCUDAKernel, "__getitem__", _BUS.listening("configure"), _configure_hook)
        if hasattr(kern, "BlockThread"):
            _set(kern.BlockThread, "syncthreads", _BUS.listening("barrier"), _barrier_hook)
        if hasattr(kern, "BlockManager") and _polls_its_threads(getattr(kern.BlockManager, "run", None)):
            _set(kern.BlockManager, "run", _FIXED[0], lambda orig: block_run)
    api = loaded(KERNELAPI)
    if api is not None:
        want = wanted[KERNELAPI]
        if want:
            missing = [n for n in ("FakeCUDAShared", "types", "numpy_support") if not hasattr(api, n)]
            if missing:
                raise UnknownVersion(f"numba's simulator kernelapi has no {', '.join(missing)}: the course's "
                                     f"interposition knows numba 0.61-0.62 and numba-cuda 0.2x")
            _set(api.FakeCUDAShared, "array", True, lambda orig: shared_array)
        else:
            _set(api.FakeCUDAShared, "array", False, None)


def _set(owner, attr, on: bool, make) -> None:
    if on:
        _PATCHES.put(owner, attr, make)
    else:
        _PATCHES.undo(owner, attr)


_BUS = Bus("numba", ("launch", "launched", "configure", "shared", "access", "barrier"), _refresh)
subscribe, unsubscribe, subscribed, listening = _BUS.subscribe, _BUS.unsubscribe, _BUS.subscribed, _BUS.listening


def install() -> None:
    """Replace the simulator's ``cuda.shared.array`` with :func:`shared_array` from now on (now if the
    simulator is imported, else when it is; idempotent)."""
    _FIXED[0] = True
    _refresh()


def uninstall() -> None:
    """Put back every patch point, the shared array too."""
    _FIXED[0] = False
    _PATCHES.undo_all()


def original(owner, attr: str):
    """What ``owner.attr`` was before this layer replaced it (itself if it is not replaced)."""
    value = vars(owner).get(attr, getattr(owner, attr, None))
    return getattr(value, "__wrapped__", value)


# ------------------------------------------------------------------------------------------------
# launches

def _names(fn) -> list:
    import inspect
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _gpu_synchronize():
    from numba import cuda  # already imported: this is its launch path
    cuda.synchronize()


def gpu_launch_hook(original):
    def __call__(self, *args):
        if not _BUS.listening("launch", "launched"):
            return original(self, *args)
        d = self.dispatcher
        fn = getattr(d, "py_func", None)
        ev = Event(kind="numba", kernel=d, fn=fn, args=args, kwargs={}, grid=self.griddim, block=self.blockdim,
                   arg_names=_names(fn), error=None, synchronize=_gpu_synchronize)
        return _BUS.around(ev, lambda: original(self, *args))
    return __call__


def _sim_launch_hook(original, sim_module):
    def __call__(self, *args):
        if not _BUS.listening("launch", "launched") or getattr(self, "_device", False) \
                or getattr(sim_module, "_kernel_context", None):
            return original(self, *args)  # a device function, or a call from inside a kernel
        if self.grid_dim is None or self.block_dim is None:
            return original(self, *args)  # numba raises its own "launch configuration" error
        fn = getattr(self, "fn", None)
        ev = Event(kind="numba", kernel=self, fn=fn, args=args, kwargs={}, grid=self.grid_dim, block=self.block_dim,
                   arg_names=_names(fn), error=None, synchronize=None)
        return _BUS.around(ev, lambda: original(self, *args))
    return __call__


def _configure_hook(original):
    def __getitem__(self, configuration):
        out = original(self, configuration)
        _BUS.emit("configure", Event(grid=tuple(self.grid_dim), block=tuple(self.block_dim)))
        return out
    return __getitem__


# ------------------------------------------------------------------------------------------------
# the simulator's threads: shared arrays and barriers

# The names numba's own BlockManager.run (numba 0.61-0.62, numba-cuda 0.2x-0.30) uses: block_run
# replaces only a run that still works this way (another leaves the simulator as it is).
_POLLING = {"BlockThread", "syncthreads_blocked", "syncthreads_event", "exception", "abort", "is_alive"}


def _polls_its_threads(run) -> bool:
    """Whether ``run`` (its code and the code nested in it) uses every name of ``_POLLING``."""
    names, todo = set(), [getattr(getattr(run, "__wrapped__", run), "__code__", None)]
    while todo:
        code = todo.pop()
        if code is not None:
            names |= set(code.co_names) | set(code.co_varnames)
            todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return _POLLING <= names


class _Arrivals:
    """What the threads of one block tell :func:`block_run`, under one condition variable: how many wait at
    the barrier, how many have finished, whether one raised. The thread whose arrival completes the count wakes
    the block's loop (one wake-up a barrier, instead of a poll every few milliseconds)."""

    def __init__(self, n: int):
        self.cv = threading.Condition()
        self.n, self.waiting, self.finished, self.failed = n, 0, 0, False

    def arrive(self) -> None:
        with self.cv:
            self.waiting += 1
            if self.waiting + self.finished >= self.n:
                self.cv.notify()

    def finish(self, failed: bool) -> None:
        with self.cv:
            self.finished += 1
            self.failed = self.failed or failed
            if failed or self.waiting + self.finished >= self.n:
                self.cv.notify()


_WATCHED = {}   # numba's BlockThread -> its subclass that reports to an _Arrivals


def _watched(base):
    """A subclass of numba's ``BlockThread`` whose ``syncthreads_blocked = True`` (what numba's ``syncthreads``
    sets before it waits) and whose end (after ``run`` has recorded any exception) report to its block's
    :class:`_Arrivals`."""
    if base not in _WATCHED:
        class Watched(base):
            def __init__(self, arrivals, *args):
                self._arrivals, self._blocked = arrivals, False
                super().__init__(*args)

            @property
            def syncthreads_blocked(self):
                return self._blocked

            @syncthreads_blocked.setter
            def syncthreads_blocked(self, value):
                self._blocked = value
                if value:
                    self._arrivals.arrive()

            def run(self):
                try:
                    super().run()
                finally:
                    self._arrivals.finish(self.exception is not None)
        _WATCHED[base] = Watched
    return _WATCHED[base]


def block_run(self, grid_point, *args):
    """``BlockManager.run`` as :func:`install` puts it: numba's semantics (a thread per CUDA thread of the
    block; when every thread still running waits at ``syncthreads``, release them all; on an exception, abort
    the others and raise the first), without its polling: each thread counts itself in at a barrier and out
    at its end, and the last one to arrive wakes this loop (a poll cost about 5 ms, the interpreter's switch
    interval, before this loop got the lock back; a block of 256 threads polled dozens of times a launch). A
    wait times out after 50 ms and counts again, so a wake-up lost to a bug costs time, never a hang."""
    kern = sys.modules[KERNEL]
    points = list(np.ndindex(*self._block_dim))
    arrivals = _Arrivals(len(points))
    Watched = _watched(kern.BlockThread)
    threads = []
    for block_point in points:
        def target():
            self._f(*args)
        t = Watched(arrivals, target, self, grid_point, block_point, self._debug)
        threads.append(t)
    for t in threads:
        t.start()
    with arrivals.cv:
        while True:
            while not arrivals.failed and arrivals.waiting + arrivals.finished < arrivals.n:
                arrivals.cv.wait(0.05)
            if arrivals.failed:
                failed = next(t for t in threads if t.exception)
                for other in threads:   # abort the others; not joined, as numba does
                    other.abort = True
                    other._blocked = False
                    other.syncthreads_event.set()
                raise failed.exception[0].with_traceback(failed.exception[1])
            if arrivals.finished == arrivals.n:
                break
            arrivals.waiting = 0
            for t in threads:
                if t._blocked:
                    t._blocked = False
                    t.syncthreads_event.set()
    for t in threads:
        t.join()


def _who():
    """``(block, thread)`` of the simulator thread running (tuples), or ``(None, None)`` outside a kernel; kept
    on the thread after its first event (a thread's indices do not change, and ``tuple`` of numba's ``Dim3``
    runs a generator: it was most of the cost of an event)."""
    t = threading.current_thread()
    who = getattr(t, "_course_who", None)
    if who is None:
        b, th = getattr(t, "blockIdx", None), getattr(t, "threadIdx", None)
        if b is None:
            return None, None
        who = t._course_who = (tuple(b), tuple(th))
    return who


def _barrier_hook(original):
    def syncthreads(self):
        block, thread = _who()
        if block is not None:
            _BUS.emit("barrier", Event(block=block, thread=thread))
        return original(self)
    return syncthreads


class _Reported(np.ndarray):
    """A shared array whose element reads and writes are ``access`` events (its ``_site`` set). A view
    taken of it (``m[r]``, ``n[:, c]``) keeps the site, so that the elements read through the view are
    events too; taking the view reads nothing (its event says ``view=True``). With ``_once`` set (the
    block's shared arrays), a thread reports its first read and its first write of the array only: what is
    asked of a shared array is which threads read and wrote it, and an event costs a few microseconds of a
    simulated thread's time (a tiled matmul reads its tiles tens of thousands of times a block); without it
    (a kernel's global arguments, whose reads are counted) every access reports."""
    _once = False

    def __array_finalize__(self, obj):
        self._site = getattr(obj, "_site", None)
        self._once = getattr(obj, "_once", False)

    def _report(self, op: str, out=None) -> None:
        site = getattr(self, "_site", None)
        if site is None:
            return
        if self._once:   # looked up first: most accesses end here
            seen = threading.current_thread().__dict__.setdefault("_course_reported", set())
            if (site, op) in seen:
                return
        block, thread = _who()
        if block is None:
            return
        if self._once:
            seen.add((site, op))
        fields = {"view": isinstance(out, np.ndarray)} if op == "load" else {}
        _BUS.emit("access", Event(op=op, site=site, block=block, thread=thread, **fields))

    def __getitem__(self, key):
        out = np.ndarray.__getitem__(self, key)
        self._report("load", out)
        return out

    def __iter__(self):   # for v in m[r]: each element read is an event, as m[r][i] is
        for i in range(len(self)):
            yield self[i]

    def __setitem__(self, key, value):
        self._report("store")
        return np.ndarray.__setitem__(self, key, value)


def block_array(shared, site, shape, dtype):
    """The block's shared array declared at ``site`` (file, line), allocated by the first thread that
    asks: look-up and allocation under one lock, so every thread of the block gets the same array.
    Returns ``(array, whether this call allocated it)``."""
    with _LOCK:
        res = shared._allocations.get(site)
        new = res is None
        if new:
            res = shared._allocations[site] = np.empty(shape, dtype)
    return res, new


def shared_array(self, shape, dtype, alignment=None):
    """``FakeCUDAShared.array`` as this layer installs it: the allocation under a lock (one array per
    block and call site), a ``shared`` event, and, while ``access`` has a subscriber, an array that
    reports its reads and writes."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    kernelapi = sys.modules[KERNELAPI]   # its own numba types and converters (numba-cuda's)
    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    f = sys._getframe(1)
    site = (f.f_code.co_filename, f.f_lineno)  # the simulator tells arrays apart by the declaring line
    if shape == 0:  # dynamic shared memory: one buffer for the whole block, allocated at launch
        count = self._dynshared_size // dtype.itemsize
        res, new = np.frombuffer(self._dynshared.data, dtype=dtype, count=count), None
    else:
        res, new = block_array(self, site, shape, dtype)
    if _BUS.listening("shared"):
        block, thread = _who()
        _BUS.emit("shared", Event(site=site, shape=tuple(res.shape), array=res, new=new, block=block, thread=thread))
    if _BUS.listening("access"):
        res = res.view(_Reported)
        res._site, res._once = site, True
    return res
