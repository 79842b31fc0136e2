#ifndef GPU_COURSE_REDUCE_02_TREE_DIVERGENT_CU
#define GPU_COURSE_REDUCE_02_TREE_DIVERGENT_CU
#include "../common.cuh"
#include "01_atomic.cu"   // RB
// rung 2: each block adds its RB elements as a tree in shared memory and writes the block's sum to
// partial[blockIdx.x]; the host runs the same kernel again on the partials until one value is left
// (no atomics). Interleaved addressing: at step s, the threads whose index is a multiple of 2s add
// the element s places to their right. Those threads are spread over every warp: each warp diverges
// at each step, and every thread computes a modulo.
__global__ void sum_tree_divergent_k(const float* __restrict__ x, float* __restrict__ partial, int n) {
    __shared__ float sh[RB];
    int t = threadIdx.x, i = blockIdx.x * RB + t;
    sh[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = 1; s < RB; s *= 2) {
        if (t % (2 * s) == 0) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = sh[0];
}
#endif  // GPU_COURSE_REDUCE_02_TREE_DIVERGENT_CU
