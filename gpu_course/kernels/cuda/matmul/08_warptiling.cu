#ifndef GPU_COURSE_MATMUL_08_WARPTILING_CU
#define GPU_COURSE_MATMUL_08_WARPTILING_CU
#include "../common.cuh"
#include "06_vectorized.cu"   // load4
#include "warp_tile.cuh"      // warp_tile_products, warp_tile_store
// rung 8: warptiling: the block tile is cut into one tile per warp, and each warp's tile into sub-tiles
// that its 32 lanes cover together, a TM x TN patch per lane.
//
//   block tile BM x BN  =  (BM/WM) x (BN/WN) warp tiles of WM x WN, one per warp
//   warp tile  WM x WN  =  WMITER x WNITER sub-tiles of WSM x WSN, which the warp walks through
//   sub-tile  WSM x WSN =  (WSM/TM) x (WSN/TN) lanes (32 in all), each a TM x TN patch
//
// A thread owns WMITER x WNITER patches of TM x TN, spread over its warp's tile. Per step i of a phase it
// loads WMITER*TM values of m's tile and WNITER*TN of n's into registers and does all their products.
// Rung 8's shape (the dispatcher's case 8; rung 9's cfg 0): 128x128 blocks of 4 warps, warp tiles of
// 64x64, each lane 4x2 patches of 4x4, BK = 16.
// * Per step a thread does 16 + 8 shared loads for 128 multiply-adds (rung 7: 8 + 8 for 64), and a warp
//   reads WM + WN = 128 floats of shared memory for 64*64 multiply-adds (rung 7's warp: 16 + 128 floats
//   for 16*128). 64x64 is the largest warp tile whose 128 accumulators per thread fit the 255 registers
//   a thread may have (about 240 used, no spills: see notebook 04's -Xptxas -v).
// * With 4x4 patches the lanes of every float4 shared load read consecutive float4s: no bank conflicts
//   (rung 7's "quarters half a tile apart" is this sub-tile grid).
// * BK = 16: half of rung 7's barriers per multiply-add; the next tile is 8 float4s per thread.
// * Two blocks fit an H100 SM (2 x 128 threads x ~240 registers of 64K; 2 x 32 KB of shared memory): 8
//   warps per SM, each with 128 independent multiply-adds per step to hide latency. The 256-thread
//   variants (128x256 and 256x128 blocks of 8 such warps, one block per SM) are among rung 9's shapes.
//
// Loads, as in rung 7: float4s from global memory into registers one phase ahead, so that they travel
// while the block multiplies, then into shared memory: m's tile transposed (mst[i*BM + row], so that a
// lane's values for one i are contiguous), n's tile with float4 stores. m's values go down 4 columns of
// mst, one float each; the 32 lanes of a warp load 32 consecutive rows of m (not 4 float4s along one row),
// so each such store hits 32 different banks. Two shared buffers, as in rung 7: the next tile goes into
// the one nobody reads, and one barrier per phase is enough.
//
// Any sizes: load4 (rung 6, 06_vectorized.cu) gives zeros outside the matrices and scalar loads where a
// row is not 16-byte aligned; the stores are guarded. vec_m / vec_n: rows of m (resp. n and out) are a
// multiple of 4 floats long with 16-byte aligned bases, so in-bounds quads are single float4s.
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT>
__global__ void __launch_bounds__(NT)
mm_warp_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
          int h, int w, int k, bool vec_m, bool vec_n) {
    constexpr int WMITER = WM * WN / (32 * TM * TN * WNITER);  // sub-tiles down a warp tile
    constexpr int WSM = WM / WMITER, WSN = WN / WNITER;        // one sub-tile: what the 32 lanes cover
    constexpr int LM = BM * BK / (4 * NT), LN = BK * BN / (4 * NT);  // float4s per thread per tile
    static_assert(NT % 32 == 0 && (BM / WM) * (BN / WN) == NT / 32, "one warp tile per warp");
    static_assert(WMITER >= 1 && WMITER * WSM == WM && WNITER * WSN == WN && (WSM / TM) * (WSN / TN) == 32,
                  "the 32 lanes cover a sub-tile exactly");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BN % 4 == 0 && BM % 32 == 0,
                  "float4 granularity, and 32 rows of m per warp's store");
    static_assert(LM * 4 * NT == BM * BK && LN * 4 * NT == BK * BN, "each thread loads whole float4s");
    static_assert(2 * (BM + BN) * BK * 4 <= 48 * 1024, "static shared memory is at most 48 KB");
    __shared__ __align__(16) float mst[2 * BK * BM];       // m's tiles transposed: mst[s*BK*BM + i*BM + row]
    __shared__ __align__(16) float ns[2 * BK * BN];        // n's tiles: ns[s*BK*BN + i*BN + col]
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int wr = warp / (BN / WN), wc = warp % (BN / WN);     // this warp's tile in the block tile
    const int lr = lane / (WSN / TN), lc = lane % (WSN / TN);   // this lane's patch in a sub-tile
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    float acc[WMITER * TM][WNITER * TN] = {{0.0f}};
    float4 pm[LM], pn[LN];                              // the next tile, on its way from global memory

    auto fetch = [&](int ph) {                          // global -> registers: the tile of phase ph
#pragma unroll
        for (int j = 0; j < LM; ++j) {                  // float4 e of m's tile: row e % BM, column 4*(e / BM)
            const int e = t + j * NT;
            pm[j] = load4(m, r0 + e % BM, ph + e / BM * 4, h, k, k, vec_m);
        }
#pragma unroll
        for (int j = 0; j < LN; ++j) {                  // float4 e of n's tile: along its rows
            const int e = t + j * NT;
            pn[j] = load4(n, ph + e / (BN / 4), c0 + e % (BN / 4) * 4, k, w, w, vec_n);
        }
    };
    auto stash = [&](int s) {                           // registers -> shared buffer s
#pragma unroll
        for (int j = 0; j < LM; ++j) {                  // transposed: down 4 columns of mst
            const int e = t + j * NT, rr = e % BM, cc = e / BM * 4, base = s * BK * BM;
            mst[base + (cc + 0) * BM + rr] = pm[j].x;
            mst[base + (cc + 1) * BM + rr] = pm[j].y;
            mst[base + (cc + 2) * BM + rr] = pm[j].z;
            mst[base + (cc + 3) * BM + rr] = pm[j].w;
        }
#pragma unroll
        for (int j = 0; j < LN; ++j)                    // float4 e of n's tile is ns[4e .. 4e+3]: one store
            *reinterpret_cast<float4*>(&ns[s * BK * BN + (t + j * NT) * 4]) = pn[j];
    };

    fetch(0);
    for (int ph = 0, s = 0; ph < k; ph += BK, s ^= 1) {
        stash(s);                                       // free: its last readers (phase ph - 2*BK) have
        __syncthreads();                                // passed the previous barrier; now tile ph is in it
        if (ph + BK < k) fetch(ph + BK);                // the next tile's loads travel during the products
        const float* ms = mst + s * BK * BM + wr * WM + lr * TM;   // this lane's first row, at i = 0
        const float* nb = ns + s * BK * BN + wc * WN + lc * TN;    // and first column
        warp_tile_products<BM, BN, BK, WSM, WSN, WMITER, WNITER, TM, TN>(acc, ms, nb);   // warp_tile.cuh
    }

    warp_tile_store<WM, WN, WSM, WSN, WMITER, WNITER, TM, TN>(acc, out, r0, c0, wr, wc, lr, lc, h, w, vec_n);
}
#endif  // GPU_COURSE_MATMUL_08_WARPTILING_CU
