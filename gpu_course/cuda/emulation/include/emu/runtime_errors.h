// The CUDA runtime's error API, __constant__ symbols, kernel attributes, C10_CUDA_* macros.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

// ------------------------------------------------------------------------------------------
// CUDA runtime error API (the part that makes sense here) and C10_CUDA_* macros.
// ------------------------------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidSymbol = 13
};
typedef cudaError_t cudaError;
inline cudaError_t cudaGetLastError() { return cudaSuccess; }  // errors are raised at once
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() {
  std::fflush(stdout);
  return cudaSuccess;
}
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "CUDA error"; }

// __constant__ and __device__ variables are plain globals here; the source check (source/refused.py)
// makes sure the symbol is one. Like a GPU, a copy outside the variable fails (here: raises).
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
namespace cuda_emu {
inline void symbol_range(const char* fn, size_t count, size_t offset, size_t size) {
  if (offset > size || count > size - offset)
    fail(std::string(fn) + ": " + std::to_string(count) + " bytes at offset " + std::to_string(offset) +
         " do not fit in the symbol (" + std::to_string(size) + " bytes); a GPU returns "
         "cudaErrorInvalidValue and copies nothing.");
}
}  // namespace cuda_emu
template <class T>
inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, size_t count, size_t offset = 0,
                                      cudaMemcpyKind = cudaMemcpyHostToDevice) {
  ::cuda_emu::symbol_range("cudaMemcpyToSymbol", count, offset, sizeof(T));
  std::memcpy(reinterpret_cast<char*>(&symbol) + offset, src, count);
  return cudaSuccess;
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                        cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  ::cuda_emu::symbol_range("cudaMemcpyFromSymbol", count, offset, sizeof(T));
  std::memcpy(dst, reinterpret_cast<const char*>(&symbol) + offset, count);
  return cudaSuccess;
}
inline const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaError"; }

// Kernel attributes: above 48 KiB of dynamic shared memory a launch needs the kernel's
// cudaFuncAttributeMaxDynamicSharedMemorySize raised first (up to 227 KiB per block, an H100's
// limit); the carveout is a performance hint, accepted and ignored.
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
  cudaFuncAttributeMax
};
enum cudaSharedCarveout {
  cudaSharedmemCarveoutDefault = -1,
  cudaSharedmemCarveoutMaxShared = 100,
  cudaSharedmemCarveoutMaxL1 = 0
};
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  static_assert(std::is_function_v<T>, "cudaFuncSetAttribute takes a kernel (a __global__ function)");
  return static_cast<cudaError_t>(
      ::cuda_emu::func_set_attribute(reinterpret_cast<const void*>(entry), static_cast<int>(attr), value));
}

#define CUDA_EMU_ASSERT(...) \
  ((__VA_ARGS__) ? (void)0 : ::cuda_emu::assert_fail(#__VA_ARGS__, __FILE__, __LINE__))
// assert(...) whose condition the rewrite changed (checked accesses): the learner's text, as written
#define CUDA_EMU_ASSERT_TEXT(TEXT, ...) \
  ((__VA_ARGS__) ? (void)0 : ::cuda_emu::assert_fail(TEXT, __FILE__, __LINE__))
#define C10_CUDA_KERNEL_LAUNCH_CHECK() ::cuda_emu::kernel_launch_check()
#define C10_CUDA_CHECK(EXPR) ::cuda_emu::cuda_check((EXPR), #EXPR)
#define C10_CUDA_CHECK_WARN(EXPR) ((void)(EXPR))
#define C10_CUDA_IGNORE_ERROR(EXPR) ((void)(EXPR))
