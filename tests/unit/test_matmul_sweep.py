"""Notebook 07's sweep table (gpu_course.matmul_sweep): the stored run's rows in cpu mode, and the table a
live run prints, with its launch-bound mark."""
from gpu_course import matmul_sweep

KERNEL = "triton matmul fp16 (autotuned)"


def test_the_stored_sweep_is_sorted_and_rates_are_positive():
    rows = matmul_sweep.stored_sweep("07_triton_matmul", KERNEL)
    assert [r["n"] for r in rows] == sorted(r["n"] for r in rows)
    assert all(r["triton"] > 0 and r["cublas"] > 0 and "gpu_us" not in r for r in rows)
    assert matmul_sweep.stored_sweep("07_triton_matmul", "no such kernel") == []


def test_print_sweep_prints_the_live_columns_only_for_a_live_sweep(capsys):
    live = dict(n=3072, triton=549.0, cublas=720.0, device="GPU", gpu_us=105.6, cpu_us=125.1, launch_bound=True,
                tile="128x128x64", programs=576, waves=4.36)
    assert matmul_sweep.print_sweep([live]) is True
    table = capsys.readouterr().out.splitlines()
    assert "CPU µs/call" in table[2] and table[3].split()[:4] == ["3072", "549", "720", "0.76x"]
    assert table[3].endswith("576   4.36  launch-bound")
    stored = {k: live[k] for k in ("n", "triton", "cublas", "device")}
    assert matmul_sweep.print_sweep([stored]) is False
    assert "launch" not in (out := capsys.readouterr().out) and "CPU" not in out


def test_bench_interleaved_alternates_the_order_and_pools_the_rounds(monkeypatch):
    from gpu_course.timing import Timing
    order = []

    def fake_bench(fn, *args, budget_ms=None):
        order.append(fn.__name__)
        return Timing((1.0, 2.0), "fake", "cpu", False, launch_ms=len(order))
    monkeypatch.setattr(matmul_sweep, "bench", fake_bench)

    def a(): pass

    def b(): pass
    t = matmul_sweep.bench_interleaved({"a": a, "b": b}, rounds=3)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert t["a"].times_ms == (1.0, 2.0) * 3 and t["b"].n == 6
    assert t["a"].launch_ms == 4 and t["b"].launch_ms == 3  # the median of the rounds' CPU times per call
    assert "interleaved" in t["a"].method


def test_the_exercise_references_of_notebook_07():
    import torch
    from gpu_course.kernels.triton_matmul import last_round_fill, stages_that_fit
    assert last_round_fill(3072, 3072, 128, 128, 132, 1) == 48 / 132      # 576 programs: 4 full rounds + 48
    assert last_round_fill(3072, 3072, 128, 128, 132, 2) == 48 / 264
    assert last_round_fill(4096, 4096, 128, 256, 128) == 1.0              # a full last round is 1, not 0
    assert last_round_fill(1000, 1100, 128, 128, 132) == 72 / 132         # edge tiles are programs too
    assert stages_that_fit(128, 256, 64, torch.float16, 232448) == 4      # 48 KiB a stage
    assert stages_that_fit(256, 256, 128, torch.float32, 65536) == 0
