#ifndef GPU_COURSE_ELEMENTWISE_03_FAST_CU
#define GPU_COURSE_ELEMENTWISE_03_FAST_CU
#include "../common.cuh"
#include "02_vec.cu"   // square4, gelu4, CHECK_ALIGNED
// v2 (U = 1) and v3 (U > 1) (notebook 03): a grid-stride loop over float4s; each thread has U loads in
// flight. Builds on 02_vec.cu.
template <int U>
__global__ void gelu_fast_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* out4 = reinterpret_cast<float4*>(out);
    int n4 = n / 4, stride = gridDim.x * blockDim.x;
    for (int base = blockIdx.x * blockDim.x + threadIdx.x; base < n4; base += U * stride) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) if (base + u * stride < n4) v[u] = x4[base + u * stride];   // U loads...
#pragma unroll
        for (int u = 0; u < U; u++) if (base + u * stride < n4) out4[base + u * stride] = gelu4(v[u]);  // ...then U stores
    }
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n % 4) out[4 * n4 + t] = gelu_f(x[4 * n4 + t]);
}
template <int U>
__global__ void square_fast_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* out4 = reinterpret_cast<float4*>(out);
    int n4 = n / 4, stride = gridDim.x * blockDim.x;
    for (int base = blockIdx.x * blockDim.x + threadIdx.x; base < n4; base += U * stride) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) if (base + u * stride < n4) v[u] = x4[base + u * stride];
#pragma unroll
        for (int u = 0; u < U; u++) if (base + u * stride < n4) out4[base + u * stride] = square4(v[u]);
    }
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n % 4) out[4 * n4 + t] = square_f(x[4 * n4 + t]);
}

void gelu_fast(torch::Tensor x, torch::Tensor out, int64_t blocks, int64_t threads, int64_t unroll) {
    CHECK_PAIR(x, out); CHECK_ALIGNED(x); CHECK_ALIGNED(out);
    int n = x.numel();
    const float* xp = x.data_ptr<float>(); float* op = out.data_ptr<float>();
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    if (unroll == 1) gelu_fast_k<1><<<blocks, threads, 0, stream>>>(xp, op, n);
    else if (unroll == 2) gelu_fast_k<2><<<blocks, threads, 0, stream>>>(xp, op, n);
    else if (unroll == 4) gelu_fast_k<4><<<blocks, threads, 0, stream>>>(xp, op, n);
    else if (unroll == 8) gelu_fast_k<8><<<blocks, threads, 0, stream>>>(xp, op, n);
    else TORCH_CHECK(false, ("unroll must be 1, 2, 4 or 8, got " + std::to_string(unroll)).c_str());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
void square_fast(torch::Tensor x, torch::Tensor out, int64_t blocks, int64_t threads, int64_t unroll) {
    CHECK_PAIR(x, out); CHECK_ALIGNED(x); CHECK_ALIGNED(out);
    int n = x.numel();
    const float* xp = x.data_ptr<float>(); float* op = out.data_ptr<float>();
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    if (unroll == 1) square_fast_k<1><<<blocks, threads, 0, stream>>>(xp, op, n);
    else if (unroll == 2) square_fast_k<2><<<blocks, threads, 0, stream>>>(xp, op, n);
    else if (unroll == 4) square_fast_k<4><<<blocks, threads, 0, stream>>>(xp, op, n);
    else if (unroll == 8) square_fast_k<8><<<blocks, threads, 0, stream>>>(xp, op, n);
    else TORCH_CHECK(false, ("unroll must be 1, 2, 4 or 8, got " + std::to_string(unroll)).c_str());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_ELEMENTWISE_03_FAST_CU
