#ifndef GPU_COURSE_TENSOR_CORES_02_WMMA_SHARED_CU
#define GPU_COURSE_TENSOR_CORES_02_WMMA_SHARED_CU
#include "../common.cuh"
#include "tc_common.cuh"
// rung 2: WMMA fed from shared memory. A block of 8 warps computes a 128x128 tile of out; each warp a 64x32
// part of it, as 4 x 2 accumulator fragments of 16x16.
//
// Per phase the block copies a 128x32 tile of m and a 32x128 tile of n into shared memory, once, and its warps
// load their fragments from there: each element of m's tile serves the 4 warps of its row of warps, each of n's the
// 2 warps of its column, where rung 1 read every tile from global memory for each warp. As in notebook 04's rungs 7-8, the next phase's tiles travel from global
// memory in registers while the warps multiply (16-byte loads of 8 halves), then go into a second shared buffer:
// one barrier per phase.
//
// Any sizes: the tiles are zero-filled outside the matrices (so the WMMA loads, which always read whole 16x16
// tiles, read zeros there), the stores are guarded. Rows of shared tiles are padded by 8 halves (16 bytes), so
// that the 8 rows a WMMA load reads at once start in different banks.
constexpr int W2_BM = 128, W2_BN = 128, W2_BK = 32, W2_NT = 256;   // block tile, threads (8 warps: 2 x 4)
constexpr int W2_WM = 64, W2_WN = 32;                               // warp tile: 4 x 2 fragments of 16x16
constexpr int W2_PAD = 8;                                           // halves of padding per shared row

union Halves8 {          // 16 bytes: one load or store instruction, or 8 halves
    uint4 v;
    __half e[8];
};

// 8 consecutive halves of row `row` of a rows x cols matrix (leading dimension ld) from column `col`: one 16-byte
// load where the row holds them all and `vec` (rows of whole 16-byte pieces, aligned base), else one by one,
// zeros outside the matrix.
__device__ inline uint4 load8(const __half* __restrict__ p, int row, int col, int rows, int cols, int ld, bool vec) {
    Halves8 x;
    if (vec && row < rows && col + 8 <= cols) {
        x.v = *reinterpret_cast<const uint4*>(p + (size_t)row * ld + col);
    } else {
        for (int q = 0; q < 8; ++q)
            x.e[q] = row < rows && col + q < cols ? p[(size_t)row * ld + col + q] : __float2half(0.0f);
    }
    return x.v;
}

__global__ void __launch_bounds__(W2_NT)
wmma_shared_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out,
              int h, int w, int k, bool vec_m, bool vec_n) {
    using namespace nvcuda;
    constexpr int LM = W2_BM * W2_BK / 8 / W2_NT, LN = W2_BK * W2_BN / 8 / W2_NT;   // 16-byte loads per thread
    __shared__ __align__(32) __half ms[2][W2_BM][W2_BK + W2_PAD];   // two buffers of m's tile
    __shared__ __align__(32) __half ns[2][W2_BK][W2_BN + W2_PAD];   // and of n's
    __shared__ __align__(32) float stage[W2_NT / 32][16 * 16];       // each warp's accumulator, on its way to fp16
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int wr = warp / (W2_BN / W2_WN), wc = warp % (W2_BN / W2_WN);   // this warp's tile in the block tile
    const int r0 = blockIdx.y * W2_BM, c0 = blockIdx.x * W2_BN;
    uint4 pm[LM], pn[LN];                                            // the next phase's tiles, in registers

    auto fetch = [&](int ph) {
        for (int j = 0; j < LM; ++j) {               // piece e of m's tile: row e / 4, columns 8 * (e % 4) ...
            const int e = t + j * W2_NT;
            pm[j] = load8(m, r0 + e / (W2_BK / 8), ph + e % (W2_BK / 8) * 8, h, k, k, vec_m);
        }
        for (int j = 0; j < LN; ++j) {               // piece e of n's tile: row e / 16, columns 8 * (e % 16) ...
            const int e = t + j * W2_NT;
            pn[j] = load8(n, ph + e / (W2_BN / 8), c0 + e % (W2_BN / 8) * 8, k, w, w, vec_n);
        }
    };
    auto store = [&](int s) {
        for (int j = 0; j < LM; ++j) {
            const int e = t + j * W2_NT;
            *reinterpret_cast<uint4*>(&ms[s][e / (W2_BK / 8)][e % (W2_BK / 8) * 8]) = pm[j];
        }
        for (int j = 0; j < LN; ++j) {
            const int e = t + j * W2_NT;
            *reinterpret_cast<uint4*>(&ns[s][e / (W2_BN / 8)][e % (W2_BN / 8) * 8]) = pn[j];
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[W2_WM / 16][W2_WN / 16];
    for (int i = 0; i < W2_WM / 16; ++i)
        for (int j = 0; j < W2_WN / 16; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    const int tiles = (k + W2_BK - 1) / W2_BK;
    fetch(0);
    store(0);
    __syncthreads();
    for (int kt = 0; kt < tiles; ++kt) {
        const int s = kt % 2;
        if (kt + 1 < tiles) fetch((kt + 1) * W2_BK);   // on its way while the warps multiply
        for (int kk = 0; kk < W2_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[W2_WM / 16];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[W2_WN / 16];
            for (int i = 0; i < W2_WM / 16; ++i)
                wmma::load_matrix_sync(a[i], &ms[s][wr * W2_WM + i * 16][kk], W2_BK + W2_PAD);
            for (int j = 0; j < W2_WN / 16; ++j)
                wmma::load_matrix_sync(b[j], &ns[s][kk][wc * W2_WN + j * 16], W2_BN + W2_PAD);
            for (int i = 0; i < W2_WM / 16; ++i)
                for (int j = 0; j < W2_WN / 16; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        if (kt + 1 < tiles) store(1 - s);               // the buffer nobody reads in this phase
        __syncthreads();
    }

    for (int i = 0; i < W2_WM / 16; ++i)
        for (int j = 0; j < W2_WN / 16; ++j) {
            wmma::store_matrix_sync(stage[warp], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const int rt = r0 + wr * W2_WM + i * 16, ct = c0 + wc * W2_WN + j * 16;
            for (int e = lane; e < 16 * 16; e += 32) {
                const int r = rt + e / 16, c = ct + e % 16;
                if (r < h && c < w) out[(size_t)r * w + c] = __float2half(stage[warp][e]);
            }
            __syncwarp();                                // read before the next fragment overwrites it
        }
}

torch::Tensor tc_wmma_shared(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    tc_check(m, n, out, "tc_wmma_shared");
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    const bool vec_m = k % 8 == 0 && (uintptr_t)m.data_ptr() % 16 == 0;
    const bool vec_n = w % 8 == 0 && (uintptr_t)n.data_ptr() % 16 == 0;
    wmma_shared_k<<<dim3(cdiv(w, W2_BN), cdiv(h, W2_BM)), W2_NT, 0, at::cuda::getCurrentCUDAStream()>>>(
            half_ptr(m), half_ptr(n), half_ptr_mut(out), h, w, k, vec_m, vec_n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_TENSOR_CORES_02_WMMA_SHARED_CU
