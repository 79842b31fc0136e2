#ifndef GPU_COURSE_TENSOR_CORES_01_WMMA_CU
#define GPU_COURSE_TENSOR_CORES_01_WMMA_CU
#include "../common.cuh"
#include "tc_common.cuh"
// rung 1: tensor cores through WMMA (nvcuda::wmma, <mma.h>): one warp computes one 16x16 tile of out.
//
// A warp-level matrix operation is done by the 32 lanes of a warp together. Each lane holds a *fragment*, its
// share of a 16x16 tile (fragment.x[0 .. num_elements-1]; which lane holds which element is up to the GPU):
//   load_matrix_sync(frag, p, ldm)      the warp loads a 16x16 tile of halves starting at p, rows ldm apart
//   mma_sync(d, a, b, c)                d = a b + c on the tensor cores: 16x16x16 fp16 products, fp32 sums
//   store_matrix_sync(p, frag, ldm, l)  the warp stores a 16x16 accumulator tile
// Here each warp walks k in steps of 16, loading both tiles straight from global memory: every tile of m and
// n is read by every warp that needs it, as in notebook 04's naive kernel, now 16x16 elements at a time.
//
// The accumulator is float32; out is float16. The conversion goes through shared memory: the warp stores its
// accumulator tile there (store_matrix_sync writes floats), then each lane converts and writes 8 elements.
//
// A WMMA load reads a whole 16x16 tile, so this rung needs h, w and k to be multiples of 16 (the host
// function says so); rung 2 stages tiles in shared memory and takes any size.
constexpr int WMMA_WARPS = 4;   // warps per block, 2 x 2 tiles of out

__global__ void wmma_global_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out,
                              int h, int w, int k) {
    using namespace nvcuda;
    __shared__ float stage[WMMA_WARPS][16 * 16];   // each warp's accumulator, on its way to fp16
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r0 = (blockIdx.y * 2 + warp / 2) * 16, c0 = (blockIdx.x * 2 + warp % 2) * 16;
    if (r0 >= h || c0 >= w) return;                // the whole warp leaves together: no tile here
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int i = 0; i < k; i += 16) {
        wmma::load_matrix_sync(a, m + (size_t)r0 * k + i, k);     // rows r0..r0+15, columns i..i+15 of m
        wmma::load_matrix_sync(b, n + (size_t)i * w + c0, w);     // rows i..i+15, columns c0..c0+15 of n
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(stage[warp], acc, 16, wmma::mem_row_major);
    __syncwarp();                                   // every lane's part of the tile is in shared memory
    for (int e = lane; e < 16 * 16; e += 32)
        out[(size_t)(r0 + e / 16) * w + c0 + e % 16] = __float2half(stage[warp][e]);
}

torch::Tensor tc_wmma_global(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    tc_check(m, n, out, "tc_wmma_global");
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    TORCH_CHECK(h % 16 == 0 && w % 16 == 0 && k % 16 == 0, "tc_wmma_global: rung 1 loads whole 16x16 tiles from "
                "global memory, so h, w and k must be multiples of 16; got h = ", std::to_string(h), ", w = ", std::to_string(w), ", k = ", std::to_string(k),
                " (rung 2 takes any size)");
    dim3 blocks(cdiv(w, 32), cdiv(h, 32));
    wmma_global_k<<<blocks, 32 * WMMA_WARPS, 0, at::cuda::getCurrentCUDAStream()>>>(
            half_ptr(m), half_ptr(n), half_ptr_mut(out), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_TENSOR_CORES_01_WMMA_CU
