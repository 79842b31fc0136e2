// The sum ladder's dispatcher (notebook 09; gpu_course/kernels/reductions.py names the rungs):
// sum_rung(x, out, rung, blocks) writes the sum of the fp32 tensor x into the one-element out.
// Rungs 1-4 use one thread per element; `blocks` is the grid of the grid-stride rungs 5-8.
void sum_rung(torch::Tensor x, torch::Tensor out, int64_t rung, int64_t blocks) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat,
                "sum_rung: x and out must be float32 tensors");
    TORCH_CHECK(out.numel() == 1, "sum_rung: out must have exactly one element, e.g. torch.empty(1)");
    TORCH_CHECK(x.numel() < (1LL << 30), "sum_rung: the kernels index with int: x must have < 2^30 elements");
    TORCH_CHECK(rung >= 1 && rung <= 8, "sum_rung: rung must be 1..8, got ", rung);
    TORCH_CHECK(rung <= 4 || (blocks >= 1 && blocks <= (1 << 20)), "sum_rung: blocks must be 1..2^20, got ", blocks);
    TORCH_CHECK(rung < 7 || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0,
                "sum_rung: rungs 7-8 read float4: x must be 16-byte aligned (a slice such as x[1:] is not): pass .clone()");
    int n = x.numel();
    const float* xp = x.data_ptr<float>();
    float* op = out.data_ptr<float>();
    if (rung != 8 || n == 0) out.zero_();   // the atomic rungs add into out
    if (n == 0) return;
    switch (rung) {
        case 1: sum_atomic_k<<<cdiv(n, RB), RB>>>(xp, op, n); break;
        case 2: sum_tree_divergent_k<<<cdiv(n, RB), RB>>>(xp, op, n); break;
        case 3: sum_tree_conflicts_k<<<cdiv(n, RB), RB>>>(xp, op, n); break;
        case 4: sum_sequential_k<<<cdiv(n, RB), RB>>>(xp, op, n); break;
        case 5: sum_coarsened_k<<<blocks, RB>>>(xp, op, n); break;
        case 6: sum_shuffle_k<<<blocks, RB>>>(xp, op, n); break;
        case 7: sum_float4_k<SUM_U><<<blocks, RB>>>(xp, op, n); break;
        case 8: {
            auto partials = torch::empty({blocks}, x.options());
            sum_last_block_k<SUM_U><<<blocks, RB>>>(xp, partials.data_ptr<float>(), op, n);
            break;
        }
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
