// LayerNorm as one C++ autograd node whose forward and backward launch the Triton kernels that
// gpu_course/kernels/triton_layernorm/ compiled, through the CUDA driver's cuLaunchKernel (what
// Inductor's C++ wrapper does for a whole graph). Autograd runs a CUDA backward on a worker thread of
// its own; a Python backward there pays the interpreter (and Triton's Python launcher) again on every
// step, a C++ one does not.
//
// The driver, the kernels' registry and launch(): triton_route/launch.h.
#define TRITON_ROUTE_WHO "layer_norm_node"
#include "../triton_route/launch.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct LayerNormNode : public torch::autograd::Function<LayerNormNode> {
  // x (h, w) with contiguous rows; weight and bias contiguous; fwd, dx, dwdb: registered kernels.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, double eps, int64_t fwd, int64_t dx, int64_t dwdb,
                            int64_t groups, int64_t block_n) {
    const int64_t h = x.size(0), w = x.size(1);
    auto y = at::empty({h, w}, x.options());
    auto stats = x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
    auto mean = at::empty({h}, stats), rstd = at::empty({h}, stats);
    launch(kernel(fwd), h, {P(x), P(weight), P(bias), P(y), P(mean), P(rstd), I(x.stride(0)), I(y.stride(0)),
                            I(w), F(eps)}, x.device());
    ctx->save_for_backward({x, weight, mean, rstd});
    ctx->saved_data["k"] = std::vector<int64_t>{dx, dwdb, groups, block_n};
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto k = ctx->saved_data["k"].toIntVector();
    at::Tensor dy = grads[0];
    // the dx kernel was compiled for rows of w elements starting on 16-byte boundaries
    if (!dy.is_contiguous() || reinterpret_cast<uintptr_t>(dy.data_ptr()) % 16 != 0)
      dy = dy.clone(at::MemoryFormat::Contiguous);
    const int64_t h = x.size(0), w = x.size(1), groups = k[2], block_n = k[3];
    auto dx = at::empty({h, w}, x.options());
    auto part = at::empty({2, groups, w}, mean.options());  // every row written by its program
    launch(kernel(k[0]), groups, {P(dy), P(x), P(weight), P(mean), P(rstd), P(dx), P(part), I(dy.stride(0)),
                                  I(x.stride(0)), I(dx.stride(0)), I(h), I(w), I(groups)}, x.device());
    auto dw = at::empty({w}, weight.options()), db = at::empty({w}, weight.options());
    launch(kernel(k[1]), (w + block_n - 1) / block_n, {P(part), P(dw), P(db), I(groups), I(w)}, x.device());
    return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

// y = LayerNorm(x) with this node as y's grad_fn.
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                      int64_t fwd, int64_t dx, int64_t dwdb, int64_t groups, int64_t block_n) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.stride(1) == 1 && weight.is_contiguous() && bias.is_contiguous(),
              "layer_norm_node: x must be a CUDA matrix with contiguous rows, weight and bias contiguous");
  return LayerNormNode::apply(x, weight, bias, eps, fwd, dx, dwdb, groups, block_n);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_kernel", &add_kernel, "register a compiled Triton kernel; returns its id");
  m.def("layer_norm", &layer_norm, "LayerNorm through the C++ autograd node");
}
