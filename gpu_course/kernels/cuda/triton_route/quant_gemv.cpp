// Notebook 15's k-major int4 GEMV (kernels/quant_gemv_kmajor.py) called from C++: the checks, the output's
// allocation, the stream's workspace and the launch of the kernel Python compiled, in one call from Python, as
// torch._weight_int4pack_mm makes its own. What Python then spends per call is one dictionary look-up and this
// function's call.
//
// int4_gemv_kmajor_kernel's runtime arguments, in order: x, words, scales, out, sums (fp32, n), tickets (int32,
// one per block of outputs), n, k, the scales' row stride, and ONE (the bits of 1.0f). Its programs leave sums
// and tickets zero, so one pair per stream serves every call on that stream.
#define TRITON_ROUTE_WHO "quant_gemv_route"
#include "launch.h"

#include <map>
#include <tuple>

namespace {

// (device, stream, n, blocks) -> (sums, tickets): made zero on a stream's first call, kept.
std::mutex workspace_lock;
std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::pair<at::Tensor, at::Tensor>> workspaces;

std::pair<at::Tensor, at::Tensor> workspace(const at::Tensor& x, int64_t n, int64_t blocks) {
  const auto stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(x.device()).id();
  const auto key = std::make_tuple(static_cast<int64_t>(x.device().index()), static_cast<int64_t>(stream), n, blocks);
  std::lock_guard<std::mutex> g(workspace_lock);
  auto hit = workspaces.find(key);
  if (hit == workspaces.end()) {
    hit = workspaces.emplace(key, std::make_pair(at::zeros({n}, x.options().dtype(at::kFloat)),
                                                 at::zeros({blocks}, x.options().dtype(at::kInt)))).first;
  }
  return hit->second;
}

}  // namespace

// out = x @ W.T for one row of x, W given as repack_kmajor's words ((k/8) x n int32) and group-wise scales
// ((k/128) x n), with registered kernel `id` (programs of block_n outputs over `steps` rows of words).
at::Tensor int4_gemv_kmajor(const at::Tensor& x, const at::Tensor& words, const at::Tensor& scales, int64_t id,
                            int64_t block_n, int64_t steps, int64_t one_bits) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.size(0) == 1 && x.stride(1) == 1,
              "quant_gemv_route: x must be one CUDA row (1, k) with contiguous columns");
  const int64_t k = x.size(1);
  TORCH_CHECK(k % 128 == 0 && words.scalar_type() == at::kInt && words.dim() == 2 && words.size(0) == k / 8 &&
                  words.is_contiguous() && words.device() == x.device(),
              "quant_gemv_route: words must be repack_kmajor's contiguous (k/8, n) int32 tensor, on x's device");
  const int64_t n = words.size(1);
  TORCH_CHECK(scales.dim() == 2 && scales.size(0) == k / 128 && scales.size(1) == n && scales.stride(1) == 1 &&
                  scales.device() == x.device(),
              "quant_gemv_route: scales must be (k/128, n) with contiguous rows, on x's device");
  TORCH_CHECK(block_n > 0 && steps > 0, "quant_gemv_route: a program's block and steps must be positive");
  const int64_t blocks = (n + block_n - 1) / block_n, splits = (k / 8 + steps - 1) / steps;
  auto out = at::empty({1, n}, x.options());
  auto [sums, tickets] = workspace(x, n, blocks);
  if (n > 0) {
    launch(kernel(id), blocks, splits, {P(x), P(words), P(scales), P(out), P(sums), P(tickets), I(n), I(k),
                                        I(scales.stride(0)), I(one_bits)}, x.device());
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_kernel", &add_kernel, "register a compiled Triton kernel; returns its id");
  m.def("int4_gemv_kmajor", &int4_gemv_kmajor, "the k-major int4 GEMV through a registered Triton kernel");
}
