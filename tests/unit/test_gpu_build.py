"""Unit tests of the GPU split build's pure-Python part (gpu_course/cuda/gpu_build/: make_units and
the decision between the learner's error and the one-unit fallback). Where nvcc is on PATH, each
generated device unit is compiled with `nvcc --ptx` (it needs no torch headers), which proves it is
valid CUDA; the host unit's structure is checked, and compiled with g++ where the CUDA and torch
headers are there. Building and running the modules needs a GPU: tests/gpu/test_load_cuda_gpu.py."""
import glob
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

import utils
from gpu_course.cuda import cxx, gpu_build
from gpu_course.cuda.errors import CudaBuildError
from gpu_course.cuda.gpu_build import NeedsClassicBuild, make_units
from gpu_course.cuda.gpu_build.attribution import failure
from gpu_course.cuda.language import STD_FLAG

NVCC = shutil.which("nvcc")

# Everything the splitter must not be fooled by, in one source: a kernel and a __constant__ mask
# in a namespace, filled by cudaMemcpyToSymbol; digit separators and a character literal before a
# kernel; braces and <<< in strings and comments; a launch in a #define, in a lambda, two in one
# statement, and a templated kernel launched as k<16>; a struct with a __device__ member; plain
# host globals and functions; a __device__ variable read back with cudaMemcpyFromSymbol.
# tests/fixtures/conv_constant.cu: a __constant__ mask and a kernel in a namespace, also built by test_cuda_frontend.py
CONV = (Path(__file__).resolve().parents[1] / "fixtures" / "conv_constant.cu").read_text()

TRICKY = utils.cuda_begin + r'''
#define R 2
#define LAUNCH_SQ(x, out, n) sq_k<<<cdiv(n, 256), 256>>>(x, out, n)
''' + CONV + r'''__device__ unsigned int hits;
const char* note = "} <<< not a launch {";   // a string with braces, and a comment {
int big = 1'000'000;
char quote = '\'';
int calls = 0;
int twice_of(int v) { return 2 * v; }
template <int B>
__global__ void fill_k(float* out, float v, int n) {
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) { out[i] = v; atomicAdd(&hits, 1u); }
}
__global__ void sq_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * x[i];   /* { unbalanced in a comment <<< */
}
struct Scale {
    float s = 2.0f;
    __device__ float operator()(float v) const { return s * v + threadIdx.x * 0.0f; }
};
torch::Tensor convolve(torch::Tensor x, torch::Tensor m) {
    TORCH_CHECK(m.numel() == 2 * R + 1, "the mask needs ", 2 * R + 1, " values");
    auto mh = m.cpu().contiguous();
    CUDA_CHECK(cudaMemcpyToSymbol(conv::mask, mh.data_ptr<float>(), sizeof(conv::mask)));
    auto out = torch::empty_like(x);
    int n = x.numel();
    conv::conv_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
torch::Tensor square_fill(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    unsigned int zero = 0, seen = 0;
    CUDA_CHECK(cudaMemcpyToSymbol(hits, &zero, sizeof(zero)));
    auto go = [&](const float* src, float* dst) { sq_k<<<cdiv(n, 256), 256>>>(src, dst, n); };
    go(x.data_ptr<float>(), out.data_ptr<float>());
    fill_k<16><<<cdiv(n, 16), 16>>>(out.data_ptr<float>(), 1.0f, n), sq_k<<<1, 1>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), 0);
    LAUNCH_SQ(x.data_ptr<float>(), out.data_ptr<float>(), n);
    CUDA_CHECK(cudaMemcpyFromSymbol(&seen, hits, sizeof(seen)));
    TORCH_CHECK(seen == (unsigned int)n, "fill_k wrote ", seen, " of ", n);
    calls += twice_of(1) / 2;
    return out;
}
'''
TRICKY_CPP = """torch::Tensor convolve(torch::Tensor x, torch::Tensor m);
torch::Tensor square_fill(torch::Tensor x);"""
TRICKY_FUNCS = ["convolve", "square_fill"]


def line_of(src, text):
    return src[:src.index(text)].count("\n") + 1


def learner_parts(unit):
    """The learner's statements of a unit, as {first line in cuda_src: text}."""
    parts = re.split(r'^#line (\d+) "(\w+)"\n', unit, flags=re.M)
    return {int(parts[k]): parts[k + 2] for k in range(1, len(parts) - 2, 3) if parts[k + 1] == "cuda_src"}


def nvcc_ptx(tmp_path, unit, name="device"):
    src = tmp_path / f"{name}.cu"
    src.write_text(unit)
    # cicc at -O0: the same entries, variables and instructions, without the optimiser (the ladder: 1 s, not 10)
    r = subprocess.run([NVCC, "--ptx", "-arch=sm_80", STD_FLAG, "--expt-relaxed-constexpr", "-Xcicc", "-O0",
                        str(src), "-o", str(tmp_path / f"{name}.ptx")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return (tmp_path / f"{name}.ptx").read_text()


@pytest.fixture(scope="module")
def tricky():
    return make_units(TRICKY, TRICKY_CPP, TRICKY_FUNCS)


@pytest.mark.skipif(not NVCC, reason="nvcc is not on PATH")
def test_tricky_device_unit_is_valid_cuda(tricky, tmp_path):
    ptx = nvcc_ptx(tmp_path, tricky.device)
    for name in ("conv_k", "sq_k", "fill_kILi16E"):  # the kernels (mangled), not launch stubs (host code)
        assert re.search(rf"\.entry \w*{name}", ptx), name
    assert re.search(r"\.const .*mask", ptx) and re.search(r"\.global .*hits", ptx)
    # the stubs are host code: compile the whole unit, and look for what the host unit links to
    r = subprocess.run([NVCC, "-c", "-arch=sm_80", STD_FLAG, "--expt-relaxed-constexpr", "-Xcompiler",
                        "-fPIC", str(tmp_path / "device.cu"), "-o", str(tmp_path / "device.o")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if shutil.which("nm"):
        nm = subprocess.run(["nm", str(tmp_path / "device.o")], capture_output=True, text=True).stdout
        exported = set(re.findall(r" T (__course_\w+)", nm))
        assert exported == {*(f"__course_launch_{i}" for i in range(5)), "__course_launch_table",
                            "__course_launch_log_total", "__course_launch_log_get",  # the launch log
                            "__course_symbol_0", "__course_symbol_1"}


def test_tricky_units_have_the_right_parts(tricky):
    dev, host = learner_parts(tricky.device), learner_parts(tricky.host)
    # kernels: defined in the device unit, only declared in the host unit
    toks = cxx.tokenize(tricky.host)
    kernels = cxx.find_functions(toks, cxx.match_brackets(toks), ("__global__",))
    assert sorted(f.name for f in kernels) == ["conv_k", "fill_k", "sq_k"]
    assert all(f.body is None for f in kernels)
    assert "<<<" not in {t.text for t in toks}
    assert not {"threadIdx", "blockIdx", "atomicAdd"} & {t.text for t in toks}
    # one stub per launch site (a macro's launch counts once), and each is called
    assert tricky.device.count('extern "C" cudaError_t __course_launch_') == 5
    assert all(f"__course_launch_{i}(dim3(" in tricky.host for i in range(5))
    assert 'static const char* const __course_launch_names[] = {"sq_k", "conv_k", "sq_k", "fill_k", "sq_k"};' \
        in tricky.device
    # device variables: a host reference bound to the stub of each
    assert re.search(r"static decltype\(course_symbol_decl_0::mask\)& mask = .*__course_symbol_0\(\)", tricky.host)
    assert "namespace course_symbol_decl_0 { extern float mask[2 * R + 1]; }" in tricky.host
    assert "return (void*)&::conv::mask;" in tricky.device and "return (void*)&::hits;" in tricky.device
    # the struct's __device__ member is only declared for the host
    assert "__device__ float operator()(float v) const ;" in tricky.host
    # plain host globals and functions: defined once (host), declared for the device
    assert "int calls = 0;" in host[line_of(TRICKY, "int calls")] and \
        dev[line_of(TRICKY, "int calls")].strip() == "extern int calls;"
    assert dev[line_of(TRICKY, "int twice_of")].strip() == "int twice_of(int v);"
    # a pointer to const chars is not itself const: external linkage, so one definition (the H100
    # linker found it in both units before)
    assert "note = " in host[line_of(TRICKY, "const char* note")] and \
        dev[line_of(TRICKY, "const char* note")].strip() == "extern const char* note;"
    assert "1'000'000" in host[line_of(TRICKY, "int big")]
    # host code keeps its lines: the launch after a line break is on its own line
    start = TRICKY.index("torch::Tensor square_fill")
    original = TRICKY[start:TRICKY.index("\n}\n", start) + 2]
    assert host[line_of(TRICKY, "torch::Tensor square_fill")].rstrip("\n").count("\n") == original.count("\n")
    assert tricky.kernels == ("conv_k", "fill_k", "sq_k")
    assert line_of(TRICKY, "if (p >= 0") in tricky.device_lines
    assert line_of(TRICKY, "auto mh = m.cpu()") in tricky.host_lines
    assert line_of(TRICKY, "inline unsigned int cdiv") not in tricky.host_lines | tricky.device_lines


def _cuda_include():
    for d in [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"))]:
        if d and os.path.exists(os.path.join(d, "include", "cuda_runtime.h")):
            return os.path.join(d, "include")
    return None


GXX = _cuda_include() and shutil.which("g++")


def gxx_syntax(tmp_path, host_unit):
    """Check a host unit with g++ against the CUDA runtime's headers and CPU torch's (~10 s)."""
    from torch.utils import cpp_extension
    stub = tmp_path / "inc" / "c10" / "cuda" / "impl"  # CPU wheels lack this generated header
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "cuda_cmake_macros.h").write_text("")
    src = tmp_path / "host.cpp"
    src.write_text(host_unit)
    cmd = ["g++", "-fsyntax-only", STD_FLAG, "-w", f"-I{tmp_path / 'inc'}", f"-I{_cuda_include()}",
           f"-I{sysconfig.get_paths()['include']}"] + [f"-I{p}" for p in cpp_extension.include_paths()]
    r = subprocess.run(cmd + [str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


def test_editing_a_kernel_leaves_the_host_unit_and_host_code_leaves_the_device_unit(tricky):
    kernel_edit = make_units(TRICKY.replace("out[i] = x[i] * x[i];", "out[i] = x[i] * x[i] + 0.0f;"),
                             TRICKY_CPP, TRICKY_FUNCS)
    assert kernel_edit.host == tricky.host and kernel_edit.binding == tricky.binding
    assert kernel_edit.device != tricky.device
    host_edit = make_units(TRICKY.replace("auto mh = m.cpu().contiguous();", "auto mh = m.contiguous().cpu();"),
                           TRICKY_CPP, TRICKY_FUNCS)
    assert host_edit.device == tricky.device and host_edit.host != tricky.host


SIMPLE = utils.cuda_begin + r'''
__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = i; }
torch::Tensor f(torch::Tensor x) { k<<<1, 32>>>(x.data_ptr<float>(), x.numel()); return x; }
'''


@pytest.mark.parametrize("what,src", [
    ("templated host function launches", SIMPLE + r'''
template <int B> void launch(torch::Tensor x) { k<<<1, B>>>(x.data_ptr<float>(), x.numel()); }'''),
    ("device code uses torch", utils.cuda_begin + r'''
__global__ void t_k(torch::PackedTensorAccessor32<float, 2> a) { a[0][0] = 1; }'''),
    ("__managed__", SIMPLE + "__managed__ int m;\n"),
    ("no __global__ function of that name", SIMPLE + r'''
void g(torch::Tensor x) { auto kk = k; kk<<<1, 1>>>(x.data_ptr<float>(), 1); }'''),
    ("leaves template arguments to deduction", utils.cuda_begin + r'''
template <typename T> __global__ void z_k(T* x) { x[threadIdx.x] = 0; }
void z(torch::Tensor x) { z_k<<<1, 1>>>(x.data_ptr<float>()); }'''),
    ("uses the local name B", utils.cuda_begin + r'''
template <int B> __global__ void b_k(float* x) { x[threadIdx.x] = B; }
void b(torch::Tensor x) { constexpr int B = 32; b_k<B><<<1, B>>>(x.data_ptr<float>()); }'''),
    ("named by a macro parameter", SIMPLE + "#define LAUNCH(kern, x) kern<<<1, 1>>>(x, 1)\n"),
    ("dynamic parallelism", SIMPLE + "__global__ void parent_k(float* x) { k<<<1, 1>>>(x, 1); }\n"),
    ("host code names threadIdx", SIMPLE + "__host__ __device__ int lane() { return threadIdx.x % 32; }\n"),
    ("two device variables named c", SIMPLE + "namespace a { __device__ int c; }\nnamespace b { __device__ int c; }\n"),
    ("a device variable the split cannot reach", SIMPLE + r'''
__constant__ float w[] = {1, 2, 3};
void set_w(torch::Tensor h) { cudaMemcpyToSymbol(w, h.data_ptr<float>(), sizeof(w)); }'''),
    ("device code the split does not recognise", SIMPLE + r'''
void lam(torch::Tensor x) { auto f = [] __device__ (float v) { return v; }; }'''),
    ("is overloaded", SIMPLE + "__global__ void k(int* x, int n) { }\n"),
    ("cudaFuncSetAttribute of g, not a __global__ function", SIMPLE + r'''
void g(float* x) { }
void attr() { cudaFuncSetAttribute(g, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536); }'''),
    ("cudaFuncSetAttribute of b_k uses the local name B", utils.cuda_begin + r'''
template <int B> __global__ void b_k(float* x) { x[threadIdx.x] = B; }
void b() { constexpr int B = 32; cudaFuncSetAttribute(b_k<B>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536); }'''),
])
def test_sources_the_split_leaves_to_one_unit(what, src):
    with pytest.raises(NeedsClassicBuild, match=re.escape(what)):
        make_units(src, "torch::Tensor f(torch::Tensor x);", ["f"])


@pytest.mark.skipif(not NVCC, reason="nvcc is not on PATH")
def test_simple_kernels_in_namespaces_and_templates_compile(tmp_path):
    src = utils.cuda_begin + r'''
namespace ops { namespace detail {
template <int TW> __global__ void scale_k(float* x, float s, int n) {
    int i = blockIdx.x * TW + threadIdx.x;
    if (i < n) x[i] *= s;
}
}  // namespace detail
torch::Tensor scale(torch::Tensor x, double s) {
    int n = x.numel();
    detail::scale_k<128><<<cdiv(n, 128), 128>>>(x.data_ptr<float>(), (float)s, n);
    return x;
}
}  // namespace ops
using ops::scale;
'''
    u = make_units(src, utils.get_sig("scale", src), ["scale"])
    assert "namespace ops {\nextern \"C\" cudaError_t __course_launch_0" in u.device
    assert "cudaLaunchKernel(&detail::scale_k<128>," in u.device
    nvcc_ptx(tmp_path, u.device)


ATTRIBUTE = utils.cuda_begin + r'''
namespace big {
template <int STAGES>
__global__ void stage_k(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x * STAGES] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = 2.0f * buf[threadIdx.x * STAGES];
}
}  // namespace big
torch::Tensor twice(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const int n = x.numel(), smem = 100 * 1024;   // over the default 48 KB: allowed per kernel first
    C10_CUDA_CHECK(cudaFuncSetAttribute(big::stage_k<64>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    big::stage_k<64><<<cdiv(n, 256), 256, smem>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
'''


def test_a_kernel_attribute_set_in_host_code_goes_through_a_device_stub(tmp_path):
    """cudaFuncSetAttribute(kernel, ...) names a kernel only the device unit defines: the host unit
    calls a stub there instead (the source stays on the split build), line numbers kept."""
    u = make_units(ATTRIBUTE, utils.get_sig("twice", ATTRIBUTE), ["twice"])
    assert 'extern "C" cudaError_t __course_func_attr_0(cudaFuncAttribute, int);' in u.host
    call = "__course_func_attr_0((cudaFuncAttribute)(cudaFuncAttributeMaxDynamicSharedMemorySize), (int)(smem))"
    assert call in u.host and "cudaFuncSetAttribute" not in u.host.replace("__course_func_attr", "")
    host_line = next(i for i, l in enumerate(u.host.splitlines()) if call in l)
    assert u.host.splitlines()[host_line + 2].strip().startswith("__course_launch_0(")  # the 2-line call kept 2 lines
    assert "return cudaFuncSetAttribute(&big::stage_k<64>, course_a, course_v);" in u.device
    if NVCC:
        nvcc_ptx(tmp_path, u.device)


@pytest.mark.slow
@pytest.mark.skipif(not NVCC, reason="nvcc is not on PATH")
def test_the_matmul_ladder_stays_on_the_split_build(tmp_path):
    """Rung 10 allows its kernels over 48 KB of shared memory: through attribute stubs, so notebook
    04's ladder still builds as three units (a kernel edit recompiles only the device unit)."""
    from gpu_course.kernels import matmul_ladder
    src = matmul_ladder.source()
    u = make_units(src, "\n".join(utils.get_sig(f, src) for f in matmul_ladder.FUNCS), matmul_ladder.FUNCS)
    assert u.device.count("__course_func_attr_") == 2 and "mm_async_k" in u.device
    ptx = nvcc_ptx(tmp_path, u.device)
    assert "cp.async" in ptx
    # <cuda_pipeline.h> is device code (g++ fails on it): the host unit must not include it. On the
    # H100 it did, and notebook 04's ladder silently went to the one-unit build (105 s).
    assert "cuda_pipeline.h" in u.device and "cuda_pipeline.h" not in u.host   # g++: test_host_units_compile_with_gxx


def test_a_compile_failure_is_the_learners_only_in_the_lines_the_unit_owns(tricky):
    def err(line, file="cuda_src"):
        return f"{file}:{line}:5: error: something is wrong\n"

    host_line = line_of(TRICKY, "auto mh = m.cpu()")
    e = failure("host", err(host_line), tricky, TRICKY, TRICKY_CPP)
    assert isinstance(e, CudaBuildError) and str(e).startswith("load_cuda: the host code does not compile")
    assert f"cuda_src:{host_line}:5: error: something is wrong\n{host_line:6d} | auto mh = m.cpu().contiguous();" \
        in str(e)
    # an error in a statement both units share, or in generated code, is the split's
    shared = line_of(TRICKY, "inline unsigned int cdiv")
    for log in (err(shared), err(3, "course_generated"), "c++: fatal error: killed\n"):
        assert isinstance(failure("host", log, tricky, TRICKY, TRICKY_CPP), NeedsClassicBuild)
    # unless the other unit fails on that line too: then it is the learner's
    e = failure("host", err(shared), tricky, TRICKY, TRICKY_CPP, f"cuda_src({shared}): error: x\n")
    assert isinstance(e, CudaBuildError) and "inline unsigned int cdiv" in str(e)
    kernel_line = line_of(TRICKY, "if (p >= 0")
    nvcc_log = f'cuda_src({kernel_line}): error: identifier "pp" is undefined\n'
    e = failure("device", nvcc_log, tricky, TRICKY, TRICKY_CPP)
    assert isinstance(e, CudaBuildError) and 'identifier "pp" is undefined' in str(e)
    assert isinstance(failure("device", err(host_line), tricky, TRICKY, TRICKY_CPP), NeedsClassicBuild)
    e = failure("binding", err(2, "cpp_src"), tricky, TRICKY, TRICKY_CPP)
    assert isinstance(e, CudaBuildError) and "torch::Tensor square_fill(torch::Tensor x);" in str(e)


def test_a_ptxas_limit_is_the_learners_error_not_the_splits(tricky):
    """ptxas names no source line; its limits (48 KB of static shared memory) are still the
    kernels' error, not a reason to rebuild everything as one nvcc unit."""
    log = ("ptxas error   : Entry function '_Z5big_kPf' uses too much shared data "
           "(0x10000 bytes, 0xc000 max)\n")
    e = failure("device", log, tricky, TRICKY, TRICKY_CPP)
    assert isinstance(e, CudaBuildError)
    assert "uses too much shared data (0x10000 bytes, 0xc000 max)" in str(e)
    assert "at most 48 KB (0xc000 bytes) of static __shared__ memory" in str(e)


# ---- valid CUDA C that torch's load_inline builds (one unit, torch/extension.h) builds split too
# Idioms of public CUDA repositories that the split units lacked the headers for (found on an H100):
# assert and printf in a kernel, climits and std::numeric_limits in device code, torch::kInt32 and
# torch::kFloat16 in host code. tests/gpu/test_load_cuda_gpu.py builds and runs them.
IDIOMS = utils.cuda_begin + r'''
#define BLOCK 256
__global__ void clamp_k(const float* __restrict__ x, int* __restrict__ out, float hi, int n) {
    assert(blockDim.x <= 1024);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < 0 && i == 0) printf("clamp_k: n=%d\n", n);
    if (i < n) {
        float v = fminf(x[i], std::numeric_limits<float>::max());
        out[i] = v >= hi ? INT_MAX : (int)v;
    }
}
torch::Tensor clamp(torch::Tensor x, double hi) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto out = torch::empty(x.sizes(), x.options().dtype(torch::kInt32));
    int n = x.numel();
    clamp_k<<<cdiv(n, BLOCK), BLOCK>>>(x.data_ptr<float>(), out.data_ptr<int>(), (float)hi, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
torch::Tensor as_half(torch::Tensor x) { return x.to(torch::kFloat16); }
'''
IDIOMS_FUNCS = ["clamp", "as_half"]
IDIOMS_CPP = "\n".join(utils.get_sig(f, IDIOMS) for f in IDIOMS_FUNCS)

# half kernels, and their wrappers casting torch's at::Half to __half, without including cuda_fp16.h
# (one nvcc unit has it through torch/extension.h)
HALF = utils.cuda_begin + r'''
__global__ void scale_half_k(const __half* __restrict__ x, __half* __restrict__ out, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(s * __half2float(x[i]));
}
torch::Tensor scale_half(torch::Tensor x, double s) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.scalar_type() == torch::kFloat16, "x must be float16");
    auto out = torch::empty_like(x);
    int n = x.numel();
    scale_half_k<<<cdiv(n, 256), 256>>>(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                                        reinterpret_cast<__half*>(out.data_ptr<at::Half>()), (float)s, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
'''
HALF_CPP = utils.get_sig("scale_half", HALF)

# a constant that names torch is host code, so the device unit does not have it: the kernel that reads
# it fails to compile there, though one unit builds it (the split's error: built as one unit)
HIDDEN = utils.cuda_begin + r'''
constexpr int ELEMENT_BYTES = sizeof(at::BFloat16);
__global__ void bytes_k(int* out) { out[threadIdx.x] = ELEMENT_BYTES; }
torch::Tensor bytes(torch::Tensor out) { bytes_k<<<1, 4>>>(out.data_ptr<int>()); return out; }
'''
HIDDEN_CPP = "torch::Tensor bytes(torch::Tensor out);"


def nvcc_object(tmp_path, unit, name="device"):
    """Compile a device unit for an H100 (sm_90a) as the GPU build does; returns (exit code, log)."""
    src = tmp_path / f"{name}.cu"
    src.write_text(unit)
    r = subprocess.run(gpu_build.nvcc_command(arch="-arch=sm_90a") + ["-c", str(src), "-o", str(tmp_path / f"{name}.o")],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.skipif(not NVCC, reason="nvcc is not on PATH")
@pytest.mark.parametrize("src,cpp,funcs", [(IDIOMS, IDIOMS_CPP, IDIOMS_FUNCS), (HALF, HALF_CPP, ["scale_half"])],
                         ids=["assert-printf-limits", "half"])
def test_load_inline_idioms_compile_in_the_device_unit(src, cpp, funcs, tmp_path):
    units = make_units(src, cpp, funcs)
    code, log = nvcc_object(tmp_path, units.device)
    assert code == 0, log[-3000:]


def one_source(*sources):
    """``sources`` as one (each begins with ``utils.cuda_begin``, kept once)."""
    assert all(s.startswith(utils.cuda_begin) for s in sources)
    return sources[0] + "".join(s[len(utils.cuda_begin):] for s in sources[1:])


@pytest.mark.slow  # g++ reads torch's ATen headers: ~15 s
@pytest.mark.skipif(not GXX, reason="needs the CUDA headers and g++")
def test_host_units_compile_with_gxx(tmp_path):
    """The host units compile with the CUDA runtime's headers and CPU torch's: the tricky source's; the
    load_inline idioms' (torch::kInt32 and torch::kFloat16 from torch/types.h, __half in a wrapper from
    cuda_fp16.h); notebook 04's matmul ladder's; an exercise check's own launch of a learner's kernel (on
    torch's current stream). As one source, so that g++ reads torch's headers once, not four times."""
    from gpu_course.exercises.cuda_launch import launcher_source
    from gpu_course.kernels import matmul_ladder
    learner = utils.cuda_begin + "__global__ void ex_k(float* out, int n) { out[threadIdx.x] = n; }\n"
    launch, _, launch_fn = launcher_source(learner, "ex_k")
    src = one_source(TRICKY, IDIOMS, HALF, matmul_ladder.source(), learner + launch)
    funcs = TRICKY_FUNCS + IDIOMS_FUNCS + ["scale_half"] + list(matmul_ladder.FUNCS) + [launch_fn]
    units = make_units(src, "\n".join(utils.get_sig(f, src) for f in funcs), funcs)
    assert "#include <torch/types.h>" in units.host and "cuda_fp16.h" in units.host
    assert "cuda_pipeline.h" not in units.host and "mm_async_k" in units.device   # the ladder's split
    assert "(cudaStream_t)(at::cuda::getCurrentCUDAStream())" in units.host   # the check's launch of ex_k
    gxx_syntax(tmp_path, units.host)


def test_half_headers_only_where_the_source_names_half_types():
    assert "cuda_fp16.h" in make_units(HALF, HALF_CPP, ["scale_half"]).device
    assert "cuda_fp16.h" in make_units(HALF, HALF_CPP, ["scale_half"]).host
    assert "cuda_fp16.h" not in make_units(IDIOMS, IDIOMS_CPP, IDIOMS_FUNCS).device   # 0.6 s of nvcc saved


@pytest.mark.parametrize("code", ["auto y = torch::nn::functional::relu(x);", "py::print(\"x\");"])
def test_torchs_frontend_in_host_code_gets_all_of_torch_extension_h(code):
    src = utils.cuda_begin + "torch::Tensor f(torch::Tensor x) { %s return x; }\n" % code
    host = make_units(src, utils.get_sig("f", src), ["f"]).host
    assert "#include <torch/extension.h>" in host and "#include <c10/cuda/CUDAException.h>" in host


@pytest.fixture(scope="module")
def names_cache(tmp_path_factory):
    """The GPU build's cache in a temp directory (the names one unit sees are cached there)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COURSE_CUDA_CACHE", str(tmp_path_factory.mktemp("cuda-cache")))
        yield


@pytest.mark.skipif(not shutil.which(os.environ.get("CXX", "c++")), reason="needs a C++ compiler (the preprocessor)")
def test_a_missing_name_that_one_unit_sees_is_the_splits_error(tricky, names_cache):
    """A unit that misses a name one unit would see (a header the unit lacked) falls back to one unit;
    a misspelt name stays the learner's quick error."""
    kernel_line = line_of(TRICKY, "if (p >= 0")
    host_line = line_of(TRICKY, "auto mh = m.cpu()")
    for log in (f'cuda_src({kernel_line}): error: identifier "assert" is undefined\n',
                f'cuda_src({kernel_line}): error: identifier "Scale" is undefined\n',   # cuda_src's own
                f"cuda_src:{host_line}:43: error: \u2018kInt32\u2019 is not a member of \u2018torch\u2019\n"):
        kind = "host" if "kInt32" in log else "device"
        e = failure(kind, log, tricky, TRICKY, TRICKY_CPP)
        assert isinstance(e, NeedsClassicBuild), log
        assert str(e).startswith(f"the {kind} unit does not see ") and str(e).endswith(", which one unit would")
    for log in (f'cuda_src({kernel_line}): error: identifier "acc2" is undefined\n',
                f"cuda_src:{host_line}:43: error: 'kInt23' is not a member of 'torch'\n"):
        kind = "host" if "kInt23" in log else "device"
        assert isinstance(failure(kind, log, tricky, TRICKY, TRICKY_CPP), CudaBuildError), log
    # cpp_src, which load_inline compiles with all of torch/extension.h
    e = failure("binding", "cpp_src:2:1: error: 'nn' is not a member of 'torch'\n", tricky, TRICKY, TRICKY_CPP)
    assert isinstance(e, NeedsClassicBuild) and str(e) == "the binding unit does not see torch::nn, which one unit would"


@pytest.mark.skipif(not NVCC, reason="nvcc is not on PATH")
def test_a_kernel_reading_a_name_the_split_left_to_the_host_unit_builds_as_one_unit(tmp_path):
    units = make_units(HIDDEN, HIDDEN_CPP, ["bytes"])
    code, log = nvcc_object(tmp_path, units.device)
    assert code != 0 and 'identifier "ELEMENT_BYTES" is undefined' in log
    e = failure("device", log, units, HIDDEN, HIDDEN_CPP)
    assert isinstance(e, NeedsClassicBuild) and str(e) == "the device unit does not see ELEMENT_BYTES, which one unit would"
