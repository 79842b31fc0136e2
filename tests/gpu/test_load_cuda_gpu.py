"""load_cuda on a real GPU: the split build (gpu_course/cuda/gpu_build/), its one-unit fallback,
launch counting (utils.launches on the modules' counters) and the build-time targets. Skipped on the CPU, where
tests/unit/test_emulation.py covers the emulation and tests/unit/test_gpu_build.py the split's
Python side; run on a GPU machine with `python -m pytest tests/gpu`."""
import importlib.util
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import utils
from gpu_course.cuda import launch_counts

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")

SRC = utils.cuda_begin + r"""
#define TW 16
__device__ __forceinline__ float sq(float v) { return v * v; }

__global__ void square_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = sq(x[i]);
}

template <int T>
__global__ void matmul_k(const float* a, const float* b, float* c, int h, int w, int k) {
    __shared__ float as[T][T], bs[T][T];
    int tc = threadIdx.x, tr = threadIdx.y;
    int r = blockIdx.y * T + tr, col = blockIdx.x * T + tc;
    float p = 0.0f;
    for (int ph = 0; ph < (k + T - 1) / T; ++ph) {
        int ka = ph * T + tc, kb = ph * T + tr;
        as[tr][tc] = (r < h && ka < k) ? a[r * k + ka] : 0.0f;
        bs[tr][tc] = (col < w && kb < k) ? b[kb * w + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < T; ++i) p += as[tr][i] * bs[i][tc];
        __syncthreads();
    }
    if (r < h && col < w) c[r * w + col] = p;
}

__global__ void block_sum_k(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, buf[0]);
}

torch::Tensor square(torch::Tensor x) {
    CHECK_INPUT(x);
    auto out = torch::empty_like(x);
    int n = x.numel();
    square_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    CHECK_INPUT(a); CHECK_INPUT(b);
    int h = a.size(0), k = a.size(1), w = b.size(1);
    TORCH_CHECK(k == b.size(0), "inner sizes differ");
    auto c = torch::empty({h, w}, a.options());
    dim3 tpb(TW, TW), blocks(cdiv(w, TW), cdiv(h, TW));
    matmul_k<TW><<<blocks, tpb>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return c;
}

torch::Tensor total(torch::Tensor x, int64_t threads) {
    CHECK_INPUT(x);
    auto out = torch::zeros({1}, x.options());
    int n = x.numel();
    block_sum_k<<<cdiv(max(n, 1), threads), threads, threads * sizeof(float), 0>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
CPP = """torch::Tensor square(torch::Tensor x);
torch::Tensor matmul(torch::Tensor a, torch::Tensor b);
torch::Tensor total(torch::Tensor x, int64_t threads);"""


@pytest.fixture(scope="module")
def mod():
    return utils.load_cuda(SRC, CPP, ["square", "matmul", "total"])


def test_kernels_match_torch(mod):
    x = torch.randn(100_003, device=utils.DEVICE)
    utils.check(mod.square(x), x * x, name="square")
    a = torch.randn(100, 70, device=utils.DEVICE)
    b = torch.randn(70, 90, device=utils.DEVICE)
    ref = (a.double() @ b.double())
    utils.check(mod.matmul(a, b), ref, atol=1e-4, rtol=1e-4, name="matmul")
    utils.check(mod.total(x, 256), x.double().sum().reshape(1), atol=1e-1, rtol=1e-4, name="total")


def test_checks_raise_in_python(mod):
    with pytest.raises(RuntimeError, match="must be a CUDA tensor"):
        mod.square(torch.randn(10))
    with pytest.raises(RuntimeError, match="must be contiguous"):
        mod.square(torch.randn(10, 10, device=utils.DEVICE).t())


def test_a_check_whose_message_has_numbers_raises(tmp_path):
    """A learner's check whose message holds a number (TORCH_CHECK(..., "got ", k)) raises a RuntimeError.
    On the GPU image of torch 2.11 + nvcc 13 this crashed the process (segmentation fault), for the split
    build and for torch's own load_inline alike, while the same check with std::to_string(k) raised: the
    module carried a static copy of libstdc++ (LD_DEBUG=bindings: std::locale's internals bound to the
    module itself) whose locale tables are never set up. The builds now link torch's shared libstdc++
    first (gpu_build.cxx_runtime). Run in a child process, so that a crash fails this test, not the run."""
    script = tmp_path / "check.py"
    script.write_text(textwrap.dedent('''
        import torch, utils
        src = utils.cuda_begin + r"""
        __global__ void k(float* x) { x[0] = 1.0f; }
        torch::Tensor rows16(torch::Tensor x) {
            TORCH_CHECK(x.size(0) % 16 == 0, "rows16: rows must be a multiple of 16, got ", x.size(0), " (", 1.5, ")");
            k<<<1, 1>>>(x.data_ptr<float>());
            return x;
        }"""
        mod = utils.load_cuda(src, "torch::Tensor rows16(torch::Tensor x);", ["rows16"])
        try:
            mod.rows16(torch.zeros(3, device="cuda"))
        except RuntimeError as e:
            print("raised:", str(e).splitlines()[0])
        '''))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "raised: rows16: rows must be a multiple of 16, got 3 (1.5)" in r.stdout, r.stdout + r.stderr[-2000:]


def test_launch_error_is_reported_by_the_launch_check(mod):
    x = torch.randn(5000, device=utils.DEVICE)
    with pytest.raises(RuntimeError, match="invalid configuration|invalid argument"):
        mod.total(x, 2048)  # more threads per block than a GPU allows
    utils.check(mod.square(x), x * x)  # and the module still works afterwards


def test_cache_reload_is_instant():
    t0 = time.perf_counter()
    utils.load_cuda(SRC, CPP, ["square", "matmul", "total"])
    assert time.perf_counter() - t0 < 1.0


def test_an_edited_kernel_runs_after_the_first_build_in_the_same_process():
    """Every edit keeps the module's name (so its binding unit stays cached): the edited build must
    still run its own kernel, not the first build's same-named symbols (a library loaded into the
    global symbol scope would stand in for them)."""
    body = utils.cuda_begin + r"""
__global__ void scale_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = FACTOR * x[i];
}
void scale(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    scale_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""
    x = torch.randn(1000, device="cuda")
    for factor in (2, 3, 5):
        src = body.replace("FACTOR", f"{factor}.0f")
        m = utils.load_cuda(src, utils.get_sig("scale", src), ["scale"])
        out = torch.full_like(x, float("nan"))
        m.scale(x, out)
        assert torch.equal(out, factor * x), f"the build with FACTOR {factor} ran another build's kernel"


def test_compile_error_names_the_line():
    bad = SRC.replace("if (i < n) out[i] = sq(x[i]);", "if (i < n) out[i] = sq(xx[i]);")
    with pytest.raises(RuntimeError) as e:
        utils.load_cuda(bad, CPP, ["square", "matmul", "total"])
    msg = str(e.value)
    assert msg.startswith("load_cuda: the kernels do not compile")
    assert 'identifier "xx" is undefined' in msg and "sq(xx[i])" in msg


def test_missing_definition_and_unknown_name():
    with pytest.raises(RuntimeError, match=r"cube\(at::Tensor\) is declared .* defined nowhere"):
        utils.load_cuda(SRC, CPP + "\ntorch::Tensor cube(torch::Tensor x);",
                        ["square", "cube"])
    with pytest.raises(ValueError, match="cpp_src declares no such function"):
        utils.load_cuda(SRC, CPP, ["sqaure"])


# A host launcher that is a template: the split build cannot bind it, so load_cuda builds one nvcc unit.
TEMPLATED_FILL = utils.cuda_begin + r"""
__global__ void fill_k(float* out, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = v;
}
template <int B>
void launch_fill(torch::Tensor out, float v) {
    int n = out.numel();
    fill_k<<<cdiv(n, B), B>>>(out.data_ptr<float>(), v, n);
}
torch::Tensor fill(torch::Tensor out, double v) { launch_fill<128>(out, (float)v); return out; }
"""


def test_templated_host_launcher_falls_back_to_one_unit():
    m = utils.load_cuda(TEMPLATED_FILL, "torch::Tensor fill(torch::Tensor out, double v);", ["fill"])
    out = m.fill(utils.poisoned(1000), 2.5)
    utils.check(out, torch.full((1000,), 2.5))


# ---- the front end's tricky sources (tests/unit run them through make_units and the emulation)
def _unit_test_module(name):
    path = Path(__file__).resolve().parent.parent / "unit" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"course_gpu_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel_launches(mod, fn: str, *args) -> dict:
    """{kernel: launches} of the call ``mod.fn(*args)``, as utils.launches records it."""
    with utils.launches(modules=[mod]) as seen:
        getattr(mod, fn)(*args)
    return seen.counts.get(mod.__name__, {})


def split_built(mod):
    """Built by the split build (not the one-unit fallback)?"""
    return launch_counts(mod) is not None and "load_inline" not in mod.build_log


def test_the_module_comes_from_the_split_build_and_counts_launches(mod):
    assert split_built(mod), mod.build_log
    x = torch.randn(5000, device=utils.DEVICE)
    assert kernel_launches(mod, "square", x) == {"square_k": 1}
    a, b = torch.randn(40, 30, device=utils.DEVICE), torch.randn(30, 20, device=utils.DEVICE)
    assert kernel_launches(mod, "matmul", a, b) == {"matmul_k": 1}  # a template: counted once
    assert kernel_launches(mod, "total", x, 256) == {"block_sum_k": 1}
    before = launch_counts(mod)["block_sum_k"]
    with pytest.raises(RuntimeError):
        kernel_launches(mod, "total", x, 2048)  # an invalid launch launches nothing
    assert launch_counts(mod)["block_sum_k"] == before


def test_a_kernel_over_48_kb_of_shared_memory_stays_on_the_split_build():
    """cudaFuncSetAttribute in host code goes through an attribute stub in the device unit; without
    it the 100 KB launch would fail."""
    t = _unit_test_module("test_gpu_build")
    m = utils.load_cuda(t.ATTRIBUTE, utils.get_sig("twice", t.ATTRIBUTE), ["twice"])
    assert split_built(m), m.build_log
    x = torch.randn(1000, device=utils.DEVICE)
    utils.check(m.twice(x), 2 * x, name="twice")
    assert kernel_launches(m, "twice", x) == {"stage_k": 1}


def test_namespaces_digit_separators_constant_memory_macros_lambdas():
    t = _unit_test_module("test_gpu_build")
    m = utils.load_cuda(t.TRICKY, t.TRICKY_CPP, t.TRICKY_FUNCS)
    assert split_built(m), m.build_log
    x, w = torch.randn(10_007, device=utils.DEVICE), torch.randn(5, device=utils.DEVICE)
    xp = torch.nn.functional.pad(x.double(), (2, 2))
    ref = sum(w[j].double() * xp[j:j + len(x)] for j in range(5))
    utils.check(m.convolve(x, w), ref, atol=1e-4, rtol=1e-4, name="convolve")
    out = m.square_fill(x)  # checks inside that fill_k counted n hits in a __device__ variable
    utils.check(out, x * x, name="square_fill")
    assert kernel_launches(m, "square_fill", x) == {"fill_k": 1, "sq_k": 3}
    assert kernel_launches(m, "convolve", x, w) == {"conv_k": 1}


def test_constant_memory_from_a_device_tensor():
    f = _unit_test_module("test_cuda_frontend")
    src = f.CONST_SRC.replace(
        "auto mh = m.cpu().contiguous();\n    CUDA_CHECK(cudaMemcpyToSymbol(conv::mask, mh.data_ptr<float>(), "
        "sizeof(conv::mask)));",
        "auto mh = m.contiguous();\n    CUDA_CHECK(cudaMemcpyToSymbol(conv::mask, mh.data_ptr<float>(), "
        "sizeof(conv::mask), 0, cudaMemcpyDeviceToDevice));")
    assert src != f.CONST_SRC
    for source in (f.CONST_SRC, src):
        m = utils.load_cuda(source, f.CONST_CPP, ["convolve", "times"])
        assert split_built(m), m.build_log
        x, w = torch.randn(203, device=utils.DEVICE), torch.randn(5, device=utils.DEVICE)
        utils.check(m.convolve(x, w), f.conv_reference(x.cpu(), w.cpu()), atol=1e-5, name="convolve")
        before = m.times()
        m.convolve(x, w)
        assert m.times() == before + 1


def test_classic_fallback_runs_and_says_its_launches_are_not_counted():
    m = utils.load_cuda(TEMPLATED_FILL, "torch::Tensor fill(torch::Tensor out, double v);", ["fill"])
    assert launch_counts(m) is None and "templated host function" in m.build_log
    assert m._course_kernels == ("fill_k",)
    with utils.launches(modules=[m]) as seen:
        out = m.fill(utils.poisoned(1000), 2.5)
    utils.check(out, torch.full((1000,), 2.5, device=utils.DEVICE))
    assert "no launch counters" in seen.uncounted[m.__name__] and m.__name__ not in seen.counts


def test_build_times_on_an_empty_cache(tmp_path, monkeypatch):
    """The targets: a first build in 20 s or less, a kernel edit in 2 s or less."""
    monkeypatch.setenv("COURSE_CUDA_CACHE", str(tmp_path))
    t0 = time.perf_counter()
    utils.load_cuda(SRC, CPP, ["square", "matmul", "total"])
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = utils.load_cuda(SRC.replace("if (i < n) out[i] = sq(x[i]);", "if (i < n) out[i] = sq(x[i]) + 0.0f;"),
                        CPP, ["square", "matmul", "total"])
    edit = time.perf_counter() - t0
    print(f"first build {first:.1f} s, kernel edit {edit:.2f} s")
    assert split_built(m) and first <= 20 and edit <= 2, (first, edit)


# ---- valid CUDA C that torch's load_inline builds builds on the split build too (sources and their
# compile checks: tests/unit/test_gpu_build.py)
def test_assert_printf_and_torch_dtypes_build_on_the_split_build_and_run():
    t = _unit_test_module("test_gpu_build")
    m = utils.load_cuda(t.IDIOMS, t.IDIOMS_CPP, t.IDIOMS_FUNCS)
    assert split_built(m), m.build_log
    x = torch.tensor([0.5, 3.7, 100.0, -2.0], device=utils.DEVICE)
    out = m.clamp(x, 50.0)
    assert out.dtype == torch.int32 and out.tolist() == [0, 3, 2**31 - 1, -2]
    assert m.as_half(x).dtype == torch.float16
    assert kernel_launches(m, "clamp", x, 50.0) == {"clamp_k": 1}


def test_half_kernels_build_on_the_split_build_and_run():
    t = _unit_test_module("test_gpu_build")
    m = utils.load_cuda(t.HALF, t.HALF_CPP, ["scale_half"])
    assert split_built(m), m.build_log
    x = torch.randn(1000, device=utils.DEVICE).half()
    utils.check(m.scale_half(x, 2.0), (2 * x.float()).half(), name="scale_half")


def test_a_unit_that_misses_a_name_one_unit_sees_builds_as_one_unit():
    """The kernel reads a constant that the split left to the host unit (it names torch): the device unit
    fails where one unit builds, so load_cuda builds one unit, and says why in the build log."""
    t = _unit_test_module("test_gpu_build")
    m = utils.load_cuda(t.HIDDEN, t.HIDDEN_CPP, ["bytes"])
    assert not split_built(m)
    assert "the device unit does not see ELEMENT_BYTES, which one unit would" in m.build_log
    out = m.bytes(torch.zeros(4, dtype=torch.int32, device=utils.DEVICE))
    assert out.tolist() == [2, 2, 2, 2]
    again = utils.load_cuda(t.HIDDEN, t.HIDDEN_CPP, ["bytes"])   # the split is not tried again
    assert "does not see ELEMENT_BYTES" in again.build_log


def test_the_course_kernels_launch_on_torchs_current_stream():
    """Every kernel the course ships launches on at::cuda::getCurrentCUDAStream(): it runs on the side stream of
    torch.cuda.stream(s), in order with torch's work there, and a CUDA graph capture (which runs on a side stream and
    refuses a launch on the legacy default stream) records it."""
    from gpu_course.kernels import elementwise
    src = elementwise.source("naive")
    m = utils.load_cuda(src, utils.get_sig("square_naive", src), ["square_naive"])
    x = torch.randn(1_000_003, device=utils.DEVICE)
    out = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)      # the side stream is busy: a launch on another stream would run first
        y = x * 2                          # torch's work on s ...
        m.square_naive(y, out)             # ... which the kernel must follow
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(out, (x * 2) * (x * 2))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        m.square_naive(x, out)
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, x * x)


def test_an_extension_linked_with_the_shared_runtime_formats_numbers(tmp_path):
    """The cause itself, without CUDA: a torch extension that formats a number, built by torch's own
    ``load`` with ``cxx_runtime.link_flags()`` on its link line, carries no copy of libstdc++ and prints
    the number (a child process: a crash fails the test)."""
    (tmp_path / "m.cpp").write_text(textwrap.dedent(r'''
        #include <torch/extension.h>
        #include <sstream>
        std::string fmt(int64_t k) { std::ostringstream s; s << "k=" << k; return s.str(); }
        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("fmt", &fmt); }'''))
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f'''
        import torch
        from torch.utils.cpp_extension import load
        from gpu_course.cuda.gpu_build import cxx_runtime
        m = load("fmt_shared", [{str(tmp_path / "m.cpp")!r}], extra_ldflags=cxx_runtime.link_flags(),
                 build_directory={str(tmp_path)!r})
        print("own runtime:", cxx_runtime.carries_own_runtime({str(tmp_path / "fmt_shared.so")!r}))
        print(m.fmt(7))'''))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "k=7" in r.stdout and "own runtime: False" in r.stdout, r.stdout + r.stderr[-2000:]
