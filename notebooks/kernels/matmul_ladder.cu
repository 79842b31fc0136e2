// The fp32 matmul ladder of notebook 04, one idea per rung: out (h x w) is m (h x k) times n (k x w),
// row-major. Every kernel handles any h, w, k (guards at the edges). Rung 3 is matmul_tiled_k<32>
// from matmul_tiled.cu, which must come before this file. Sections start with "// ---- rung".

// ---- rung 1: naive, one thread per output, threadIdx.x -> ROW (uncoalesced)
__global__ void mm_rows_k(const float* __restrict__ m, const float* __restrict__ n,
                          float* __restrict__ out, int h, int w, int k) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;   // neighbours in a warp: different rows
    int c = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < h && c < w) {
        float p = 0.0f;
        for (int i = 0; i < k; ++i) p += m[r * k + i] * n[i * w + c];
        out[r * w + c] = p;
    }
}

// ---- rung 2: naive, threadIdx.x -> COLUMN (coalesced): the seeds' matmul_k
__global__ void mm_cols_k(const float* __restrict__ m, const float* __restrict__ n,
                          float* __restrict__ out, int h, int w, int k) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;   // neighbours in a warp: neighbouring columns
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < h && c < w) {
        float p = 0.0f;
        for (int i = 0; i < k; ++i) p += m[r * k + i] * n[i * w + c];
        out[r * w + c] = p;
    }
}

// ---- rung 4: 1D blocktiling: a BM x BN block tile, each thread computes TM outputs of one column
template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
mm_tile1d_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
            int h, int w, int k) {
    constexpr int NT = BM * BN / TM;                 // threads per block
    static_assert(BM * BK == NT && BN * BK == NT, "each thread loads one element of each tile");
    __shared__ float ms[BM * BK];
    __shared__ float ns[BK * BN];
    const int t = threadIdx.x;
    const int tc = t % BN, tr = t / BN;              // output column, and group of TM rows
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    const int ar = t / BK, ac = t % BK;              // the element of m's tile this thread loads
    const int br = t / BN, bc = t % BN;              // ... and of n's tile
    float acc[TM] = {0.0f};
    for (int ph = 0; ph < k; ph += BK) {
        ms[ar * BK + ac] = (r0 + ar < h && ph + ac < k) ? m[(r0 + ar) * k + ph + ac] : 0.0f;
        ns[br * BN + bc] = (ph + br < k && c0 + bc < w) ? n[(ph + br) * w + c0 + bc] : 0.0f;
        __syncthreads();
        for (int i = 0; i < BK; ++i) {
            float b = ns[i * BN + tc];               // one shared load reused TM times
#pragma unroll
            for (int j = 0; j < TM; ++j) acc[j] += ms[(tr * TM + j) * BK + i] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < TM; ++j) {
        int r = r0 + tr * TM + j, c = c0 + tc;
        if (r < h && c < w) out[r * w + c] = acc[j];
    }
}

// ---- rung 5: 2D blocktiling: each thread computes a TM x TN patch from registers
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(BM * BN / (TM * TN))
mm_tile2d_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
            int h, int w, int k) {
    constexpr int NT = BM * BN / (TM * TN);
    __shared__ float ms[BM * BK];
    __shared__ float ns[BK * BN];
    const int t = threadIdx.x;
    const int tr = t / (BN / TN), tc = t % (BN / TN);    // this thread's patch in the block tile
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    float acc[TM][TN] = {{0.0f}};
    float rm[TM], rn[TN];
    for (int ph = 0; ph < k; ph += BK) {
        for (int e = t; e < BM * BK; e += NT) {          // NT threads load BM*BK elements
            int rr = e / BK, cc = e % BK;
            ms[e] = (r0 + rr < h && ph + cc < k) ? m[(r0 + rr) * k + ph + cc] : 0.0f;
        }
        for (int e = t; e < BK * BN; e += NT) {
            int rr = e / BN, cc = e % BN;
            ns[e] = (ph + rr < k && c0 + cc < w) ? n[(ph + rr) * w + c0 + cc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < BK; ++i) {
#pragma unroll
            for (int a = 0; a < TM; ++a) rm[a] = ms[(tr * TM + a) * BK + i];
#pragma unroll
            for (int b = 0; b < TN; ++b) rn[b] = ns[i * BN + tc * TN + b];
#pragma unroll
            for (int a = 0; a < TM; ++a)
#pragma unroll
                for (int b = 0; b < TN; ++b) acc[a][b] += rm[a] * rn[b];   // TM*TN FMAs, TM+TN loads
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < TM; ++a)
#pragma unroll
        for (int b = 0; b < TN; ++b) {
            int r = r0 + tr * TM + a, c = c0 + tc * TN + b;
            if (r < h && c < w) out[r * w + c] = acc[a][b];
        }
}

// ---- rung 6: rung 5 + float4 loads and stores, m's tile stored transposed in shared memory
// Four floats at (row, col) of a matrix with `cols` columns and leading dimension ld; zero outside.
// vec: ld is a multiple of 4 and the base is 16-byte aligned, so an in-bounds quad is one float4.
__device__ __forceinline__ float4 load4(const float* __restrict__ p, int row, int col, int rows,
                                        int cols, int ld, bool vec) {
    if (row >= rows) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* q = p + (size_t)row * ld + col;
    if (vec && col + 3 < cols) return *reinterpret_cast<const float4*>(q);
    return make_float4(col < cols ? q[0] : 0.0f, col + 1 < cols ? q[1] : 0.0f,
                       col + 2 < cols ? q[2] : 0.0f, col + 3 < cols ? q[3] : 0.0f);
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(BM * BN / (TM * TN))
mm_vec_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
         int h, int w, int k, bool vec_m, bool vec_n) {
    constexpr int NT = BM * BN / (TM * TN);
    static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 granularity");
    __shared__ __align__(16) float mst[BK * BM];     // m's tile TRANSPOSED: mst[i * BM + row]
    __shared__ __align__(16) float ns[BK * BN];
    const int t = threadIdx.x;
    const int tr = t / (BN / TN), tc = t % (BN / TN);
    const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    float acc[TM][TN] = {{0.0f}};
    float rm[TM], rn[TN];
    for (int ph = 0; ph < k; ph += BK) {
        for (int e = t; e < BM * BK / 4; e += NT) {      // one float4 of a row of m's tile ...
            int rr = e / (BK / 4), cc = (e % (BK / 4)) * 4;
            float4 v = load4(m, r0 + rr, ph + cc, h, k, k, vec_m);
            mst[(cc + 0) * BM + rr] = v.x;                // ... written down a column of mst
            mst[(cc + 1) * BM + rr] = v.y;
            mst[(cc + 2) * BM + rr] = v.z;
            mst[(cc + 3) * BM + rr] = v.w;
        }
        for (int e = t; e < BK * BN / 4; e += NT) {
            int rr = e / (BN / 4), cc = (e % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&ns[rr * BN + cc]) = load4(n, ph + rr, c0 + cc, k, w, w, vec_n);
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < BK; ++i) {
#pragma unroll
            for (int a = 0; a < TM; a += 4)               // contiguous now: float4 shared loads
                *reinterpret_cast<float4*>(&rm[a]) = *reinterpret_cast<const float4*>(&mst[i * BM + tr * TM + a]);
#pragma unroll
            for (int b = 0; b < TN; b += 4)
                *reinterpret_cast<float4*>(&rn[b]) = *reinterpret_cast<const float4*>(&ns[i * BN + tc * TN + b]);
#pragma unroll
            for (int a = 0; a < TM; ++a)
#pragma unroll
                for (int b = 0; b < TN; ++b) acc[a][b] += rm[a] * rn[b];
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < TM; ++a) {
        int r = r0 + tr * TM + a;
        if (r >= h) break;
#pragma unroll
        for (int b = 0; b < TN; b += 4) {
            int c = c0 + tc * TN + b;
            if (vec_n && c + 3 < w) {                     // w % 4 == 0: one float4 store
                *reinterpret_cast<float4*>(&out[(size_t)r * w + c]) =
                    make_float4(acc[a][b], acc[a][b + 1], acc[a][b + 2], acc[a][b + 3]);
            } else {
                for (int q = 0; q < 4; ++q)
                    if (c + q < w) out[(size_t)r * w + c + q] = acc[a][b + q];
            }
        }
    }
}

// ---- rung 7: rung 6 + conflict-free fragments, and the next tile loaded while this one is used
// Each thread still computes 8x8 outputs, but as four 4x4 quarters half a tile apart (rows tr*4 and
// 64 + tr*4, columns tc*4 and 64 + tc*4). A warp's float4 shared loads then read 16 consecutive
// float4s (no bank conflicts; rung 6's threads read 32 bytes apart). Two shared buffers: while the
// block multiplies one tile, each thread's next float4s of m and n are already on their way from
// global memory into registers, and one __syncthreads per tile is enough.
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

// ---- host: one entry point for every rung, and rung 6 in a few tile shapes (for tuning)
static void mm_check(const torch::Tensor& m, const torch::Tensor& n, const torch::Tensor& out) {
    CHECK_INPUT(m); CHECK_INPUT(n); CHECK_INPUT(out);
    TORCH_CHECK(m.dim() == 2 && n.dim() == 2 && m.size(1) == n.size(0),
                "matmul: m (h x k) and n (k x w) do not fit: ", m.sizes(), " and ", n.sizes());
    TORCH_CHECK(out.size(0) == m.size(0) && out.size(1) == n.size(1), "matmul: out must be h x w");
    TORCH_CHECK(m.numel() < (1LL << 31) && n.numel() < (1LL << 31) && out.numel() < (1LL << 31),
                "matmul: the kernels index with 32-bit ints; matrices must have < 2^31 elements");
}

static bool aligned16(const torch::Tensor& t) { return ((uintptr_t)t.data_ptr<float>()) % 16 == 0; }

torch::Tensor matmul_vec_cfg(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t cfg) {
    mm_check(m, n, out);
    int h = m.size(0), k = m.size(1), w = n.size(1);
    const float* mp = m.data_ptr<float>();
    const float* np_ = n.data_ptr<float>();
    float* op = out.data_ptr<float>();
    bool vm = k % 4 == 0 && aligned16(m), vn = w % 4 == 0 && aligned16(n) && aligned16(out);
    switch (cfg) {
        case 0: mm_vec_k<128, 128, 8, 8, 8><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 1: mm_vec_k<128, 128, 16, 8, 8><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 2: mm_vec_k<64, 128, 8, 8, 8><<<dim3(cdiv(w, 128), cdiv(h, 64)), 128>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 3: mm_vec_k<128, 64, 8, 8, 8><<<dim3(cdiv(w, 64), cdiv(h, 128)), 128>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 4: mm_vec_k<64, 64, 16, 4, 4><<<dim3(cdiv(w, 64), cdiv(h, 64)), 256>>>(mp, np_, op, h, w, k, vm, vn); break;
        default: TORCH_CHECK(false, "matmul_vec_cfg: cfg must be 0..4, got ", cfg);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor matmul_rung(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t rung) {
    mm_check(m, n, out);
    int h = m.size(0), k = m.size(1), w = n.size(1);
    const float* mp = m.data_ptr<float>();
    const float* np_ = n.data_ptr<float>();
    float* op = out.data_ptr<float>();
    if (rung == 1) mm_rows_k<<<dim3(cdiv(h, 16), cdiv(w, 16)), dim3(16, 16)>>>(mp, np_, op, h, w, k);
    else if (rung == 2) mm_cols_k<<<dim3(cdiv(w, 16), cdiv(h, 16)), dim3(16, 16)>>>(mp, np_, op, h, w, k);
    else if (rung == 3) matmul_tiled_k<32><<<dim3(cdiv(w, 32), cdiv(h, 32)), dim3(32, 32)>>>(mp, np_, op, h, w, k);
    else if (rung == 4) mm_tile1d_k<64, 64, 8, 8><<<dim3(cdiv(w, 64), cdiv(h, 64)), 64 * 64 / 8>>>(mp, np_, op, h, w, k);
    else if (rung == 5) mm_tile2d_k<128, 128, 8, 8, 8><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256>>>(mp, np_, op, h, w, k);
    else if (rung == 6) return matmul_vec_cfg(m, n, out, 0);
    else if (rung == 7) {
        bool vm = k % 4 == 0 && aligned16(m), vn = w % 4 == 0 && aligned16(n) && aligned16(out);
        mm_pipe_k<128, 128, 8><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256>>>(mp, np_, op, h, w, k, vm, vn);
    }
    else TORCH_CHECK(false, "matmul_rung: rung must be 1..7, got ", rung);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
