"""Unit tests of gpu_course/timing.py (CPU; the GPU branches run in tests/gpu and the notebooks)."""
import pytest
import torch

import utils


def test_bench_returns_sane_numbers_on_the_cpu():
    a = torch.randn(128, 128)
    t = utils.bench(torch.matmul, a, a, reps=7)
    assert t.n == 7 and all(x > 0 for x in t.times_ms)
    assert t.min <= t.median <= max(t.times_ms) and t.std >= 0
    if not utils.ON_GPU:
        assert "says nothing about a GPU" in str(t) and t.method == "wall clock"

@pytest.mark.skipif(utils.ON_GPU, reason="on a GPU bench times GPU work, and time.sleep has none")
def test_bench_budget_and_cap():
    import time
    t = utils.bench(time.sleep, 0.002, warmup=0, budget_ms=20)
    assert 3 <= t.n <= 12 and t.median >= 2.0
    t = utils.bench(lambda: None, warmup=0, budget_ms=10_000, max_reps=50)
    assert t.n == 50


def test_bench_counts_warmup_calls():
    calls = []
    utils.bench(calls.append, 1, warmup=4, reps=6)
    assert len(calls) == 10
    with pytest.raises(TypeError, match="callable"):
        utils.bench(42)

def test_fmt():
    assert utils.fmt_ms(0.5) == "500.0 µs" and utils.fmt_ms(12.25) == "12.250 ms"
    assert utils.fmt_num(2912.4) == "2,912" and utils.fmt_num(0.01234) == "0.0123"
