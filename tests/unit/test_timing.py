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


def test_bench_refuses_zero_reps():
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="reps must be a whole number"):
            utils.bench(torch.ones, 4, reps=bad)


def test_wait_and_barrier_come_before_each_clock():
    """What distributed's rank timers pass: ``wait`` replaces synchronize around each clock, ``barrier`` lines
    the ranks up after the wait, just before the clock starts."""
    from gpu_course.user_timing import cpu_ms_per_call, loop_ms
    seen = []
    loop_ms(lambda: seen.append("call"), steps=2, rounds=2, warmup=3, wait=lambda: seen.append("wait"),
            barrier=lambda: seen.append("barrier"))
    round_ = ["wait", "barrier", "call", "call", "wait"]
    assert seen == ["call"] * 3 + ["wait"] + round_ * 2
    seen.clear()
    cpu_ms_per_call(lambda: seen.append("call"), n=2, rounds=2, wait=lambda: seen.append("wait"),
                    barrier=lambda: seen.append("barrier"))
    # back to back: one wait and barrier before each loop of n calls, none between the calls
    assert seen == ["wait", "barrier", "call", "call", "wait"] * 2


def test_cpu_time_per_call_stops_when_the_last_call_returns():
    """A fake clock: each call costs 2 ms of CPU, each wait for the device 50 ms. The CPU's cost is the loop's
    time to its last return over the calls; the waits (the GPU's run) never count."""
    from gpu_course.timing import cpu_ms_back_to_back
    now = [0.0]

    def tick(ms):
        now[0] += ms / 1e3
    per = cpu_ms_back_to_back(lambda: tick(2.0), calls=5, rounds=3, wait=lambda: tick(50.0),
                              clock=lambda: now[0], each_round=True)
    assert per == pytest.approx([2.0] * 3)
    assert cpu_ms_back_to_back(lambda: tick(2.0), calls=5, wait=lambda: tick(50.0), clock=lambda: now[0]) \
        == pytest.approx(2.0)


def test_launch_ms_and_cpu_per_call_are_one_figure(monkeypatch):
    """Timing.launch_ms and cpu_ms_per_call go through the same back-to-back loop (CPU mode: bench's GPU branch
    is patched in with a fake queue), and launch_bound compares that figure with the GPU time."""
    from gpu_course import timing, user_timing
    seen = []
    real = timing.cpu_ms_back_to_back

    def spy(fn, args=(), kwargs=None, **kw):
        seen.append(kw.get("calls"))
        return real(fn, args, kwargs, **{**kw, "wait": lambda: None})
    monkeypatch.setattr(timing, "cpu_ms_back_to_back", spy)
    monkeypatch.setattr(user_timing, "cpu_ms_back_to_back", spy)
    user_timing.cpu_ms_per_call(lambda: None, n=4, rounds=2)
    assert seen == [4, 4]
    monkeypatch.setattr(timing, "ON_GPU", True)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(timing, "_bench_gpu", lambda fn, a, k, reps, b, f, h, m, launch_ms:
                        timing.Timing([0.001], "fake", "cpu", True, launch_ms=launch_ms))
    seen.clear()
    t = timing.bench(lambda: None, warmup=3)
    assert len(seen) == 1 and 2 <= seen[0] <= 10 and t.launch_ms is not None
    assert t.launch_bound == (t.launch_ms > t.median)
    assert not timing.Timing([1.0], "m", "d", True, launch_ms=0.5).launch_bound
    assert timing.Timing([1.0], "m", "d", True, launch_ms=1.5).launch_bound


def test_loop_and_cpu_time_count_every_call():
    calls = []
    assert utils.loop_ms(calls.append, 1, steps=4, rounds=3) >= 0
    assert len(calls) == 1 + 12  # one warm-up, then 3 rounds of 4
    calls.clear()
    assert utils.cpu_ms_per_call(calls.append, 1, n=5) >= 0 and len(calls) == 5
    calls.clear()
    assert utils.cpu_ms_per_call(calls.append, 1, n=5, rounds=3) >= 0 and len(calls) == 15


@pytest.mark.skipif(utils.ON_GPU, reason="sleep does no GPU work")
def test_loop_and_cpu_time_see_the_cpu_cost():
    import time
    t = utils.bench_user(time.sleep, 0.003)
    assert t.loop_ms >= 3.0 and t.cpu_ms >= 3.0 and t.median >= 3.0
    assert "says nothing about a GPU" in str(t)


def test_compare_prints_one_row_per_function(capsys):
    import time
    out = utils.compare({"slow": lambda: time.sleep(0.004), "fast": lambda: None}, baseline="slow")
    text = capsys.readouterr().out
    # a header, 2 rows, and in cpu mode a note that these times say nothing about a GPU
    assert set(out) == {"slow", "fast"} and text.count("\n") == (3 if utils.ON_GPU else 4)
    fast_row = [line for line in text.splitlines() if line.startswith("fast")][0]
    gpu_ratio = out["slow"].median / out["fast"].median          # the baseline's time over the row's
    loop_ratio = out["slow"].loop_ms / out["fast"].loop_ms
    assert fast_row.rstrip().endswith(f"{gpu_ratio:5.2f}×, {loop_ratio:5.2f}×"), fast_row
    with pytest.raises(ValueError, match="baseline 'nope'"):
        utils.compare({"a": lambda: None}, baseline="nope")
    with pytest.raises(ValueError, match="at least one"):
        utils.compare({})


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: on a GPU the graph's replays are tests/gpu's")
def test_cuda_graph_on_the_cpu_calls_the_function():
    calls = []
    replay = utils.cuda_graph(calls.append, 7)
    replay()
    replay()
    assert calls == [7, 7]


def test_a_timing_cannot_be_edited():
    import dataclasses
    t = utils.bench(torch.ones, 10, reps=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.times_ms = [0.0]
    with pytest.raises(AttributeError):
        t.times_ms.append(0.0)  # a tuple
    u = utils.UserTiming(t, 1.0, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.loop_ms = 0.0


def test_tools_table_prints_a_column_per_size_and_ranges():
    from gpu_course.timing_exercises import tools_table
    rows = {"torch.utils.benchmark": 0.007, "  lowest / highest round": (0.0065, 0.0072)}
    text = tools_table({"64 KiB": rows, "8 MiB": rows}).splitlines()
    assert text[0].split()[-4:] == ["64", "KiB", "8", "MiB"]
    assert text[1].split()[-2:] == ["7.0", "7.0"] and text[2].split()[-2:] == ["6.5-7.2", "6.5-7.2"]
