// Notebook 11's FlashAttention forward called from C++: the output's and the LSE's allocations, the tensor maps
// and the launch of the kernel Python compiled (and the autotuner chose), in one call from Python, as
// torch's scaled_dot_product_attention makes its own. What Python then spends per call is one dictionary look-up
// and this function's call.
//
// The kernels' runtime arguments, in order:
//   attention_fwd_kernel (pointer loads):         q, k, v, out, lse, scale, N
//   attention_fwd_desc_kernel (tensor maps, TMA): q, k, v as tensor maps of the (B*H*N, d) matrices, each followed
//                                                 by its shape and strides; out, lse, scale, N, B*H
#define TRITON_ROUTE_WHO "attention_route"
#include "launch.h"

#include <vector>

// (out, lse) of FlashAttention's forward over q, k, v (batch, heads, N, d) with registered kernel `id`, on a grid
// of query blocks of `block_m` rows by B*H, or, where `programs` > 0 (a persistent grid), of at most that many
// programs, each taking pairs of query blocks of one head. `maps` is empty for the pointer kernel; for the
// descriptor kernel, per tensor map (q's, k's, v's): CUDA's element type and swizzle, then the box's rows and
// columns, as Triton compiled them (its tensordesc_meta).
std::vector<at::Tensor> forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, double scale,
                                int64_t id, int64_t block_m, int64_t programs, const std::vector<int64_t>& maps) {
  TORCH_CHECK(q_in.is_cuda() && q_in.dim() == 4 && k_in.sizes() == q_in.sizes() && v_in.sizes() == q_in.sizes(),
              "attention_route: q, k and v must be CUDA tensors (batch, heads, N, d) of one shape");
  TORCH_CHECK(block_m > 0 && programs >= 0 && (maps.empty() || maps.size() == 12),
              "attention_route: a query block of at least one row, and four numbers per tensor map");
  const auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();  // as the Python path copies
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3), BH = B * H;
  auto out = at::empty(q.sizes(), q.options());
  auto lse = at::empty({B, H, N}, q.options().dtype(at::kFloat));
  const int64_t blocks = (N + block_m - 1) / block_m;
  const int64_t grid_x = programs > 0 ? std::min(programs, BH * ((blocks + 1) / 2)) : blocks;
  const int64_t grid_y = programs > 0 ? 1 : BH;
  if (N == 0 || BH == 0) return {out, lse};
  const Kernel& kern = kernel(id);
  if (maps.empty()) {
    launch(kern, grid_x, grid_y, {P(q), P(k), P(v), P(out), P(lse), F(scale), I(N)}, q.device());
    return {out, lse};
  }
  const int64_t rows = BH * N, elem = q.element_size();
  TensorMap m[3];
  const at::Tensor* t[3] = {&q, &k, &v};
  for (int j = 0; j < 3; ++j)
    m[j] = encode_tiled(t[j]->data_ptr(), rows, D, elem, maps[4 * j], maps[4 * j + 1], maps[4 * j + 2],
                        maps[4 * j + 3]);
  launch(kern, grid_x, grid_y,
         {M(m[0]), I(rows), I(D), I(D), I(1), M(m[1]), I(rows), I(D), I(D), I(1), M(m[2]), I(rows), I(D), I(D), I(1),
          P(out), P(lse), F(scale), I(N), I(BH)},
         q.device());
  return {out, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_kernel", &add_kernel, "register a compiled Triton kernel; returns its id");
  m.def("forward", &forward, "FlashAttention's forward through a registered Triton kernel: [out, lse]");
}
