#ifndef GPU_COURSE_SCAN_01_KOGGE_STONE_CU
#define GPU_COURSE_SCAN_01_KOGGE_STONE_CU
#include "../common.cuh"
// Kogge-Stone inclusive scan (notebook 09) of up to 1024 elements in ONE block: at step s = 1, 2, 4,
// ... every element adds the one s places to its left. log2(n) steps, about n*log2(n) additions.
__global__ void scan_kogge_stone_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float sh[1024];
    int t = threadIdx.x;
    sh[t] = t < n ? x[t] : 0.0f;
    __syncthreads();
    for (int s = 1; s < blockDim.x; s *= 2) {
        float left = t >= s ? sh[t - s] : 0.0f;
        __syncthreads();   // every thread has read its left neighbour before any thread writes
        sh[t] += left;
        __syncthreads();
    }
    if (t < n) out[t] = sh[t];
}

void scan_kogge_stone(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat && out.numel() == x.numel(),
                "scan_kogge_stone: x and out must be float32 tensors of the same size");
    int n = x.numel();
    TORCH_CHECK(n <= 1024, ("scan_kogge_stone: one block scans at most 1024 elements, got " + std::to_string(n)).c_str());
    if (n == 0) return;
    scan_kogge_stone_k<<<1, cdiv(n, 32) * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_SCAN_01_KOGGE_STONE_CU
