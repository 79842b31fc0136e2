#ifndef GPU_COURSE_ATTENTION_FLASH_WGMMA_CU
#define GPU_COURSE_ATTENTION_FLASH_WGMMA_CU
#include "../common.cuh"
#include "../tensor_cores/05_wgmma_tma.cu"
// The attention forward of notebook 11, out = softmax(q k^T / sqrt(d)) v, on Hopper (sm_90a) in CUDA C++, built on
// notebook 12's rung 5: tiles copied by TMA into a ring of shared-memory stages, mbarriers, one producer warpgroup
// and two consumer warpgroups, wgmma. q, k, v and out are (batch, heads, n, d) float16, contiguous; d is 64 or 128.
//
// A block owns 128 rows of q (one (batch, head)); each consumer warpgroup 64 of them. For each tile of BN = 128 keys:
//   S = q k^T        wgmma from shared memory: q's tile and k's tile are both K-major (rows along d);
//   online softmax   on S in registers (notebook 11's running max m and sum l, in base 2: exp2(S log2(e)/sqrt(d) - m));
//   O += P v         wgmma with P from registers: the fp32 accumulator layout of S, rounded to fp16 two by two, is
//                    exactly the layout wgmma wants for its A operand (rows l / 4 and l / 4 + 8 of each warp's 16,
//                    columns 2 (l % 4) and + 8), so P never goes through shared memory; v's tile is MN-major (rows
//                    along the keys, the k of this product), read transposed, as rung 5 reads n's tile.
// The producer copies q once and k, v tile after tile, STAGES ahead; a consumer frees a stage a turn after its
// second wgmma is done. PINGPONG = 1 adds FlashAttention-3's schedule between the two consumers: named barriers let
// one issue its GEMMs while the other computes its softmax, so the tensor cores are fed while the exponentials run.
#include <cuda.h>

constexpr int FA_BM = 128, FA_BN = 128, FA_THREADS = 384;

// TMA: the box at (x, y, z) of the 3-D tensor `map` describes (x the contiguous coordinate): rows of one
// (batch, head), zeros past its n rows (a 2-D view of all heads would read the next head's rows instead).
__device__ inline void tma_load_3d(void* dst, const CUtensorMap* map, int x, int y, int z, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z),
                    "r"(smem_addr(bar))
                 : "memory");
}

// Two floats as an fp16 pair in one 32-bit register (the low half first: the lower column).
__device__ inline uint32_t pack_half2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
}

// d (64 x 64 or 64 x 128 fp32) += a (64 x 16 fp16, in registers: 4 per thread, the accumulator layout's pairs)
// times b's 16 x N step (descriptor desc_b, MN-major: imm-trans-b = 1).
__device__ inline void wgmma_rs_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},"
                 " {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

__device__ inline void wgmma_rs_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
                 " {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

template <int D>
__device__ inline void wgmma_pv(float (&o)[D / 2], const uint32_t (&a)[4], uint64_t desc_v) {
    if constexpr (D == 128) wgmma_rs_m64n128k16(o, a, desc_v);
    else wgmma_rs_m64n64k16(o, a, desc_v);
}

// A barrier of the two consumer warpgroups' 256 threads, by id (ids 1 and 2: __syncthreads is 0). bar.arrive
// signals without waiting: what the ping-pong hands from one consumer to the other.
__device__ inline void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" :: "r"(id) : "memory"); }
__device__ inline void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" :: "r"(id) : "memory"); }

// 2^x by the special-function unit's approximation (flushing results below 2^-126 to 0): what exp2f becomes with
// --use_fast_math, without the range handling of the accurate exp2f.
__device__ inline float fa_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// The row maximum and sum of the four lanes that share a row (lanes 4r .. 4r + 3 of a warp).
__device__ inline float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
__device__ inline float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffff, x, 1);
    return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// The online softmax of one consumer thread's two rows (lane / 4 and lane / 4 + 8 of its warp's 16): the running
// maximum m (in log2 units) and this thread's share of the running sum l (the four lanes of a row add theirs at the
// end). sc[i] is row (i / 2) % 2, key key0 + 8 (i / 4) + 2 (lane % 4) + i % 2: the wgmma accumulator's layout.
struct Softmax {
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    // Turn a tile of raw scores sc into exp2(sc * scale_log2 - m), m the new maximum (in log2 units): one
    // multiply-add and one ex2 an element; alpha: how much the rows' earlier sums (and O) shrink, exp2(m_old - m_new)
    // (0 on the first tile, where m_old = -inf).
    template <int N>
    __device__ inline void step(float (&sc)[N], int key0, int nk, float scale_log2, int lane, float (&alpha)[2]) {
        if (key0 + 2 * N > nk) {                                // the last tile: keys past nk do not exist
#pragma unroll
            for (int i = 0; i < N; ++i)
                if (key0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2 >= nk) sc[i] = -INFINITY;
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i = 0; i < N; ++i) mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], sc[i]);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float mr = fmaxf(m[r], quad_max(mx[r]) * scale_log2);   // the scale is positive: max commutes
            alpha[r] = fa_ex2(m[r] - mr);
            m[r] = mr;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int i = 0; i < N; ++i) {
            sc[i] = fa_ex2(fmaf(sc[i], scale_log2, -m[(i / 2) % 2]));
            l[(i / 2) % 2] += sc[i];
        }
    }

    __device__ inline void inverse_sums(float (&inv)[2]) const {
#pragma unroll
        for (int r = 0; r < 2; ++r) inv[r] = 1.0f / quad_sum(l[r]);
    }
};

// Keep P's registers as they are at this point: a wgmma reads its A operand from them after the instruction is
// issued, so the compiler must not reuse them before the wait that follows it, nor move their writes past the
// wgmma.fence before it (wg_touch does the same for an accumulator).
template <int K>
__device__ inline void touch_p(uint32_t (&p)[K][4]) {
#pragma unroll
    for (int i = 0; i < K; ++i)
        asm volatile("" : "+r"(p[i][0]), "+r"(p[i][1]), "+r"(p[i][2]), "+r"(p[i][3]) :: "memory");
}

template <int D, int STAGES, int PINGPONG>
__global__ void __launch_bounds__(FA_THREADS, 1)
flash_wgmma_k(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
              const __grid_constant__ CUtensorMap tm_v, __half* __restrict__ out, int nq, int nk, float scale_log2) {
    static_assert(STAGES >= 3, "a stage is freed a turn after its last product: with two stages each copy would wait "
                               "for the turn before it");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BOXES = D / 64;                               // 64 halves (128 bytes) of d per TMA box
    constexpr int Q_BOX = FA_BM * 128, KV_BOX = FA_BN * 128;    // bytes of one box of q's tile, of k's or v's
    constexpr int Q_BYTES = BOXES * Q_BOX, KV_BYTES = BOXES * KV_BOX;
    extern __shared__ __align__(1024) unsigned char smem_fa[];
    unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_fa) + 1023) & ~uintptr_t(1023));
    unsigned char* qs = base;                                   // q's tile: BOXES boxes of 128 rows x 64 halves
    unsigned char* ks = qs + Q_BYTES;                           // STAGES tiles of k, then STAGES tiles of v
    unsigned char* vs = ks + STAGES * KV_BYTES;
    uint64_t* q_full = reinterpret_cast<uint64_t*>(vs + STAGES * KV_BYTES);
    uint64_t* k_full = q_full + 1;
    uint64_t* v_full = k_full + STAGES;
    uint64_t* kv_empty = v_full + STAGES;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const int row0 = blockIdx.x * FA_BM, bh = blockIdx.y;
    const int tiles = (nk + FA_BN - 1) / FA_BN;
    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&k_full[s], 1);
            mbar_init(&v_full[s], 1);
            mbar_init(&kv_empty[s], 2);                         // one arrive per consumer warpgroup
        }
        asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {                                              // the producer: copies only
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (t == 0) {
            mbar_expect_tx(q_full, Q_BYTES);
            for (int b = 0; b < BOXES; ++b) tma_load_3d(qs + b * Q_BOX, &tm_q, b * 64, row0, bh, q_full);
            for (int j = 0; j < tiles; ++j) {
                const int s = j % STAGES, use = j / STAGES;
                if (use > 0) mbar_wait(&kv_empty[s], (use - 1) % 2);   // both consumers are done with stage s
                mbar_expect_tx(&k_full[s], KV_BYTES);
                for (int b = 0; b < BOXES; ++b)
                    tma_load_3d(ks + s * KV_BYTES + b * KV_BOX, &tm_k, b * 64, j * FA_BN, bh, &k_full[s]);
                mbar_expect_tx(&v_full[s], KV_BYTES);
                for (int b = 0; b < BOXES; ++b)
                    tma_load_3d(vs + s * KV_BYTES + b * KV_BOX, &tm_v, b * 64, j * FA_BN, bh, &v_full[s]);
            }
        }
    } else {                                                    // the consumers: 64 rows of q each
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
        const int c = wg - 1, warp = t / 32, lane = t % 32;
        const unsigned char* qa = qs + c * 64 * 128;            // this warpgroup's 64 rows, in every box
        float o[D / 2], sc[FA_BN / 2];                          // O, and S (then P, in fp32) of one tile of keys
        // P in fp16 (wgmma's A operand, 16 keys a step), twice: P_j is written into one copy while P_{j-1} v_{j-1}
        // may still read the other, so that writing P_j need not wait for that product. (Even so, ptxas of CUDA 13.0
        // puts the wait for P_{j-1} v_{j-1} at the start of tile j's softmax in the machine code: the softmax of one
        // consumer runs beside the other consumer's products, not beside its own.)
        uint32_t pa[FA_BN / 16][4] = {}, pb[FA_BN / 16][4] = {};
        using PRegs = uint32_t[FA_BN / 16][4];
        Softmax sm;
#pragma unroll
        for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
        if (PINGPONG && c == 1) named_arrive(1);                // consumer 0 goes first
        // S_j = q k_j^T, 16 of d at a time; O += P v_j, 16 keys at a time (both issued, not waited for)
        auto issue_s = [&](int st) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
                wgmma_m64n128k16<0>(sc, wg_desc(qa + (kk / 4) * Q_BOX + (kk % 4) * 32, 16, 1024),
                                    wg_desc(ks + st * KV_BYTES + (kk / 4) * KV_BOX + (kk % 4) * 32, 16, 1024));
            wg_commit();
        };
        float alpha[2];
        auto issue_pv = [&](int st, PRegs& p) {                 // O shrinks by alpha, then O += P v
#pragma unroll
            for (int i = 0; i < D / 2; ++i) o[i] *= alpha[(i / 2) % 2];
            wg_touch(o);
            touch_p(p);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < FA_BN / 16; ++kk)
                wgmma_pv<D>(o, p[kk], wg_desc(vs + st * KV_BYTES + kk * 16 * 128, KV_BOX, 1024));
            wg_commit();
        };
        auto to_p = [&](PRegs& p) {                             // P_j in fp16, as wgmma's A operand
#pragma unroll
            for (int i = 0; i < FA_BN / 2; i += 2) p[i / 8][(i % 8) / 2] = pack_half2(sc[i], sc[i + 1]);
        };
        mbar_wait(q_full, 0);
        // Tile 0: S only. Then, for each next tile j, in one turn at the tensor cores: S_j, then O shrinks by the last
        // softmax's alpha (no product writes O at that point) and O += P_{j-1} v_{j-1}; tile j's softmax comes before
        // the wait for that second product (FlashAttention-3's order; what ptxas makes of it: above). Last: O += P v.
#pragma unroll
        for (int i = 0; i < FA_BN / 2; ++i) sc[i] = 0.0f;
        wg_touch(sc);                                           // written before the fence, as PTX requires
        mbar_wait(&k_full[0], 0);
        if (PINGPONG) named_sync(1 + c);                        // my turn at the tensor cores
        wg_fence();
        issue_s(0);
        if (PINGPONG) named_arrive(2 - c);                      // the other consumer's turn
        wg_wait<0>();
        wg_touch(sc);
        sm.step(sc, 0, nk, scale_log2, lane, alpha);            // sc becomes P_0, in fp32
        to_p(pa);
        auto tile = [&](int j, PRegs& p_last, PRegs& p_next) { // S_j and P_{j-1} v_{j-1}; P_j into p_next
            const int s = j % STAGES, sp = (j - 1) % STAGES;    // this tile's stage, the one before
#pragma unroll
            for (int i = 0; i < FA_BN / 2; ++i) sc[i] = 0.0f;
            // k and v of tile j - 2 are read (its P v was waited for in the last turn): free their stage, a turn after
            // the wait, before waiting for tile j's (with STAGES = 2, tile j's copy would wait for this very arrive)
            if (t == 0 && j >= 2) mbar_arrive(&kv_empty[(j - 2) % STAGES]);
            mbar_wait(&k_full[s], (j / STAGES) % 2);
            mbar_wait(&v_full[sp], ((j - 1) / STAGES) % 2);
            wg_touch(sc);                                       // sc as written, before the fence
            if (PINGPONG) named_sync(1 + c);
            wg_fence();
            issue_s(s);
            issue_pv(sp, p_last);
            if (PINGPONG) named_arrive(2 - c);
            wg_wait<1>();                                       // S_j is done (groups complete in order)
            wg_touch(sc);
            sm.step(sc, j * FA_BN, nk, scale_log2, lane, alpha);
            to_p(p_next);
            wg_wait<0>();                                       // O += P_{j-1} v_{j-1} is done too
            wg_touch(o);
            touch_p(p_last);
            touch_p(p_next);
        };
        for (int j = 1; j < tiles; j += 2) {                    // two tiles a turn, so that each copy of P has a name
            tile(j, pa, pb);
            if (j + 1 < tiles) tile(j + 1, pb, pa);
        }
        auto last = [&](PRegs& p) {                             // O += P v of the last tile
            const int sp = (tiles - 1) % STAGES;
            mbar_wait(&v_full[sp], ((tiles - 1) / STAGES) % 2);
            if (PINGPONG) named_sync(1 + c);
            issue_pv(sp, p);
            if (PINGPONG) named_arrive(2 - c);
            wg_wait<0>();
            wg_touch(o);
            touch_p(p);
            if (t == 0 && tiles >= 2) mbar_arrive(&kv_empty[(tiles - 2) % STAGES]);
            if (t == 0) mbar_arrive(&kv_empty[sp]);
        };
        if ((tiles - 1) % 2) last(pb);
        else last(pa);
        if (PINGPONG && c == 0) named_sync(1);                  // balance consumer 1's last arrive
        float inv[2];
        sm.inverse_sums(inv);
#pragma unroll
        for (int i = 0; i < D / 2; i += 2) {
            const int row = row0 + c * 64 + warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
            const int col = 8 * (i / 4) + 2 * (lane % 4);
            if (row < nq)
                *reinterpret_cast<__half2*>(out + ((size_t)bh * nq + row) * D + col) =
                    __floats2half2_rn(o[i] * inv[(i / 2) % 2], o[i + 1] * inv[(i / 2) % 2]);
        }
    }
#else
    __trap();   // built for a GPU without wgmma (sm_90a): flash_wgmma refuses to launch it there
#endif
}

// The TMA description of x (batch, heads, n, d) as a 3-D tensor (d, n, batch x heads), copied in boxes of 64 halves
// of d by `rows` rows of one (batch, head), with the 128-byte swizzle; zeros past n.
static CUtensorMap head_map(const torch::Tensor& x, int rows) {
    CUtensorMap map;
    const int64_t n = x.size(2), d = x.size(3);
    const cuuint64_t dims[3] = {(cuuint64_t)d, (cuuint64_t)n, (cuuint64_t)(x.size(0) * x.size(1))};
    const cuuint64_t strides[2] = {(cuuint64_t)d * 2, (cuuint64_t)(n * d * 2)};   // bytes between rows, heads
    const cuuint32_t box[3] = {64, (cuuint32_t)rows, 1};
    const cuuint32_t elem[3] = {1, 1, 1};
    const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, const_cast<void*>(x.data_ptr()), dims,
                                      strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TORCH_CHECK(r == CUDA_SUCCESS, ("flash_wgmma: cuTensorMapEncodeTiled failed (CUresult " + std::to_string((int)r) +
                ") for a tensor of shape " + tc_shape(x)).c_str());
    return map;
}

constexpr int FA_VARIANTS = 4;   // d 64 / 128, each plain or ping-pong

static int fa_smem(int d, int stages) { return (FA_BM + 2 * stages * FA_BN) * d * 2 + 1024 + (1 + 3 * stages) * 8; }

torch::Tensor flash_wgmma(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor out, int64_t pingpong) {
    CHECK_INPUT(q); CHECK_INPUT(k); CHECK_INPUT(v); CHECK_INPUT(out);
    for (const torch::Tensor* x : {&q, &k, &v, &out})
        TORCH_CHECK(x->scalar_type() == torch::kHalf && x->dim() == 4, ("flash_wgmma: q, k, v and out must be float16 "
                    "(batch, heads, n, d) tensors; got " + tc_shape(*x) + " " + c10::toString(x->scalar_type())).c_str());
    const int64_t d = q.size(3);
    TORCH_CHECK(d == 64 || d == 128, ("flash_wgmma: d must be 64 or 128, got " + std::to_string(d)).c_str());
    TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == d &&
                out.sizes() == q.sizes(), ("flash_wgmma: k and v must be (batch, heads, n_k, d) and out like q; got q " +
                tc_shape(q) + ", k " + tc_shape(k) + ", v " + tc_shape(v) + ", out " + tc_shape(out)).c_str());
    TORCH_CHECK(q.size(2) > 0 && k.size(2) > 0, "flash_wgmma: q and k need at least one row");
    TORCH_CHECK(pingpong == 0 || pingpong == 1, "flash_wgmma: pingpong must be 0 or 1");
    TORCH_CHECK(k.device() == q.device() && v.device() == q.device() && out.device() == q.device(),
                "flash_wgmma: q, k, v and out must be on one GPU");
    TORCH_CHECK(q.size(0) * q.size(1) <= 65535, ("flash_wgmma: at most 65535 (batch x heads), got " +
                std::to_string(q.size(0) * q.size(1))).c_str());
    TORCH_CHECK((uintptr_t)out.data_ptr() % 16 == 0, "flash_wgmma: out must start on a 16-byte boundary (a fresh "
                "tensor does): pass torch.empty_like(q)");
    int dev = 0, major = 0, minor = 0;
    C10_CUDA_CHECK(cudaGetDevice(&dev));
    TORCH_CHECK(q.get_device() == dev, ("flash_wgmma: the tensors are on cuda:" + std::to_string(q.get_device()) +
                " but the current GPU is cuda:" + std::to_string(dev) + "; call it inside torch.cuda.device(q.device)").c_str());
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    TORCH_CHECK(major == 9 && minor == 0, ("flash_wgmma: wgmma and TMA exist on Hopper GPUs (sm_90) only; this GPU is sm_" +
                std::to_string(major) + std::to_string(minor)).c_str());
    const CUtensorMap tm_q = head_map(q, FA_BM), tm_k = head_map(k, FA_BN), tm_v = head_map(v, FA_BN);
    const int nq = q.size(2), nk = k.size(2);
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)d);   // log2(e) / sqrt(d)
    const dim3 grid(cdiv(nq, FA_BM), q.size(0) * q.size(1));
    static bool allowed[FA_VARIANTS] = {};
    const auto stream = at::cuda::getCurrentCUDAStream();
    const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
    switch ((d == 128 ? 2 : 0) + (int)pingpong) {
        case 0: {   // d = 64: 4 stages of 32 KB
            const int smem = fa_smem(64, 4);
            if (!allowed[0]) C10_CUDA_CHECK(cudaFuncSetAttribute(flash_wgmma_k<64, 4, 0>, attr, smem));
            allowed[0] = true;
            flash_wgmma_k<64, 4, 0><<<grid, FA_THREADS, smem, stream>>>(tm_q, tm_k, tm_v, half_ptr_mut(out), nq, nk,
                                                                         scale_log2);
            break;
        }
        case 1: {
            const int smem = fa_smem(64, 4);
            if (!allowed[1]) C10_CUDA_CHECK(cudaFuncSetAttribute(flash_wgmma_k<64, 4, 1>, attr, smem));
            allowed[1] = true;
            flash_wgmma_k<64, 4, 1><<<grid, FA_THREADS, smem, stream>>>(tm_q, tm_k, tm_v, half_ptr_mut(out), nq, nk,
                                                                         scale_log2);
            break;
        }
        case 2: {   // d = 128: 3 stages of 64 KB
            const int smem = fa_smem(128, 3);
            if (!allowed[2]) C10_CUDA_CHECK(cudaFuncSetAttribute(flash_wgmma_k<128, 3, 0>, attr, smem));
            allowed[2] = true;
            flash_wgmma_k<128, 3, 0><<<grid, FA_THREADS, smem, stream>>>(tm_q, tm_k, tm_v, half_ptr_mut(out), nq, nk,
                                                                          scale_log2);
            break;
        }
        default: {
            const int smem = fa_smem(128, 3);
            if (!allowed[3]) C10_CUDA_CHECK(cudaFuncSetAttribute(flash_wgmma_k<128, 3, 1>, attr, smem));
            allowed[3] = true;
            flash_wgmma_k<128, 3, 1><<<grid, FA_THREADS, smem, stream>>>(tm_q, tm_k, tm_v, half_ptr_mut(out), nq, nk,
                                                                          scale_log2);
        }
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_ATTENTION_FLASH_WGMMA_CU
