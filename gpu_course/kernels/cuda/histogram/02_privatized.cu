#ifndef GPU_COURSE_HISTOGRAM_02_PRIVATIZED_CU
#define GPU_COURSE_HISTOGRAM_02_PRIVATIZED_CU
#include "../common.cuh"
#include "01_global.cu"   // bin_of
// privatized: each block counts into its own copy of the bins in shared memory (fast atomics, and
// the contention is spread over the blocks), reading float4s over a grid-stride loop; at the end it
// adds its copy to the global counts: `bins` global atomics per block instead of one per element.
__device__ __forceinline__ void count_one(int* local, float v, float lo, float hi, int bins) {
    int b = bin_of(v, lo, hi, bins);
    if (b >= 0) atomicAdd(&local[b], 1);
}

__global__ void histogram_privatized_k(const float* __restrict__ x, int* __restrict__ counts, int n,
                                       float lo, float hi, int bins) {
    extern __shared__ int local[];             // `bins` counters, sized by the launch
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const float4* x4 = reinterpret_cast<const float4*>(x);
    int n4 = n / 4, stride = gridDim.x * blockDim.x, g = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = g; i < n4; i += stride) {
        float4 v = x4[i];
        count_one(local, v.x, lo, hi, bins);
        count_one(local, v.y, lo, hi, bins);
        count_one(local, v.z, lo, hi, bins);
        count_one(local, v.w, lo, hi, bins);
    }
    if (g < n - 4 * n4) count_one(local, x[4 * n4 + g], lo, hi, bins);
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);
}

// counts (int32, `bins` elements) = the histogram of x over [lo, hi]. privatized: the shared-memory
// kernel on `blocks` blocks; otherwise the naive one.
void histogram(torch::Tensor x, torch::Tensor counts, double lo, double hi, bool privatized, int64_t blocks) {
    CHECK_INPUT(x); CHECK_INPUT(counts);
    TORCH_CHECK(x.scalar_type() == torch::kFloat, "histogram: x must be float32");
    TORCH_CHECK(counts.scalar_type() == torch::kInt, "histogram: counts must be int32 (torch.int32)");
    TORCH_CHECK(lo < hi, ("histogram: need lo < hi, got " + std::to_string(lo) + " and " + std::to_string(hi)).c_str());
    TORCH_CHECK(x.numel() < (1LL << 30), "histogram: the kernels index with int: at most 2^30 elements");
    int n = x.numel(), bins = counts.numel();
    TORCH_CHECK(bins >= 1 && bins <= 8192,
                ("histogram: 1 to 8192 bins (they must fit in shared memory), got " + std::to_string(bins)).c_str());
    counts.zero_();
    if (n == 0) return;
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    if (privatized) {
        TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0,
                    "histogram: x must be 16-byte aligned for float4 (a slice such as x[1:] is not): pass .clone()");
        TORCH_CHECK(blocks >= 1 && blocks <= (1 << 20), ("histogram: blocks must be 1..2^20, got " + std::to_string(blocks)).c_str());
        histogram_privatized_k<<<blocks, 256, bins * sizeof(int), stream>>>(x.data_ptr<float>(), counts.data_ptr<int>(),
                                                                            n, (float)lo, (float)hi, bins);
    } else {
        histogram_global_k<<<cdiv(n, 256), 256, 0, stream>>>(x.data_ptr<float>(), counts.data_ptr<int>(), n,
                                                             (float)lo, (float)hi, bins);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_HISTOGRAM_02_PRIVATIZED_CU
