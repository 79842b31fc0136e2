#ifndef GPU_COURSE_TENSOR_CORES_04_CP_ASYNC_CU
#define GPU_COURSE_TENSOR_CORES_04_CP_ASYNC_CU
#include "../common.cuh"
#include "03_mma_ldmatrix.cu"
// rung 4: rung 3's warps, fed by cp.async through a pipeline of STAGES shared buffers (notebook 04's rung 10 did
// the same for fp32 with __pipeline_memcpy_async; here the PTX itself, tc_ptx.cuh).
//
// Rung 3 brings each tile in through registers: a 16-byte load into a register, held for a phase, then a store
// into shared memory. cp.async copies global -> shared directly: no staging registers (which rung 3 needs 32 of),
// no store instructions, and STAGES - 1 tiles in flight while the warps multiply the current one. Each copy lands
// in its swizzled place (swz_at); a piece outside the matrices copies nothing and fills zeros (src-size 0).
// One barrier per phase: after cp.async.wait_group, a thread's own copies of tile kt have landed; the barrier makes
// everyone's visible and ends phase kt - 1 everywhere, whose buffer the copies of tile kt + STAGES - 1, issued
// right after it, overwrite. A batch is committed every phase, empty ones at the end too, so that "all but the
// newest STAGES - 2" always means "up to tile kt".
//
// With the registers freed, each warp takes a 64x64 tile of out (4 x 8 mma tiles: 128 fp32 accumulators per lane,
// twice rung 3's): per step along k it loads 4 A and 8 B fragments (8 ldmatrix.x4) for 32 mma.sync, a third
// fewer loads per mma than rung 3. Blocks are launched in groups of 8 rows of tiles (notebook 04's rung 10,
// Triton's GROUP_M) so that a wave of blocks shares more of its tiles of m and n in the L2 cache.
//
// Shapes (tc_async's cfg, tensor_cores.CONFIGS[4]): block tile, warp tile, stages; see the host function.
template <int BM, int BN, int WM, int WN, int STAGES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, 1)
mma_async_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out, int h, int w,
            int k, int group) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32, MI = WM / 16, NJ = WN / 8;
    constexpr int LM = BM * TC_BK / 8 / NT, LN = TC_BK * BN / 8 / NT;   // 16-byte copies per thread per tile
    constexpr int STAGE = BM * TC_BK + TC_BK * BN;                       // halves per stage
    static_assert(LM * 8 * NT == BM * TC_BK && LN * 8 * NT == TC_BK * BN && STAGES >= 2, "whole copies per thread");
    extern __shared__ __align__(128) __half smem4[];                     // STAGES x (m's tile, n's tile)
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int wm0 = warp / (BN / WN) * WM, wn0 = warp % (BN / WN) * WN;
    int bx = blockIdx.x, by = blockIdx.y;        // launch index -> tile: groups of `group` rows of tiles
    if (group > 0) {
        const int gx = gridDim.x, id = by * gx + bx, per = group * gx, g0 = id / per * group;
        const int gh = min(group, (int)gridDim.y - g0);
        by = g0 + (id % per) % gh;
        bx = (id % per) / gh;
    }
    const int r0 = by * BM, c0 = bx * BN;
    const int tiles = (k + TC_BK - 1) / TC_BK;
    float acc[MI][NJ][4] = {};

    // Thread t copies, of m's tile, piece t % 8 of rows t / 8 + j NT / 8 (j < LM), and of n's tile piece t % (BN / 8)
    // of rows t / (BN / 8) + j NT / (BN / 8): the same column and the same swizzle for all its rows, since the rows
    // it copies are 8 apart (NT / 8 and 8 NT / BN are multiples of 8). So the addresses are a few numbers per
    // thread plus constants, which keeps registers for the accumulators.
    static_assert((NT / 8) % 8 == 0 && (NT / (BN / 8)) % 8 == 0, "a thread's rows share their swizzle");
    const int mrow = t / 8, mcol = t % 8 * 8, nrow = t / (BN / 8), ncol = t % (BN / 8) * 8;
    const int mdst = mrow * TC_BK + swz(mrow, t % 8) * 8, ndst = nrow * BN + swz(nrow, t % (BN / 8)) * 8;
    const __half* msrc = m + (size_t)(r0 + mrow) * k + mcol;
    const __half* nsrc = n + (size_t)nrow * w + c0 + ncol;
    auto copy_tile = [&](int kt) {               // start the copies of tile kt (if any), close the batch
        if (kt < tiles) {
            const int ph = kt * TC_BK;
            __half* ms = smem4 + kt % STAGES * STAGE;
            __half* ns = ms + BM * TC_BK;
#pragma unroll
            for (int j = 0; j < LM; ++j) {
                const bool in = r0 + mrow + j * (NT / 8) < h && ph + mcol < k;
                cp_async16(ms + mdst + j * (NT / 8) * TC_BK, in ? msrc + (size_t)j * (NT / 8) * k + ph : m, in);
            }
#pragma unroll
            for (int j = 0; j < LN; ++j) {
                const int dr = ph + j * (NT / (BN / 8));   // rows below the thread's first one
                const bool in = nrow + dr < k && c0 + ncol < w;
                cp_async16(ns + ndst + j * (NT / (BN / 8)) * BN, in ? nsrc + (size_t)dr * w : n, in);
            }
        }
        cp_async_commit();
    };

#pragma unroll
    for (int kt = 0; kt < STAGES - 1; ++kt) copy_tile(kt);   // fill the pipeline
    for (int kt = 0; kt < tiles; ++kt) {
        cp_async_wait<STAGES - 2>();             // my copies of tile kt have landed ...
        __syncthreads();                         // ... and everyone's; phase kt - 1 is over everywhere
        copy_tile(kt + STAGES - 1);              // into the buffer phase kt - 1 used
        const __half* ms = smem4 + kt % STAGES * STAGE;
        warp_phase<MI, NJ, BN>(acc, ms, ms + BM * TC_BK, wm0, wn0, lane);
    }
    store_acc(acc, out, r0 + wm0, c0 + wn0, h, w, lane);
}

// The launch order tc_async uses: groups of 8 rows of tiles (0 would be row order).
constexpr int TC_GROUP = 8;
constexpr int ASYNC_CFGS = 5;

// Rung 4 in shape cfg (tensor_cores.CONFIGS[4] names them in this order) and launch order `group`. Each case: its
// dynamic shared memory, allowed once (above the default 48 KB), then the launch.
static void launch_async(const torch::Tensor& m, const torch::Tensor& n, torch::Tensor& out, int64_t cfg, int group) {
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    const __half* mp = half_ptr(m);
    const __half* np_ = half_ptr(n);
    __half* op = half_ptr_mut(out);
    static bool allowed[ASYNC_CFGS] = {};
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
    switch (cfg) {
        case 0: {   // 128x256 blocks of 8 warps of 64x64, 3 stages: 144 KB, one block per SM
            const int smem = 3 * (128 + 256) * TC_BK * 2;
            if (!allowed[0]) C10_CUDA_CHECK(cudaFuncSetAttribute(mma_async_k<128, 256, 64, 64, 3>, attr, smem));
            allowed[0] = true;
            mma_async_k<128, 256, 64, 64, 3><<<dim3(cdiv(w, 256), cdiv(h, 128)), 256, smem, stream>>>(mp, np_, op, h, w, k, group);
            break;
        }
        case 1: {   // 128x128 blocks of 4 warps of 64x64, 3 stages: 96 KB, two blocks per SM
            const int smem = 3 * (128 + 128) * TC_BK * 2;
            if (!allowed[1]) C10_CUDA_CHECK(cudaFuncSetAttribute(mma_async_k<128, 128, 64, 64, 3>, attr, smem));
            allowed[1] = true;
            mma_async_k<128, 128, 64, 64, 3><<<dim3(cdiv(w, 128), cdiv(h, 128)), 128, smem, stream>>>(mp, np_, op, h, w, k, group);
            break;
        }
        case 2: {   // 256x128 blocks of 8 warps of 64x64, 3 stages: 144 KB
            const int smem = 3 * (256 + 128) * TC_BK * 2;
            if (!allowed[2]) C10_CUDA_CHECK(cudaFuncSetAttribute(mma_async_k<256, 128, 64, 64, 3>, attr, smem));
            allowed[2] = true;
            mma_async_k<256, 128, 64, 64, 3><<<dim3(cdiv(w, 128), cdiv(h, 256)), 256, smem, stream>>>(mp, np_, op, h, w, k, group);
            break;
        }
        case 3: {   // cfg 0 with 4 stages: 192 KB
            const int smem = 4 * (128 + 256) * TC_BK * 2;
            if (!allowed[3]) C10_CUDA_CHECK(cudaFuncSetAttribute(mma_async_k<128, 256, 64, 64, 4>, attr, smem));
            allowed[3] = true;
            mma_async_k<128, 256, 64, 64, 4><<<dim3(cdiv(w, 256), cdiv(h, 128)), 256, smem, stream>>>(mp, np_, op, h, w, k, group);
            break;
        }
        default: {  // 128x128 blocks of 8 warps of 64x32 (rung 3's warps), 4 stages: 128 KB
            const int smem = 4 * (128 + 128) * TC_BK * 2;
            if (!allowed[4]) C10_CUDA_CHECK(cudaFuncSetAttribute(mma_async_k<128, 128, 64, 32, 4>, attr, smem));
            allowed[4] = true;
            mma_async_k<128, 128, 64, 32, 4><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256, smem, stream>>>(mp, np_, op, h, w, k, group);
            break;
        }
    }
}

torch::Tensor tc_async(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t cfg) {
    tc_check(m, n, out, "tc_async");
    tc_check_rows16(m, n, out, "tc_async");
    TORCH_CHECK(cfg >= 0 && cfg < ASYNC_CFGS, ("tc_async: cfg must be 0.." + std::to_string(ASYNC_CFGS - 1) +
                " (tensor_cores.CONFIGS[4]), got " + std::to_string(cfg)).c_str());
    launch_async(m, n, out, cfg, TC_GROUP);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// Rung 4 in shape cfg with launch order `group` (0: row order; tc_async uses TC_GROUP), for notebook 12's timing.
torch::Tensor tc_async_order(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t cfg, int64_t group) {
    tc_check(m, n, out, "tc_async_order");
    tc_check_rows16(m, n, out, "tc_async_order");
    TORCH_CHECK(cfg >= 0 && cfg < ASYNC_CFGS, ("tc_async_order: cfg must be 0.." + std::to_string(ASYNC_CFGS - 1) + ", got " + std::to_string(cfg)).c_str());
    TORCH_CHECK(group >= 0 && group <= 1024, ("tc_async_order: group must be 0..1024 rows of tiles, got " + std::to_string(group)).c_str());
    launch_async(m, n, out, cfg, (int)group);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_TENSOR_CORES_04_CP_ASYNC_CU
