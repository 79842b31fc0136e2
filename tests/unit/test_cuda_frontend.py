"""Unit tests of gpu_course/cuda/__init__.py (get_sig, load_cuda's checks, build logs, its cache
of the session, launch counts) and, in cpu mode, of load_cuda through the emulation on the sources the GPU tests
use (constant memory, symbol copies). The GPU branches run in tests/gpu and the notebooks."""
import os
from pathlib import Path

import pytest
import torch

import utils

pytestmark = pytest.mark.usefixtures("without_nvcc_check")   # the builds here test other things


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


TRICKY = r'''
#define BODY { return x; }
int big = 1'000;                                     // digit separators
char q = '{';                                        // a brace in a character literal
const char* s = "torch::Tensor fake(torch::Tensor x) {";
/* torch::Tensor commented(torch::Tensor x) { */
namespace ops {
__global__ void k(float* x) { x[0] = 1; }
torch::Tensor inside(torch::Tensor x,
                     int64_t n = 1'024) { return x; }
}  // namespace ops
auto lam = [](int v) { return v; };
torch::Tensor after(torch::Tensor x)
{
    auto f = [&](int v) { return x; };
    return f(0);
}
extern "C" { int c_api(int v) { return v; } }
'''


@pytest.mark.parametrize("fname,want", [
    ("inside", "namespace ops { torch::Tensor inside(torch::Tensor x, int64_t n = 1'024); } using ops::inside;"),
    ("after", "torch::Tensor after(torch::Tensor x);"),
    ("c_api", 'extern "C" int c_api(int v);'),
])
def test_get_sig_on_tricky_sources(fname, want):
    assert utils.get_sig(fname, TRICKY) == want


def test_get_sig_is_not_fooled_by_comments_strings_and_kernels_in_namespaces():
    for name in ("fake", "commented", "lam"):
        with pytest.raises(ValueError, match=f"no definition of '{name}'.*: after, c_api, inside$"):
            utils.get_sig(name, TRICKY)
    with pytest.raises(ValueError, match="'k' is a kernel"):
        utils.get_sig("k", TRICKY)
    with pytest.raises(ValueError, match="anonymous namespace"):
        utils.get_sig("h", "namespace { int h(int a) { return a; } }")


def test_funcs_must_be_names_declared_in_cpp_src():
    from gpu_course.cuda import check_funcs
    assert check_funcs("void f(int); void g();", ("f", "g")) == ["f", "g"]
    with pytest.raises(ValueError, match=r"funcs lists 'f x', which is not a C\+\+ function name"):
        check_funcs("void f(int);", ["f x"])
    with pytest.raises(ValueError, match="funcs lists 'h', but cpp_src declares no such function"):
        check_funcs("void f(int); // h(", ["h"])
    with pytest.raises(ValueError, match="funcs is empty"):
        utils.load_cuda(SRC, "", [])


TEMPLATED = utils.cuda_begin + r"""
template <int S>
__global__ void scale_k(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= S; }
void scale(torch::Tensor x) { int n = x.numel(); scale_k<3><<<cdiv(n, 64), 64>>>(x.data_ptr<float>(), n); }
"""


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode (the emulation); tests/gpu counts the split build's launches")
def test_one_launch_of_a_templated_kernel_counts_once():
    """The emulation's counters hold scale_k and scale_k<3>: utils.launches counts the launch once."""
    mod = utils.load_cuda(TEMPLATED, "void scale(torch::Tensor x);", ["scale"])
    x = torch.ones(100)
    with utils.launches(modules=[mod]) as seen:
        mod.scale(x)
    assert seen.counts == {mod.__name__: {"scale_k": 1}}
    assert [(L.name, L.count, L.host_function) for L in seen] == [("scale_k", 1, "scale")]
    utils.check(x, torch.full((100,), 3.0), name="scale")


# ---- in cpu mode load_cuda runs the emulation: the same source as on a GPU
# tests/fixtures/conv_constant.cu: a __constant__ mask and a kernel in a namespace, also built by test_gpu_build.py
CONV = (Path(__file__).resolve().parents[1] / "fixtures" / "conv_constant.cu").read_text()

CONST_SRC = utils.cuda_begin + r'''
#define R 2
''' + CONV + r'''__device__ int calls;
int big = 1'000;
torch::Tensor convolve(torch::Tensor x, torch::Tensor m) {
    TORCH_CHECK(m.numel() == 2 * R + 1, "the mask needs ", 2 * R + 1, " values");
    auto mh = m.cpu().contiguous();
    CUDA_CHECK(cudaMemcpyToSymbol(conv::mask, mh.data_ptr<float>(), sizeof(conv::mask)));
    int c = 0;
    CUDA_CHECK(cudaMemcpyFromSymbol(&c, calls, sizeof(int)));
    c += 1;
    CUDA_CHECK(cudaMemcpyToSymbol(calls, &c, sizeof(int)));
    auto out = torch::empty_like(x);
    int n = x.numel();
    conv::conv_k<<<cdiv(n, 64), 64>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
int64_t times() { int c; CUDA_CHECK(cudaMemcpyFromSymbol(&c, calls, sizeof(int))); return c + 0 * big; }
'''
CONST_CPP = "torch::Tensor convolve(torch::Tensor x, torch::Tensor m);\nint64_t times();"


def conv_reference(x, m):
    xp = torch.nn.functional.pad(x.double(), (2, 2))
    return torch.stack([(xp[i:i + 5] * m.double()).sum() for i in range(len(x))])


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode (the emulation); tests/gpu runs this on a GPU")
def test_constant_memory_and_symbol_copies_in_the_emulation():
    mod = utils.load_cuda(CONST_SRC, CONST_CPP, ["convolve", "times"])
    assert "loaded from cache" in mod.build_log or " -o " in mod.build_log
    assert utils.last_build_log() == mod.build_log
    assert mod._course_kernels == ("conv_k",)
    x, m = torch.randn(203), torch.randn(5)
    utils.check(mod.convolve(x, m), conv_reference(x, m), atol=1e-5, name="convolve")
    mod.convolve(x, m)
    assert mod.times() >= 2
    with pytest.raises(RuntimeError, match="the mask needs 5 values"):
        mod.convolve(x, torch.randn(4))


def _count_tokenize(monkeypatch) -> list:
    """Record the text of every cxx.tokenize call, from whichever module of the package makes it."""
    import sys
    from gpu_course.cuda import cxx
    real, read = cxx.tokenize, []

    def counting(text, *args, **kwargs):
        read.append(text)
        return real(text, *args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("gpu_course") and getattr(module, "tokenize", None) is real:
            monkeypatch.setattr(module, "tokenize", counting)
    return read


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode (the emulation); the GPU build reads its source through the same parse")
def test_a_build_reads_each_source_once_and_a_cache_hit_reads_none(monkeypatch):
    import gpu_course.cuda as cuda
    from gpu_course.cuda import parsed
    monkeypatch.setattr(cuda, "_BUILT", {})
    src = CONST_SRC + "// built once more, on its own\n"
    read = _count_tokenize(monkeypatch)
    parsed.parse.cache_clear()
    mod = utils.load_cuda(src, CONST_CPP, ["convolve", "times"])  # built, or loaded from the disk cache
    assert (read.count(src), read.count(CONST_CPP)) == (1, 1)
    assert mod._course_kernels == ("conv_k",)
    read.clear()
    parsed.parse.cache_clear()
    assert utils.load_cuda(src, CONST_CPP, ["convolve", "times"]) is mod  # the session's cache: no parse
    assert read == []
    assert utils.last_build_log() == mod.build_log


def test_the_build_key_names_texts_arguments_and_the_build_environment(monkeypatch):
    from gpu_course.cuda import _build_key
    key = _build_key(SRC, "void f();", ["f"], True, True, (), None)
    assert key == _build_key(SRC, "void f();", ("f",), True, True, [], None)
    for other in [(SRC + " ", "void f();", ["f"], True, True, (), None),
                  (SRC, "void f();", ["f"], False, True, (), None),
                  (SRC, "void f();", ["f"], True, False, (), None),
                  (SRC, "void f();", ["f"], True, True, ["-Xptxas", "-v"], None),
                  (SRC, "void f();", ["f"], True, True, (), "warn")]:
        assert _build_key(*other) != key, other
    monkeypatch.setenv("CUDA_EMU_CHECKED", "0")
    assert _build_key(SRC, "void f();", ["f"], True, True, (), None) != key
    monkeypatch.delenv("CUDA_EMU_CHECKED")
    monkeypatch.setenv("XDG_CACHE_HOME", "/elsewhere")  # another cache directory of the emulation
    assert _build_key(SRC, "void f();", ["f"], True, True, (), None) != key or "CUDA_EMU_CACHE" in os.environ
    assert _build_key(SRC, "void f();", [["f"]], True, True, (), None) is None  # load_cuda reports it
    import gpu_course.cuda as cuda
    monkeypatch.setattr(cuda, "ON_GPU", True)  # the GPU build: its cache directory names the build too
    on_gpu = _build_key(SRC, "void f();", ["f"], True, True, (), None)
    monkeypatch.setenv("COURSE_CUDA_CACHE", "/fresh")
    assert on_gpu != key and _build_key(SRC, "void f();", ["f"], True, True, (), None) != on_gpu


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode (the emulation)")
def test_symbol_copies_into_what_is_no_device_variable_are_refused():
    bad = CONST_SRC.replace("cudaMemcpyToSymbol(conv::mask,", "cudaMemcpyToSymbol(big,")
    line = bad[:bad.index("cudaMemcpyToSymbol(big,")].count("\n") + 1
    with pytest.raises(utils.CudaEmulationError,
                       match=rf"cuda_src line {line}: the symbol of cudaMemcpyToSymbol must be a __constant__ "
                             r"or __device__ variable defined in this source, not 'big'"):
        utils.load_cuda(bad, CONST_CPP, ["convolve", "times"])


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode (the emulation)")
def test_a_symbol_copy_past_the_variable_raises():
    src = CONST_SRC.replace("sizeof(conv::mask))", "sizeof(conv::mask) + 4)")
    mod = utils.load_cuda(src, CONST_CPP, ["convolve", "times"])
    with pytest.raises(utils.CudaEmulationError, match=r"cudaMemcpyToSymbol: 24 bytes at offset 0 do not fit "
                                                       r"in the symbol \(20 bytes\)"):
        mod.convolve(torch.randn(10), torch.randn(5))


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode (the emulation)")
def test_a_compile_error_keeps_its_log():
    bad = CONST_SRC.replace("acc += mask[j + R] * x[p];", "acc += mask[j + R] * xx[p];")
    with pytest.raises(utils.CudaEmulationError) as e:
        utils.load_cuda(bad, CONST_CPP, ["convolve", "times"])
    line = bad[:bad.index("xx[p]")].count("\n") + 1
    assert f"cuda_src:{line}:" in str(e.value) and "'xx' was not declared" in e.value.log
    assert utils.last_build_log() == e.value.log


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode (the emulation)")
def test_a_host_function_in_a_namespace_is_bound_through_get_sig():
    src = utils.cuda_begin + r'''
namespace ops {
__global__ void twice_k(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2;
}
torch::Tensor twice(torch::Tensor x) {
    twice_k<<<cdiv(x.numel(), 32), 32>>>(x.data_ptr<float>(), x.numel());
    return x;
}
}  // namespace ops
'''
    mod = utils.load_cuda(src, utils.get_sig("twice", src), ["twice"])
    assert torch.equal(mod.twice(torch.ones(40)), torch.full((40,), 2.0))


def test_appending_adds_its_code_to_that_source_only_inside_the_block():
    from gpu_course.cuda import _with_appended, appending
    add = ("int launch() { return 1; }", "int launch();", "launch")
    assert _with_appended(SRC, "void f();", ["f"]) == (SRC, "void f();", ["f"])
    with pytest.raises(RuntimeError):
        with appending(SRC, *add):
            assert _with_appended(SRC, "void f();", ["f"]) == (SRC + "\n" + add[0], "void f();\nint launch();",
                                                               ["f", "launch"])
            for unchanged in [(SRC + " ", "void f();", ["f"]),      # another source
                              (SRC, ["void f();"], ["f"]),          # cpp_src not one string
                              (SRC, "void f();", "f"),              # funcs as one string: load_cuda reports it
                              (SRC, "void f(); int launch();", ["f", "launch"])]:  # names the function already
                assert _with_appended(*unchanged) == unchanged
            raise RuntimeError("a failed build inside the block")
    assert _with_appended(SRC, "void f();", ["f"]) == (SRC, "void f();", ["f"])  # closed, even after an error
