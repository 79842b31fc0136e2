#ifndef GPU_COURSE_MATMUL_05_2D_BLOCKTILING_CU
#define GPU_COURSE_MATMUL_05_2D_BLOCKTILING_CU
#include "../common.cuh"
// rung 5: 2D blocktiling: each thread computes a TM x TN patch from registers. MINB: the blocks per SM
// asked of the compiler (__launch_bounds__' second argument; 1 in the ladder, 2 in rung 5's cfg 1).
template <int BM, int BN, int BK, int TM, int TN, int MINB>
__global__ void __launch_bounds__(BM * BN / (TM * TN), MINB)
mm_tile2d_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
            int h, int w, int k) {
    constexpr int NT = BM * BN / (TM * TN);
    __shared__ float ms[BM * BK];
    __shared__ float ns[BK * BN];
    const int t = threadIdx.x;
    const int tr = t / (BN / TN), tc = t % (BN / TN);    // this thread's patch in the block tile
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    float acc[TM][TN] = {{0.0f}};
    float rm[TM], rn[TN];
    for (int ph = 0; ph < k; ph += BK) {
        for (int e = t; e < BM * BK; e += NT) {          // NT threads load BM*BK elements
            int rr = e / BK, cc = e % BK;
            ms[e] = (r0 + rr < h && ph + cc < k) ? m[(r0 + rr) * k + ph + cc] : 0.0f;
        }
        for (int e = t; e < BK * BN; e += NT) {
            int rr = e / BN, cc = e % BN;
            ns[e] = (ph + rr < k && c0 + cc < w) ? n[(ph + rr) * w + c0 + cc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < BK; ++i) {
#pragma unroll
            for (int a = 0; a < TM; ++a) rm[a] = ms[(tr * TM + a) * BK + i];
#pragma unroll
            for (int b = 0; b < TN; ++b) rn[b] = ns[i * BN + tc * TN + b];
#pragma unroll
            for (int a = 0; a < TM; ++a)
#pragma unroll
                for (int b = 0; b < TN; ++b) acc[a][b] += rm[a] * rn[b];   // TM*TN FMAs, TM+TN loads
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < TM; ++a)
#pragma unroll
        for (int b = 0; b < TN; ++b) {
            int r = r0 + tr * TM + a, c = c0 + tc * TN + b;
            if (r < h && c < w) out[r * w + c] = acc[a][b];
        }
}
#endif  // GPU_COURSE_MATMUL_05_2D_BLOCKTILING_CU
