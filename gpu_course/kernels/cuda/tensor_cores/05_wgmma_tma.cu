#ifndef GPU_COURSE_TENSOR_CORES_05_WGMMA_TMA_CU
#define GPU_COURSE_TENSOR_CORES_05_WGMMA_TMA_CU
#include "../common.cuh"
#include "tc_common.cuh"
#include "tc_ptx.cuh"
// rung 5: Hopper (sm_90) only: wgmma.mma_async on tiles that TMA copies into shared memory, a pipeline of mbarriers,
// and warps that specialise: one warpgroup copies, two multiply.
//
// What changes from rung 4, one idea each:
// * wgmma: a *warpgroup* (4 warps, 128 threads) multiplies a 64 x N tile (here N = 256) by a 64-wide (k = 16) step
//   in one instruction, reading both operands straight from shared memory through 64-bit *descriptors* (address,
//   layout, swizzle): no ldmatrix, no fragments of m and n in registers, only the 64 x 256 fp32 accumulator (128
//   registers a thread). The instruction is asynchronous: the warpgroup issues it, may issue more, and waits for a
//   *group* of them later (wgmma.commit_group / wait_group).
// * TMA (the Tensor Memory Accelerator): one thread asks the hardware to copy a whole 2-D box of a matrix
//   (64 x 128 halves of m, 64 x 64 of n) into shared memory, described by a CUtensorMap that the host makes once
//   (cuTensorMapEncodeTiled): no address arithmetic, no per-thread copies, zeros outside the matrix, and the 128-byte
//   swizzle of rungs 3 and 4 applied by the copy engine (CU_TENSOR_MAP_SWIZZLE_128B) in the layout wgmma reads.
// * mbarriers: a copy signals its completion on a barrier in shared memory (it counts the bytes that arrived), so the
//   multiplying warps wait for exactly the stage they need, and they signal back on a second barrier when a stage
//   may be overwritten. full[s] / empty[s] for each of STAGES stages: a ring of buffers, as rung 4's, without
//   __syncthreads.
// * warp specialisation: warpgroup 0 only issues copies (one thread of it; setmaxnreg gives its registers away),
//   warpgroups 1 and 2 only multiply (setmaxnreg takes them), each 64 rows of the block's 128 x 256 tile.
//
// The descriptors (wg_desc): m's tile is K-major (rows of 64 halves = 128 bytes, 8-row groups 1024 bytes apart); n's
// is MN-major (its tile is k rows of 64 columns, so wgmma reads it transposed: imm-trans-b = 1), the 64-column boxes
// 8192 bytes apart (the "leading byte offset"), 8-row groups 1024 bytes apart (the "stride byte offset"). A 16-step
// of k is 32 bytes further into m's rows, 16 rows (2048 bytes) further down n's boxes.
//
// Needs: k and w multiples of 8 (TMA's rows are whole 16-byte pieces), an sm_90 GPU, and code built for sm_90a
// (the course's GPU build does that on an H100). Any h.
#include <cuda.h>

constexpr int WG_BM = 128, WG_BK = 64;     // block tile rows (2 consumer warpgroups of 64), k per stage
constexpr int WG_THREADS = 384;            // warpgroup 0: copies (TMA); warpgroups 1 and 2: wgmma

// A wgmma descriptor of a shared tile with the 128-byte swizzle: start address, leading and stride byte offsets
// (each >> 4), layout type 1 (SWIZZLE_128B) in bits 62-63. The tile must start on a 1024-byte boundary (the
// swizzle's period), or at a 16-step of k inside such a tile.
__device__ inline uint64_t wg_desc(const void* tile, uint32_t lbo, uint32_t sbo) {
    const uint64_t a = smem_addr(tile);
    return ((a & 0x3ffff) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

// mbarriers: a 64-bit word of shared memory that counts arrivals (and, with expect_tx, bytes of copies) until a
// phase completes; a waiter asks whether the phase of parity `parity` has completed.
__device__ inline void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ inline void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {   // arrive, and expect `bytes` of copies
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ inline void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_addr(bar)) : "memory");
}
__device__ inline void mbar_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
}

// TMA: copy the box at (x, y) (x the inner, contiguous coordinate) of the matrix that `map` describes into shared
// memory at dst; its bytes count towards `bar`'s expected transaction.
__device__ inline void tma_load_2d(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar))
                 : "memory");
}

__device__ inline void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ inline void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }
// Tell the compiler that an accumulator changes here (wgmma writes it asynchronously, behind its back).
template <int R>
__device__ inline void wg_touch(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// d (64 x N fp32, this warpgroup's) += m's 64 x 16 step (descriptor desc_m, K-major) n's 16 x N step (desc_n:
// MN-major with TRANS_B = 1, K-major with 0). scale-d = 1: accumulate.
template <int TRANS_B>
__device__ inline void wgmma_m64n256k16(float (&d)[128], uint64_t desc_m, uint64_t desc_n) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},"
                 " %128, %129, p, 1, 1, 0, %131;\n}\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                 "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                 "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                 "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                 "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                 "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                 "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                 "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(desc_m), "l"(desc_n), "r"(1), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ inline void wgmma_m64n128k16(float (&d)[64], uint64_t desc_m, uint64_t desc_n) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
                 " %64, %65, p, 1, 1, 0, %67;\n}\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(desc_m), "l"(desc_n), "r"(1), "n"(TRANS_B));
}

template <int BN, int TRANS_B>
__device__ inline void wgmma_step(float (&d)[BN / 2], uint64_t desc_m, uint64_t desc_n) {
    if constexpr (BN == 256) wgmma_m64n256k16<TRANS_B>(d, desc_m, desc_n);
    else wgmma_m64n128k16<TRANS_B>(d, desc_m, desc_n);
}

// N_KMAJOR: tm_n describes n transposed (w x k, made by the host), so that n's tiles are K-major like m's (one box
// of BN rows of 64 halves), read without transposing (TRANS_B = 0): what tc_wgmma's cfg 2 does, to compare.
template <int BN, int STAGES, bool N_KMAJOR>
__global__ void __launch_bounds__(WG_THREADS, 1)
wgmma_tma_k(const __grid_constant__ CUtensorMap tm_m, const __grid_constant__ CUtensorMap tm_n,
            __half* __restrict__ out, int h, int w, int k, int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_BYTES = WG_BM * WG_BK * 2, B_BYTES = WG_BK * BN * 2, BOX_N = WG_BK * 64 * 2;
    extern __shared__ __align__(1024) unsigned char smem5[];
    unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem5) + 1023) & ~uintptr_t(1023));
    unsigned char* as = base;                                  // STAGES tiles of m: 128 rows x 64 halves
    unsigned char* bs = base + STAGES * A_BYTES;               // STAGES tiles of n: BN / 64 boxes of 64 x 64
    uint64_t* full = reinterpret_cast<uint64_t*>(base + STAGES * (A_BYTES + B_BYTES));
    uint64_t* empty = full + STAGES;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    int bx = blockIdx.x, by = blockIdx.y;                      // groups of `group` rows of tiles, as rung 4
    if (group > 0) {
        const int gx = gridDim.x, id = by * gx + bx, per = group * gx, g0 = id / per * group;
        const int gh = min(group, (int)gridDim.y - g0);
        by = g0 + (id % per) % gh;
        bx = (id % per) / gh;
    }
    const int r0 = by * WG_BM, c0 = bx * BN;
    const int tiles = (k + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);                            // the producer's arrive (+ the copies' bytes)
            mbar_init(&empty[s], 2);                           // one arrive per consumer warpgroup
        }
        asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {                                             // the producer: copies only
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (t == 0) {
            for (int kt = 0; kt < tiles; ++kt) {
                const int s = kt % STAGES, use = kt / STAGES;
                if (use > 0) mbar_wait(&empty[s], (use - 1) % 2);   // both consumers are done with stage s
                mbar_expect_tx(&full[s], A_BYTES + B_BYTES);
                tma_load_2d(as + s * A_BYTES, &tm_m, kt * WG_BK, r0, &full[s]);
                if (N_KMAJOR)                                  // one box: BN rows of nt, 64 halves of k each
                    tma_load_2d(bs + s * B_BYTES, &tm_n, kt * WG_BK, c0, &full[s]);
                else                                           // BN / 64 boxes of 64 k rows x 64 columns
                    for (int j = 0; j < BN / 64; ++j)
                        tma_load_2d(bs + s * B_BYTES + j * BOX_N, &tm_n, c0 + j * 64, kt * WG_BK, &full[s]);
            }
        }
    } else {                                                   // the consumers: 64 rows of the tile each
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1;
        float d[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
        wg_touch(d);
        for (int kt = 0; kt < tiles; ++kt) {
            const int s = kt % STAGES;
            mbar_wait(&full[s], (kt / STAGES) % 2);            // stage s holds tile kt
            const unsigned char* a = as + s * A_BYTES + c * 64 * 128;   // this warpgroup's 64 rows of m's tile
            const unsigned char* b = bs + s * B_BYTES;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; ++kk)
                if (N_KMAJOR)
                    wgmma_step<BN, 0>(d, wg_desc(a + kk * 32, 16, 1024), wg_desc(b + kk * 32, 16, 1024));
                else
                    wgmma_step<BN, 1>(d, wg_desc(a + kk * 32, 16, 1024), wg_desc(b + kk * 16 * 128, BOX_N, 1024));
            wg_commit();
            wg_wait<1>();                                      // tile kt - 1's wgmmas are done reading ...
            if (kt > 0 && t == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);   // ... so its stage may be refilled
        }
        wg_wait<0>();
        wg_touch(d);
        // the accumulator layout: d[i] is row 16 (warp) + l / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (l % 4) + i % 2
        const int warp = t / 32, lane = t % 32;
#pragma unroll
        for (int i = 0; i < BN / 2; i += 2) {
            const int r = r0 + c * 64 + warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
            const int col = c0 + 8 * (i / 4) + 2 * (lane % 4);
            if (r < h && col < w)
                *reinterpret_cast<__half2*>(out + (size_t)r * w + col) = __floats2half2_rn(d[i], d[i + 1]);
        }
    }
#else
    __trap();   // built for a GPU without wgmma (sm_90a): tc_wgmma refuses to launch it there
#endif
}

// cuTensorMapEncodeTiled is a driver API function: found through the runtime (no -lcuda at link time).
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiled encode_tiled() {
    static EncodeTiled fn = nullptr;
    if (!fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q;
#if CUDART_VERSION >= 12050
        C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
#else
        C10_CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &q));
#endif
        TORCH_CHECK(q == cudaDriverEntryPointSuccess && p, "tc_wgmma: the CUDA driver has no cuTensorMapEncodeTiled "
                    "(TMA needs CUDA 12 or newer)");
        fn = reinterpret_cast<EncodeTiled>(p);
    }
    return fn;
}

// The TMA description of a rows x cols row-major fp16 matrix, copied in boxes of box_rows x box_cols (box_cols
// halves = 128 bytes: the 128-byte swizzle's width), zeros outside the matrix.
static CUtensorMap tensor_map(const torch::Tensor& t, int box_rows, int box_cols) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {(cuuint64_t)t.size(1), (cuuint64_t)t.size(0)};   // inner (contiguous) first
    const cuuint64_t strides[1] = {(cuuint64_t)t.size(1) * 2};                     // bytes between rows
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t elem[2] = {1, 1};
    const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(t.data_ptr()), dims,
                                      strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TORCH_CHECK(r == CUDA_SUCCESS, ("tc_wgmma: cuTensorMapEncodeTiled failed (CUresult " + std::to_string((int)r) + ") for a " +
                std::to_string(t.size(0)) + " x " + std::to_string(t.size(1)) + " matrix").c_str());
    return map;
}

constexpr int WGMMA_CFGS = 3;

torch::Tensor tc_wgmma(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t cfg) {
    tc_check(m, n, out, "tc_wgmma");
    tc_check_rows16(m, n, out, "tc_wgmma");
    TORCH_CHECK(cfg >= 0 && cfg < WGMMA_CFGS, ("tc_wgmma: cfg must be 0.." + std::to_string(WGMMA_CFGS - 1) +
                " (tensor_cores.CONFIGS[5]), got " + std::to_string(cfg)).c_str());
    int dev = 0, major = 0, minor = 0;
    C10_CUDA_CHECK(cudaGetDevice(&dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    TORCH_CHECK(major == 9 && minor == 0, ("tc_wgmma: wgmma and TMA exist on Hopper GPUs (sm_90) only; this GPU is sm_" +
                std::to_string(major) + std::to_string(minor)).c_str());
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    const CUtensorMap tm_m = tensor_map(m, WG_BM, WG_BK);
    torch::Tensor nt;                             // cfg 2: n transposed (w x k), K-major tiles
    if (cfg == 2) nt = n.t().contiguous();
    const CUtensorMap tm_n = cfg == 2 ? tensor_map(nt, 256, WG_BK) : tensor_map(n, WG_BK, 64);
    static bool allowed[WGMMA_CFGS] = {};
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
    switch (cfg) {
        case 0: {   // 128 x 256 tiles, 4 stages of 48 KB
            const int smem = 4 * (WG_BM + 256) * WG_BK * 2 + 1024 + 2 * 4 * 8;
            if (!allowed[0]) C10_CUDA_CHECK(cudaFuncSetAttribute(wgmma_tma_k<256, 4, false>, attr, smem));
            allowed[0] = true;
            wgmma_tma_k<256, 4, false><<<dim3(cdiv(w, 256), cdiv(h, WG_BM)), WG_THREADS, smem, stream>>>(
                tm_m, tm_n, half_ptr_mut(out), h, w, k, 8);
            break;
        }
        case 1: {   // 128 x 128 tiles, 5 stages of 32 KB
            const int smem = 5 * (WG_BM + 128) * WG_BK * 2 + 1024 + 2 * 5 * 8;
            if (!allowed[1]) C10_CUDA_CHECK(cudaFuncSetAttribute(wgmma_tma_k<128, 5, false>, attr, smem));
            allowed[1] = true;
            wgmma_tma_k<128, 5, false><<<dim3(cdiv(w, 128), cdiv(h, WG_BM)), WG_THREADS, smem, stream>>>(
                tm_m, tm_n, half_ptr_mut(out), h, w, k, 8);
            break;
        }
        default: {  // cfg 0's tiles with n transposed first (its time counted): both operands K-major
            const int smem = 4 * (WG_BM + 256) * WG_BK * 2 + 1024 + 2 * 4 * 8;
            if (!allowed[2]) C10_CUDA_CHECK(cudaFuncSetAttribute(wgmma_tma_k<256, 4, true>, attr, smem));
            allowed[2] = true;
            wgmma_tma_k<256, 4, true><<<dim3(cdiv(w, 256), cdiv(h, WG_BM)), WG_THREADS, smem, stream>>>(
                tm_m, tm_n, half_ptr_mut(out), h, w, k, 8);
            break;
        }
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_TENSOR_CORES_05_WGMMA_TMA_CU
