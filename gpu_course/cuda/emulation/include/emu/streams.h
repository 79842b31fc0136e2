// torch's CUDA guards and the stream-ordered memory calls of host code (cudaMemsetAsync, cudaMemcpyAsync).
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
//
// The emulation has one device and one stream, torch's current one (launch.h): every launch and every call
// here runs to completion, in order, on the calling thread. So a guard only remembers its device, and the
// *Async calls are done when they return. Their pointers are checked against the tensors the host code took
// them from (a range past a tensor's end is an error naming the call), as a GPU's memory checker would.
#pragma once

namespace c10::cuda {
/// at::cuda::CUDAGuard guard(x.device()): on a GPU it makes x's device current until the end of the scope.
struct CUDAGuard {
  explicit CUDAGuard(c10::Device d) : dev_(d) {}
  explicit CUDAGuard(c10::DeviceIndex i) : dev_(c10::DeviceType::CUDA, i) {}
  CUDAGuard(const CUDAGuard&) = delete;
  CUDAGuard& operator=(const CUDAGuard&) = delete;
  void set_device(c10::Device d) { dev_ = d; }
  void reset_device(c10::Device d) { dev_ = d; }
  void set_index(c10::DeviceIndex i) { dev_ = c10::Device(c10::DeviceType::CUDA, i); }
  c10::Device original_device() const { return dev_; }
  c10::Device current_device() const { return dev_; }

 private:
  c10::Device dev_;
};
/// at::cuda::OptionalCUDAGuard guard(device_of(x)): a CUDAGuard when given a device, else nothing.
struct OptionalCUDAGuard {
  OptionalCUDAGuard() = default;
  explicit OptionalCUDAGuard(std::optional<c10::Device> d) : dev_(d) {}
  explicit OptionalCUDAGuard(c10::Device d) : dev_(d) {}
  explicit OptionalCUDAGuard(c10::DeviceIndex i) : dev_(c10::Device(c10::DeviceType::CUDA, i)) {}
  OptionalCUDAGuard(const OptionalCUDAGuard&) = delete;
  OptionalCUDAGuard& operator=(const OptionalCUDAGuard&) = delete;
  void set_device(c10::Device d) { dev_ = d; }
  void reset_device(c10::Device d) { dev_ = d; }
  void set_index(c10::DeviceIndex i) { dev_ = c10::Device(c10::DeviceType::CUDA, i); }
  std::optional<c10::Device> original_device() const { return dev_; }
  std::optional<c10::Device> current_device() const { return dev_; }
  void reset() { dev_.reset(); }

 private:
  std::optional<c10::Device> dev_;
};
/// c10::cuda::CUDAStreamGuard guard(stream): the stream can only be the current one here.
struct CUDAStreamGuard {
  explicit CUDAStreamGuard(CUDAStream s) : s_(s) {}
  CUDAStreamGuard(const CUDAStreamGuard&) = delete;
  CUDAStreamGuard& operator=(const CUDAStreamGuard&) = delete;
  CUDAStream original_stream() const { return s_; }
  CUDAStream current_stream() const { return s_; }

 private:
  CUDAStream s_;
};
}  // namespace c10::cuda

namespace cuda_emu {
/// The bytes [p, p + n) of a stream-ordered call `fn` (its argument `arg`) must lie in one tensor when p is in one.
inline void async_range(const char* fn, const char* arg, const void* p, size_t n) {
  Bounds b;
  if (!p || !find_tracked(p, &b)) return;  // host memory (a std::vector's), or memory the emulation does not know
  const char* q = static_cast<const char*>(p);
  if (q + n > b.hi)
    fail(std::string(fn) + ": " + std::to_string(n) + " bytes from " + arg + " run " +
         std::to_string(static_cast<long long>(q + n - b.hi)) + " bytes past the end of " + b.what + " (" + arg +
         " is byte " + std::to_string(static_cast<long long>(q - b.lo)) +
         " of it). Give the size in bytes of what is there: count * sizeof(element). On a GPU this writes or "
         "reads past the allocation (an illegal memory access, or another tensor's data).");
}
}  // namespace cuda_emu
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t = nullptr) {
  ::cuda_emu::async_range("cudaMemsetAsync", "the pointer", p, count);
  if (count) std::memset(p, value, count);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int value, size_t count) { return cudaMemsetAsync(p, value, count); }
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind, cudaStream_t = nullptr) {
  ::cuda_emu::async_range("cudaMemcpyAsync", "the destination", dst, count);
  ::cuda_emu::async_range("cudaMemcpyAsync", "the source", src, count);
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, count, kind);
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }  // every call is done on return
#define AT_CUDA_CHECK(EXPR) C10_CUDA_CHECK(EXPR)
