"""Unit tests of gpu_course/device_ceilings.py and results.py (CPU; the GPU branches run in tests/gpu and the notebooks)."""
import csv
import json

import pytest

import utils
from gpu_course import device_ceilings as ceilings_mod, results as results_mod
from gpu_course.results import _slug
from gpu_course.user_timing import user_table


def test_throughput_against_measured_ceiling():
    ceil = utils.ceilings()
    assert ceil["copy"] > 0 and ceil["fp32"] > 0
    r = utils.throughput(2.0, nbytes=4 * 10**6)  # 4 MB in 2 ms = 2 GB/s
    assert r.unit == "GB/s" and r.value == pytest.approx(2.0)
    assert r.pct == pytest.approx(100 * 2.0 / ceil["copy"])
    if utils.ON_GPU:
        assert "copy bandwidth (bytes read + written) measured here" in str(r)
    else:  # a CPU's caches make a % of its copy ceiling meaningless: none is printed
        assert str(r) == "2 GB/s (CPU: a % of a ceiling is reported on a GPU only)"
    f = utils.throughput(1.0, flops=2 * 10**9)
    assert f.unit == "TFLOP/s" and f.value == pytest.approx(2.0)
    with pytest.raises(ValueError, match="exactly one"):
        utils.throughput(1.0)
    with pytest.raises(ValueError, match="positive"):
        utils.throughput(0.0, nbytes=1)
    if not utils.ON_GPU:
        with pytest.raises(ValueError, match="no measured ceiling 'bf16'"):
            utils.throughput(1.0, flops=1, kind="bf16")

def _fake_gpu_timing(ms):
    return utils.Timing([ms, ms, ms], "CUDA events", "Test GPU 9000", True)

def test_gpu_string_of_throughput(monkeypatch):
    monkeypatch.setattr(ceilings_mod, "ON_GPU", True)
    r = utils.Throughput(1500.0, "GB/s", 3000.0, "copy")
    assert str(r) == ("1,500 GB/s = 50 % of the best copy bandwidth (bytes read + written) measured "
                      "here (3,000 GB/s)")
    # with a spec sheet: its % first; a kernel faster than the library's best is a ratio, never > 100 %
    fast = utils.Throughput(720.0, "TFLOP/s", 702.0, "fp16", spec=989.4)
    assert fast.pct_spec == pytest.approx(72.77, abs=0.01)
    assert str(fast) == ("720 TFLOP/s = 73 % of the spec-sheet peak (989 TFLOP/s), 1.03× the best "
                         "fp16 matmul measured here (702)")
    assert utils.Throughput(1.0, "GB/s", 2.0, "copy").pct_spec is None
    # a % while it rounds to 100 or less: 100.3 % is "100 %" (not "1.00×"), 100.6 % is a ratio
    assert str(utils.Throughput(3009.0, "GB/s", 3000.0, "copy")).endswith("= 100 % of the best copy bandwidth "
                                                                         "(bytes read + written) measured here (3,000 GB/s)")
    assert utils.Throughput(3018.0, "GB/s", 3000.0, "copy").vs_measured("it") == "1.01× it"


def test_spec_peaks_name_their_source():
    for device, peaks in utils.SPEC_PEAKS.items():
        assert peaks["source"] and all(peaks[k] > 0 for k in ("fp16", "fp32", "copy")), device
        assert set(peaks) <= {"fp32", "tf32", "fp16", "bf16", "fp8", "int8", "copy", "source"}, device
    h100 = "NVIDIA H100 80GB HBM3"
    assert utils.spec_peak("fp16", h100) == 989.4 and utils.spec_peak("copy", h100) == 3350.0
    assert utils.spec_peak("fp16", "CPU (x86_64)") is None and utils.spec_peak("int4", h100) is None


def test_results_are_saved_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.delenv("COURSE_SAVE_RESULTS", raising=False)
    row = utils.save_result("01", "square", "n=1e8", _fake_gpu_timing(2.0))
    assert row["ms"] == "2" and not list(tmp_path.iterdir())  # a learner's run writes nothing
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    utils.save_result("01", "square", "n=1e8", _fake_gpu_timing(2.0))
    assert [p.name for p in tmp_path.iterdir()] == ["test-gpu-9000.csv"]


def test_record_and_results_table(tmp_path, monkeypatch):
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    cpu = utils.Timing([1.0], "wall clock", "CPU (x)", False)
    assert utils.save_result("01", "square", "n=10", cpu) is None  # the CPU records nothing
    assert not list(tmp_path.iterdir())
    r = utils.Throughput(1500.0, "GB/s", 3000.0, "copy")
    utils.save_result("01", "square", "n=1e8", _fake_gpu_timing(2.0), r, baseline=_fake_gpu_timing(1.9))
    utils.save_result("01", "square", "n=1e8", _fake_gpu_timing(1.0), r, baseline=_fake_gpu_timing(1.9))
    utils.save_result("04", "matmul", "4096³", _fake_gpu_timing(5.0))
    path = tmp_path / "test-gpu-9000.csv"
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 3 and rows[0]["pct_of_ceiling"] == "50" and rows[0]["vs_baseline"] == "0.95"
    latest = utils.stored_results("Test GPU 9000")
    assert [(x["kernel"], x["ms"]) for x in latest] == [("square", "1"), ("matmul", "5")]
    assert utils.stored_results(notebook="04")[0]["kernel"] == "matmul"
    table = utils.results_markdown(latest)
    assert "| 01 | square | n=1e8 | Test GPU 9000 | 1.000 ms |  |  | 1,500 GB/s |  | 1.90× torch |  |" in table
    assert table.count("\n") == 3
    h100 = {**latest[0], "device": "NVIDIA H100 80GB HBM3", "rate": "1675", "ceiling": "copy"}
    assert "| 1,675 GB/s | 50 % copy |" in utils.results_markdown([h100])  # % of the H100's 3,350 GB/s
    assert "a \\| b" in utils.results_markdown([{**latest[0], "kernel": "a | b"}])
    # the share the run printed, from its unrounded rate (pct_of_spec), not recomputed from the stored rate
    printed = {**h100, "rate": "2965", "pct_of_spec": "88.4"}   # 2965 / 3350 would round to 89 %
    assert "| 2,965 GB/s | 88 % copy |" in utils.results_markdown([printed])

def test_gpu_ceilings_are_cached_per_device(tmp_path, monkeypatch):
    monkeypatch.setattr(ceilings_mod, "CEILINGS_FILE", tmp_path / "ceilings.json")
    monkeypatch.setattr(ceilings_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(ceilings_mod, "ON_GPU", True)
    monkeypatch.setattr(ceilings_mod, "device_name", lambda: "Test GPU 9000")
    monkeypatch.setattr(ceilings_mod, "_ceilings_cache", {})
    calls = []
    monkeypatch.setattr(ceilings_mod, "_measure_ceilings",
                        lambda: calls.append(1) or ({"copy": 3000.04, "fp32": 40.00001}, {"fp32": [40.00001]}))
    assert utils.ceilings() == {"copy": 3000.0, "fp32": 40.0}
    stored = json.loads((tmp_path / "ceilings.json").read_text())
    assert stored["Test GPU 9000"]["ceilings"]["copy"] == 3000.0
    monkeypatch.setattr(ceilings_mod, "_ceilings_cache", {})
    assert utils.ceilings()["fp32"] == 40.0 and len(calls) == 1  # read back, not re-measured
    utils.ceilings(refresh=True)
    assert len(calls) == 2

def test_slug_and_results_file():
    assert _slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert utils.results_file("NVIDIA H100 80GB HBM3").name == "nvidia-h100-80gb-hbm3.csv"

def test_report_prints_and_records(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    monkeypatch.setattr(ceilings_mod, "ceilings", lambda: {"copy": 3000.0, "fp32": 50.0})
    t = _fake_gpu_timing(1.0)
    line = utils.report("03", "square_k", "n=1e8", t, baseline=_fake_gpu_timing(0.9),
                        nbytes=2_400_000_000)
    assert line == "square_k: 1.000 ms, 2,400 GB/s = 80 % of the copy rate measured here, 0.90× torch"
    assert capsys.readouterr().out == line + "\n"
    assert float(utils.stored_results("Test GPU 9000")[0]["vs_baseline"]) == 0.9
    cpu = utils.Timing([2.0], "wall clock", "CPU", False)
    assert utils.report("03", "k", "n", cpu).endswith("(CPU: not a GPU figure)")


def _fake_user_timing(ms, loop, cpu):
    return utils.UserTiming(_fake_gpu_timing(ms), loop, cpu)


def test_report_of_user_timings_carries_the_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    monkeypatch.setattr(ceilings_mod, "ceilings", lambda: {"copy": 3000.0, "fp32": 50.0})
    ours, torch_ = _fake_user_timing(0.05, 0.2, 0.21), _fake_user_timing(0.08, 0.08, 0.02)
    line = utils.report("10", "ln", "4096x8192", ours, baseline=torch_, nbytes=150_000_000)
    assert line == ("ln: GPU 50.0 µs, loop 200.0 µs a step, CPU 210.0 µs a call, 3,000 GB/s = 100 % of the "
                    "copy rate measured here, 1.60× torch, 0.40× in a loop")
    row = utils.stored_results("Test GPU 9000")[0]
    assert (row["loop_ms"], row["cpu_ms"], row["baseline_loop_ms"], row["vs_baseline_loop"]) == \
        ("0.2", "0.21", "0.08", "0.4")
    assert ours.launch_bound and not torch_.launch_bound
    table = utils.results_markdown([row])
    assert "| 50.0 µs | 200.0 µs | 210.0 µs | 3,000 GB/s |  | 1.60× torch | 0.40× |" in table


def test_old_results_file_gets_the_new_columns(tmp_path, monkeypatch):
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    old_fields = results_mod.RESULT_FIELDS[:13]
    path = tmp_path / "test-gpu-9000.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=old_fields)
        w.writeheader()
        w.writerow({k: "x" for k in old_fields} | {"ms": "3", "device": "Test GPU 9000", "notebook": "01",
                                                    "kernel": "old", "size": "n"})
    utils.save_result("01", "new", "n", _fake_user_timing(1.0, 2.0, 0.5))
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == results_mod.RESULT_FIELDS
    assert rows[0]["kernel"] == "old" and rows[0]["loop_ms"] == "" and rows[1]["loop_ms"] == "2"


# ------------------------------------------------------------ what the bench/ scripts record
def _gpu_user(ms, loop, cpu):
    return utils.UserTiming(_fake_gpu_timing(ms), loop, cpu)


def _saving_to(tmp_path, monkeypatch):
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    monkeypatch.setattr(ceilings_mod, "ceilings", lambda: {"copy": 3000.0, "fp32": 50.0, "fp16": 700.0})


def test_record_comparison_records_each_row_with_its_loop_and_cpu_figures(tmp_path, monkeypatch):
    _saving_to(tmp_path, monkeypatch)
    times = {"torch.sum": _gpu_user(1.0, 1.2, 0.02), "rung 7": _gpu_user(0.8, 1.5, 0.05)}
    rows = results_mod.record_comparison("bench/reductions", "1e+08 fp32", times, "torch.sum",
                                         nbytes=2_400_000_000, prefix="sum: ")
    stored = list(csv.DictReader((tmp_path / "test-gpu-9000.csv").open()))
    assert stored == rows and [r["notebook"] for r in rows] == ["bench/reductions"] * 2
    base, ours = rows
    assert (base["kernel"], base["baseline"], base["vs_baseline"], base["loop_ms"], base["cpu_ms"]) == \
        ("sum: torch.sum", "", "", "1.2", "0.02")
    assert (ours["kernel"], ours["baseline"], ours["vs_baseline"], ours["loop_ms"], ours["cpu_ms"],
            ours["baseline_loop_ms"], ours["vs_baseline_loop"]) == \
        ("sum: rung 7", "torch.sum", "1.25", "1.5", "0.05", "1.2", "0.8")
    assert (ours["rate"], ours["unit"], ours["pct_of_ceiling"]) == ("3000", "GB/s", "100")
    # the baseline's row left out (it was recorded with another table), another name for it in the rows
    again = results_mod.record_comparison("bench/x", "4096³", times, "torch.sum", flops=2 * 4096**3,
                                          kind="fp16", baseline_name="cuBLAS fp16", include_baseline=False)
    assert [(r["kernel"], r["baseline"], r["unit"]) for r in again] == [("rung 7", "cuBLAS fp16", "TFLOP/s")]


def test_record_comparison_refuses_rows_without_the_loop_and_cpu_figures(tmp_path, monkeypatch):
    _saving_to(tmp_path, monkeypatch)
    with pytest.raises(TypeError, match="bench_user"):
        results_mod.record_comparison("bench/x", "n", {"torch": _gpu_user(1.0, 1.0, 0.1),
                                                       "sweep cfg 3": _fake_gpu_timing(0.5)}, "torch")
    with pytest.raises(ValueError, match="baseline 'cuBLAS' is not one of"):
        results_mod.record_comparison("bench/x", "n", {"torch": _gpu_user(1.0, 1.0, 0.1)}, "cuBLAS")
    assert not list(tmp_path.iterdir())


def test_record_comparison_writes_nothing_in_cpu_mode(tmp_path, monkeypatch):
    _saving_to(tmp_path, monkeypatch)  # even when asked to save
    cpu = utils.UserTiming(utils.Timing([3.0], "wall clock", "CPU (x)", False), 3.1, 3.2)
    assert results_mod.record_comparison("bench/x", "n", {"torch": cpu, "ours": cpu}, "torch", nbytes=8) == []
    assert not list(tmp_path.iterdir())


def test_compare_and_record_times_prints_and_records(tmp_path, monkeypatch, capsys):
    _saving_to(tmp_path, monkeypatch)
    fake = {"eager torch": _gpu_user(2.0, 2.5, 0.03), "Triton fused": _gpu_user(1.0, 2.0, 0.04)}

    def fake_compare(fns, *args, baseline=None, **kwargs):
        assert list(fns) == list(fake) and baseline is None and kwargs == {"l2_flush": True}
        print(user_table(fake, "eager torch"))
        return fake
    monkeypatch.setattr(results_mod, "compare", fake_compare)
    got = results_mod.compare_and_record("bench/triton_matmul", "8x4 @ 4x2", {n: None for n in fake},
                                         flops=64, kind="fp16", prefix="matmul + bias + GeLU: ", l2_flush=True)
    assert got is fake and "Triton fused" in capsys.readouterr().out
    rows = utils.stored_results("Test GPU 9000", notebook="bench/triton_matmul")
    assert [(r["kernel"], r["baseline"], r["vs_baseline"], r["vs_baseline_loop"]) for r in rows] == [
        ("matmul + bias + GeLU: eager torch", "", "", ""),
        ("matmul + bias + GeLU: Triton fused", "eager torch", "2", "1.25")]


def test_bench_recording_turns_saving_on_only_on_a_gpu(monkeypatch):
    from gpu_course import mode
    monkeypatch.delenv("COURSE_SAVE_RESULTS", raising=False)  # (put back as it was after the test)
    monkeypatch.setattr(mode, "ON_GPU", False)
    assert "nothing recorded" in results_mod.bench_recording(True) and not utils.saving_results()
    monkeypatch.setattr(mode, "ON_GPU", True)
    monkeypatch.setattr(results_mod, "device_name", lambda: "Test GPU 9000")
    line = results_mod.bench_recording(True)
    assert line.endswith("test-gpu-9000.csv") and utils.saving_results()
    assert "--no-record" in results_mod.bench_recording(False) and not utils.saving_results()


def test_refresh_measures_now_and_keeps_the_rounds(monkeypatch):
    """ceilings(refresh=True) measures in this run (never the file), the copy and the matmuls in alternating
    rounds whose rates ceiling_rounds gives; each ceiling is the median of its rounds."""
    import statistics
    import torch
    order = []

    def fake_bench(fn, *args, budget_ms=None):
        order.append("copy" if args[0].dim() == 1 else "tf32" if torch.backends.cuda.matmul.allow_tf32
                     else {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[args[0].dtype])
        return utils.Timing([1.0 + len(order) / 100], "fake", "cpu", False)
    monkeypatch.setattr(ceilings_mod, "bench", fake_bench)
    monkeypatch.setattr(ceilings_mod, "_measure_ceilings",
                        lambda rounds=None, real=ceilings_mod._measure_ceilings: real(rounds=3))
    ceil = utils.ceilings(refresh=True)
    rounds = utils.ceiling_rounds()
    kinds = list(rounds)   # the copy first, then the matmuls; every round has each once, odd rounds reversed
    assert kinds[0] == "copy" and order == kinds + kinds[::-1] + kinds
    assert all(len(v) == 3 for v in rounds.values())
    assert ceil["fp32"] == float(f"{statistics.median(rounds['fp32']):.4g}")
    assert ceil["copy"] == float(f"{statistics.median(rounds['copy']):.4g}")
    monkeypatch.undo()
    utils.ceilings(refresh=True)   # leave this session's real CPU ceilings behind for the other tests


def test_the_table_shows_what_the_line_printed(tmp_path, monkeypatch, capsys):
    """Figures are stored exact: the table rounds once, as the line did (0.192448 ms was printed 192.4 µs and,
    stored to 5 digits as 0.19245, tabled 192.5 µs; 86.54 % printed 87 %, stored 86.5, tabled 86 %)."""
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    monkeypatch.setattr(ceilings_mod, "ceilings", lambda: {"copy": 4230.0, "fp32": 50.0})
    monkeypatch.setattr(ceilings_mod, "spec_peak", lambda key, device=None: 4800.0 if key == "copy" else None)
    t = utils.Timing([0.192448] * 3, "CUDA events", "Test GPU 9000", True)
    base = utils.Timing([1.6994499] * 3, "CUDA events", "Test GPU 9000", True)
    nbytes = int(0.192448e-3 * 4800e9 * 0.86540)            # 86.54 % of the 4,800 GB/s sheet
    line = utils.report("08", "gelu", "n", t, baseline=base, nbytes=nbytes)
    capsys.readouterr()
    table = utils.results_markdown(utils.stored_results("Test GPU 9000"))
    row = table.splitlines()[-1].split(" | ")
    assert "192.4 µs" in line and row[4] == "192.4 µs"
    assert "= 87 % of the spec-sheet copy peak" in line and row[8] == "87 % copy"
    assert line.endswith("8.83× torch") and row[9] == "8.83× torch"


def test_a_notebooks_rows_come_from_one_gpu(tmp_path, monkeypatch):
    """On the CPU a notebook's rows come from the GPU its stored outputs name, not from every GPU's file."""
    import gpu_course.session as session_mod
    monkeypatch.setattr(results_mod, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(results_mod.mode, "ON_GPU", False)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    for gpu in ("GPU A", "GPU B"):
        utils.save_result("08_x", "k", "n", utils.Timing([1.0], "CUDA events", gpu, True))
    stored = {"08_x": "GPU B"}
    monkeypatch.setattr(session_mod, "stored_device", lambda stem: stored.get(stem))
    assert [r["device"] for r in utils.stored_results(notebook="08_x")] == ["GPU B"]
    assert len(utils.stored_results()) == 2                          # no notebook: every file
    stored["08_x"] = "GPU C"                                         # its GPU's file has none of its rows
    assert len(utils.stored_results(notebook="08_x")) == 2
    monkeypatch.setattr(results_mod.mode, "ON_GPU", True)            # on a GPU: this GPU's rows first
    monkeypatch.setattr(results_mod.mode, "device_name", lambda: "GPU A")
    stored["08_x"] = "GPU B"
    assert [r["device"] for r in utils.stored_results(notebook="08_x")] == ["GPU A"]
    monkeypatch.setattr(results_mod.mode, "device_name", lambda: "GPU T")   # none here: the stored GPU's
    assert [r["device"] for r in utils.stored_results(notebook="08_x")] == ["GPU B"]
