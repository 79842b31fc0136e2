#ifndef GPU_COURSE_ELEMENTWISE_04_SCALAR4_CU
#define GPU_COURSE_ELEMENTWISE_04_SCALAR4_CU
#include "../common.cuh"
#include "03_fast.cu"                 // square_f, gelu_f, CHECK_PAIR (and the steps before)
#include "../memory/pointer_chase.cu" // built with the ladder: the latency the Little's-law reading needs
// v1s (notebook 03): v1's grid and work per thread (4 floats), but four 4-byte loads instead of one
// float4: a block covers 4 x blockDim floats, and load k of a thread reads x[base + k * blockDim.x], so each
// of a warp's four load instructions asks for 32 neighbouring floats (128 bytes), as v0's one does. Against
// v1 only the width of the load differs; against v0, the threads, blocks and index arithmetic per element.
template <typename F>
__device__ __forceinline__ void scalar4_body(const float* __restrict__ x, float* __restrict__ out, int n, F f) {
    int base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; k++) if (base + k * (int)blockDim.x < n) v[k] = x[base + k * blockDim.x];  // 4 loads...
#pragma unroll
    for (int k = 0; k < 4; k++) if (base + k * (int)blockDim.x < n) out[base + k * blockDim.x] = f(v[k]);  // ...4 stores
}
struct SquareF { __device__ float operator()(float v) const { return square_f(v); } };
struct GeluF { __device__ float operator()(float v) const { return gelu_f(v); } };
__global__ void square_scalar4_k(const float* __restrict__ x, float* __restrict__ out, int n) { scalar4_body(x, out, n, SquareF()); }
__global__ void gelu_scalar4_k(const float* __restrict__ x, float* __restrict__ out, int n) { scalar4_body(x, out, n, GeluF()); }

void square_scalar4(torch::Tensor x, torch::Tensor out) {
    CHECK_PAIR(x, out);
    int n = x.numel();
    square_scalar4_k<<<cdiv(n, 4 * 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
void gelu_scalar4(torch::Tensor x, torch::Tensor out) {
    CHECK_PAIR(x, out);
    int n = x.numel();
    gelu_scalar4_k<<<cdiv(n, 4 * 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_ELEMENTWISE_04_SCALAR4_CU
