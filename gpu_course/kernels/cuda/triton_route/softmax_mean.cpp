// Notebook 06's fused softmax and its two parallel means called from C++: the checks, the allocations and the
// launches of the kernels Python compiled, in one call from Python, as torch.softmax and torch.mean make theirs.
// What Python then spends per call is one dictionary look-up and this function's call. Every output is
// allocated as the Python launchers allocate it (in torch's default dtype: fp32 unless changed).
//
// The kernels' runtime arguments, in order:
//   softmax_rows_kernel: x, out, x's row stride, out's row stride, h, w
//   partial_sums_kernel: x, partial, n          sum_to_mean_kernel: partial, out, m, n
//   mean_atomic_kernel:  x, out, n
#define TRITON_ROUTE_WHO "softmax_mean_route"
#include "launch.h"

namespace {

at::TensorOptions as_python_allocates(const at::Tensor& x) {
  return x.options().dtype(c10::get_default_dtype());  // torch.empty(..., device=x.device): the default dtype
}

}  // namespace

// softmax along the rows of x with registered kernel `id`, `rows` rows a program.
at::Tensor softmax(const at::Tensor& x, int64_t id, int64_t rows) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.stride(1) == 1,
              "softmax_mean_route: x must be a CUDA matrix whose columns are contiguous");
  TORCH_CHECK(rows > 0, "softmax_mean_route: a program takes at least one row");
  const int64_t h = x.size(0), w = x.size(1);
  auto out = at::empty({h, w}, as_python_allocates(x));
  if (h > 0) launch(kernel(id), (h + rows - 1) / rows, {P(x), P(out), I(x.stride(0)), I(out.stride(0)), I(h), I(w)},
                    x.device());
  return out;
}

// The mean of x's elements in two passes: kernel `partial_id` writes one sum per tile of `tile` elements,
// kernel `sum_id` (one program) adds them and divides by n.
at::Tensor mean_two_pass(const at::Tensor& x, int64_t partial_id, int64_t sum_id, int64_t tile) {
  TORCH_CHECK(x.is_cuda() && tile > 0, "softmax_mean_route: x must be a CUDA tensor and a tile positive");
  const int64_t n = x.numel(), m = (n + tile - 1) / tile;
  auto partial = at::empty({m}, as_python_allocates(x));
  auto out = at::empty({1}, as_python_allocates(x));
  if (m > 0) launch(kernel(partial_id), m, {P(x), P(partial), I(n)}, x.device());
  launch(kernel(sum_id), 1, {P(partial), P(out), I(m), I(n)}, x.device());
  return out.select(0, 0);
}

// The mean of x's elements with one kernel, `id`: each program adds its tile's share into one zeroed number.
at::Tensor mean_atomic(const at::Tensor& x, int64_t id, int64_t tile) {
  TORCH_CHECK(x.is_cuda() && tile > 0, "softmax_mean_route: x must be a CUDA tensor and a tile positive");
  const int64_t n = x.numel(), programs = (n + tile - 1) / tile;
  auto out = at::zeros({1}, as_python_allocates(x));
  if (programs > 0) launch(kernel(id), programs, {P(x), P(out), I(n)}, x.device());
  return out.select(0, 0);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_kernel", &add_kernel, "register a compiled Triton kernel; returns its id");
  m.def("softmax", &softmax, "softmax along the rows through a registered Triton kernel");
  m.def("mean_two_pass", &mean_two_pass, "the two-pass mean through two registered Triton kernels");
  m.def("mean_atomic", &mean_atomic, "the one-kernel atomic mean through a registered Triton kernel");
}
