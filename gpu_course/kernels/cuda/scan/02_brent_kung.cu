#ifndef GPU_COURSE_SCAN_02_BRENT_KUNG_CU
#define GPU_COURSE_SCAN_02_BRENT_KUNG_CU
#include "../common.cuh"
// Brent-Kung inclusive scan (notebook 09) of up to 2048 elements in ONE block, two per thread: an
// up-sweep builds a reduction tree in place, a down-sweep hands the partial sums down to the
// elements that still need them. About 2n additions instead of n*log2(n), in 2*log2(n) steps.
__global__ void scan_brent_kung_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float sh[2048];
    int t = threadIdx.x, m = 2 * blockDim.x;   // m, a power of two, elements in shared memory
    sh[t] = t < n ? x[t] : 0.0f;
    sh[t + blockDim.x] = t + blockDim.x < n ? x[t + blockDim.x] : 0.0f;
    for (int s = 1; s < m; s *= 2) {           // up-sweep: sh[k] becomes the sum of the 2s elements ending at k
        __syncthreads();
        int k = (t + 1) * 2 * s - 1;
        if (k < m) sh[k] += sh[k - s];
    }
    for (int s = m / 4; s > 0; s /= 2) {       // down-sweep: complete the elements between the tree's nodes
        __syncthreads();
        int k = (t + 1) * 2 * s - 1;
        if (k + s < m) sh[k + s] += sh[k];
    }
    __syncthreads();
    if (t < n) out[t] = sh[t];
    if (t + blockDim.x < n) out[t + blockDim.x] = sh[t + blockDim.x];
}

void scan_brent_kung(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat && out.numel() == x.numel(),
                "scan_brent_kung: x and out must be float32 tensors of the same size");
    int n = x.numel();
    TORCH_CHECK(n <= 2048, ("scan_brent_kung: one block scans at most 2048 elements, got " + std::to_string(n)).c_str());
    if (n == 0) return;
    int threads = 32;
    while (2 * threads < n) threads *= 2;      // a power of two, 2 * threads >= n
    scan_brent_kung_k<<<1, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_SCAN_02_BRENT_KUNG_CU
