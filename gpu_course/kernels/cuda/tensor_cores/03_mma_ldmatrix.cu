#ifndef GPU_COURSE_TENSOR_CORES_03_MMA_LDMATRIX_CU
#define GPU_COURSE_TENSOR_CORES_03_MMA_LDMATRIX_CU
#include "../common.cuh"
#include "tc_common.cuh"
#include "tc_ptx.cuh"
// rung 3: the tensor cores' own instruction, mma.sync.m16n8k16 (inline PTX, tc_ptx.cuh), fed by ldmatrix from
// swizzled shared tiles.
//
// WMMA hides two things that this rung does itself. (1) Which lane holds which element: mma.sync's fragments
// have the layouts the PTX ISA documents (mma_a_rc, mma_b_rc, mma_c_rc in tc_common.cuh, drawn in notebook 12), so
// the kernel knows where its results are and writes them to out directly, as pairs of halves, without a trip
// through shared memory. (2) How fragments get from shared memory into registers: one ldmatrix.x4 gives each lane
// its four registers of an A fragment (16x16), or of two B fragments (16x8 each, with .trans since n's tile is
// stored k-major rows of n).
//
// The block: 128x128 tiles of out, 8 warps (2 x 4), each warp 64x32 of it = 4 x 4 mma tiles of 16x8, so per step
// of 16 along k a warp loads 4 A fragments and 4 B fragments (6 ldmatrix.x4) for 16 mma.sync. Phases of BK = 64:
// a tile row of m is 64 halves = 128 bytes, 8 pieces of 16 bytes. ldmatrix reads the same piece of 8 consecutive
// rows at once; unswizzled, those 8 rows start 128 bytes apart, in the same 4 banks: an 8-way bank conflict. The
// swizzle swz(row, piece) = piece ^ (row % 8) (tc_common.cuh) spreads them over all 32 banks. n's tile (rows of
// 128 halves) is swizzled the same way.
//
// Two kinds of double buffering: the next phase's tiles travel from global memory in registers while the warps
// multiply (as rung 2), into a second pair of shared buffers; and within a phase, the fragments of step kk + 1 are
// loaded from shared memory (into a second set of registers) while step kk's mma.sync run.
//
// Needs: k and w multiples of 8 (16-byte pieces; the host function checks), any h.
constexpr int TC_BK = 64;   // rungs 3 to 5: a phase is 64 halves of k (128-byte tile rows)

// One warp's fragments of one 16-step of k: A for MI tiles of 16 rows, B for NJ tiles of 8 columns.
template <int MI, int NJ>
struct Frags {
    uint32_t a[MI][4];
    uint32_t b[NJ][2];
};

// Load step kk's fragments of the warp's WM x WN tile (top left at row wm0 of ms, column wn0 of ns) from the
// swizzled shared tiles ms (BM x 64) and ns (64 x BN). Lane l gives ldmatrix the address of row l % 16 of the A
// tile, halves 8 (l / 16) ...; and of k row l % 16 of two B tiles, columns 8 (l / 16) ... Those rows are l % 8
// modulo 8 (wm0, i * 16 and kk * 16 are multiples of 8), so the swizzle XORs every piece index with l % 8.
template <int MI, int NJ, int BN>
__device__ inline void load_frags(Frags<MI, NJ>& f, const __half* ms, const __half* ns, int wm0, int wn0, int kk,
                                  int lane) {
#ifdef TC_NO_SWIZZLE
    const int piece = kk * 2 + lane / 16;                    // every piece in place (tc_common.cuh's swz)
#else
    const int piece = (kk * 2 + lane / 16) ^ (lane % 8);     // swz(row, kk * 2 + lane / 16): row % 8 is lane % 8
#endif
    const __half* a = ms + (wm0 + lane % 16) * TC_BK + piece * 8;
#pragma unroll
    for (int i = 0; i < MI; ++i) ldmatrix_x4(f.a[i], a + i * 16 * TC_BK);
    const __half* b = ns + (kk * 16 + lane % 16) * BN;
#pragma unroll
    for (int j = 0; j < NJ; j += 2) {            // two 16x8 B tiles per ldmatrix
        uint32_t r[4];
        ldmatrix_x4_trans(r, b + swz(lane % 8, (wn0 + j * 8) / 8 + lane / 16) * 8);
        f.b[j][0] = r[0], f.b[j][1] = r[1], f.b[j + 1][0] = r[2], f.b[j + 1][1] = r[3];
    }
}

// One phase of a warp: 4 steps of 16 along k, each loading the next step's fragments before its mma.sync.
template <int MI, int NJ, int BN>
__device__ inline void warp_phase(float (&acc)[MI][NJ][4], const __half* ms, const __half* ns, int wm0, int wn0,
                                  int lane) {
    Frags<MI, NJ> f[2];
    load_frags<MI, NJ, BN>(f[0], ms, ns, wm0, wn0, 0, lane);
#pragma unroll
    for (int kk = 0; kk < TC_BK / 16; ++kk) {
        if (kk + 1 < TC_BK / 16) load_frags<MI, NJ, BN>(f[(kk + 1) % 2], ms, ns, wm0, wn0, kk + 1, lane);
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NJ; ++j) mma_16816(acc[i][j], f[kk % 2].a[i], f[kk % 2].b[j][0], f[kk % 2].b[j][1]);
    }
}

// The warp's accumulators to out, as the C layout says: element i of tile (i0, j0) is at row g + 8 (i / 2), column
// 2 (l % 4) + i % 2; two neighbours (i, i + 1) make one 4-byte store of a __half2.
template <int MI, int NJ>
__device__ inline void store_acc(const float (&acc)[MI][NJ][4], __half* __restrict__ out, int r0, int c0, int h,
                                 int w, int lane) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int q = 0; q < 4; q += 2) {
                int row, col;
                mma_c_rc(lane, q, row, col);
                const int r = r0 + i * 16 + row, c = c0 + j * 8 + col;
                if (r < h && c < w)   // w is even, so c + 1 < w too
                    *reinterpret_cast<__half2*>(out + (size_t)r * w + c) = __floats2half2_rn(acc[i][j][q], acc[i][j][q + 1]);
            }
}

// The 16-byte piece at (row, col) of a rows x cols part of a matrix with rows ld halves apart (col a multiple of 8,
// like cols): zeros outside the part.
__device__ inline uint4 load16(const __half* __restrict__ p, int row, int col, int rows, int cols, int ld) {
    return row < rows && col < cols ? *reinterpret_cast<const uint4*>(p + (size_t)row * ld + col) : make_uint4(0, 0, 0, 0);
}

constexpr int M3_BM = 128, M3_BN = 128, M3_WM = 64, M3_WN = 32, M3_NT = 256;

__global__ void __launch_bounds__(M3_NT)
mma_ldmatrix_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out, int h, int w,
               int k) {
    constexpr int MI = M3_WM / 16, NJ = M3_WN / 8;
    constexpr int LM = M3_BM * TC_BK / 8 / M3_NT, LN = TC_BK * M3_BN / 8 / M3_NT;   // 16-byte pieces per thread
    constexpr int STAGE = M3_BM * TC_BK + TC_BK * M3_BN;   // halves of one buffer: m's tile, then n's
    extern __shared__ __align__(128) __half smem3[];       // 2 buffers, swizzled
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int wm0 = warp / (M3_BN / M3_WN) * M3_WM, wn0 = warp % (M3_BN / M3_WN) * M3_WN;
    const int r0 = blockIdx.y * M3_BM, c0 = blockIdx.x * M3_BN;
    float acc[MI][NJ][4] = {};
    uint4 pm[LM], pn[LN];

    auto fetch = [&](int ph) {                   // global -> registers: piece e is (row e / 8, piece e % 8) of m's
        for (int j = 0; j < LM; ++j) {           // tile, (row e / 16, piece e % 16) of n's
            const int e = t + j * M3_NT;
            pm[j] = load16(m + (size_t)r0 * k + ph, e / 8, e % 8 * 8, h - r0, k - ph, k);
        }
        for (int j = 0; j < LN; ++j) {
            const int e = t + j * M3_NT;
            pn[j] = load16(n + (size_t)ph * w + c0, e / (M3_BN / 8), e % (M3_BN / 8) * 8, k - ph, w - c0, w);
        }
    };
    auto store = [&](int s) {                    // registers -> the swizzled shared tiles of buffer s
        __half* ms = smem3 + s * STAGE;
        __half* ns = ms + M3_BM * TC_BK;
        for (int j = 0; j < LM; ++j) {
            const int e = t + j * M3_NT;
            *reinterpret_cast<uint4*>(ms + swz_at(e / 8, e % 8 * 8, TC_BK)) = pm[j];
        }
        for (int j = 0; j < LN; ++j) {
            const int e = t + j * M3_NT;
            *reinterpret_cast<uint4*>(ns + swz_at(e / (M3_BN / 8), e % (M3_BN / 8) * 8, M3_BN)) = pn[j];
        }
    };

    const int tiles = (k + TC_BK - 1) / TC_BK;
    fetch(0);
    store(0);
    __syncthreads();
    for (int kt = 0; kt < tiles; ++kt) {
        const int s = kt % 2;
        if (kt + 1 < tiles) fetch((kt + 1) * TC_BK);
        warp_phase<MI, NJ, M3_BN>(acc, smem3 + s * STAGE, smem3 + s * STAGE + M3_BM * TC_BK, wm0, wn0, lane);
        if (kt + 1 < tiles) store(1 - s);
        __syncthreads();
    }
    store_acc(acc, out, r0 + wm0, c0 + wn0, h, w, lane);
}

torch::Tensor tc_mma(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    tc_check(m, n, out, "tc_mma");
    tc_check_rows16(m, n, out, "tc_mma");
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    const int smem = 2 * (M3_BM * TC_BK + TC_BK * M3_BN) * sizeof(__half);   // 64 KB: above the default 48 KB
    static bool allowed = false;
    if (!allowed) C10_CUDA_CHECK(cudaFuncSetAttribute(mma_ldmatrix_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    allowed = true;
    mma_ldmatrix_k<<<dim3(cdiv(w, M3_BN), cdiv(h, M3_BM)), M3_NT, smem, at::cuda::getCurrentCUDAStream()>>>(
            half_ptr(m), half_ptr(n), half_ptr_mut(out), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_TENSOR_CORES_03_MMA_LDMATRIX_CU
