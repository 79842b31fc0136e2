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
    live = dict(n=3072, triton=549.0, cublas=720.0, device="GPU", gpu_us=105.6, launch_us=125.1, launch_bound=True,
                tile="128x128x64", programs=576, waves=4.36)
    assert matmul_sweep.print_sweep([live]) is True
    table = capsys.readouterr().out.splitlines()
    assert "launch µs (CPU)" in table[2] and table[3].split()[:4] == ["3072", "549", "720", "0.76x"]
    assert table[3].endswith("576   4.36  launch-bound")
    stored = {k: live[k] for k in ("n", "triton", "cublas", "device")}
    assert matmul_sweep.print_sweep([stored]) is False
    assert "launch" not in capsys.readouterr().out
