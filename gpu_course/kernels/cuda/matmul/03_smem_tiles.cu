#ifndef GPU_COURSE_MATMUL_03_SMEM_TILES_CU
#define GPU_COURSE_MATMUL_03_SMEM_TILES_CU
#include "../common.cuh"
// rung 3: shared-memory tiles, the tile width TW a template parameter (notebooks 04 and 05 time it).
// out (h x w) is m (h x k) times n (k x w), all row-major fp32. One thread per output; a block of
// TW x TW threads stages one TW x TW tile of m and one of n in shared memory per phase.
template <int TW>
__global__ void matmul_tiled_k(const float* __restrict__ m, const float* __restrict__ n,
                               float* __restrict__ out, int h, int w, int k) {
    __shared__ float ms[TW][TW];
    __shared__ float ns[TW][TW];
    int tr = threadIdx.y, tc = threadIdx.x;
    int r = blockIdx.y * TW + tr, c = blockIdx.x * TW + tc;
    float p = 0.0f;
    for (int ph = 0; ph < k; ph += TW) {
        // each thread loads one element of each tile (zero outside the matrices)
        ms[tr][tc] = (r < h && ph + tc < k) ? m[r * k + ph + tc] : 0.0f;
        ns[tr][tc] = (c < w && ph + tr < k) ? n[(ph + tr) * w + c] : 0.0f;
        __syncthreads();                      // the tiles are complete
        for (int i = 0; i < TW; ++i) p += ms[tr][i] * ns[i][tc];
        __syncthreads();                      // everyone is done reading before the next load
    }
    if (r < h && c < w) out[r * w + c] = p;
}

torch::Tensor matmul_tiled(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t tw) {
    CHECK_INPUT(m); CHECK_INPUT(n); CHECK_INPUT(out);
    int h = m.size(0), k = m.size(1), w = n.size(1);
    // each message is one C string (numbers joined into a std::string first): the form every build handles
    TORCH_CHECK(n.size(0) == k, ("matmul_tiled: m is " + std::to_string(h) + "x" + std::to_string(k) +
                                 " but n has " + std::to_string(n.size(0)) + " rows").c_str());
    TORCH_CHECK(out.dim() == 2 && out.size(0) == h && out.size(1) == w,
                ("matmul_tiled: out must be " + std::to_string(h) + "x" + std::to_string(w)).c_str());
    const float* mp = m.data_ptr<float>();
    const float* np_ = n.data_ptr<float>();
    float* op = out.data_ptr<float>();
    dim3 blocks(cdiv(w, tw), cdiv(h, tw));
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    if (tw == 8) matmul_tiled_k<8><<<blocks, dim3(8, 8), 0, stream>>>(mp, np_, op, h, w, k);
    else if (tw == 16) matmul_tiled_k<16><<<blocks, dim3(16, 16), 0, stream>>>(mp, np_, op, h, w, k);
    else if (tw == 32) matmul_tiled_k<32><<<blocks, dim3(32, 32), 0, stream>>>(mp, np_, op, h, w, k);
    else TORCH_CHECK(false, ("matmul_tiled: tw must be 8, 16 or 32, got " + std::to_string(tw)).c_str());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_MATMUL_03_SMEM_TILES_CU
