#ifndef GPU_COURSE_REDUCE_07_FLOAT4_CU
#define GPU_COURSE_REDUCE_07_FLOAT4_CU
#include "../common.cuh"
#include "06_warp_shuffle.cu"   // block_sum
// rung 7: rung 6 reading 16 bytes per load instruction (float4), with U independent loads in flight
// per thread in each turn of the grid-stride loop (bytes in flight: notebook 03, section 6). And one
// launch instead of two: each block adds its sum to out with one atomicAdd, in whatever order the
// blocks finish (so the last bits of the result can change from run to run).
constexpr int SUM_U = 4;

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// This thread's share of x (16-byte aligned): float4s i, i + stride, ... of the grid-stride loop,
// U at a time; the n % 4 last elements go to the grid's first threads.
template <int U>
__device__ __forceinline__ float thread_sum4(const float* __restrict__ x, int n) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    int n4 = n / 4, stride = gridDim.x * blockDim.x, g = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    int i = g;
    for (; i < n4 - (U - 1) * stride; i += U * stride) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) v[u] = x4[i + u * stride];   // U loads issued before any add
#pragma unroll
        for (int u = 0; u < U; u++) s += sum4(v[u]);
    }
    for (; i < n4; i += stride) s += sum4(x4[i]);
    if (g < n - 4 * n4) s += x[4 * n4 + g];
    return s;
}

template <int U>
__global__ void sum_float4_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    float s = block_sum(thread_sum4<U>(x, n));
    if (threadIdx.x == 0) atomicAdd(out, s);
}
#endif  // GPU_COURSE_REDUCE_07_FLOAT4_CU
