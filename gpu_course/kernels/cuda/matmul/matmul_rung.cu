#ifndef GPU_COURSE_MATMUL_MATMUL_RUNG_CU
#define GPU_COURSE_MATMUL_MATMUL_RUNG_CU
#include "../common.cuh"
#include "01_naive.cu"
#include "02_coalesced.cu"
#include "03_smem_tiles.cu"
#include "04_1d_blocktiling.cu"
#include "05_2d_blocktiling.cu"
#include "06_vectorized.cu"
#include "07_conflict_free_prefetch.cu"
#include "08_warptiling.cu"
#include "09_autotuned.cu"
#include "10_async_pipeline.cu"
// The ladder's dispatcher (notebook 04, bench/matmul_ladder.py), after the rung files it includes. matmul_rung(m, n,
// out, rung) runs a rung in the shape notebook 04 teaches; matmul_rung_cfg(m, n, out, rung, cfg) one of its compiled
// tile shapes (cfg 0 is that default), written once, here and in 09/10's cases: matmul_ladder.py reads RUNG3_TW and
// the launches, in cfg order (a switch's default last). A new rung: a file, an #include, a case, a name in RUNGS.
static std::string shape_of(const torch::Tensor& t) {   // "1000x777"
    std::string s = t.dim() ? "" : "a scalar";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "x" : "") + std::to_string(t.size(i));
    return s;
}

static void mm_check(const torch::Tensor& m, const torch::Tensor& n, const torch::Tensor& out) {
    CHECK_INPUT(m); CHECK_INPUT(n); CHECK_INPUT(out);
    // each message is one C string (numbers joined into a std::string first): the form every build handles
    TORCH_CHECK(m.dim() == 2 && n.dim() == 2 && m.size(1) == n.size(0),
                ("matmul: m (h x k) and n (k x w) do not fit: " + shape_of(m) + " and " + shape_of(n)).c_str());
    TORCH_CHECK(out.dim() == 2 && out.size(0) == m.size(0) && out.size(1) == n.size(1),
                ("matmul: out must be h x w = " + std::to_string(m.size(0)) + "x" + std::to_string(n.size(1)) +
                 ", got " + shape_of(out)).c_str());
    TORCH_CHECK(m.numel() < (1LL << 31) && n.numel() < (1LL << 31) && out.numel() < (1LL << 31),
                "matmul: the kernels index with 32-bit ints; matrices must have < 2^31 elements");
}

static bool aligned16(const torch::Tensor& t) { return ((uintptr_t)t.data_ptr<float>()) % 16 == 0; }

static const int RUNG3_TW[] = {32, 16, 8};   // rung 3's tile widths (matmul_tiled's tw), by cfg
static const int RUNG_CFGS[] = {0, 1, 1, 3, 1, 2, 5, 1, 1, RUNG9_CFGS, RUNG10_CFGS};   // compiled tile shapes of rungs 1..10

torch::Tensor matmul_rung_cfg(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t rung, int64_t cfg) {
    mm_check(m, n, out);
    TORCH_CHECK(rung >= 1 && rung <= 10, ("matmul_rung: rung must be 1..10, got " + std::to_string(rung)).c_str());
    TORCH_CHECK(cfg >= 0 && cfg < RUNG_CFGS[rung], ("matmul_rung_cfg: rung " + std::to_string(rung) +
                " has tile shapes 0.." + std::to_string(RUNG_CFGS[rung] - 1) + ", got cfg " + std::to_string(cfg)).c_str());
    int h = m.size(0), k = m.size(1), w = n.size(1);
    const float* mp = m.data_ptr<float>();
    const float* np_ = n.data_ptr<float>();
    float* op = out.data_ptr<float>();
    // float4 paths (rungs 6-9): rows a multiple of 4 floats long and 16-byte aligned bases
    bool vm = k % 4 == 0 && aligned16(m), vn = w % 4 == 0 && aligned16(n) && aligned16(out);
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    switch (rung) {
        case 1: mm_rows_k<<<dim3(cdiv(h, 16), cdiv(w, 16)), dim3(16, 16), 0, stream>>>(mp, np_, op, h, w, k); break;
        case 2: mm_cols_k<<<dim3(cdiv(w, 16), cdiv(h, 16)), dim3(16, 16), 0, stream>>>(mp, np_, op, h, w, k); break;
        case 3: return matmul_tiled(m, n, out, RUNG3_TW[cfg]);
        case 10: matmul_async(m, n, out, cfg, RUNG10_GROUP); break;   // transposes m first: needs the tensors
        case 4: mm_tile1d_k<64, 64, 8, 8><<<dim3(cdiv(w, 64), cdiv(h, 64)), 64 * 64 / 8, 0, stream>>>(mp, np_, op, h, w, k); break;
        case 5:   // cfg 1: the same kernel with __launch_bounds__(256, 2), at most 128 registers a thread
            if (cfg == 0) mm_tile2d_k<128, 128, 8, 8, 8, 1><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256, 0, stream>>>(mp, np_, op, h, w, k);
            else mm_tile2d_k<128, 128, 8, 8, 8, 2><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256, 0, stream>>>(mp, np_, op, h, w, k);
            break;
        case 6:
            switch (cfg) {
                case 0: mm_vec_k<128, 128, 8, 8, 8><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
                case 1: mm_vec_k<128, 128, 16, 8, 8><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
                case 2: mm_vec_k<64, 128, 8, 8, 8><<<dim3(cdiv(w, 128), cdiv(h, 64)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
                case 3: mm_vec_k<128, 64, 8, 8, 8><<<dim3(cdiv(w, 64), cdiv(h, 128)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
                default: mm_vec_k<64, 64, 16, 4, 4><<<dim3(cdiv(w, 64), cdiv(h, 64)), 256, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
            }
            break;
        case 7: mm_pipe_k<128, 128, 8><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 8: mm_warp_k<128, 128, 16, 64, 64, 2, 4, 4, 128><<<dim3(cdiv(w, 128), cdiv(h, 128)), 128, 0, stream>>>(
                    mp, np_, op, h, w, k, vm, vn); break;
        default: mm_warp_tuned(cfg, mp, np_, op, h, w, k, vm, vn); break;   // rung 9: cfg picks the shape
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor matmul_rung(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t rung) {
    return matmul_rung_cfg(m, n, out, rung, 0);
}

// Rung 9's cfg 4 shape fed m transposed once (mt, as rung 10 reads it) through registers: the control for rung 10.
torch::Tensor matmul_rung9_mt(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    mm_check(m, n, out);
    matmul_warp_mt(m, n, out, aligned16(n) && aligned16(out));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// Rung 10 in its default shape with launch order `group` (0: row order; matmul_rung uses RUNG10_GROUP).
torch::Tensor matmul_rung10_order(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t group) {
    mm_check(m, n, out);
    TORCH_CHECK(group >= 0 && group <= 1024,
                ("matmul_rung10_order: group must be 0..1024 rows of blocks, got " + std::to_string(group)).c_str());
    matmul_async(m, n, out, 0, group);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_MATMUL_MATMUL_RUNG_CU
