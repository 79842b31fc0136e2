#ifndef GPU_COURSE_MATMUL_07_CONFLICT_FREE_PREFETCH_CU
#define GPU_COURSE_MATMUL_07_CONFLICT_FREE_PREFETCH_CU
#include "../common.cuh"
#include "06_vectorized.cu"   // load4
// rung 7: rung 6 + conflict-free fragments, and the next tile loaded while this one is used
// Each thread still computes 8x8 outputs, but as four 4x4 quarters half a tile apart (rows tr*4 and
// 64 + tr*4, columns tc*4 and 64 + tc*4). A warp's float4 shared loads then read 16 consecutive
// float4s (no bank conflicts; rung 6's threads read 32 bytes apart). Two shared buffers: while the
// block multiplies one tile, each thread's next float4s of m and n are already on their way from
// global memory into registers, and one __syncthreads per tile is enough.
// load4 is rung 6's (06_vectorized.cu comes first).
template <int BM, int BN, int BK>
__global__ void __launch_bounds__(256, 2)
mm_pipe_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
          int h, int w, int k, bool vec_m, bool vec_n) {
    static_assert(BM == 128 && BN == 128 && BK == 8, "the thread layout assumes 128x128x8, 256 threads");
    constexpr int TILE = BK * BM;                    // floats per tile (BM == BN)
    __shared__ __align__(16) float mst[2 * TILE];     // m's tiles, transposed: mst[buf*TILE + i*BM + row]
    __shared__ __align__(16) float ns[2 * TILE];      // n's tiles: ns[buf*TILE + i*BN + col]
    const int t = threadIdx.x, tr = t / 16, tc = t % 16;
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    const int mr = t / 2, mc = (t % 2) * 4;           // the float4 of m's tile this thread loads
    const int nr = t / 32, nc = (t % 32) * 4;         // the float4 of n's tile this thread loads
    float acc[8][8] = {{0.0f}};
    float4 pm = load4(m, r0 + mr, mc, h, k, k, vec_m);
    float4 pn = load4(n, nr, c0 + nc, k, w, w, vec_n);
    int buf = 0;
    mst[(mc + 0) * BM + mr] = pm.x; mst[(mc + 1) * BM + mr] = pm.y;
    mst[(mc + 2) * BM + mr] = pm.z; mst[(mc + 3) * BM + mr] = pm.w;
    *reinterpret_cast<float4*>(&ns[nr * BN + nc]) = pn;
    __syncthreads();
    for (int ph = 0; ph < k; ph += BK) {
        const bool more = ph + BK < k;
        if (more) {                                   // issue the next tile's loads now ...
            pm = load4(m, r0 + mr, ph + BK + mc, h, k, k, vec_m);
            pn = load4(n, ph + BK + nr, c0 + nc, k, w, w, vec_n);
        }
        const float* ms = mst + buf * TILE;
        const float* nsb = ns + buf * TILE;
#pragma unroll
        for (int i = 0; i < BK; ++i) {                // ... and multiply this tile meanwhile
            float rm[8], rn[8];
            *reinterpret_cast<float4*>(&rm[0]) = *reinterpret_cast<const float4*>(&ms[i * BM + tr * 4]);
            *reinterpret_cast<float4*>(&rm[4]) = *reinterpret_cast<const float4*>(&ms[i * BM + 64 + tr * 4]);
            *reinterpret_cast<float4*>(&rn[0]) = *reinterpret_cast<const float4*>(&nsb[i * BN + tc * 4]);
            *reinterpret_cast<float4*>(&rn[4]) = *reinterpret_cast<const float4*>(&nsb[i * BN + 64 + tc * 4]);
#pragma unroll
            for (int a = 0; a < 8; ++a)
#pragma unroll
                for (int b = 0; b < 8; ++b) acc[a][b] += rm[a] * rn[b];
        }
        if (more) {                                   // the other buffer: nobody reads it now
            float* md = mst + (buf ^ 1) * TILE;
            md[(mc + 0) * BM + mr] = pm.x; md[(mc + 1) * BM + mr] = pm.y;
            md[(mc + 2) * BM + mr] = pm.z; md[(mc + 3) * BM + mr] = pm.w;
            *reinterpret_cast<float4*>(&ns[(buf ^ 1) * TILE + nr * BN + nc]) = pn;
        }
        __syncthreads();
        buf ^= 1;
    }
#pragma unroll
    for (int a = 0; a < 8; ++a) {
        int r = r0 + (a < 4 ? tr * 4 + a : 64 + tr * 4 + a - 4);
        if (r >= h) continue;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            int c = c0 + half * 64 + tc * 4;
            const float* v = &acc[a][half * 4];
            if (vec_n && c + 3 < w) {
                *reinterpret_cast<float4*>(&out[(size_t)r * w + c]) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
                for (int q = 0; q < 4; ++q)
                    if (c + q < w) out[(size_t)r * w + c + q] = v[q];
            }
        }
    }
}
#endif  // GPU_COURSE_MATMUL_07_CONFLICT_FREE_PREFETCH_CU
