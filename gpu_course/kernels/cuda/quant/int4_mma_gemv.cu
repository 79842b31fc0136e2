#ifndef GPU_COURSE_QUANT_INT4_MMA_GEMV_CU
#define GPU_COURSE_QUANT_INT4_MMA_GEMV_CU
#include "../common.cuh"
// out = x @ W.T for 1 to 16 rows of x (bf16) and W (n x k) in int4 with a bf16 scale per group of 128 columns of a
// row: notebook 15's weight-only layer for decoding, with the products on the tensor cores (mma.sync.m16n8k16, bf16
// operands, fp32 sums, sm_80 and newer) and the weights decoded in registers.
//
// The tile of one mma is 16 rows of x by 8 columns of out, over 16 of k. The rows are the batch: up to 16 fit one
// tile, so one instruction serves every batch from 1 to 16 (the rows past M are zeros); the 8 columns are rows of W.
// Which k each of the 16 slots of the product stands for is ours to choose, as long as x's fragment (A) and W's (B)
// agree. Lane l = 4 g + t holds, for W's row g of the tile, the B values of slots 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1),
// and for x's rows g and g + 8 the A values of the same slots. Slot 2t + i of chunk c (c = 0..7 in a group of 128)
// stands for column 32 t + 4 c + i of the group and slot 2t + 8 + i for column 32 t + 4 c + 2 + i: lane t's 32
// columns of a group are then contiguous in x (four 16-byte loads a row) and in W (16 bytes a row: 32 nibbles).
//
// Decoding: int4_mma_repack puts the nibbles of columns 2p and 2p + 1 (p = 0..3) of each 32-bit word at bits 4p and
// 4p + 16; then (word >> 4p) & 0x000F000F | 0x43004300 (one lop3) is a bf16 pair {128 + q', 128 + q''}, exactly
// (q' = q + 8 in 0..15; 128 has a spacing of 1 in bf16), the B register of two slots. The product then sums
// x (128 + q') = x q + 136 x over a group, so a second mma with B all ones gives each row's sum of x, and the group's
// result is scale (sum - 136 sum(x)). Each warp takes NT tiles of 8 columns over a share of the groups; the warps of a
// block add their sums in shared memory and write out.
#include <cuda_bf16.h>

constexpr int I4_GROUP = 128;   // columns of W per scale
constexpr int I4_GPW = 4;       // groups whose weights a warp loads in one go (and the next ones while it multiplies)

__device__ __forceinline__ uint32_t i4_pair(uint32_t word, int p) {
    uint32_t r;   // (word >> 4p) & 0x000F000F | 0x43004300, one instruction
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(word >> (4 * p)), "n"(0x000F000F), "n"(0x43004300));
    return r;
}

__device__ __forceinline__ uint32_t u4_word(const uint4& v, int u) {   // word u of 4 (u known when compiled)
    return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w;
}

__device__ __forceinline__ void i4_mma(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// x: M x K bf16 as uint4 (8 a piece); w: N x K/32 uint4 (int4_mma_repack's words); s: K/128 x N bf16 as pairs.
// TWO: x has more than 8 rows (the tile's rows g + 8 are used). At most 128 registers a thread: 16 warps an SM.
template <int NT, int WARPS, bool TWO>
__global__ void __launch_bounds__(WARPS * 32, 16 / WARPS)
int4_mma_gemv_k(const uint4* __restrict__ x, const uint4* __restrict__ w, const uint32_t* __restrict__ s,
                __nv_bfloat16* __restrict__ out, int M, int N, int K) {
    __shared__ float red[WARPS][NT][32][4];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int n0 = blockIdx.x * 8 * NT, groups = K / I4_GROUP, per = (groups + WARPS - 1) / WARPS;
    const int gb = min(groups, warp * per), ge = min(groups, gb + per);
    const int xq = K / 8, wq = K / 32;                  // uint4 pieces in a row of x, of W
    const uint32_t ones = 0x3F803F80u;                  // bf16 {1, 1}
    const uint4 zero = make_uint4(0, 0, 0, 0);
    float acc[NT][4] = {};
    uint4 cur[I4_GPW][NT], nxt[I4_GPW][NT];
    auto load = [&](uint4 (&dst)[I4_GPW][NT], int base) {
#pragma unroll
        for (int i = 0; i < I4_GPW; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int n = n0 + 8 * j + g;
                dst[i][j] = (base + i < ge && n < N) ? __ldcs(&w[(size_t)n * wq + (base + i) * 4 + t]) : zero;
            }
    };
    if (gb < ge) load(cur, gb);
    for (int base = gb; base < ge; base += I4_GPW) {
        if (base + I4_GPW < ge) load(nxt, base + I4_GPW);      // in flight while this batch multiplies
#pragma unroll
        for (int i = 0; i < I4_GPW; ++i) {
            const int G = base + i;
            if (G >= ge) break;                                 // the same for the whole warp
            uint4 xa[4], xb[4];                                 // x's rows g and g + 8, columns 128 G + 32 t ..
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                xa[u] = g < M ? __ldg(&x[(size_t)g * xq + G * 16 + t * 4 + u]) : zero;
                xb[u] = TWO && g + 8 < M ? __ldg(&x[(size_t)(g + 8) * xq + G * 16 + t * 4 + u]) : zero;
            }
            float sx[4] = {}, cg[NT][4] = {};
#pragma unroll
            for (int u = 0; u < 4; ++u) {                       // word u: chunks 2u (pairs 0, 1) and 2u + 1 (2, 3)
                i4_mma(sx, xa[u].x, xb[u].x, xa[u].y, xb[u].y, ones, ones);
                i4_mma(sx, xa[u].z, xb[u].z, xa[u].w, xb[u].w, ones, ones);
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    const uint32_t word = u4_word(cur[i][j], u);
                    i4_mma(cg[j], xa[u].x, xb[u].x, xa[u].y, xb[u].y, i4_pair(word, 0), i4_pair(word, 1));
                    i4_mma(cg[j], xa[u].z, xb[u].z, xa[u].w, xb[u].w, i4_pair(word, 2), i4_pair(word, 3));
                }
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {                      // scales of columns n0 + 8 j + 2 t and + 1
                const int n = n0 + 8 * j + 2 * t;
                const uint32_t sv = n < N ? __ldg(&s[((size_t)G * N + n) / 2]) : 0u;
                const float s0 = __uint_as_float(sv << 16), s1 = __uint_as_float(sv & 0xFFFF0000u);
                acc[j][0] += s0 * (cg[j][0] - 136.f * sx[0]);
                acc[j][1] += s1 * (cg[j][1] - 136.f * sx[1]);
                acc[j][2] += s0 * (cg[j][2] - 136.f * sx[2]);
                acc[j][3] += s1 * (cg[j][3] - 136.f * sx[3]);
            }
        }
        if (base + I4_GPW < ge) {
#pragma unroll
            for (int i = 0; i < I4_GPW; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) cur[i][j] = nxt[i][j];
        }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[warp][j][lane][e] = acc[j][e];
    __syncthreads();
    for (int id = threadIdx.x; id < NT * 128; id += WARPS * 32) {   // (tile j, lane l, value e), the warps added
        const int j = id / 128, l = (id / 4) % 32, e = id % 4;
        float v = 0.f;
#pragma unroll
        for (int q = 0; q < WARPS; ++q) v += red[q][j][l][e];
        const int row = l / 4 + (e >= 2 ? 8 : 0), col = n0 + 8 * j + 2 * (l % 4) + (e & 1);
        if (row < M && col < N) out[(size_t)row * N + col] = __float2bfloat16(v);
    }
}

// The shapes int4_mma_gemv can launch: {tiles of 8 columns a warp (NT), warps a block}.
constexpr int I4_CONFIGS[][2] = {{2, 4}, {2, 8}, {1, 8}, {1, 4}};

torch::Tensor int4_mma_gemv(torch::Tensor x, torch::Tensor words, torch::Tensor scales, torch::Tensor out, int64_t cfg) {
    CHECK_INPUT(x); CHECK_INPUT(words); CHECK_INPUT(scales); CHECK_INPUT(out);
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && scales.scalar_type() == torch::kBFloat16 &&
                out.scalar_type() == torch::kBFloat16, "int4_mma_gemv: x, scales and out must be bfloat16");
    TORCH_CHECK(words.scalar_type() == torch::kInt32, "int4_mma_gemv: words must be int4_mma_repack's int32 tensor");
    TORCH_CHECK(x.dim() == 2 && x.size(0) >= 1 && x.size(0) <= 16,
                ("int4_mma_gemv: x must be (M, K) with 1 <= M <= 16 (one tile of the product), got " +
                 std::to_string(x.dim()) + " dims, M = " + std::to_string(x.size(0))).c_str());
    const int M = x.size(0), K = x.size(1), N = words.size(0);
    TORCH_CHECK(K % I4_GROUP == 0 && K > 0, ("int4_mma_gemv: K must be a positive multiple of 128, got " +
                                             std::to_string(K)).c_str());
    TORCH_CHECK(N % 2 == 0 && N > 0, ("int4_mma_gemv: N must be even, got " + std::to_string(N)).c_str());
    TORCH_CHECK(words.dim() == 2 && words.size(1) == K / 8, ("int4_mma_gemv: words must be (N, K/8) = (" +
                std::to_string(N) + ", " + std::to_string(K / 8) + ")").c_str());
    TORCH_CHECK(scales.dim() == 2 && scales.size(0) == K / I4_GROUP && scales.size(1) == N,
                "int4_mma_gemv: scales must be (K/128, N)");
    TORCH_CHECK(out.dim() == 2 && out.size(0) == M && out.size(1) == N, "int4_mma_gemv: out must be (M, N)");
    TORCH_CHECK(x.device() == words.device() && x.device() == scales.device() && x.device() == out.device(),
                "int4_mma_gemv: x, words, scales and out must be on the same GPU");
    TORCH_CHECK((uintptr_t)x.data_ptr() % 16 == 0 && (uintptr_t)words.data_ptr() % 16 == 0 &&
                (uintptr_t)scales.data_ptr() % 4 == 0, "int4_mma_gemv: x and words must start on a 16-byte boundary, "
                "scales on a 4-byte one (a fresh tensor does; a view with an offset may not: pass .clone())");
    TORCH_CHECK(cfg >= 0 && cfg < (int64_t)(sizeof(I4_CONFIGS) / sizeof(I4_CONFIGS[0])),
                ("int4_mma_gemv: cfg must be 0 to " + std::to_string(sizeof(I4_CONFIGS) / sizeof(I4_CONFIGS[0]) - 1) +
                 ", got " + std::to_string(cfg)).c_str());
    const auto stream = at::cuda::getCurrentCUDAStream();
    const auto* xp = reinterpret_cast<const uint4*>(x.data_ptr());
    const auto* wp = reinterpret_cast<const uint4*>(words.data_ptr());
    const auto* sp = reinterpret_cast<const uint32_t*>(scales.data_ptr());
    auto* op = reinterpret_cast<__nv_bfloat16*>(out.data_ptr());
    const int nt = I4_CONFIGS[cfg][0], warps = I4_CONFIGS[cfg][1];
    const dim3 grid(cdiv(N, 8 * nt)), block(32 * warps);
    switch (2 * cfg + (M > 8)) {   // the rows g + 8 only where x has them
        case 0: int4_mma_gemv_k<2, 4, false><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K); break;
        case 1: int4_mma_gemv_k<2, 4, true><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K); break;
        case 2: int4_mma_gemv_k<2, 8, false><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K); break;
        case 3: int4_mma_gemv_k<2, 8, true><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K); break;
        case 4: int4_mma_gemv_k<1, 8, false><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K); break;
        case 5: int4_mma_gemv_k<1, 8, true><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K); break;
        case 6: int4_mma_gemv_k<1, 4, false><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K); break;
        default: int4_mma_gemv_k<1, 4, true><<<grid, block, 0, stream>>>(xp, wp, sp, op, M, N, K);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_QUANT_INT4_MMA_GEMV_CU
