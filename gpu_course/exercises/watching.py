"""Checks of code that is not a kernel: what it called (:func:`watch_calls`), and work that only a
synchronize waits for (:func:`slow_work`, for checks of a timer)."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass
class Call:
    """One recorded call: its arguments and what it returned (or raised)."""
    args: tuple
    kwargs: dict
    result: object = None
    error: BaseException | None = None


def rebind(original, replacement, extra=()) -> list:
    """Bind ``replacement`` wherever a module (or a dict in ``extra``, such as a function's
    globals) holds ``original``; return what :func:`unbind` needs to put it back."""
    done, spaces = [], [getattr(m, "__dict__", None) for m in list(sys.modules.values())]
    for d in spaces + list(extra):
        if not isinstance(d, dict):
            continue
        for name, value in list(d.items()):
            if value is original:
                d[name] = replacement
                done.append((d, name))
    return done


def unbind(done: list, original, replacement) -> None:
    """Put ``original`` back where :func:`rebind` bound ``replacement`` (and nothing has rebound it since)."""
    for d, name in done:
        if d.get(name) is replacement:
            d[name] = original


@contextmanager
def watch_calls(fn, *, within=()):
    """Record every call of ``fn`` (``utils.bench``, say) made while the block runs, however the
    code reached it: every module attribute bound to ``fn`` (``utils.bench``, or ``bench`` after
    ``from utils import bench`` in a notebook) calls a recorder while the block is open; pass
    ``within=[f]`` to cover a function ``f`` whose globals are not a module's. Yields the list
    of :class:`Call`, in order. (Code that kept ``fn`` in a closure or a default argument is not
    seen.)

    >>> import gpu_course.launch as launch
    >>> with watch_calls(launch.cdiv) as seen:
    ...     _ = launch.cdiv(10, 4)
    >>> [(c.args, c.result) for c in seen]
    [((10, 4), 3)]
    """
    seen: list[Call] = []

    def recorder(*args, **kwargs):
        call = Call(args, kwargs)
        seen.append(call)
        try:
            call.result = fn(*args, **kwargs)
        except BaseException as e:
            call.error = e
            raise
        return call.result
    recorder.__wrapped__ = fn
    done = rebind(fn, recorder, [getattr(f, "__globals__", None) for f in within])
    try:
        yield seen
    finally:
        unbind(done, fn, recorder)


@contextmanager
def slow_work(ms: float = 50.0, *, within=()):
    """For checks of a timer: yields ``launch``, a function that behaves like launching ``ms`` ms
    of GPU work: it returns at once, and the work is over only when a synchronize has waited for
    it. On a GPU the work is real (a spin kernel, :func:`~gpu_course.timing.spin_gpu`), so
    ``utils.synchronize()``, ``torch.cuda.synchronize()`` or anything else that waits for the GPU
    waits for it. In cpu mode it is simulated: while the block is open, ``utils.synchronize``
    (however it was imported, see :func:`watch_calls` for ``within``) and
    ``torch.cuda.synchronize`` sleep until the work would be over. Work launched while earlier work is
    still queued starts when that ends, as on a GPU's stream; ``launch.busy()`` says whether queued work
    is still running (``stream.query()`` on a GPU).

    >>> import time
    >>> from gpu_course import mode
    >>> with slow_work(20) as launch:
    ...     t0 = time.perf_counter(); launch(); mode.synchronize()
    ...     waited = (time.perf_counter() - t0) * 1e3
    >>> waited >= 15
    True
    """
    from .. import mode
    from ..timing import spin_gpu

    if mode.ON_GPU:
        spin_gpu(0.01)   # the spin's rate is measured on first use, with a synchronize: not inside a check
        torch.cuda.synchronize()

        def launch_gpu():
            spin_gpu(ms)
        launch_gpu.busy = lambda: not torch.cuda.current_stream().query()
        yield launch_gpu
        return
    until = [0.0]

    def launch():
        until[0] = max(until[0], time.perf_counter()) + ms / 1e3   # behind the work already queued
    launch.busy = lambda: time.perf_counter() < until[0]

    def wait(*_, **__):
        time.sleep(max(0.0, until[0] - time.perf_counter()))
    extra = [getattr(f, "__globals__", None) for f in within]
    done = [(rebind(f, wait, extra), f) for f in (mode.synchronize, torch.cuda.synchronize)]
    try:
        yield launch
    finally:
        for d, f in done:
            unbind(d, f, wait)
