"""utils.bench on a real GPU: the launch is hidden, so short kernels are timed as the GPU runs
them, and an L2 flush makes a cache-sized kernel slower, not faster. Skipped on the CPU."""
import pytest
import torch

import utils

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


def square_fn(n):
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    return lambda: torch.square(x, out=out)


def test_hidden_launch_times_a_tiny_kernel_as_the_gpu_runs_it():
    fn = square_fn(2**14)  # a few µs of GPU work, more of CPU launch
    idle = utils.bench(fn, hide_launch=False)
    hidden = utils.bench(fn)
    assert hidden.median < idle.median, (hidden, idle)
    assert hidden.launch_ms > 0 and "launch hidden" in hidden.method


def test_hidden_launch_agrees_with_do_bench():
    import triton
    fn = square_fn(2**20)
    ours = utils.bench(fn, l2_flush=True).median
    theirs = triton.testing.do_bench(fn, return_mode="median")  # flushes L2, keeps the queue busy
    assert 0.7 < ours / theirs < 1.4, (ours, theirs)


def test_flushed_runs_of_a_cache_sized_kernel_are_slower():
    fn = square_fn(2**21)  # 8 MB in + 8 MB out: fits in an H100's 50 MB L2
    hot = utils.bench(fn)
    cold = utils.bench(fn, l2_flush=True)
    assert cold.median > hot.median, (cold, hot)


def test_spin_gpu_keeps_the_gpu_busy_without_blocking_the_cpu():
    import time
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    utils.spin_gpu(50.0)
    queued = time.perf_counter() - t0
    torch.cuda.synchronize()
    waited = time.perf_counter() - t0
    assert queued < 0.01 and waited > 0.04, (queued, waited)
