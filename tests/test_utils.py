"""Unit tests of utils.py (run on the CPU in CI; the GPU branches are exercised by the notebooks)."""
import csv
import doctest
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import utils

ROOT = utils.ROOT


def run_py(code: str, **env) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (mode selection happens once, at import)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("COURSE_MODE", "NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, cwd=ROOT, timeout=300)


# ---------------------------------------------------------------------------------------- mode
def test_doctests():
    result = doctest.testmod(utils, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10 and result.failed == 0


def test_choose_mode():
    assert utils._choose_mode(None, True) == "gpu"
    assert utils._choose_mode(None, False) == "cpu"
    assert utils._choose_mode(" CPU ", True) == "cpu"
    assert utils._choose_mode("auto", False) == "cpu"
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        utils._choose_mode("gpu", False)
    with pytest.raises(ValueError, match="use 'gpu', 'cpu'"):
        utils._choose_mode("tpu", True)


def test_forced_cpu_mode_sets_switches_before_numba_and_triton():
    r = run_py("""
        import os, utils
        from numba import cuda, config
        import triton, triton.language as tl
        @triton.jit
        def k(x): pass
        print(utils.MODE, utils.DEVICE, os.environ["NUMBA_ENABLE_CUDASIM"],
              os.environ["TRITON_INTERPRET"], config.ENABLE_CUDASIM, type(k).__name__)
    """, COURSE_MODE="cpu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cpu", "cpu", "1", "1", "1", "InterpretedFunction"]


def test_auto_mode_follows_torch():
    r = run_py("import utils, torch; print(utils.MODE, torch.cuda.is_available())")
    assert r.returncode == 0, r.stderr
    mode, avail = r.stdout.split()
    assert mode == ("gpu" if avail == "True" else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_forcing_gpu_without_gpu_is_a_clear_error():
    r = run_py("import utils", COURSE_MODE="gpu")
    assert r.returncode != 0
    assert "COURSE_MODE=gpu but torch sees no CUDA GPU" in r.stderr


def test_bad_mode_is_a_clear_error():
    r = run_py("import utils", COURSE_MODE="fast")
    assert "COURSE_MODE='fast': use 'gpu', 'cpu'" in r.stderr


def test_importing_numba_first_warns():
    r = run_py("import numba, warnings, utils", COURSE_MODE="cpu", PYTHONWARNINGS="always")
    assert r.returncode == 0, r.stderr
    assert "numba was imported before utils" in r.stderr


def test_by_mode_and_banner():
    assert utils.by_mode(gpu="big", cpu="small") == ("big" if utils.ON_GPU else "small")
    assert utils.banner().startswith(f"Mode {utils.MODE}:")


def test_versions_and_properties():
    v = utils.versions()
    assert v["torch"] == torch.__version__ and v["python"].count(".") == 2
    assert (utils.gpu_properties() is None) == (not utils.ON_GPU)


# ------------------------------------------------------------------------------ small helpers
def test_dim3():
    assert utils.dim3(16) == (16, 1, 1)
    d = utils.dim3(4, 2)
    assert (d.x, d.y, d.z) == (4, 2, 1)
    assert utils.dim3(1, 2, 3).z == 3


@pytest.mark.parametrize("a,b,want", [(0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2),
                                      (10**8, 256, 390625), (10**8 + 1, 256, 390626)])
def test_cdiv(a, b, want):
    assert utils.cdiv(a, b) == want


@pytest.mark.parametrize("a,b,err", [(5, 0, ValueError), (5, -2, ValueError),
                                     (5.0, 2, TypeError), (5, True, TypeError)])
def test_cdiv_rejects(a, b, err):
    with pytest.raises(err):
        utils.cdiv(a, b)


SRC = r"""
__global__ void square_k(const float* __restrict__ x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * x[i];
}
torch::Tensor square(torch::Tensor x) {
    auto out = torch::empty_like(x);
    return out;
}
std::vector<torch::Tensor> two_outputs(const torch::Tensor& a,
                                       torch::Tensor b, int64_t n)
{
    return {a, b};
}
template <int TW>
torch::Tensor tiled(torch::Tensor m) { return m; }
static inline int helper(int a) { return a; }
"""


@pytest.mark.parametrize("fname,want", [
    ("square", "torch::Tensor square(torch::Tensor x);"),
    ("two_outputs", "std::vector<torch::Tensor> two_outputs(const torch::Tensor& a, "
                    "torch::Tensor b, int64_t n);"),
    ("tiled", "template <int TW> torch::Tensor tiled(torch::Tensor m);"),
    ("helper", "static inline int helper(int a);"),
])
def test_get_sig(fname, want):
    assert utils.get_sig(fname, SRC) == want


def test_get_sig_skips_kernels_and_explains_misses():
    with pytest.raises(ValueError, match=r"'square_k' is a kernel"):
        utils.get_sig("square_k", SRC)
    with pytest.raises(ValueError, match="no definition of 'cube'.*: helper, square, tiled, two_outputs$"):
        utils.get_sig("cube", SRC)


def test_show_img_layouts():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ax = utils.show_img(torch.rand(3, 8, 10), title="chw")
    assert ax.get_images()[0].get_array().shape == (8, 10, 3) and ax.get_title() == "chw"
    ax = utils.show_img(torch.rand(8, 10))
    assert ax.get_images()[0].get_cmap().name == "gray"
    with pytest.raises(ValueError, match="2 or 3 dimensions"):
        utils.show_img(torch.rand(10))
    plt.close("all")


def test_show_img_does_not_import_matplotlib_at_import():
    r = run_py("import sys, utils; print('matplotlib' in sys.modules)", COURSE_MODE="cpu")
    assert r.stdout.strip() == "False", r.stderr


# ---------------------------------------------------------------------------------- checking
def test_check_passes_and_prints_stably():
    ref = torch.randn(100, 37, dtype=torch.float64)
    got = ref.float()
    c = utils.check(got, ref, atol=1e-6, rtol=1e-6, name="copy")
    assert repr(c) == "copy: OK (matches the reference within atol=1e-06, rtol=1e-06)"
    assert c.n == 3700 and c.max_abs < 1e-6


def test_check_catches_a_wrong_element():
    ref = torch.randn(50, 30)
    out = ref.clone()
    out[7, 11] += 1.0
    with pytest.raises(utils.CheckFailed) as e:
        utils.check(out, ref, name="wrong")
    msg = str(e.value)
    assert "wrong: 1 of 1500 elements differ" in msg and "first bad index (7, 11)" in msg
    assert "max abs error 1" in msg


def test_check_catches_an_unwritten_element():
    ref = torch.randn(1000)
    out = utils.poisoned(1000, device="cpu")
    out[:999] = ref[:999]  # a kernel whose grid misses the last element
    with pytest.raises(utils.CheckFailed, match=r"(?s)first bad index 999: got nan.*1 elements are NaN"):
        utils.check(out, ref)


def test_check_shape_and_nan_reference():
    with pytest.raises(utils.CheckFailed, match=r"shape \(3,\) but the reference has \(4,\)"):
        utils.check(torch.zeros(3), torch.zeros(4))
    nan_ref = torch.tensor([1.0, float("nan")])
    utils.check(nan_ref.clone(), nan_ref)  # NaN where the reference is NaN matches
    with pytest.raises(utils.CheckFailed):
        utils.check(torch.tensor([1.0, 2.0]), nan_ref)


def test_poison_ints_and_bools():
    t = utils.poison_(torch.zeros(3, dtype=torch.int32))
    assert (t == torch.iinfo(torch.int32).min).all()
    with pytest.raises(TypeError, match="bool"):
        utils.poison_(torch.zeros(2, dtype=torch.bool))
    assert utils.poisoned((2, 3), device="cpu").shape == (2, 3)


# ------------------------------------------------------------------------------------ timing
def test_bench_returns_sane_numbers_on_the_cpu():
    a = torch.randn(128, 128)
    t = utils.bench(torch.matmul, a, a, reps=7)
    assert t.n == 7 and all(x > 0 for x in t.times_ms)
    assert t.min <= t.median <= max(t.times_ms) and t.std >= 0
    if not utils.ON_GPU:
        assert "says nothing about a GPU" in str(t) and t.method == "wall clock"


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


def test_rate_against_measured_ceiling():
    ceil = utils.ceilings()
    assert ceil["copy"] > 0 and ceil["fp32"] > 0
    r = utils.rate(2.0, nbytes=4 * 10**6)  # 4 MB in 2 ms = 2 GB/s
    assert r.unit == "GB/s" and r.value == pytest.approx(2.0)
    assert r.pct == pytest.approx(100 * 2.0 / ceil["copy"])
    assert "% of this" in str(r)
    f = utils.rate(1.0, flops=2 * 10**9)
    assert f.unit == "TFLOP/s" and f.value == pytest.approx(2.0)
    with pytest.raises(ValueError, match="exactly one"):
        utils.rate(1.0)
    with pytest.raises(ValueError, match="positive"):
        utils.rate(0.0, nbytes=1)
    if not utils.ON_GPU:
        with pytest.raises(ValueError, match="no measured ceiling 'bf16'"):
            utils.rate(1.0, flops=1, kind="bf16")


def test_fmt():
    assert utils.fmt_ms(0.5) == "500.0 µs" and utils.fmt_ms(12.25) == "12.250 ms"
    assert utils.fmt_num(2912.4) == "2,912" and utils.fmt_num(0.01234) == "0.0123"


# ----------------------------------------------------------------------------------- results
def _fake_gpu_timing(ms):
    return utils.Timing([ms, ms, ms], "CUDA events", "Test GPU 9000", True)


def test_record_and_results_table(tmp_path, monkeypatch):
    monkeypatch.setattr(utils, "RESULTS_DIR", tmp_path)
    cpu = utils.Timing([1.0], "wall clock", "CPU (x)", False)
    assert utils.record("01", "square", "n=10", cpu) is None  # the CPU records nothing
    assert not list(tmp_path.iterdir())
    r = utils.Rate(1500.0, "GB/s", 3000.0, "copy")
    utils.record("01", "square", "n=1e8", _fake_gpu_timing(2.0), r, baseline=_fake_gpu_timing(1.9))
    utils.record("01", "square", "n=1e8", _fake_gpu_timing(1.0), r, baseline=_fake_gpu_timing(1.9))
    utils.record("04", "matmul", "4096³", _fake_gpu_timing(5.0))
    path = tmp_path / "test-gpu-9000.csv"
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 3 and rows[0]["pct_of_ceiling"] == "50.0" and rows[0]["vs_baseline"] == "0.950"
    latest = utils.stored_results("Test GPU 9000")
    assert [(x["kernel"], x["ms"]) for x in latest] == [("square", "1"), ("matmul", "5")]
    assert utils.stored_results(notebook="04")[0]["kernel"] == "matmul"
    table = utils.results_markdown(latest)
    assert "| 01 | square | n=1e8 | Test GPU 9000 | 1.000 ms | 1,500 GB/s | 50 % copy | 1.90× torch |" in table
    assert table.count("\n") == 3
    assert "a \\| b" in utils.results_markdown([{**latest[0], "kernel": "a | b"}])


def test_gpu_ceilings_are_cached_per_device(tmp_path, monkeypatch):
    monkeypatch.setattr(utils, "CEILINGS_FILE", tmp_path / "ceilings.json")
    monkeypatch.setattr(utils, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(utils, "ON_GPU", True)
    monkeypatch.setattr(utils, "device_name", lambda: "Test GPU 9000")
    monkeypatch.setattr(utils, "_ceilings_cache", {})
    calls = []
    monkeypatch.setattr(utils, "_measure_ceilings",
                        lambda: calls.append(1) or {"copy": 3000.04, "fp32": 40.00001})
    assert utils.ceilings() == {"copy": 3000.0, "fp32": 40.0}
    stored = json.loads((tmp_path / "ceilings.json").read_text())
    assert stored["Test GPU 9000"]["ceilings"]["copy"] == 3000.0
    monkeypatch.setattr(utils, "_ceilings_cache", {})
    assert utils.ceilings()["fp32"] == 40.0 and len(calls) == 1  # read back, not re-measured
    utils.ceilings(refresh=True)
    assert len(calls) == 2


def test_slug_and_results_file():
    assert utils._slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert utils.results_file("NVIDIA H100 80GB HBM3").name == "nvidia-h100-80gb-hbm3.csv"


# --------------------------------------------------------------------------------- exercises
def test_exercise(capsys):
    utils.exercise("e1", None, lambda a: True, hint="use cdiv")
    utils.exercise("e2", 4, lambda a: a == 4)
    utils.exercise("e3", 5, lambda a: a == 4, hint="round up")

    def strict(a):
        assert a > 10, "must be above 10"
    utils.exercise("e4", 3, strict)
    utils.exercise("e5", 30, strict)
    out = capsys.readouterr().out.splitlines()
    assert out == ["⬜ e1: not answered yet (hint: use cdiv)", "✅ e2: correct",
                   "❌ e3: not yet; hint: round up",
                   "❌ e4: not yet (AssertionError: must be above 10)", "✅ e5: correct"]


# -------------------------------------------------------------------------- printf and report
def test_capture_printf_sees_c_level_output(capsys):
    import ctypes
    libc = ctypes.CDLL(None)
    with utils.capture_printf() as cap:
        libc.printf(b"thread %d says hi\n", 7)
        os.write(2, b"on stderr\n")
    assert cap.text == "thread 7 says hi\non stderr\n"
    assert capsys.readouterr().out == cap.text


def test_capture_printf_prints_even_when_the_block_raises(capsys):
    with pytest.raises(ZeroDivisionError):
        with utils.capture_printf() as cap:
            os.write(1, b"before the error\n")
            1 / 0
    assert cap.text == "before the error\n"


def test_report_prints_and_records(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(utils, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(utils, "ceilings", lambda: {"copy": 3000.0, "fp32": 50.0})
    t = _fake_gpu_timing(1.0)
    line = utils.report("03", "square_k", "n=1e8", t, baseline=_fake_gpu_timing(0.9),
                        nbytes=2_400_000_000)
    assert line == "square_k: 1.000 ms, 2,400 GB/s = 80 % of copy ceiling, 0.90× torch"
    assert capsys.readouterr().out == line + "\n"
    assert utils.stored_results("Test GPU 9000")[0]["vs_baseline"] == "0.900"
    cpu = utils.Timing([2.0], "wall clock", "CPU", False)
    assert utils.report("03", "k", "n", cpu).endswith("(CPU: not a GPU figure)")


def test_to_numba_shares_memory():
    t = torch.zeros(4, device=utils.DEVICE)
    a = utils.to_numba(t)
    if not utils.ON_GPU:
        a[1] = 5.0
        assert t[1].item() == 5.0
    assert a.shape == (4,)
