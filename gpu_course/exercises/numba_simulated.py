"""On a GPU, the counts of cpu mode for a Numba answer: the course's own launch made again in Numba's CUDA simulator.

On a GPU the compiled kernel's PTX says that shared-memory loads, stores and barriers are there, not that the tiles
carry the work: a naive product beside tiles of zeros that every thread writes and reads holds the same instructions
as a tiled one. So on a GPU, after the GPU replay (which decides the result and reads the PTX), :func:`simulated_run`
launches the learner's kernel again, each recorded launch with its grid and block, in the simulator
(``numba.cuda.simulator``, which runs beside the CUDA target: the kernel's Python function, ``py_func``), on CPU
memory: the output poisoned, every other array a copy of its values. What it executed is counted as in cpu mode
(:func:`.replay.counting`: which threads of which block wrote and read each shared array, the barriers each thread
passed, the global loads), into the GPU execution, whose evidence then reads the counts. Where the simulator cannot
run the kernel (a device function it cannot call ...) nothing is counted and the PTX is read, as before.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["simulated_run", "SimulatedRunError"]

POISON = 0xFF


class SimulatedRunError(Exception):
    """The simulated launch refuses the answer (the message says why, to the learner)."""


def _span(v):
    """``(lo, hi)`` of the device memory a CUDA array argument covers (``__cuda_array_interface__``), or None."""
    cai = getattr(v, "__cuda_array_interface__", None)
    if not cai:
        return None
    ptr = int(cai["data"][0])
    import numpy as np
    item = np.dtype(cai["typestr"]).itemsize
    shape, strides = cai["shape"], cai.get("strides")
    if not shape:
        return ptr, ptr + item
    strides = strides or tuple(item * int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    hi = ptr + item + sum((n - 1) * s for n, s in zip(shape, strides) if n > 0)
    return ptr, hi


def _host_copy(v, output_span):
    """The CPU stand-in of a launch argument: a device array (or CUDA tensor) becomes a NumPy copy of its values,
    poisoned where it is the output; anything else stays."""
    import numpy as np
    span = _span(v)
    if span is None:
        return v
    host = v.detach().cpu().numpy().copy() if isinstance(v, torch.Tensor) else v.copy_to_host()
    if span[0] < output_span[1] and output_span[0] < span[1]:
        host.view(np.uint8)[...] = POISON
    return host


@contextmanager
def _device_functions_as_python(fn):
    """While open, the CUDA device functions that ``fn``'s module holds are their Python functions (the simulator
    calls a device function as Python)."""
    from numba.cuda.dispatcher import CUDADispatcher
    g = fn.__globals__
    swapped = {k: v for k, v in g.items() if isinstance(v, CUDADispatcher) and v.targetoptions.get("device")}
    g.update({k: v.py_func for k, v in swapped.items()})
    try:
        yield
    finally:
        g.update(swapped)


def simulated_run(trial, execution) -> None:
    """Launch ``trial.mine`` (the learner's recorded Numba launches) again in the simulator, counted, and put the
    counts into ``execution`` (the GPU replay's :class:`.replay.Execution`). Raises :class:`SimulatedRunError` when
    the simulated launch does not compute the result."""
    import numpy as np
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    from .. import simulator_fix
    from .kinds import result_problem
    from .kinds.numba import _GlobalArrays
    from .replay import Execution, counting
    simulator_fix.install()   # the simulator's shared arrays, thread-safe
    out_span = (trial.out.data_ptr(), trial.out.data_ptr() + trial.out.numel() * trial.out.element_size())
    ex = Execution()
    result = None
    for L in trial.mine:
        fn = getattr(L.kernel, "py_func", None)
        if fn is None or L.grid is None or L.block is None:
            raise SimulatedRunError("no Python function or launch configuration to simulate")
        args = [_host_copy(a, out_span) for a in L.args]
        spans = [_span(a) for a in L.args]
        outs = [a for a, sp in zip(args, spans) if sp and sp[0] < out_span[1] and out_span[0] < sp[1]]
        if outs:
            result = outs[-1]
        ext = _GlobalArrays()
        kernel = FakeCUDAKernel(fn, device=False, fastmath=False, extensions=[ext])
        g, b = tuple(L.grid), tuple(L.block)
        ex.threads = b[0] * b[1] * b[2]
        ex.programs += g[0] * g[1] * g[2]
        ex.blocks.update((x, y, z) for x in range(g[0]) for y in range(g[1]) for z in range(g[2]))
        with counting(ex), _device_functions_as_python(fn):
            kernel[g, b](*args)
        ex.elements = max(ex.elements, sum(ext.seen.values()))
    if result is None:
        raise SimulatedRunError("the output is none of the arrays the kernel was given")
    got = torch.from_numpy(np.ascontiguousarray(result)).reshape(trial.out.shape)
    first = result_problem(trial, got)
    if first:
        raise SimulatedRunError(f"the check launched {trial.label} again in Numba's CUDA simulator, where it counts "
                                f"what each thread does, and it did not compute the result: {first}")
    for name in ("blocks", "threads", "shared", "barriers", "gloads", "elements", "programs"):
        setattr(execution, name, getattr(ex, name))
    execution.counted = True
