#ifndef GPU_COURSE_SCAN_04_THREE_PASS_CU
#define GPU_COURSE_SCAN_04_THREE_PASS_CU
#include "../common.cuh"
#include "03_tiles.cu"                 // load_tile, store_tile, warp_scan, scan_tile
#include "../reduce/07_float4.cu"      // sum4, and block_sum
// Multi-block scan in three passes (reduce, then scan): (1) each block sums its tile;
// (2) one block scans the tile sums into each tile's offset; (3) each block scans its tile again,
// from x, and adds its offset. x is read twice and out written once: 3 passes over memory.
__global__ void scan_tile_sums_k(const float* __restrict__ x, float* __restrict__ sums, int n) {
    float4 v[SI];
    load_tile(x, n, blockIdx.x, v);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < SI; j++) s += sum4(v[j]);
    s = block_sum(s);
    if (threadIdx.x == 0) sums[blockIdx.x] = s;
}

// One block of 1024 threads turns m tile sums into exclusive offsets, 1024 at a time with a carry.
__global__ void scan_offsets_k(float* __restrict__ sums, int m) {
    __shared__ float wsum[33];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float carry = 0.0f;
    for (int base = 0; base < m; base += blockDim.x) {
        int i = base + threadIdx.x;
        float a = i < m ? sums[i] : 0.0f;
        float incl = warp_scan(a);
        float before = __shfl_up_sync(0xffffffffu, incl, 1);
        if (lane == 0) before = 0.0f;
        if (lane == 31) wsum[warp] = incl;
        __syncthreads();
        if (warp == 0) {
            float w = lane < blockDim.x / 32 ? wsum[lane] : 0.0f;
            float wi = warp_scan(w);
            float we = __shfl_up_sync(0xffffffffu, wi, 1);
            wsum[lane] = lane == 0 ? 0.0f : we;
            if (lane == 31) wsum[32] = wi;
        }
        __syncthreads();
        if (i < m) sums[i] = carry + (wsum[warp] + before);
        carry += wsum[32];
        __syncthreads();   // wsum is rewritten by the next round
    }
}

__global__ void scan_add_tiles_k(const float* __restrict__ x, float* __restrict__ out,
                                 const float* __restrict__ offsets, int n) {
    __shared__ float seg[33];
    float4 v[SI];
    load_tile(x, n, blockIdx.x, v);
    scan_tile(v, seg);
    store_tile(out, n, blockIdx.x, v, offsets[blockIdx.x]);
}

static void check_scan(const torch::Tensor& x, const torch::Tensor& out, const char* name) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat && out.numel() == x.numel(),
                name, ": x and out must be float32 tensors of the same size");
    TORCH_CHECK(x.numel() < (1LL << 30), name, ": the kernels index with int: at most 2^30 elements");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0,
                name, ": x and out must be 16-byte aligned for float4 (a slice such as x[1:] is not): pass .clone()");
}

void scan_three_pass(torch::Tensor x, torch::Tensor out) {
    check_scan(x, out, "scan_three_pass");
    int n = x.numel(), tiles = cdiv(n, STILE);
    if (n == 0) return;
    auto sums = torch::empty({tiles}, x.options());
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    scan_tile_sums_k<<<tiles, ST, 0, stream>>>(x.data_ptr<float>(), sums.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    scan_offsets_k<<<1, 1024, 0, stream>>>(sums.data_ptr<float>(), tiles);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    scan_add_tiles_k<<<tiles, ST, 0, stream>>>(x.data_ptr<float>(), out.data_ptr<float>(), sums.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_SCAN_04_THREE_PASS_CU
