#ifndef GPU_COURSE_REDUCE_03_TREE_CONFLICTS_CU
#define GPU_COURSE_REDUCE_03_TREE_CONFLICTS_CU
#include "../common.cuh"
#include "01_atomic.cu"   // RB
// rung 3: rung 2's tree with the work given to the FIRST RB/(2s) threads (thread t adds at index
// 2*s*t): whole warps now idle together, no divergence and no modulo. But the threads of a warp touch
// words 2s apart, so for s >= 1 several of them hit the same shared-memory bank: bank conflicts.
__global__ void sum_tree_conflicts_k(const float* __restrict__ x, float* __restrict__ partial, int n) {
    __shared__ float sh[RB];
    int t = threadIdx.x, i = blockIdx.x * RB + t;
    sh[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = 1; s < RB; s *= 2) {
        int k = 2 * s * t;
        if (k < RB) sh[k] += sh[k + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = sh[0];
}
#endif  // GPU_COURSE_REDUCE_03_TREE_CONFLICTS_CU
