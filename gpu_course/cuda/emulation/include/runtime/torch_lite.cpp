// torch_api.h's lite tier: factories forwarded to the operators' dispatcher.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
// ------------------------------------------------------------------------------------------
// torch_api.h's "lite" factories: torch::empty(...) etc. forward to the operators' dispatcher
// entry points (at::_ops); its operators as functions (torch::cumsum...) call the Tensor methods.
// Only declared in tier 1: tiers 2 and 3 have ATen's own.
// ------------------------------------------------------------------------------------------
#if CUDA_EMU_TORCH == 1
namespace lite {
static c10::SymIntArrayRef sym(IntArrayRef size) { return c10::fromIntArrayRefSlow(size); }
static std::optional<at::ScalarType> dtype(const TensorOptions& o) {
  return c10::optTypeMetaToScalarType(o.dtype_opt());
}
static MF memory_format(const TensorOptions& o, MF mf) {
  return c10::impl::check_tensor_options_and_extract_memory_format(o, mf);
}

Tensor empty(IntArrayRef size, TensorOptions o, MF mf) {
  return at::_ops::empty_memory_format::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(),
                                             o.pinned_memory_opt(), memory_format(o, mf));
}
Tensor empty_like(const Tensor& t, TensorOptions o, MF mf) {
  return at::_ops::empty_like::call(t, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                    memory_format(o, mf));
}
Tensor zeros(IntArrayRef size, TensorOptions o) {
  return at::_ops::zeros::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor zeros_like(const Tensor& t, TensorOptions o, MF mf) {
  return at::_ops::zeros_like::call(t, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                    memory_format(o, mf));
}
Tensor ones(IntArrayRef size, TensorOptions o) {
  return at::_ops::ones::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor ones_like(const Tensor& t, TensorOptions o, MF mf) {
  return at::_ops::ones_like::call(t, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                   memory_format(o, mf));
}
Tensor full(IntArrayRef size, const Scalar& v, TensorOptions o) {
  return at::_ops::full::call(sym(size), v, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor full_like(const Tensor& t, const Scalar& v, TensorOptions o, MF mf) {
  return at::_ops::full_like::call(t, v, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                   memory_format(o, mf));
}
Tensor arange(const Scalar& end, TensorOptions o) {
  return at::_ops::arange::call(end, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions o) {
  return at::_ops::arange_start::call(start, end, dtype(o), o.layout_opt(), o.device_opt(),
                                      o.pinned_memory_opt());
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o) {
  return at::_ops::arange_start_step::call(start, end, step, dtype(o), o.layout_opt(), o.device_opt(),
                                           o.pinned_memory_opt());
}
Tensor rand(IntArrayRef size, TensorOptions o) {
  return at::_ops::rand::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor randn(IntArrayRef size, TensorOptions o) {
  return at::_ops::randn::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}

// The operators as functions: each is its Tensor method.
Tensor sum(const Tensor& self, OptDtype dtype) { return self.sum(dtype); }
Tensor sum(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype) {
  return self.sum(dim, keepdim, dtype);
}
Tensor mean(const Tensor& self, OptDtype dtype) { return self.mean(dtype); }
Tensor mean(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype) {
  return self.mean(dim, keepdim, dtype);
}
Tensor max(const Tensor& self) { return self.max(); }
std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim) { return self.max(dim, keepdim); }
Tensor max(const Tensor& self, const Tensor& other) { return self.max(other); }
Tensor min(const Tensor& self) { return self.min(); }
std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim) { return self.min(dim, keepdim); }
Tensor min(const Tensor& self, const Tensor& other) { return self.min(other); }
Tensor amax(const Tensor& self, IntArrayRef dim, bool keepdim) { return self.amax(dim, keepdim); }
Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) { return self.argmax(dim, keepdim); }
Tensor cumsum(const Tensor& self, int64_t dim, OptDtype dtype) { return self.cumsum(dim, dtype); }
Tensor cumprod(const Tensor& self, int64_t dim, OptDtype dtype) { return self.cumprod(dim, dtype); }
Tensor bincount(const Tensor& self, const std::optional<Tensor>& weights, int64_t minlength) {
  return self.bincount(weights, minlength);
}
Tensor matmul(const Tensor& self, const Tensor& other) { return self.matmul(other); }
Tensor mm(const Tensor& self, const Tensor& mat2) { return self.mm(mat2); }
Tensor bmm(const Tensor& self, const Tensor& mat2) { return self.bmm(mat2); }
Tensor softmax(const Tensor& self, int64_t dim, OptDtype dtype) { return self.softmax(dim, dtype); }
Tensor log_softmax(const Tensor& self, int64_t dim, OptDtype dtype) { return self.log_softmax(dim, dtype); }
Tensor exp(const Tensor& self) { return self.exp(); }
Tensor sqrt(const Tensor& self) { return self.sqrt(); }
Tensor abs(const Tensor& self) { return self.abs(); }
Tensor relu(const Tensor& self) { return self.relu(); }
Tensor sigmoid(const Tensor& self) { return self.sigmoid(); }
Tensor tanh(const Tensor& self) { return self.tanh(); }
}  // namespace lite
#endif
}  // namespace cuda_emu

#if CUDA_EMU_TORCH == 1
namespace at {
// Same meaning as ATen/TensorOperators.h: `scalar op tensor` is computed on the tensor.
#define CUDA_EMU_TENSOR_OP(op, body, reverse_scalar_body)                      \
  Tensor operator op(const Tensor& x, const Tensor& y) { return body; }        \
  Tensor operator op(const Tensor& x, const Scalar& y) { return body; }        \
  Tensor operator op(const Scalar& x, const Tensor& y) { return reverse_scalar_body; }
CUDA_EMU_TENSOR_OP(+, x.add(y), y.add(x))
CUDA_EMU_TENSOR_OP(*, x.mul(y), y.mul(x))
CUDA_EMU_TENSOR_OP(-, x.sub(y), cuda_emu::lite::empty_like(y).fill_(x).sub_(y))
CUDA_EMU_TENSOR_OP(/, x.div(y), cuda_emu::lite::empty_like(y).fill_(x).div_(y))
CUDA_EMU_TENSOR_OP(%, x.remainder(y), cuda_emu::lite::empty_like(y).fill_(x).remainder_(y))
CUDA_EMU_TENSOR_OP(&, x.bitwise_and(y), y.bitwise_and(x))
CUDA_EMU_TENSOR_OP(|, x.bitwise_or(y), y.bitwise_or(x))
CUDA_EMU_TENSOR_OP(^, x.bitwise_xor(y), y.bitwise_xor(x))
CUDA_EMU_TENSOR_OP(<, x.lt(y), y.gt(x))
CUDA_EMU_TENSOR_OP(>, x.gt(y), y.lt(x))
CUDA_EMU_TENSOR_OP(<=, x.le(y), y.ge(x))
CUDA_EMU_TENSOR_OP(>=, x.ge(y), y.le(x))
CUDA_EMU_TENSOR_OP(==, x.eq(y), y.eq(x))
CUDA_EMU_TENSOR_OP(!=, x.ne(y), y.ne(x))
#undef CUDA_EMU_TENSOR_OP
}  // namespace at
#endif
