"""cpu mode refuses what a GPU refuses, with the GPU's rule in the message, and accepts the usual
idioms a GPU accepts: 48 KB of static __shared__ memory per kernel, C++17 (what the GPU build
compiles with), a learner's own cudaCheck, a __device__ lerp. (tests/gpu/test_gpu_rules_gpu.py
checks the GPU side of the same rules.)"""
import pytest
import torch

import utils
from gpu_course.cuda import CudaEmulationError

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="the CPU emulation (cpu mode)")

OK_SRC = utils.cuda_begin + r"""
// the usual error-check idiom (llm.c's): a macro and a function of the learner's own
#define cudaCheck(err) (cudaErrorCheck(err, __FILE__, __LINE__))
inline void cudaErrorCheck(cudaError_t error, const char* file, int line) {
    if (error != cudaSuccess) {
        printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
    }
}

// C++20's <cmath> would put std::lerp in the global namespace, and this would not compile
__device__ float lerp(float a, float b, float t) { return a + t * (b - a); }

#define HALF (24 * 1024 / 4)   // two arrays of 24 KB: 48 KB, the most a GPU allows
__global__ void blend_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float a[HALF];
    __shared__ float b[HALF];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    a[t] = i < n ? x[i] : 0.0f;
    b[t] = 1.0f;
    __syncthreads();
    if (i < n) out[i] = lerp(a[t], b[t], 0.5f);
}

torch::Tensor blend(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    cudaError_t cudaStatus;
    blend_k<<<cdiv(n, 128), 128>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    cudaCheck(cudaGetLastError());
    cudaStatus = cudaDeviceSynchronize();
    cudaCheck(cudaStatus);
    return out;
}

int64_t cplusplus() { return __cplusplus; }
"""
OK_CPP = "torch::Tensor blend(torch::Tensor x);\nint64_t cplusplus();"


def test_the_common_idioms_build_and_run():
    m = utils.load_cuda(OK_SRC, OK_CPP, ["blend", "cplusplus"])
    x = torch.arange(300.0)
    assert torch.equal(m.blend(x), (x + 1) / 2)
    assert m.cplusplus() == 201703   # C++17, as the GPU build (nvcc -std=c++17, g++ -std=c++17)


def _fails(src, cpp, funcs):
    with pytest.raises(CudaEmulationError) as e:
        utils.load_cuda(src, cpp, funcs)
    return str(e.value)


def test_more_than_48_kb_of_static_shared_memory_is_refused():
    src = utils.cuda_begin + r"""
__global__ void big_k(float* out) {
    __shared__ float tile[64 * 64];       // 16 KB
    __shared__ float stash[64 * 64 * 3];  // 48 KB more
    tile[threadIdx.x] = stash[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x] + stash[threadIdx.x];
}
torch::Tensor big(torch::Tensor out) { big_k<<<1, 32>>>(out.data_ptr<float>()); return out; }
"""
    msg = _fails(src, "torch::Tensor big(torch::Tensor out);", ["big"])
    assert "more than 48 KB (0xc000 bytes) of static __shared__ memory in one kernel" in msg
    assert "a GPU build refuses it (ptxas: uses too much shared data, 0xc000 max) for every target but" in msg
    assert "__shared__ float stash[64 * 64 * 3];" in msg   # the declaration that crosses the limit


def test_cxx20_library_is_refused_as_on_the_gpu():
    """std::bit_ceil is C++20: the GPU build (C++17) does not compile it, so neither does cpu mode."""
    src = utils.cuda_begin + r"""
#include <bit>
int64_t round_up(int64_t n) { return (int64_t)std::bit_ceil((uint64_t)n); }
"""
    msg = _fails(src, "int64_t round_up(int64_t n);", ["round_up"])
    assert "bit_ceil" in msg and "did not compile" in msg


def test_a_cuda_runtime_call_the_source_does_not_define_is_still_refused():
    src = utils.cuda_begin + "int64_t f() { int n = 0; cudaGetDeviceCount(&n); return n; }"
    msg = _fails(src, "int64_t f();", ["f"])
    assert "the CUDA runtime API (cudaGetDeviceCount) is not supported" in msg
