#ifndef GPU_COURSE_MATMUL_01_NAIVE_CU
#define GPU_COURSE_MATMUL_01_NAIVE_CU
#include "../common.cuh"
// rung 1: naive, one thread per output, threadIdx.x -> ROW (uncoalesced)
__global__ void mm_rows_k(const float* __restrict__ m, const float* __restrict__ n,
                          float* __restrict__ out, int h, int w, int k) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;   // neighbours in a warp: different rows
    int c = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < h && c < w) {
        float p = 0.0f;
        for (int i = 0; i < k; ++i) p += m[r * k + i] * n[i * w + c];
        out[r * w + c] = p;
    }
}
#endif  // GPU_COURSE_MATMUL_01_NAIVE_CU
