#ifndef GPU_COURSE_TENSOR_CORES_TC_COMMON_CUH
#define GPU_COURSE_TENSOR_CORES_TC_COMMON_CUH
#include "../common.cuh"
// What every rung of notebook 12's tensor-core ladder shares (gpu_course/kernels/tensor_cores.py joins this file
// first): out (h x w) = m (h x k) @ n (k x w), all three row-major float16, products summed in float32.
#include <cstdint>
#include <cuda_fp16.h>
#include <mma.h>

// torch's float16 (at::Half) and CUDA's (__half) are the same 16 bits under two names.
static inline const __half* half_ptr(const torch::Tensor& t) {
    return reinterpret_cast<const __half*>(t.data_ptr<at::Half>());
}
static inline __half* half_ptr_mut(torch::Tensor& t) { return reinterpret_cast<__half*>(t.data_ptr<at::Half>()); }

// A tensor's shape as text, "1000 x 776", built without streams (a number streamed into a TORCH_CHECK message
// crashed the module on one GPU image).
static std::string tc_shape(const torch::Tensor& t) {
    std::string s;
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? " x " : "") + std::to_string(t.size(i));
    return t.dim() ? s : "a scalar";
}

// The checks every rung's host function makes, with messages a learner can act on.
static void tc_check(const torch::Tensor& m, const torch::Tensor& n, const torch::Tensor& out, const char* fn) {
    CHECK_INPUT(m); CHECK_INPUT(n); CHECK_INPUT(out);
    TORCH_CHECK(m.scalar_type() == torch::kHalf && n.scalar_type() == torch::kHalf && out.scalar_type() == torch::kHalf,
                (std::string(fn) + ": m, n and out must be float16 tensors (x.half()); got " + c10::toString(m.scalar_type()) +
                 ", " + c10::toString(n.scalar_type()) + " and " + c10::toString(out.scalar_type())).c_str());
    TORCH_CHECK(m.dim() == 2 && n.dim() == 2 && m.size(1) == n.size(0),  // messages as one string (see notebook 04)
                (std::string(fn) + ": m (h x k) and n (k x w) do not fit: " + tc_shape(m) + " and " + tc_shape(n)).c_str());
    TORCH_CHECK(out.dim() == 2 && out.size(0) == m.size(0) && out.size(1) == n.size(1), (std::string(fn) + ": out must be h x w = " +
                std::to_string(m.size(0)) + " x " + std::to_string(n.size(1)) + ", got " + tc_shape(out)).c_str());
    TORCH_CHECK(m.numel() < (1LL << 31) && n.numel() < (1LL << 31) && out.numel() < (1LL << 31),
                fn, ": the kernels index with 32-bit ints; matrices must have < 2^31 elements");
}

// Rungs 3 to 5 move 16-byte pieces of rows (8 halves): every row of m, n and out must start on a 16-byte
// boundary, so k and w must be multiples of 8 and the tensors 16-byte aligned (a fresh tensor is).
static void tc_check_rows16(const torch::Tensor& m, const torch::Tensor& n, const torch::Tensor& out, const char* fn) {
    const long k = m.size(1), w = n.size(1);
    TORCH_CHECK(k % 8 == 0 && w % 8 == 0, fn, ": k and w must be multiples of 8 (rows of whole 16-byte pieces), "
                "got k = ", std::to_string(k), ", w = ", std::to_string(w), "; pad them with zeros (torch.nn.functional.pad), or use rung 2, "
                "which takes any size");
    TORCH_CHECK(((uintptr_t)m.data_ptr() | (uintptr_t)n.data_ptr() | (uintptr_t)out.data_ptr()) % 16 == 0,
                fn, ": m, n and out must start on a 16-byte boundary (a view that starts mid-row does not): "
                "pass x.contiguous().clone()");
}

// The swizzle of rungs 3 to 5: a shared tile whose rows are 128 bytes (64 halves) or a multiple, stored in
// 16-byte pieces (8 halves). Piece `chunk` of row `row` is kept at piece chunk ^ (row % 8) of that row, so that the
// 8 rows an ldmatrix reads at once (the same logical piece of 8 consecutive rows) lie in 8 different groups of 4
// banks: one pass instead of eight. (Hopper's TMA writes the same pattern itself: CU_TENSOR_MAP_SWIZZLE_128B.)
// Built with -DTC_NO_SWIZZLE, every piece stays in place (the same results, with the bank conflicts back): what
// notebook 12's profiler comparison measures.
#ifdef TC_NO_SWIZZLE
__host__ __device__ inline int swz(int, int chunk) { return chunk; }
#else
__host__ __device__ inline int swz(int row, int chunk) { return chunk ^ (row % 8); }
#endif
// The element (row, col) of such a tile, rows `rl` halves long: its offset in halves.
__host__ __device__ inline int swz_at(int row, int col, int rl) { return row * rl + swz(row, col / 8) * 8 + col % 8; }

// Where the PTX ISA puts the elements of mma.m16n8k16's fragments (f16 inputs, f32 accumulators):
// lane `lane` holds element i of its fragment at (row, col) of the tile. A is 16 x 16 (m x k, 8 halves a lane),
// B is 16 x 8 (k x n, 4 halves), C and D are 16 x 8 (4 floats). groupID = lane / 4, threadID_in_group = lane % 4.
__host__ __device__ inline void mma_a_rc(int lane, int i, int& row, int& col) {
    row = lane / 4 + 8 * ((i / 2) % 2);
    col = (lane % 4) * 2 + i % 2 + 8 * (i / 4);
}
__host__ __device__ inline void mma_b_rc(int lane, int i, int& row, int& col) {
    row = (lane % 4) * 2 + i % 2 + 8 * (i / 2);
    col = lane / 4;
}
__host__ __device__ inline void mma_c_rc(int lane, int i, int& row, int& col) {
    row = lane / 4 + 8 * (i / 2);
    col = (lane % 4) * 2 + i % 2;
}

// The drawings of notebook 12: which lane holds each element of a fragment, as a 16 x 16 (or 16 x 8) grid of
// lane * 16 + element index. wmma: a warp fills its accumulator with those numbers and stores it with
// store_matrix_sync, so the grid is where the GPU (or the emulation) keeps them. mma.sync: each lane writes its
// numbers where the PTX ISA's mapping (mma_*_rc above) says the instruction expects them.
__global__ void wmma_layout_k(float* __restrict__ grid) {
    using namespace nvcuda;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    const int lane = threadIdx.x;
    for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = lane * 16 + i;
    wmma::store_matrix_sync(grid, acc, 16, wmma::mem_row_major);
}

__global__ void mma_layout_k(float* __restrict__ a, float* __restrict__ b, float* __restrict__ c) {
    const int lane = threadIdx.x;
    int row, col;
    for (int i = 0; i < 8; ++i) {
        mma_a_rc(lane, i, row, col);
        a[row * 16 + col] = lane * 16 + i;
    }
    for (int i = 0; i < 4; ++i) {
        mma_b_rc(lane, i, row, col);
        b[row * 8 + col] = lane * 16 + i;
        mma_c_rc(lane, i, row, col);
        c[row * 8 + col] = lane * 16 + i;
    }
}

// {wmma accumulator (16 x 16), mma A (16 x 16), mma B (16 x 8), mma C (16 x 8)}: lane * 16 + element, float32.
std::vector<torch::Tensor> fragment_layouts(torch::Tensor like) {
    auto opt = like.options().dtype(torch::kFloat);
    auto w = torch::full({16, 16}, -1.0, opt), a = torch::full({16, 16}, -1.0, opt);
    auto b = torch::full({16, 8}, -1.0, opt), c = torch::full({16, 8}, -1.0, opt);
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    wmma_layout_k<<<1, 32, 0, stream>>>(w.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    mma_layout_k<<<1, 32, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {w, a, b, c};
}
#endif  // GPU_COURSE_TENSOR_CORES_TC_COMMON_CUH
