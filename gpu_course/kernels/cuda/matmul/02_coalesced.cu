#ifndef GPU_COURSE_MATMUL_02_COALESCED_CU
#define GPU_COURSE_MATMUL_02_COALESCED_CU
#include "../common.cuh"
// rung 2: naive, threadIdx.x -> COLUMN (coalesced): GPU MODE lecture 5's matmul_k
__global__ void mm_cols_k(const float* __restrict__ m, const float* __restrict__ n,
                          float* __restrict__ out, int h, int w, int k) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;   // neighbours in a warp: neighbouring columns
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < h && c < w) {
        float p = 0.0f;
        for (int i = 0; i < k; ++i) p += m[r * k + i] * n[i * w + c];
        out[r * w + c] = p;
    }
}
#endif  // GPU_COURSE_MATMUL_02_COALESCED_CU
