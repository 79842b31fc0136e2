#ifndef GPU_COURSE_MATMUL_WARP_TILE_CUH
#define GPU_COURSE_MATMUL_WARP_TILE_CUH
#include "../common.cuh"
// What rungs 8 to 10 do the same way once a phase's tiles are in shared memory, written once (as llm.c's common.h):
// a lane's products over the BK columns of the phase, and its stores of the finished warp tile. Both inline into
// the kernels that call them (rung 8's mm_warp_k, rung 10's mm_async_k), whose shapes they take as template
// arguments; acc is the lane's WMITER*TM x WNITER*TN accumulators, in registers.

// The products of one phase: for each i < BK, the lane's WMITER*TM values of m's transposed tile (ms: its first
// row at i = 0) and WNITER*TN of n's tile (nb: its first column), float4 shared loads, then all their products.
template <int BM, int BN, int BK, int WSM, int WSN, int WMITER, int WNITER, int TM, int TN>
__device__ __forceinline__ void warp_tile_products(float (&acc)[WMITER * TM][WNITER * TN], const float* ms,
                                                   const float* nb) {
#pragma unroll
    for (int i = 0; i < BK; ++i) {
        float rm[WMITER * TM], rn[WNITER * TN];
#pragma unroll
        for (int a = 0; a < WMITER; ++a)            // sub-tile a's TM rows: float4 shared loads
#pragma unroll
            for (int q = 0; q < TM; q += 4)
                *reinterpret_cast<float4*>(&rm[a * TM + q]) =
                    *reinterpret_cast<const float4*>(&ms[i * BM + a * WSM + q]);
#pragma unroll
        for (int b = 0; b < WNITER; ++b)
#pragma unroll
            for (int q = 0; q < TN; q += 4)
                *reinterpret_cast<float4*>(&rn[b * TN + q]) =
                    *reinterpret_cast<const float4*>(&nb[i * BN + b * WSN + q]);
#pragma unroll
        for (int a = 0; a < WMITER * TM; ++a)
#pragma unroll
            for (int b = 0; b < WNITER * TN; ++b) acc[a][b] += rm[a] * rn[b];
    }
}

// The stores of a lane's patches of out (h x w, row-major): the block tile at (r0, c0), its warp tile (wr, wc), the
// lane's patch (lr, lc). vec: rows of out are whole 16-byte quads, so an in-bounds quad is one float4 store.
template <int WM, int WN, int WSM, int WSN, int WMITER, int WNITER, int TM, int TN>
__device__ __forceinline__ void warp_tile_store(const float (&acc)[WMITER * TM][WNITER * TN], float* __restrict__ out,
                                                int r0, int c0, int wr, int wc, int lr, int lc, int h, int w,
                                                bool vec) {
#pragma unroll
    for (int a = 0; a < WMITER * TM; ++a) {
        const int r = r0 + wr * WM + a / TM * WSM + lr * TM + a % TM;
        if (r >= h) continue;
#pragma unroll
        for (int b = 0; b < WNITER * TN; b += 4) {
            const int c = c0 + wc * WN + b / TN * WSN + lc * TN + b % TN;
            const float* v = &acc[a][b];
            if (vec && c + 3 < w) {
                *reinterpret_cast<float4*>(&out[(size_t)r * w + c]) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (c + q < w) out[(size_t)r * w + c + q] = v[q];
            }
        }
    }
}
#endif  // GPU_COURSE_MATMUL_WARP_TILE_CUH
