#ifndef GPU_COURSE_MATMUL_10_ASYNC_PIPELINE_CU
#define GPU_COURSE_MATMUL_10_ASYNC_PIPELINE_CU
#include "../common.cuh"
#include "warp_tile.cuh"   // warp_tile_products, warp_tile_store (rung 8's)
#include "06_vectorized.cu"  // load4 (for the control at the end)
// rung 10: rung 8's warptiling, fed by asynchronous copies (cp.async) through a pipeline of STAGES tiles.
#include <cuda_pipeline.h>
//
// Rungs 7-9 bring the next tile in through registers: a float4 load into a register, then (a phase later)
// a store from that register into shared memory. The registers are held for a whole phase (rung 8: 32 of
// its ~240), the stores are instructions in the issue slots the multiply-adds need, and one tile ahead is
// all the latency two buffers can hide. sm_80 and later can copy global -> shared directly:
//
//   __pipeline_memcpy_async(dst_shared, src_global, 16, zfill)   // start a 16-byte copy (cp.async);
//                                                                // its last zfill bytes are zeros instead
//   __pipeline_commit()                                           // close this thread's batch of copies
//   __pipeline_wait_prior(N)                                      // wait until all but the newest N
//                                                                // batches have landed
//
// With STAGES buffers, phase kt computes on buffer kt % STAGES while the copies of tiles kt+1 ..
// kt+STAGES-1 are in flight. One barrier per phase: after it every thread's copies of tile kt are visible
// (each waited for its own first) and every thread has finished phase kt-1, whose buffer the copies of
// tile kt+STAGES-1, issued right after the barrier, overwrite. A batch is committed every phase, empty
// ones at the end too, so that "all but the newest STAGES-2" always means "up to tile kt".
//
// A copy moves bytes unchanged: it cannot transpose m's tile as rungs 6-9 do on the way through registers.
// So m is transposed once before the product (transpose_pad_k, a classic shared-memory transpose): mt is
// k x hp, hp = h rounded up to 4 with zero columns, and a tile of it is BK rows of BM consecutive floats,
// 16-byte quads both in global and in shared memory. That costs one read and one write of m (1/3 of the
// product's minimum traffic at 4096^3, under 2 % of its time; notebook 04 times it) and is counted in the
// rung's time. n is used as it is when its rows are whole 16-byte quads, else copied to padded rows first.
// Quads past the matrices' ends are zero-filled (zfill = 16: nothing is read).
//
// Shapes (matmul_async's cases, matmul_ladder.RUNG_CONFIGS[10]): 256x128x16 blocks of 8 warps with rung
// 8's 64x64 warp tiles and 5 stages (5 x 24 KB = 120 KB of dynamic shared memory, one block per SM), then
// the same with 2 stages (double buffering, for comparison), then rung 8's 128x128 blocks with 4 stages
// (64 KB: two blocks per SM). Dynamic shared memory above 48 KB must be allowed per kernel
// (cudaFuncSetAttribute); an H100 gives a block up to 227 KB.
//
// Launch order: blocks start roughly in the order of their index, x fastest, so in row order a wave of blocks
// (132 on an H100) covers a few whole rows of blocks of out: a few row strips of m, but every column strip of n.
// With group > 0 the block at index (x, y) computes another tile: the tiles are taken `group` rows of blocks at
// a time, down a column of the group before across it (Triton's GROUP_M, notebook 07), so that a wave reads
// fewer distinct strips of m and n and more of its reads hit the L2. group = 0 keeps row order.
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int STAGES, int MINB>
__global__ void __launch_bounds__(NT, MINB)
mm_async_k(const float* __restrict__ mt, const float* __restrict__ n, float* __restrict__ out,
           int h, int hp, int w, int wp, int k, int group) {
    constexpr int WMITER = WM * WN / (32 * TM * TN * WNITER);
    constexpr int WSM = WM / WMITER, WSN = WN / WNITER;
    constexpr int LM = BM * BK / (4 * NT), LN = BK * BN / (4 * NT);   // 16-byte copies per thread per tile
    static_assert(NT % 32 == 0 && (BM / WM) * (BN / WN) == NT / 32, "one warp tile per warp");
    static_assert(WMITER >= 1 && WMITER * WSM == WM && WNITER * WSN == WN && (WSM / TM) * (WSN / TN) == 32,
                  "the 32 lanes cover a sub-tile exactly");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BM % 4 == 0 && BN % 4 == 0, "float4 granularity");
    static_assert(LM * 4 * NT == BM * BK && LN * 4 * NT == BK * BN, "each thread copies whole quads");
    static_assert(STAGES >= 2, "at least double buffering");
    extern __shared__ __align__(16) float smem[];
    float* mst = smem;                            // STAGES tiles of mt: mst[s*BK*BM + i*BM + row]
    float* ns = smem + STAGES * BK * BM;          // STAGES tiles of n:  ns[s*BK*BN + i*BN + col]
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int wr = warp / (BN / WN), wc = warp % (BN / WN);
    const int lr = lane / (WSN / TN), lc = lane % (WSN / TN);
    int bx = blockIdx.x, by = blockIdx.y;         // launch index -> tile (see Launch order above)
    if (group > 0) {
        const int gx = gridDim.x, id = by * gx + bx, per = group * gx, g0 = id / per * group;
        const int gh = min(group, (int)gridDim.y - g0);   // the last group may have fewer rows
        by = g0 + (id % per) % gh; bx = (id % per) / gh;
    }
    const int r0 = by * BM, c0 = bx * BN;
    const int tiles = (k + BK - 1) / BK;
    float acc[WMITER * TM][WNITER * TN] = {{0.0f}};

    auto copy_tile = [&](int kt) {                // start the copies of tile kt (if any), close the batch
        if (kt < tiles) {
            const int ph = kt * BK, s = kt % STAGES;
#pragma unroll
            for (int j = 0; j < LM; ++j) {        // quad e of mt's tile: row i, columns c..c+3
                const int e = t + j * NT, i = e / (BM / 4), c = e % (BM / 4) * 4;
                const bool in = ph + i < k && r0 + c < hp;
                __pipeline_memcpy_async(&mst[s * BK * BM + i * BM + c], in ? mt + (size_t)(ph + i) * hp + r0 + c : mt,
                                        16, in ? 0 : 16);
            }
#pragma unroll
            for (int j = 0; j < LN; ++j) {
                const int e = t + j * NT, i = e / (BN / 4), c = e % (BN / 4) * 4;
                const bool in = ph + i < k && c0 + c < wp;
                __pipeline_memcpy_async(&ns[s * BK * BN + i * BN + c], in ? n + (size_t)(ph + i) * wp + c0 + c : n,
                                        16, in ? 0 : 16);
            }
        }
        __pipeline_commit();
    };

#pragma unroll
    for (int kt = 0; kt < STAGES - 1; ++kt) copy_tile(kt);   // fill the pipeline
    for (int kt = 0; kt < tiles; ++kt) {
        __pipeline_wait_prior(STAGES - 2);        // my copies of tile kt have landed ...
        __syncthreads();                          // ... and everyone's; phase kt-1 is over everywhere
        copy_tile(kt + STAGES - 1);               // into the buffer phase kt-1 used
        const float* ms = mst + kt % STAGES * BK * BM + wr * WM + lr * TM;
        const float* nb = ns + kt % STAGES * BK * BN + wc * WN + lc * TN;
        warp_tile_products<BM, BN, BK, WSM, WSN, WMITER, WNITER, TM, TN>(acc, ms, nb);   // rung 8's, unchanged
    }

    // rows of whole quads: out is 16-byte aligned (host)
    warp_tile_store<WM, WN, WSM, WSN, WMITER, WNITER, TM, TN>(acc, out, r0, c0, wr, wc, lr, lc, h, w, w % 4 == 0);
}

// mt[kk][r] = m[r][kk] for r < h, 0 for h <= r < hp: 32x32 tiles through shared memory, so that both the
// reads (along m's rows) and the writes (along mt's rows) are coalesced; the +1 column keeps the
// column-wise reads of the tile free of bank conflicts.
__global__ void transpose_pad_k(const float* __restrict__ m, float* __restrict__ mt, int h, int k, int hp) {
    __shared__ float tile[32][33];
    const int r0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int r = r0 + j, c = k0 + threadIdx.x;
        tile[j][threadIdx.x] = r < h && c < k ? m[(size_t)r * k + c] : 0.0f;
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int kk = k0 + j, r = r0 + threadIdx.x;
        if (kk < k && r < hp) mt[(size_t)kk * hp + r] = tile[threadIdx.x][j];
    }
}

// m (h x k) as mt (k x hp): the layout rung 10's copies need (notebook 04 times it alone).
torch::Tensor transposed_padded(torch::Tensor m) {
    CHECK_INPUT(m);
    TORCH_CHECK(m.dim() == 2 && m.scalar_type() == torch::kFloat, "transposed_padded: m must be a 2-D float32 matrix");
    const int h = m.size(0), k = m.size(1), hp = cdiv(h, 4) * 4;
    auto mt = torch::empty({k, hp}, m.options());
    if (k > 0 && hp > 0)
        transpose_pad_k<<<dim3(cdiv(hp, 32), cdiv(k, 32)), dim3(32, 8), 0, at::cuda::getCurrentCUDAStream()>>>(
                m.data_ptr<float>(), mt.data_ptr<float>(), h, k, hp);
    return mt;
}

// Rung 10's compiled shapes, by cfg (matmul_ladder.RUNG_CONFIGS[10] names them in this order), and the launch
// order matmul_rung uses.
static const int RUNG10_CFGS = 3;
static const int RUNG10_GROUP = 8;

torch::Tensor matmul_async(const torch::Tensor& m, const torch::Tensor& n, torch::Tensor& out, int64_t cfg,
                           int64_t group) {
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    auto mt = transposed_padded(m);
    const bool n_quads = w % 4 == 0 && ((uintptr_t)n.data_ptr<float>()) % 16 == 0;
    auto np = n_quads ? n : torch::zeros({k, cdiv(w, 4) * 4}, n.options());
    if (!n_quads) np.narrow(1, 0, w).copy_(n);
    // the kernel stores float4s when w % 4 == 0: an out that starts off a 16-byte boundary gets an aligned copy
    const bool out_ok = w % 4 != 0 || ((uintptr_t)out.data_ptr<float>()) % 16 == 0;
    auto o = out_ok ? out : torch::empty_like(out);
    const float* mp = mt.data_ptr<float>();
    const float* np_ = np.data_ptr<float>();
    float* op = o.data_ptr<float>();
    const int hp = mt.size(1), wp = np.size(1), g = (int)group;
    // Each case: its dynamic shared memory, allowed once above the default 48 KB, then the launch.
    static bool allowed[RUNG10_CFGS] = {};
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    switch (cfg) {
        case 0: {   // 256x128x16, warp tiles 64x64, 4x2 patches of 4x4, 256 threads, 5 stages (120 KB)
            const int smem = 5 * 16 * (256 + 128) * sizeof(float);
            if (!allowed[0]) C10_CUDA_CHECK(cudaFuncSetAttribute(mm_async_k<256, 128, 16, 64, 64, 2, 4, 4, 256, 5, 1>,
                                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            allowed[0] = true;
            mm_async_k<256, 128, 16, 64, 64, 2, 4, 4, 256, 5, 1><<<dim3(cdiv(w, 128), cdiv(h, 256)), 256, smem, stream>>>(
                mp, np_, op, h, hp, w, wp, k, g);
            break;
        }
        case 1: {   // the same with 2 stages: double buffering (48 KB, the default limit)
            const int smem = 2 * 16 * (256 + 128) * sizeof(float);
            mm_async_k<256, 128, 16, 64, 64, 2, 4, 4, 256, 2, 1><<<dim3(cdiv(w, 128), cdiv(h, 256)), 256, smem, stream>>>(
                mp, np_, op, h, hp, w, wp, k, g);
            break;
        }
        default: {  // rung 8's 128x128x16 blocks of 128 threads, 4 stages (64 KB: two blocks per SM)
            const int smem = 4 * 16 * (128 + 128) * sizeof(float);
            if (!allowed[2]) C10_CUDA_CHECK(cudaFuncSetAttribute(mm_async_k<128, 128, 16, 64, 64, 2, 4, 4, 128, 4, 2>,
                                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            allowed[2] = true;
            mm_async_k<128, 128, 16, 64, 64, 2, 4, 4, 128, 4, 2><<<dim3(cdiv(w, 128), cdiv(h, 128)), 128, smem, stream>>>(
                mp, np_, op, h, hp, w, wp, k, g);
            break;
        }
    }
    if (!out_ok) out.copy_(o);
    return out;
}
// The control (notebook 04): rung 9's cfg 4 shape (256x128x16, 8 warps of 64x64) fed the same mt as rung 10,
// but through registers and two shared buffers, as rung 8 does: float4 loads of mt one phase ahead, then
// float4 stores into shared memory (contiguous now: mt's tile is already transposed). It differs from rung 10
// in the copies alone (and the pipeline's depth), from rung 9's cfg 4 in reading mt instead of m.
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT>
__global__ void __launch_bounds__(NT)
mm_warp_mt_k(const float* __restrict__ mt, const float* __restrict__ n, float* __restrict__ out,
             int h, int hp, int w, int k, bool vec_n) {
    constexpr int WMITER = WM * WN / (32 * TM * TN * WNITER);
    constexpr int WSM = WM / WMITER, WSN = WN / WNITER;
    constexpr int LM = BM * BK / (4 * NT), LN = BK * BN / (4 * NT);
    static_assert(NT % 32 == 0 && (BM / WM) * (BN / WN) == NT / 32, "one warp tile per warp");
    static_assert(WMITER >= 1 && WMITER * WSM == WM && WNITER * WSN == WN && (WSM / TM) * (WSN / TN) == 32,
                  "the 32 lanes cover a sub-tile exactly");
    static_assert(LM * 4 * NT == BM * BK && LN * 4 * NT == BK * BN, "each thread loads whole float4s");
    static_assert(2 * (BM + BN) * BK * 4 <= 48 * 1024, "static shared memory is at most 48 KB");
    __shared__ __align__(16) float mst[2 * BK * BM];       // mt's tiles: mst[s*BK*BM + i*BM + row]
    __shared__ __align__(16) float ns[2 * BK * BN];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int wr = warp / (BN / WN), wc = warp % (BN / WN);
    const int lr = lane / (WSN / TN), lc = lane % (WSN / TN);
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    float acc[WMITER * TM][WNITER * TN] = {{0.0f}};
    float4 pm[LM], pn[LN];

    auto fetch = [&](int ph) {                          // float4 e of a tile: row e / (B/4), columns 4*(e % (B/4))
#pragma unroll
        for (int j = 0; j < LM; ++j) {                  // mt is k x hp, hp a multiple of 4: whole float4s
            const int e = t + j * NT;
            pm[j] = load4(mt, ph + e / (BM / 4), r0 + e % (BM / 4) * 4, k, hp, hp, true);
        }
#pragma unroll
        for (int j = 0; j < LN; ++j) {
            const int e = t + j * NT;
            pn[j] = load4(n, ph + e / (BN / 4), c0 + e % (BN / 4) * 4, k, w, w, vec_n);
        }
    };
    auto stash = [&](int s) {                           // both tiles: float4 e is floats 4e .. 4e+3
#pragma unroll
        for (int j = 0; j < LM; ++j) *reinterpret_cast<float4*>(&mst[s * BK * BM + (t + j * NT) * 4]) = pm[j];
#pragma unroll
        for (int j = 0; j < LN; ++j) *reinterpret_cast<float4*>(&ns[s * BK * BN + (t + j * NT) * 4]) = pn[j];
    };

    fetch(0);
    for (int ph = 0, s = 0; ph < k; ph += BK, s ^= 1) {
        stash(s);
        __syncthreads();
        if (ph + BK < k) fetch(ph + BK);
        const float* ms = mst + s * BK * BM + wr * WM + lr * TM;
        const float* nb = ns + s * BK * BN + wc * WN + lc * TN;
        warp_tile_products<BM, BN, BK, WSM, WSN, WMITER, WNITER, TM, TN>(acc, ms, nb);
    }
    warp_tile_store<WM, WN, WSM, WSN, WMITER, WNITER, TM, TN>(acc, out, r0, c0, wr, wc, lr, lc, h, w, vec_n);
}

// The control's host side: transpose m as rung 10 does (counted in its time), then one launch. vec_n: n's and
// out's rows are whole 16-byte aligned quads (the caller checks the bases).
torch::Tensor matmul_warp_mt(const torch::Tensor& m, const torch::Tensor& n, torch::Tensor& out, bool aligned) {
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    auto mt = transposed_padded(m);
    mm_warp_mt_k<256, 128, 16, 64, 64, 2, 4, 4, 256><<<dim3(cdiv(w, 128), cdiv(h, 256)), 256, 0,
                                                      at::cuda::getCurrentCUDAStream()>>>(
        mt.data_ptr<float>(), n.data_ptr<float>(), out.data_ptr<float>(), h, (int)mt.size(1), w, k,
        aligned && w % 4 == 0);
    return out;
}
#endif  // GPU_COURSE_MATMUL_10_ASYNC_PIPELINE_CU
