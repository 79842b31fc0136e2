#ifndef GPU_COURSE_REDUCE_05_COARSENED_CU
#define GPU_COURSE_REDUCE_05_COARSENED_CU
#include "../common.cuh"
#include "01_atomic.cu"   // RB
// rung 5: thread coarsening. In rungs 2-4 a thread loads one element, then waits through eight
// levels of tree in a block that lives for one short pass, and x needs several passes. Here a grid
// sized to the machine (`blocks` from the host) walks x with a grid-stride loop: each thread first
// adds many elements in a register, then the block runs rung 4's tree once on RB partial sums and
// writes partial[blockIdx.x]. A second launch of ONE block sums the `blocks` partials.
__global__ void sum_coarsened_k(const float* __restrict__ x, float* __restrict__ partial, int n) {
    __shared__ float sh[RB];
    int t = threadIdx.x;
    float s = 0.0f;
    for (int i = blockIdx.x * RB + t; i < n; i += gridDim.x * RB) s += x[i];
    sh[t] = s;
    __syncthreads();
    for (int k = RB / 2; k > 0; k >>= 1) {
        if (t < k) sh[t] += sh[t + k];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = sh[0];
}
#endif  // GPU_COURSE_REDUCE_05_COARSENED_CU
