// LayerNorm as one C++ autograd node whose forward and backward launch the Triton kernels that
// gpu_course/kernels/triton_layernorm/ compiled, through the CUDA driver's cuLaunchKernel (what
// Inductor's C++ wrapper does for a whole graph). Autograd runs a CUDA backward on a worker thread of
// its own; a Python backward there pays the interpreter (and Triton's Python launcher) again on every
// step, a C++ one does not.
//
// Python registers each compiled kernel once (add_kernel): its CUfunction, threads per program, dynamic
// shared memory, and how each argument is passed, one letter per argument in order: 'p' a pointer,
// 'i' a 32-bit int, 'l' a 64-bit int, 'f' a 32-bit float, '-' compiled in (Triton folds an int equal to
// 1 into the kernel). Triton appends `scratch` null pointers (its global and profile scratch memory)
// after the arguments.
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

// The driver's entry points, from the libcuda.so.1 that torch has loaded (no link-time dependency).
struct Driver {
  LaunchFn launch;
  ErrorFn error;
  CtxGetFn ctx_get;
  CtxSetFn ctx_set;
  DeviceGetFn device_get;
  RetainFn retain;
};

const Driver& driver() {
  static const Driver d = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    TORCH_CHECK(lib != nullptr, "layer_norm_node: cannot open libcuda.so.1 (the CUDA driver)");
    Driver d{reinterpret_cast<LaunchFn>(dlsym(lib, "cuLaunchKernel")),
             reinterpret_cast<ErrorFn>(dlsym(lib, "cuGetErrorString")),
             reinterpret_cast<CtxGetFn>(dlsym(lib, "cuCtxGetCurrent")),
             reinterpret_cast<CtxSetFn>(dlsym(lib, "cuCtxSetCurrent")),
             reinterpret_cast<DeviceGetFn>(dlsym(lib, "cuDeviceGet")),
             reinterpret_cast<RetainFn>(dlsym(lib, "cuDevicePrimaryCtxRetain"))};
    TORCH_CHECK(d.launch && d.error && d.ctx_get && d.ctx_set && d.device_get && d.retain,
                "layer_norm_node: the CUDA driver lacks an entry point this node needs");
    return d;
  }();
  return d;
}

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* s = nullptr;
  driver().error(r, &s);
  TORCH_CHECK(false, std::string("layer_norm_node: ") + what + " failed: " + (s ? s : "unknown error"));
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
  TORCH_CHECK(id >= 0 && id < static_cast<int64_t>(registry.size()), "layer_norm_node: no kernel of that id");
  return registry[id];
}

// One argument as Python would pass it: a pointer or an int in `i`, a float in `f`.
struct Word {
  int64_t i;
  double f;
};
Word P(const at::Tensor& t) { return {reinterpret_cast<int64_t>(t.data_ptr()), 0.0}; }
Word I(int64_t v) { return {v, 0.0}; }
Word F(double v) { return {0, v}; }

void launch(const Kernel& k, int64_t grid, std::initializer_list<Word> words, const at::Device& device) {
  TORCH_CHECK(static_cast<int>(words.size()) == k.nargs, "layer_norm_node: the kernel takes " +
              std::to_string(k.nargs) + " arguments, given " + std::to_string(words.size()));
  std::array<int64_t, kMaxArgs + 2> store{};
  std::array<void*, kMaxArgs + 2> params{};
  int n = 0, j = 0;
  for (const Word& w : words) {
    const char c = k.layout[j++];
    if (c == '-') continue;  // compiled into the kernel: not a parameter
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
  check(d.launch(k.fn, static_cast<unsigned>(grid), 1, 1, k.threads, 1, 1, k.shared, stream, params.data(), nullptr),
        "cuLaunchKernel");
}

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

// A compiled Triton kernel, registered once: returns its id.
int64_t add_kernel(int64_t function, int64_t threads, int64_t shared, const std::string& layout, int64_t scratch) {
  TORCH_CHECK(function != 0 && threads > 0 && shared >= 0, "add_kernel: not a loaded kernel");
  TORCH_CHECK(layout.size() <= static_cast<size_t>(kMaxArgs) && scratch >= 0 && scratch <= 2,
              "add_kernel: at most 24 arguments and 2 scratch pointers");
  Kernel k{reinterpret_cast<void*>(function), static_cast<unsigned>(threads), static_cast<unsigned>(shared),
           static_cast<int>(layout.size()), static_cast<int>(scratch), {}};
  for (size_t i = 0; i < layout.size(); ++i) {
    TORCH_CHECK(std::string("pilf-").find(layout[i]) != std::string::npos,
                "add_kernel: the layout's letters are p, i, l, f and -");
    k.layout[i] = layout[i];
  }
  std::lock_guard<std::mutex> g(registry_lock);
  registry.push_back(k);
  return static_cast<int64_t>(registry.size()) - 1;
}

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
