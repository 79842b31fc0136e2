#ifndef GPU_COURSE_MATMUL_06_VECTORIZED_CU
#define GPU_COURSE_MATMUL_06_VECTORIZED_CU
#include "../common.cuh"
// rung 6: rung 5 + float4 loads and stores, m's tile stored transposed in shared memory
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
#endif  // GPU_COURSE_MATMUL_06_VECTORIZED_CU
