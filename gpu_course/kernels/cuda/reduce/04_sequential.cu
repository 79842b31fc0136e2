#ifndef GPU_COURSE_REDUCE_04_SEQUENTIAL_CU
#define GPU_COURSE_REDUCE_04_SEQUENTIAL_CU
#include "../common.cuh"
#include "01_atomic.cu"   // RB
// rung 4: sequential addressing: at step s (RB/2, RB/4, ... 1) the first s threads add the element
// s places to their right. The active threads are contiguous (a warp is all busy or all idle until
// s < 32) and read consecutive words (no bank conflicts). Partials and passes as in rung 2.
__global__ void sum_sequential_k(const float* __restrict__ x, float* __restrict__ partial, int n) {
    __shared__ float sh[RB];
    int t = threadIdx.x, i = blockIdx.x * RB + t;
    sh[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = RB / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = sh[0];
}
#endif  // GPU_COURSE_REDUCE_04_SEQUENTIAL_CU
