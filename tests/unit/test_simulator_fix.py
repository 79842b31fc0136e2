"""gpu_course.simulator_fix: Numba's CUDA simulator gives all threads of a block the same
``cuda.shared.array`` even when the interpreter switches threads inside the allocation."""
import threading
import time

import numpy as np
import pytest

import utils  # noqa: F401  first: cpu mode, the simulator switch and the fix
from gpu_course import interpose, simulator_fix
from gpu_course.interpose import numba as numba_events
from numba import cuda   # a global: the simulator swaps the kernel's global `cuda` for its own

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="the simulator runs in cpu mode only")


def _allocations_from_threads(shared, n=16):
    """Call shared.array from the same line in n threads at once; the arrays they got."""
    got, start = [None] * n, threading.Barrier(n)

    def one(i):
        start.wait()
        got[i] = shared.array((4, 4), np.float32)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


@pytest.fixture
def slow_empty(monkeypatch):
    """np.empty that yields to other threads: the window between look-up and store made wide."""
    real = np.empty
    monkeypatch.setattr(np, "empty", lambda *a, **k: (time.sleep(0.01), real(*a, **k))[1])


def test_every_thread_gets_the_one_shared_array(slow_empty):
    from numba.cuda.simulator import kernelapi
    assert kernelapi.FakeCUDAShared.array is numba_events.shared_array   # installed by utils
    got = _allocations_from_threads(kernelapi.FakeCUDAShared(0))
    assert all(a is got[0] for a in got)


@pytest.fixture
def all_in_empty(monkeypatch):
    """np.empty that returns only once 16 threads are in it: every thread has looked its call site up before
    any stores what it made (the thread switch the race needs, made certain rather than likely)."""
    real, inside = np.empty, threading.Barrier(16, timeout=60)
    monkeypatch.setattr(np, "empty", lambda *a, **k: (inside.wait(), real(*a, **k))[1])


def test_the_unpatched_simulator_has_the_race(all_in_empty, monkeypatch):
    """Why the fix exists: where threads switch between the look-up and the store, the simulator's own method
    hands every thread of the block its own array for one call site."""
    from numba.cuda.simulator import kernelapi
    original = numba_events.original(kernelapi.FakeCUDAShared, "array")
    assert original is not numba_events.shared_array
    monkeypatch.setattr(kernelapi.FakeCUDAShared, "array", original)
    got = _allocations_from_threads(kernelapi.FakeCUDAShared(0))
    assert len({id(a) for a in got}) == len(got)


@cuda.jit
def tile_sum(x, out):
    """One block of 8 threads: each stores its element in shared memory; thread 0 sums them."""
    s = cuda.shared.array(8, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    if t == 0:
        acc = 0.0
        for i in range(8):
            acc += s[i]
        out[0] = acc


def test_a_tiled_numba_kernel_is_right_under_thread_switches(slow_empty):
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(1, np.float32)
    tile_sum[1, 8](x, out)
    assert out[0] == x.sum()


def test_the_checks_counting_shares_one_array_per_block(slow_empty):
    """The exercise checks replace the method with one that records who reads and writes shared
    memory; it allocates under the same lock (without it, the check's own launch of a correct
    tiled kernel returned a few wrong elements now and then)."""
    from gpu_course.exercises.replay import Execution, counting
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(1, np.float32)
    ex = Execution()
    with counting(ex):
        tile_sum[1, 8](x, out)
    assert out[0] == x.sum()
    (use,) = ex.shared.values()
    assert len(use.writers) == 8 and ex.barriers and all(n == 1 for n in ex.barriers.values())


@cuda.jit
def sync_then_fail(x):
    """One block of 8 threads, two barriers; thread 5 raises between them."""
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 5:
        x[100] = 1   # out of bounds: an IndexError in thread 5
    cuda.syncthreads()


@cuda.jit
def early_exit_then_barriers(x):
    t = cuda.threadIdx.x
    if t < 3:
        return   # these threads end; the barriers below wait for the others only, as numba's loop does
    for _ in range(4):
        cuda.syncthreads()
        x[t] += 1
    x[t] += cuda.syncthreads_count(1)   # 5 threads still running


def test_the_blocks_run_waits_on_arrivals_and_keeps_numbas_behaviour():
    """install() replaces the simulator's BlockManager.run with block_run (numba's rules, without its
    polling: the last thread to reach a barrier or its end wakes the loop): barriers still hold every
    thread, threads that ended do not hold the others, and a thread's exception is raised as numba raises
    it, naming the thread."""
    from numba.cuda.simulator import kernel
    assert kernel.BlockManager.run is numba_events.block_run
    assert numba_events._polls_its_threads(numba_events.original(kernel.BlockManager, "run"))
    x = np.zeros(8, dtype=np.float32)
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\] ctaid=\[0, 0, 0\]"):
        sync_then_fail[1, 8](x)
    out = np.zeros(1, np.float32)
    tile_sum[1, 8](np.arange(8, dtype=np.float32), out)   # a barrier holds every thread of the block
    assert out[0] == 28
    y = np.zeros(8, np.float32)
    early_exit_then_barriers[1, 8](y)
    assert y.tolist() == [0, 0, 0, 9, 9, 9, 9, 9]


def test_install_is_idempotent():
    simulator_fix.install()
    simulator_fix.install()
    from numba.cuda.simulator import kernel
    finders = [f.module for f in __import__("sys").meta_path if isinstance(f, interpose._PatchOnImport)]
    assert len(finders) == len(set(finders))   # at most one waiting finder per module
    assert kernel.FakeCUDAKernel.__getitem__.__wrapped__ is not None
    assert not hasattr(kernel.FakeCUDAKernel.__getitem__.__wrapped__, "__wrapped__")   # wrapped once


@cuda.jit
def fill_one(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1


@pytest.mark.parametrize("grid, block, rule", [
    (1, 1025, r"1025 threads per block; a GPU runs at most 1024 threads in a block"),
    ((1, 1), (32, 32, 2), r"2048 threads per block"),
    (0, 32, r"a grid of 0 blocks; a GPU launches at least one block in each dimension"),
    ((4, 0), 32, r"a grid of \(4, 0\) blocks"),
    (1, (1, 1, 65), r"at most \(1024, 1024, 64\)"),
    (1, 0, r"every block dimension must be at least 1"),
])
def test_launches_a_gpu_refuses_are_refused(grid, block, rule):
    """The simulator ran these (1025 threads; a 0-block grid silently did nothing)."""
    out = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=rule + r".*CUDA_ERROR_INVALID_VALUE"):
        fill_one[grid, block](out)
    fill_one[1, 1024](out)    # the limit itself is fine, and the kernel still works
    assert out.tolist() == [1, 1, 1, 1]
