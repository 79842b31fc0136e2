#ifndef GPU_COURSE_ELEMENTWISE_02_VEC_CU
#define GPU_COURSE_ELEMENTWISE_02_VEC_CU
#include "../common.cuh"
#include "01_naive.cu"   // square_f, gelu_f, CHECK_PAIR
// v1 (notebook 03): one float4 (16 bytes) per thread; builds on 01_naive.cu.
__device__ __forceinline__ float4 square4(float4 v) { return make_float4(square_f(v.x), square_f(v.y), square_f(v.z), square_f(v.w)); }
__device__ __forceinline__ float4 gelu4(float4 v) { return make_float4(gelu_f(v.x), gelu_f(v.y), gelu_f(v.z), gelu_f(v.w)); }

// v1: one float4 per thread, plus the tail (n % 4 elements) done by the first threads one by one
__global__ void gelu_vec_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n / 4;
    if (j < n4) reinterpret_cast<float4*>(out)[j] = gelu4(reinterpret_cast<const float4*>(x)[j]);
    if (j < n % 4) out[4 * n4 + j] = gelu_f(x[4 * n4 + j]);
}
__global__ void square_vec_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n / 4;
    if (j < n4) reinterpret_cast<float4*>(out)[j] = square4(reinterpret_cast<const float4*>(x)[j]);
    if (j < n % 4) out[4 * n4 + j] = square_f(x[4 * n4 + j]);
}

#define CHECK_ALIGNED(t) TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, \
    #t " must be 16-byte aligned for float4 loads (a slice such as x[1:] is not): pass .clone()")

void gelu_vec(torch::Tensor x, torch::Tensor out) {
    CHECK_PAIR(x, out); CHECK_ALIGNED(x); CHECK_ALIGNED(out);
    int n = x.numel();
    gelu_vec_k<<<cdiv(max(n / 4, n % 4), 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
void square_vec(torch::Tensor x, torch::Tensor out) {
    CHECK_PAIR(x, out); CHECK_ALIGNED(x); CHECK_ALIGNED(out);
    int n = x.numel();
    square_vec_k<<<cdiv(max(n / 4, n % 4), 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_ELEMENTWISE_02_VEC_CU
