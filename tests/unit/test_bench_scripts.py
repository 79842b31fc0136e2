"""The bench scripts that compare our kernels with a library, run whole in cpu mode (tiny sizes, through the
CUDA C emulation and the Triton interpreter): each runs to its end, says that its times say nothing about a
GPU, and prints its table with the three figures a caller gets (GPU time, time per step of a loop, CPU time
per call) for ours and for the library, and the library's time over ours for the GPU time and the loop.
(bench/layernorm.py and bench/flash_attention.py print theirs through tables tested in test_layernorm.py and
test_attention.py; bench/collectives.py times collectives across ranks, which have no GPU time of their own,
with the helpers tested in test_distributed.py; here these three only run.) On a GPU each script records its rows in the results (notebook
"bench/<script>"); in cpu mode none writes anything there. Each script either records or says why not."""
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import utils

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow   # the scripts run whole, in a fresh interpreter

# script -> its arguments for a short cpu-mode run
SCRIPTS = {"elementwise.py": [], "int4_gemv.py": ["--shapes", "32x256"], "matmul_ladder.py": [], "reductions.py": [], "tensor_cores.py": [],
           "triton_basics_bench.py": [], "triton_matmul.py": ["--sizes", "64"],
           "triton_matmul_sweep.py": ["fp16", "64"]}

TIME = r"\d[\d.,]* (?:µs|ms|s)"
# GPU time, loop/step, CPU/call, then (further on) the library's time over this row's: GPU, loop
ROW = re.compile(rf"{TIME} +{TIME} +{TIME}\b.* \d+\.\d\d×, +\d+\.\d\d×")


# the scripts that record their rows (the others say in their docstring why they record nothing)
RECORDING = ["elementwise.py", "flash_attention.py", "layernorm.py", "matmul_ladder.py", "reductions.py",
             "tensor_cores.py", "triton_basics_bench.py", "triton_matmul.py"]


# scripts that only run here (their tables are tested elsewhere: see the module's docstring)
RUN_ONLY = {"flash_attention.py": [], "layernorm.py": ["--dtypes", "float16"],
            "collectives.py": ["--max-bytes", "64K", "--ops", "all_reduce", "all_gather"]}

# Runs the scripts one after another in ONE fresh interpreter (each as __main__, with its own argv),
# so that torch, triton and the course are imported once, not once per script; for each script:
# its exit code, what it printed, and the files it added to the results directory.
DRIVER = r"""
import contextlib, io, json, os, runpy, sys, time, traceback
jobs, results_dir = json.loads(sys.argv[1]), sys.argv[2]
report = {}
for name, path, args in jobs:
    out, code, t0, before = io.StringIO(), 0, time.perf_counter(), set(os.listdir(results_dir))
    sys.argv = [path, *args]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    report[name] = {"code": code, "out": out.getvalue(), "written": sorted(set(os.listdir(results_dir)) - before),
                    "seconds": round(time.perf_counter() - t0, 1)}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every script of SCRIPTS and RUN_ONLY, run whole in cpu mode: {name: (exit code, output, files
    it added to the results directory)}."""
    results_dir = tmp_path_factory.mktemp("results")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET", "COURSE_SAVE_RESULTS")}
    env.update(COURSE_MODE="cpu", COURSE_RESULTS_DIR=str(results_dir),
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    jobs = [(name, str(ROOT / "bench" / name), args) for name, args in {**SCRIPTS, **RUN_ONLY}.items()]
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(jobs), str(results_dir)], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=900)
    assert r.returncode == 0, f"the scripts' driver failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    report = json.loads(r.stdout.strip().splitlines()[-1])
    print("seconds per script:", {name: v["seconds"] for name, v in report.items()})   # shown with -s
    return {name: (v["code"], v["out"], v["written"]) for name, v in report.items()}


def assert_ran_and_recorded_nothing(name, runs):
    code, out, written = runs[name]
    assert code == 0, f"{name} failed:\n{out[-3000:]}"
    assert not written, f"{name} wrote in cpu mode: {written}"
    if name in RECORDING:
        assert "results: nothing recorded (cpu mode" in out, f"{name}: no line saying nothing is recorded"
    return out


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_bench_script_prints_gpu_loop_and_cpu_figures_against_the_library(name, runs):
    out = assert_ran_and_recorded_nothing(name, runs)
    assert "nothing about a GPU" in out, f"{name}: no note that cpu-mode times mean nothing"
    headers = [line for line in out.splitlines()
               if "GPU time" in line and "loop/step" in line and "CPU/call" in line]
    assert headers, f"{name}: no table header with GPU time, loop/step and CPU/call:\n{out}"
    rows = [line for line in out.splitlines() if ROW.search(line)]
    assert len(rows) >= 2, f"{name}: fewer than two rows with the three figures and the two ratios:\n{out}"
    # the library's own row: its time over its own, 1.00x on the GPU time and on the loop
    assert any(re.search(r" 1\.00×, +1\.00×", line) for line in rows), f"{name}: no baseline row:\n{out}"


@pytest.mark.parametrize("name", sorted(RUN_ONLY))
def test_bench_script_runs_and_records_nothing_in_cpu_mode(name, runs):
    assert_ran_and_recorded_nothing(name, runs)


@pytest.mark.parametrize("path", sorted((ROOT / "bench").glob("*.py")), ids=lambda p: p.name)
def test_each_bench_script_records_or_says_why_not(path):
    code = path.read_text()
    doc = ast.get_docstring(ast.parse(code))
    if path.name not in RECORDING:
        assert "records nothing" in doc, f"{path.name}: its docstring does not say why it records nothing"
        return
    assert f'NB = "bench/{path.stem}"' in code, f"{path.name}: rows not recorded under bench/{path.stem}"
    assert "record_flag(" in code and "bench_recording(" in code, f"{path.name}: no --no-record flag"
    assert "results/<device>.csv" in doc and "--no-record" in doc, f"{path.name}: docstring says not what it writes"
    assert "writes no files" not in doc and "writes none" not in doc


def _load(name):
    """A bench script as a module (its main() not run)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name[:-3]}", ROOT / "bench" / name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_user_timing(ms, loop, cpu):
    return utils.UserTiming(utils.Timing([ms] * 3, "CUDA events", "Test GPU 9000", True), loop, cpu)


def test_triton_matmul_records_the_loop_and_cpu_figures(tmp_path, monkeypatch, capsys):
    from gpu_course import device_ceilings, results
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    monkeypatch.setattr(device_ceilings, "ceilings", lambda: {"fp16": 700.0})
    tm = _load("triton_matmul.py")
    ours, cublas = _fake_user_timing(2.0, 2.5, 0.03), _fake_user_timing(1.8, 2.0, 0.01)
    tm.rows(4096, "fp16", ours, cublas, "triton matmul fp16 (autotuned)", "fp16", "cuBLAS")
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in printed] == ["cuBLAS", "Triton"]
    assert printed[1].split()[3:9] == ["2.000", "ms", "2.500", "ms", "30.0", "µs"]
    assert "0.90×,  0.80×" in printed[1] and "1.00×,  1.00×" in printed[0]
    base, row = utils.stored_results("Test GPU 9000", notebook="bench/triton_matmul")
    assert (base["kernel"], base["baseline"], base["loop_ms"], base["cpu_ms"]) == ("cuBLAS fp16", "", "2", "0.01")
    assert (row["kernel"], row["baseline"], row["vs_baseline"]) == ("triton matmul fp16 (autotuned)", "cuBLAS", "0.9")
    assert (row["loop_ms"], row["cpu_ms"], row["baseline_loop_ms"], row["vs_baseline_loop"]) == \
        ("2.5", "0.03", "2", "0.8")
