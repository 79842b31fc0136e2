// Notebook 07's Triton matmul called from C++: the checks, the output's allocation and the launch of the
// kernel Python compiled (and the autotuner chose), in one call from Python, as torch.matmul makes its
// cuBLAS call. What Python then spends per call is one dictionary look-up and this function's call.
//
// matmul_kernel's runtime arguments, in order: a, b, bias (out where there is none: never read), out,
// h, w, k, and the strides of a, b and out (two each).
#define TRITON_ROUTE_WHO "matmul_route"
#include "launch.h"

namespace {

at::Tensor run(const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, int64_t id, int64_t block_m,
               int64_t block_n) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) &&
                  a.scalar_type() == b.scalar_type() && a.device() == b.device(),
              "matmul_route: a (h x k) and b (k x w) must be CUDA matrices of one dtype on one device");
  TORCH_CHECK(block_m > 0 && block_n > 0, "matmul_route: the tile's sides must be positive");
  const int64_t h = a.size(0), k = a.size(1), w = b.size(1);
  auto out = at::empty({h, w}, a.options());
  const at::Tensor& bias_or_out = bias ? *bias : out;  // without a bias the kernel never reads it
  const int64_t tiles = ((h + block_m - 1) / block_m) * ((w + block_n - 1) / block_n);
  launch(kernel(id), tiles, {P(a), P(b), P(bias_or_out), P(out), I(h), I(w), I(k), I(a.stride(0)), I(a.stride(1)),
                             I(b.stride(0)), I(b.stride(1)), I(out.stride(0)), I(out.stride(1))}, a.device());
  return out;
}

}  // namespace

// out = a @ b with registered kernel `id` (tiles of block_m x block_n).
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, int64_t id, int64_t block_m, int64_t block_n) {
  return run(a, b, nullptr, id, block_m, block_n);
}

// out = activation(a @ b + bias), the activation compiled into kernel `id`.
at::Tensor matmul_bias(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, int64_t id,
                       int64_t block_m, int64_t block_n) {
  TORCH_CHECK(bias.is_cuda() && bias.dim() == 1 && bias.size(0) == b.size(1) && bias.device() == a.device(),
              "matmul_route: bias must be a CUDA vector with one value per column of b");
  return run(a, b, &bias, id, block_m, block_n);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_kernel", &add_kernel, "register a compiled Triton kernel; returns its id");
  m.def("matmul", &matmul, "a @ b through a registered Triton kernel");
  m.def("matmul_bias", &matmul_bias, "activation(a @ b + bias) through a registered Triton kernel");
}
