#ifndef GPU_COURSE_REDUCE_SUM_RUNG_CU
#define GPU_COURSE_REDUCE_SUM_RUNG_CU
#include "../common.cuh"
#include "01_atomic.cu"
#include "02_tree_divergent.cu"
#include "03_tree_conflicts.cu"
#include "04_sequential.cu"
#include "05_coarsened.cu"
#include "06_warp_shuffle.cu"
#include "07_float4.cu"
#include "08_last_block.cu"
// The sum ladder's dispatcher (notebook 09; gpu_course/kernels/reductions.py names the rungs):
// sum_rung(x, out, rung, blocks) writes the sum of the fp32 tensor x into the one-element out.
// Rung 1 adds every element into out with an atomic. Rungs 2-4 use one thread per element: each
// block writes its sum to an array of partials, and the same kernel runs again on the partials
// (RB times fewer each pass) until one block writes out. Rungs 5-6 run `blocks` blocks over x with a
// grid-stride loop, then one block over their `blocks` partials. Rungs 7-8 are single launches.

// One pass of rung 2, 3 or 4 (or, for rung 0, of rung 3's padded control) over n values: cdiv(n, RB) blocks,
// one partial each.
static void tree_pass(int rung, const float* in, float* partial, int n) {
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    switch (rung) {
        case 0: sum_tree_padded_k<<<cdiv(n, RB), RB, 0, stream>>>(in, partial, n); break;
        case 2: sum_tree_divergent_k<<<cdiv(n, RB), RB, 0, stream>>>(in, partial, n); break;
        case 3: sum_tree_conflicts_k<<<cdiv(n, RB), RB, 0, stream>>>(in, partial, n); break;
        case 4: sum_sequential_k<<<cdiv(n, RB), RB, 0, stream>>>(in, partial, n); break;
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The passes of a tree rung over n >= 1 values of xp, the last one writing op: ping-pong between two arrays
// (a pass must not overwrite partials another block still reads).
static void tree_sum(int rung, const torch::Tensor& x, const float* xp, float* op, int n) {
    int g = cdiv(n, RB);
    auto a = torch::empty({g}, x.options()), b = torch::empty({cdiv(g, RB)}, x.options());
    float* buf[2] = {a.data_ptr<float>(), b.data_ptr<float>()};
    const float* in = xp;
    for (int k = 0; ; k ^= 1) {
        g = cdiv(n, RB);
        float* dst = g == 1 ? op : buf[k];
        tree_pass(rung, in, dst, n);
        if (g == 1) break;
        in = dst;
        n = g;
    }
}

// One pass of rung 5 or 6 over n values with `blocks` blocks, one partial each.
static void stride_pass(int rung, const float* in, float* partial, int n, int blocks) {
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    if (rung == 5) sum_coarsened_k<<<blocks, RB, 0, stream>>>(in, partial, n);
    else sum_shuffle_k<<<blocks, RB, 0, stream>>>(in, partial, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void sum_rung(torch::Tensor x, torch::Tensor out, int64_t rung, int64_t blocks) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat,
                "sum_rung: x and out must be float32 tensors");
    TORCH_CHECK(out.numel() == 1, "sum_rung: out must have exactly one element, e.g. torch.empty(1)");
    TORCH_CHECK(x.numel() < (1LL << 30), "sum_rung: the kernels index with int: x must have < 2^30 elements");
    TORCH_CHECK(rung >= 1 && rung <= 8, ("sum_rung: rung must be 1..8, got " + std::to_string(rung)).c_str());
    TORCH_CHECK(rung <= 4 || (blocks >= 1 && blocks <= (1 << 20)),
                ("sum_rung: blocks must be 1..2^20, got " + std::to_string(blocks)).c_str());
    TORCH_CHECK(rung < 7 || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0,
                "sum_rung: rungs 7-8 read float4: x must be 16-byte aligned (a slice such as x[1:] is not): pass .clone()");
    int n = x.numel();
    const float* xp = x.data_ptr<float>();
    float* op = out.data_ptr<float>();
    if (n == 0 || rung == 1 || rung == 7) out.zero_();   // the atomic rungs add into out
    if (n == 0) return;
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    if (rung >= 2 && rung <= 4) {
        tree_sum(rung, x, xp, op, n);
        return;
    }
    switch (rung) {
        case 1: sum_atomic_k<<<cdiv(n, RB), RB, 0, stream>>>(xp, op, n); break;
        case 5: case 6: {
            if (blocks == 1) { stride_pass(rung, xp, op, n, 1); return; }
            auto partials = torch::empty({blocks}, x.options());
            stride_pass(rung, xp, partials.data_ptr<float>(), n, blocks);
            stride_pass(rung, partials.data_ptr<float>(), op, blocks, 1);   // one block sums the partials
            return;
        }
        case 7: sum_float4_k<SUM_U><<<blocks, RB, 0, stream>>>(xp, op, n); break;
        case 8: {
            auto partials = torch::empty({blocks}, x.options());
            sum_last_block_k<SUM_U><<<blocks, RB, 0, stream>>>(xp, partials.data_ptr<float>(), op, n);
            break;
        }
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Rung 3's padded control (sum_tree_padded_k), not a rung: the sum of x into the one-element out, in the passes
// of rungs 2-4.
void sum_tree_padded(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat,
                "sum_tree_padded: x and out must be float32 tensors");
    TORCH_CHECK(out.numel() == 1, "sum_tree_padded: out must have exactly one element, e.g. torch.empty(1)");
    TORCH_CHECK(x.numel() < (1LL << 30), "sum_tree_padded: the kernel indexes with int: x must have < 2^30 elements");
    if (x.numel() == 0) { out.zero_(); return; }
    tree_sum(0, x, x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
#endif  // GPU_COURSE_REDUCE_SUM_RUNG_CU
