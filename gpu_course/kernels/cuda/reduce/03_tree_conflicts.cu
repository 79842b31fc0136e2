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

// A control for rung 3, not a rung: the same tree on a shared array padded by one word after every 32, so that
// word k sits at k + k / 32. Thread t's words, 2s apart, then fall in different banks of one warp's access (one
// word per bank, no conflicts); the threads, the levels and the barriers are rung 3's.
__global__ void sum_tree_padded_k(const float* __restrict__ x, float* __restrict__ partial, int n) {
    __shared__ float sh[RB + RB / 32];
    int t = threadIdx.x, i = blockIdx.x * RB + t;
    sh[t + (t >> 5)] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = 1; s < RB; s *= 2) {
        int k = 2 * s * t;
        if (k < RB) sh[k + (k >> 5)] += sh[k + s + ((k + s) >> 5)];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = sh[0];
}
#endif  // GPU_COURSE_REDUCE_03_TREE_CONFLICTS_CU
