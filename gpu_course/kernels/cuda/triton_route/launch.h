// Launching a Triton kernel that Python compiled, from C++, through the CUDA driver's cuLaunchKernel
// (what Inductor's C++ wrapper does for a whole graph): the pieces the course's C++ routes share
// (layer_norm/node.cpp; matmul.cpp, softmax_mean.cpp, attention.cpp and quant_gemv.cpp here). Each route is an
// extension of its own and includes this file once; define TRITON_ROUTE_WHO (the route's name, for its error
// messages) first.
//
// Python registers each compiled kernel once (add_kernel): its CUfunction, threads per program, dynamic
// shared memory, and how each argument is passed, one letter per argument in order: 'p' a pointer,
// 'i' a 32-bit int, 'l' a 64-bit int, 'f' a 32-bit float, '-' compiled in (Triton folds an int equal to
// 1 into the kernel), 'T' a TMA tensor map (a 128-byte CUtensorMap passed by value, which the route fills with
// encode_tiled; Triton follows each with the tensor's shape and strides, 'i' and 'l' letters of their own).
// Triton appends `scratch` null pointers (its global and profile scratch memory) after the arguments.
#pragma once
#ifndef TRITON_ROUTE_WHO
#error "define TRITON_ROUTE_WHO (the route's name) before including triton_route/launch.h"
#endif
#include <torch/extension.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace {

using CUresult = int;  // CUDA_SUCCESS is 0
using LaunchFn = CUresult (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              void*, void**, void**);
using ErrorFn = CUresult (*)(CUresult, const char**);
using CtxGetFn = CUresult (*)(void**);
using CtxSetFn = CUresult (*)(void*);
using DeviceGetFn = CUresult (*)(int*, int);
using RetainFn = CUresult (*)(void**, int);
using EncodeTiledFn = CUresult (*)(void*, int, unsigned, void*, const uint64_t*, const uint64_t*, const unsigned*,
                                   const unsigned*, int, int, int, int);

// The driver's entry points, from the libcuda.so.1 that torch has loaded (no link-time dependency).
struct Driver {
  LaunchFn launch;
  ErrorFn error;
  CtxGetFn ctx_get;
  CtxSetFn ctx_set;
  DeviceGetFn device_get;
  RetainFn retain;
  EncodeTiledFn encode_tiled;  // cuTensorMapEncodeTiled (CUDA 12+); null on an older driver
};

const Driver& driver() {
  static const Driver d = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    TORCH_CHECK(lib != nullptr, TRITON_ROUTE_WHO ": cannot open libcuda.so.1 (the CUDA driver)");
    Driver d{reinterpret_cast<LaunchFn>(dlsym(lib, "cuLaunchKernel")),
             reinterpret_cast<ErrorFn>(dlsym(lib, "cuGetErrorString")),
             reinterpret_cast<CtxGetFn>(dlsym(lib, "cuCtxGetCurrent")),
             reinterpret_cast<CtxSetFn>(dlsym(lib, "cuCtxSetCurrent")),
             reinterpret_cast<DeviceGetFn>(dlsym(lib, "cuDeviceGet")),
             reinterpret_cast<RetainFn>(dlsym(lib, "cuDevicePrimaryCtxRetain")),
             reinterpret_cast<EncodeTiledFn>(dlsym(lib, "cuTensorMapEncodeTiled"))};
    TORCH_CHECK(d.launch && d.error && d.ctx_get && d.ctx_set && d.device_get && d.retain,
                TRITON_ROUTE_WHO ": the CUDA driver lacks an entry point this route needs");
    return d;
  }();
  return d;
}

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* s = nullptr;
  driver().error(r, &s);
  TORCH_CHECK(false, std::string(TRITON_ROUTE_WHO ": ") + what + " failed: " + (s ? s : "unknown error"));
}

constexpr int kMaxArgs = 24;

struct Kernel {
  void* fn;
  unsigned threads, shared;
  int nargs, scratch;
  std::array<char, kMaxArgs> layout;
};

std::mutex registry_lock;      // kernels are added from Python while a backward may read them
std::deque<Kernel> registry;   // a deque: adding never moves the kernels already there

Kernel kernel(int64_t id) {
  std::lock_guard<std::mutex> g(registry_lock);
  TORCH_CHECK(id >= 0 && id < static_cast<int64_t>(registry.size()), TRITON_ROUTE_WHO ": no kernel of that id");
  return registry[id];
}

// A TMA tensor map: what cuTensorMapEncodeTiled fills and a kernel takes by value (CUDA's CUtensorMap).
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

// The tensor map of a row-major matrix of `rows` x `cols` elements of `elem_size` bytes at `base`, copied in
// boxes of `box_rows` x `box_cols`, as Triton's fill_tma_descriptor_tiled makes it for a host TensorDescriptor
// (`elem_type` and `swizzle` as CUDA's enums; L2 promotion of 128 bytes; no fill of out-of-bounds elements).
TensorMap encode_tiled(const void* base, int64_t rows, int64_t cols, int64_t elem_size, int64_t elem_type,
                       int64_t swizzle, int64_t box_rows, int64_t box_cols) {
  const auto encode = driver().encode_tiled;
  TORCH_CHECK(encode != nullptr, TRITON_ROUTE_WHO ": the CUDA driver has no cuTensorMapEncodeTiled (TMA)");
  TensorMap map{};
  const uint64_t dims[2] = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};  // innermost first
  const uint64_t strides[2] = {static_cast<uint64_t>(cols * elem_size), 0};             // bytes; rank - 1 used
  const unsigned box[2] = {static_cast<unsigned>(box_cols), static_cast<unsigned>(box_rows)};
  const unsigned element_strides[2] = {1, 1};
  constexpr int kInterleaveNone = 0, kL2Promotion128B = 2, kFillNone = 0;
  check(encode(&map, static_cast<int>(elem_type), 2, const_cast<void*>(base), dims, strides, box, element_strides,
               kInterleaveNone, static_cast<int>(swizzle), kL2Promotion128B, kFillNone),
        "cuTensorMapEncodeTiled");
  return map;
}

// One argument as Python would pass it: a pointer or an int in `i`, a float in `f`, a tensor map's address in `i`.
struct Word {
  int64_t i;
  double f;
};
Word P(const at::Tensor& t) { return {reinterpret_cast<int64_t>(t.data_ptr()), 0.0}; }
Word I(int64_t v) { return {v, 0.0}; }
Word F(double v) { return {0, v}; }
Word M(const TensorMap& map) { return {reinterpret_cast<int64_t>(&map), 0.0}; }  // `map` outlives the launch

// Launch kernel `k` on a grid of grid_x x grid_y programs with `words`, one per letter of its layout.
void launch(const Kernel& k, int64_t grid_x, int64_t grid_y, std::initializer_list<Word> words,
            const at::Device& device) {
  TORCH_CHECK(static_cast<int>(words.size()) == k.nargs, TRITON_ROUTE_WHO ": the kernel takes " +
              std::to_string(k.nargs) + " arguments, given " + std::to_string(words.size()));
  std::array<int64_t, kMaxArgs + 2> store{};
  std::array<void*, kMaxArgs + 2> params{};
  int n = 0, j = 0;
  for (const Word& w : words) {
    const char c = k.layout[j++];
    if (c == '-') continue;  // compiled into the kernel: not a parameter
    if (c == 'T') {          // by value: the driver copies the 128 bytes the word points to
      params[n++] = reinterpret_cast<void*>(w.i);
      continue;
    }
    void* slot = &store[n];
    if (c == 'i') *static_cast<int32_t*>(slot) = static_cast<int32_t>(w.i);
    else if (c == 'f') *static_cast<float*>(slot) = static_cast<float>(w.f);
    else *static_cast<int64_t*>(slot) = w.i;  // 'p', 'l'
    params[n++] = slot;
  }
  for (int s = 0; s < k.scratch; ++s) params[n++] = &store[kMaxArgs + s];  // null: no scratch memory
  const Driver& d = driver();
  void* ctx = nullptr;  // autograd's worker thread may have no current context yet
  check(d.ctx_get(&ctx), "cuCtxGetCurrent");
  if (ctx == nullptr) {
    int dev = 0;
    check(d.device_get(&dev, device.index()), "cuDeviceGet");
    check(d.retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(d.ctx_set(ctx), "cuCtxSetCurrent");
  }
  void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle();
  check(d.launch(k.fn, static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), 1, k.threads, 1, 1, k.shared,
                 stream, params.data(), nullptr),
        "cuLaunchKernel");
}

void launch(const Kernel& k, int64_t grid, std::initializer_list<Word> words, const at::Device& device) {
  launch(k, grid, 1, words, device);
}

// A compiled Triton kernel, registered once: returns its id.
int64_t add_kernel(int64_t function, int64_t threads, int64_t shared, const std::string& layout, int64_t scratch) {
  TORCH_CHECK(function != 0 && threads > 0 && shared >= 0, "add_kernel: not a loaded kernel");
  TORCH_CHECK(layout.size() <= static_cast<size_t>(kMaxArgs) && scratch >= 0 && scratch <= 2,
              "add_kernel: at most 24 arguments and 2 scratch pointers");
  Kernel k{reinterpret_cast<void*>(function), static_cast<unsigned>(threads), static_cast<unsigned>(shared),
           static_cast<int>(layout.size()), static_cast<int>(scratch), {}};
  for (size_t i = 0; i < layout.size(); ++i) {
    TORCH_CHECK(std::string("pilf-T").find(layout[i]) != std::string::npos,
                "add_kernel: the layout's letters are p, i, l, f, T and -");
    k.layout[i] = layout[i];
  }
  std::lock_guard<std::mutex> g(registry_lock);
  registry.push_back(k);
  return static_cast<int64_t>(registry.size()) - 1;
}

}  // namespace
