#ifndef GPU_COURSE_MATMUL_04_1D_BLOCKTILING_CU
#define GPU_COURSE_MATMUL_04_1D_BLOCKTILING_CU
#include "../common.cuh"
// rung 4: 1D blocktiling: a BM x BN block tile, each thread computes TM outputs of one column
template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
mm_tile1d_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
            int h, int w, int k) {
    constexpr int NT = BM * BN / TM;                 // threads per block
    static_assert(BM * BK == NT && BN * BK == NT, "each thread loads one element of each tile");
    __shared__ float ms[BM * BK];
    __shared__ float ns[BK * BN];
    const int t = threadIdx.x;
    const int tc = t % BN, tr = t / BN;              // output column, and group of TM rows
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    const int ar = t / BK, ac = t % BK;              // the element of m's tile this thread loads
    const int br = t / BN, bc = t % BN;              // ... and of n's tile
    float acc[TM] = {0.0f};
    for (int ph = 0; ph < k; ph += BK) {
        ms[ar * BK + ac] = (r0 + ar < h && ph + ac < k) ? m[(r0 + ar) * k + ph + ac] : 0.0f;
        ns[br * BN + bc] = (ph + br < k && c0 + bc < w) ? n[(ph + br) * w + c0 + bc] : 0.0f;
        __syncthreads();
        for (int i = 0; i < BK; ++i) {
            float b = ns[i * BN + tc];               // one shared load reused TM times
#pragma unroll
            for (int j = 0; j < TM; ++j) acc[j] += ms[(tr * TM + j) * BK + i] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < TM; ++j) {
        int r = r0 + tr * TM + j, c = c0 + tc;
        if (r < h && c < w) out[r * w + c] = acc[j];
    }
}
#endif  // GPU_COURSE_MATMUL_04_1D_BLOCKTILING_CU
