#ifndef GPU_COURSE_REDUCE_08_LAST_BLOCK_CU
#define GPU_COURSE_REDUCE_08_LAST_BLOCK_CU
#include "../common.cuh"
#include "07_float4.cu"   // thread_sum4, and block_sum
// rung 8: deterministic, with no floating-point atomics. Each block writes its sum to
// partials[block]; the block that finishes LAST (counted with an integer atomic, exact in any order)
// adds all the partials in a fixed order. Same result on every run, and still one launch.
// One counter for every launch of the module: two rung-8 sums running at the same time (on two
// streams) would count into it together and corrupt each other. torch's reductions allocate their
// counter per call (as scan_lookback does with its ticket); this one keeps the kernel short.
__device__ unsigned int sum_blocks_done = 0;   // blocks finished; the last one resets it to 0

template <int U>
__global__ void sum_last_block_k(const float* __restrict__ x, float* __restrict__ partials,
                                 float* __restrict__ out, int n) {
    __shared__ bool last;
    float s = block_sum(thread_sum4<U>(x, n));
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = s;
        __threadfence();   // this block's partial is visible to all blocks before it is counted
        last = atomicAdd(&sum_blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();       // also separates the two calls of block_sum
    if (!last) return;
    __threadfence();       // the last block sees every partial counted before it
    float t = 0.0f;
    for (int b = threadIdx.x; b < gridDim.x; b += blockDim.x) t += __ldcg(&partials[b]);  // from L2
    t = block_sum(t);
    if (threadIdx.x == 0) {
        *out = t;
        sum_blocks_done = 0;   // ready for the next launch
    }
}
#endif  // GPU_COURSE_REDUCE_08_LAST_BLOCK_CU
