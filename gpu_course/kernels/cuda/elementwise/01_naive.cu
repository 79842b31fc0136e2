#ifndef GPU_COURSE_ELEMENTWISE_01_NAIVE_CU
#define GPU_COURSE_ELEMENTWISE_01_NAIVE_CU
#include "../common.cuh"
// v0 (notebook 03): one thread per element; square_f and gelu_f are the elementwise functions every
// later step reuses, CHECK_PAIR the host functions' checks.
__device__ __forceinline__ float square_f(float x) { return x * x; }
__device__ __forceinline__ float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));   // sqrt(2/pi)
}

__global__ void square_naive_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = square_f(x[i]);
}
__global__ void gelu_naive_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gelu_f(x[i]);
}

#define CHECK_PAIR(x, out) do { CHECK_INPUT(x); CHECK_INPUT(out); \
    TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat, "x and out must be float32"); \
    TORCH_CHECK(x.numel() == out.numel(), "out must have as many elements as x"); } while (0)

void square_naive(torch::Tensor x, torch::Tensor out) {
    CHECK_PAIR(x, out);
    int n = x.numel();
    square_naive_k<<<cdiv(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
void gelu_naive(torch::Tensor x, torch::Tensor out) {
    CHECK_PAIR(x, out);
    int n = x.numel();
    gelu_naive_k<<<cdiv(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_ELEMENTWISE_01_NAIVE_CU
