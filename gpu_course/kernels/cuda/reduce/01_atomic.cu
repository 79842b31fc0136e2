#ifndef GPU_COURSE_REDUCE_01_ATOMIC_CU
#define GPU_COURSE_REDUCE_01_ATOMIC_CU
#include "../common.cuh"
// rung 1 (notebook 09): every thread adds its element to the result with atomicAdd. Correct, and
// n atomic additions to ONE address, which the memory system must perform one after another.
constexpr int RB = 256;   // threads per block of every rung

__global__ void sum_atomic_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
#endif  // GPU_COURSE_REDUCE_01_ATOMIC_CU
