#ifndef GPU_COURSE_REDUCE_06_WARP_SHUFFLE_CU
#define GPU_COURSE_REDUCE_06_WARP_SHUFFLE_CU
#include "../common.cuh"
// rung 6: rung 5 with warp shuffles. The last five levels of the tree happen inside one warp, where
// __shfl_down_sync reads another lane's register directly: no shared memory, no __syncthreads().
// Shared memory is left only to combine the block's warps.
__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);   // lane i adds lane i + offset's value
    return v;                                            // lane 0 holds the warp's sum
}

// The sum of v over the block (blockDim.x a multiple of 32), valid in thread 0. It reuses its
// shared array, so a kernel that calls it twice needs a __syncthreads() between the calls.
__device__ float block_sum(float v) {
    __shared__ float warp_sums[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    v = 0.0f;
    if (warp == 0) v = warp_sum(lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f);
    return v;
}

// Partials and the second launch as in rung 5.
__global__ void sum_shuffle_k(const float* __restrict__ x, float* __restrict__ partial, int n) {
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}
#endif  // GPU_COURSE_REDUCE_06_WARP_SHUFFLE_CU
