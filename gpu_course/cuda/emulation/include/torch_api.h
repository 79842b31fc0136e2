// torch_api.h: how much of the torch C++ API a CPU-emulation build sees.
//
// Parsing torch/extension.h costs ~20 s and even its precompiled form ~8 s per build, so
// The emulation (gpu_course/cuda/emulation) compiles in tiers, escalating only when the source needs more:
//   CUDA_EMU_TORCH=1 (default) "lite": at::Tensor with all its methods, TensorOptions,
//       AT_DISPATCH_*, accessors, the arithmetic/comparison operators on tensors, the common
//       factories (torch::empty/zeros/ones/full/arange/rand/randn and their _like forms) and
//       common operators as functions (torch::sum/cumsum/bincount/matmul/softmax/relu...),
//       declared here and defined in runtime.cpp on top of at::_ops and Tensor methods.
//   CUDA_EMU_TORCH=2: all of ATen (every at:: / torch:: operator such as torch::matmul).
//   CUDA_EMU_TORCH=3: torch/all.h, the whole C++ frontend (torch::nn ...), without a PCH.
#pragma once

#ifndef CUDA_EMU_TORCH
#define CUDA_EMU_TORCH 1
#endif

#if CUDA_EMU_TORCH >= 3
#include <torch/all.h>
#elif CUDA_EMU_TORCH == 2
#include <ATen/ATen.h>
#else
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/empty_like_ops.h>
#include <ATen/ops/empty_ops.h>
#include <ATen/ops/full_like_ops.h>
#include <ATen/ops/full_ops.h>
#include <ATen/ops/ones_like_ops.h>
#include <ATen/ops/ones_ops.h>
#include <ATen/ops/rand_ops.h>
#include <ATen/ops/randn_ops.h>
#include <ATen/ops/zeros_like_ops.h>
#include <ATen/ops/zeros_ops.h>
#endif
#include <c10/util/Exception.h>
#if CUDA_EMU_TORCH == 1
namespace at {
/// device_of(x), as ATen/DeviceGuard.h defines it (for OptionalCUDAGuard), without that header's ~0.5 s of
/// template instantiation in every build
inline std::optional<Device> device_of(const Tensor& t) {
  return t.defined() ? std::make_optional(t.device()) : std::nullopt;
}
}  // namespace at
#endif

#if CUDA_EMU_TORCH == 1
namespace cuda_emu {
namespace lite {
// Factories as torch::empty(...) etc. spell them; each forwards to the operator's dispatcher
// entry point (at::_ops), which lives in libtorch_cpu.
using at::IntArrayRef;
using at::Scalar;
using at::Tensor;
using at::TensorOptions;
using MF = std::optional<at::MemoryFormat>;

// Defined in runtime.cpp (compiled once), so that no build pays for their template code.
Tensor empty(IntArrayRef size, TensorOptions o = {}, MF mf = std::nullopt);
Tensor empty_like(const Tensor& t, TensorOptions o = {}, MF mf = std::nullopt);
Tensor zeros(IntArrayRef size, TensorOptions o = {});
Tensor zeros_like(const Tensor& t, TensorOptions o = {}, MF mf = std::nullopt);
Tensor ones(IntArrayRef size, TensorOptions o = {});
Tensor ones_like(const Tensor& t, TensorOptions o = {}, MF mf = std::nullopt);
Tensor full(IntArrayRef size, const Scalar& v, TensorOptions o = {});
Tensor full_like(const Tensor& t, const Scalar& v, TensorOptions o = {}, MF mf = std::nullopt);
Tensor arange(const Scalar& end, TensorOptions o = {});
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions o = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o = {});
Tensor rand(IntArrayRef size, TensorOptions o = {});
Tensor randn(IntArrayRef size, TensorOptions o = {});

// The operators host code reaches for as free functions (torch::cumsum(x, 0), torch::bincount(x, {}, 256)),
// with ATen's signatures and defaults; defined in runtime.cpp on the Tensor methods of the same name. A call
// that none of these overloads takes is built again with all of ATen (tiers.needs_more_torch).
using OptDtype = std::optional<at::ScalarType>;
Tensor sum(const Tensor& self, OptDtype dtype = std::nullopt);
Tensor sum(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim = false, OptDtype dtype = std::nullopt);
Tensor mean(const Tensor& self, OptDtype dtype = std::nullopt);
Tensor mean(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim = false, OptDtype dtype = std::nullopt);
Tensor max(const Tensor& self);
std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& self, const Tensor& other);
Tensor min(const Tensor& self);
std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& self, const Tensor& other);
Tensor amax(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false);
Tensor argmax(const Tensor& self, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor cumsum(const Tensor& self, int64_t dim, OptDtype dtype = std::nullopt);
Tensor cumprod(const Tensor& self, int64_t dim, OptDtype dtype = std::nullopt);
Tensor bincount(const Tensor& self, const std::optional<Tensor>& weights = {}, int64_t minlength = 0);
Tensor matmul(const Tensor& self, const Tensor& other);
Tensor mm(const Tensor& self, const Tensor& mat2);
Tensor bmm(const Tensor& self, const Tensor& mat2);
Tensor softmax(const Tensor& self, int64_t dim, OptDtype dtype = std::nullopt);
Tensor log_softmax(const Tensor& self, int64_t dim, OptDtype dtype = std::nullopt);
Tensor exp(const Tensor& self);
Tensor sqrt(const Tensor& self);
Tensor abs(const Tensor& self);
Tensor relu(const Tensor& self);
Tensor sigmoid(const Tensor& self);
Tensor tanh(const Tensor& self);
}  // namespace lite
}  // namespace cuda_emu

namespace at {
// The lite functions are ATen's: at::empty, torch::empty (torch has `using namespace at`) and, found by
// argument-dependent lookup as in ATen, cumsum(x, 0) unqualified.
using cuda_emu::lite::abs;
using cuda_emu::lite::amax;
using cuda_emu::lite::arange;
using cuda_emu::lite::argmax;
using cuda_emu::lite::bincount;
using cuda_emu::lite::bmm;
using cuda_emu::lite::cumprod;
using cuda_emu::lite::cumsum;
using cuda_emu::lite::empty;
using cuda_emu::lite::empty_like;
using cuda_emu::lite::exp;
using cuda_emu::lite::full;
using cuda_emu::lite::full_like;
using cuda_emu::lite::log_softmax;
using cuda_emu::lite::matmul;
using cuda_emu::lite::max;
using cuda_emu::lite::mean;
using cuda_emu::lite::min;
using cuda_emu::lite::mm;
using cuda_emu::lite::ones;
using cuda_emu::lite::ones_like;
using cuda_emu::lite::rand;
using cuda_emu::lite::randn;
using cuda_emu::lite::relu;
using cuda_emu::lite::sigmoid;
using cuda_emu::lite::softmax;
using cuda_emu::lite::sqrt;
using cuda_emu::lite::sum;
using cuda_emu::lite::tanh;
using cuda_emu::lite::zeros;
using cuda_emu::lite::zeros_like;

// The free operators of ATen/TensorOperators.h (which includes all of ATen), on Tensor methods.
#define CUDA_EMU_TENSOR_OP(op)                                 \
  Tensor operator op(const Tensor& x, const Tensor& y);        \
  Tensor operator op(const Tensor& x, const Scalar& y);        \
  Tensor operator op(const Scalar& x, const Tensor& y);
CUDA_EMU_TENSOR_OP(+)
CUDA_EMU_TENSOR_OP(-)
CUDA_EMU_TENSOR_OP(*)
CUDA_EMU_TENSOR_OP(/)
CUDA_EMU_TENSOR_OP(%)
CUDA_EMU_TENSOR_OP(&)
CUDA_EMU_TENSOR_OP(|)
CUDA_EMU_TENSOR_OP(^)
CUDA_EMU_TENSOR_OP(<)
CUDA_EMU_TENSOR_OP(>)
CUDA_EMU_TENSOR_OP(<=)
CUDA_EMU_TENSOR_OP(>=)
CUDA_EMU_TENSOR_OP(==)
CUDA_EMU_TENSOR_OP(!=)
#undef CUDA_EMU_TENSOR_OP
}  // namespace at
#endif

#if CUDA_EMU_TORCH <= 2
// What torch/types.h adds on top of ATen, so that torch::Tensor, torch::kFloat32 ... work.
namespace torch {
using namespace at;  // NOLINT
using std::nullopt;
using std::optional;
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
#endif
