// Launching: torch's current stream, k<<<grid, block, smem, stream>>>(args) as a call.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

// torch's current stream (at::cuda::getCurrentCUDAStream(), which at:: reaches through its
// `using namespace c10::cuda`): the 4th <<<>>> argument of a kernel that torch.cuda.stream(s), a
// CUDA graph capture or torch.compile may run on a stream of their choice. The emulation runs every
// launch to completion, in order, on the calling thread: one stream, always the current one.
// cudaStream_t as CUDA spells it; the only stream there is, the current one, is the null (default) stream.
typedef struct CUstream_st* cudaStream_t;
namespace c10::cuda {
struct CUDAStream {
  cudaStream_t stream() const { return nullptr; }
  operator cudaStream_t() const { return nullptr; }  // NOLINT: implicit, as in torch
  int device_index() const { return 0; }
  void synchronize() const {}
  bool query() const { return true; }
};
inline CUDAStream getCurrentCUDAStream(int /*device_index*/ = -1) { return {}; }
}  // namespace c10::cuda

namespace cuda_emu {
// ------------------------------------------------------------------------------------------
// Launching: k<<<grid, block, smem, stream>>>(args) becomes
// kernel("k", "param,names", line, [&](auto&&... a) { k(a...); }).config(grid, block, smem, stream)(args)
// ------------------------------------------------------------------------------------------
struct StreamArg {
  StreamArg() = default;
  StreamArg(std::nullptr_t) {}  // NOLINT
  StreamArg(c10::cuda::CUDAStream) {}  // NOLINT: torch's current stream, the only one emulated
  StreamArg(cudaStream_t) {}  // NOLINT: cudaStream_t from it (streams of one's own are refused before compiling)
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  StreamArg(I v) {  // NOLINT
    if (v != 0)
      fail("the 4th <<<>>> argument (a CUDA stream) must be 0: streams are not supported by "
           "the CPU emulation; run on a GPU.");
  }
};

template <class A>
inline void note_param(const A& a) {
  if constexpr (is_gptr<A>::value)
    if (a.info) g.params.push_back({a.lo, a.hi, a.info});
}

template <class A>
inline ArgRec arg_rec(const A& a) {
  using D = std::decay_t<A>;
  ArgRec r{'?', static_cast<unsigned char>(sizeof(D) < 255 ? sizeof(D) : 255), 0};
  if constexpr (std::is_pointer_v<D>) {
    r.kind = 'p';
    r.bits = reinterpret_cast<uintptr_t>(a);
  } else if constexpr (std::is_null_pointer_v<D>) {
    r.kind = 'p';
  } else if constexpr (is_gptr<D>::value) {
    r.kind = 'p';
    r.bits = reinterpret_cast<uintptr_t>(a.p);
  } else if constexpr (std::is_same_v<D, bool>) {
    r.kind = 'b';
    r.bits = a ? 1 : 0;
  } else if constexpr (std::is_enum_v<D>) {
    r.kind = 'i';
    r.bits = static_cast<uint64_t>(static_cast<long long>(a));
  } else if constexpr (std::is_integral_v<D>) {
    r.kind = std::is_signed_v<D> ? 'i' : 'u';
    r.bits = std::is_signed_v<D> ? static_cast<uint64_t>(static_cast<long long>(a)) : static_cast<uint64_t>(a);
  } else if constexpr (std::is_floating_point_v<D>) {
    r.kind = 'f';
    const double v = static_cast<double>(a);
    std::memcpy(&r.bits, &v, sizeof v);
  }
  return r;
}

/// A kernel argument as the kernel receives it: raw pointers become checked pointers.
template <class A>
inline auto convert_arg(A&& a, PtrInfo& info, const char* pname) {
  using D = std::decay_t<A>;
  if constexpr (std::is_pointer_v<D> && !std::is_void_v<std::remove_pointer_t<D>> &&
                !std::is_function_v<std::remove_pointer_t<D>>) {
    using T = std::remove_pointer_t<D>;
    info.name = pname;
    info.base = addr_of(a);
    info.esize = sizeof(T);
    Bounds b;
    if (!a || !find_tracked(addr_of(a), &b)) return gptr<T>(a);  // not from a tracked tensor: unchecked
    info.what = std::move(b.what);
    return gptr<T>(a, b.lo, b.hi, &info);
  } else {
    return D(std::forward<A>(a));
  }
}

#if defined(__clang__)
template <auto F>
struct KernelTag {};

/// clang's __PRETTY_FUNCTION__ drops a function pointer's template arguments ("[F = &k]"), so its
/// spelling is made from the demangled name of a type that holds F: "KernelTag<&(void ns::k<16>(float*))>"
/// -> "kname() [with auto F = ns::k<16>]", the form g++ writes (launch_records.cpp reads it).
std::string clang_kernel_spelling(const char* mangled);

template <auto F>
inline const char* kname() {
  static const std::string spelling = clang_kernel_spelling(typeid(KernelTag<F>).name());
  return spelling.c_str();
}
#else
/// `kname<&k<16>>()`: the compiler's spelling of an instantiated kernel ("... [with auto F = k<16>]").
template <auto F>
inline const char* kname() {
  return __PRETTY_FUNCTION__;
}
#endif

template <class F>
struct Kernel {
  const char* name;
  const char* params;
  int line;
  F f;
  const char* pretty = nullptr;  // kname<&k<...>>(), for templated kernels
  const void* addr = nullptr;    // the kernel's address where the launch names one function

  struct Launch {
    Kernel* k;
    Config cfg;
    template <class... A>
    void operator()(A&&... a) {
      k->launch(cfg, std::index_sequence_for<A...>{}, std::forward<A>(a)...);
    }
  };
  Launch config(dim3 grid, dim3 block, size_t smem = 0, StreamArg = {}) {
    return {this, {grid, block, smem, addr}};
  }

  template <size_t... I, class... A>
  void launch(const Config& cfg, std::index_sequence<I...>, A&&... a) {
    if (g.in_kernel)
      fail("a kernel launch inside a kernel (dynamic parallelism) is not supported by the CPU "
           "emulation; run on a GPU.");
    std::vector<std::string> names = param_names(params, sizeof...(A));
    std::vector<PtrInfo> infos(sizeof...(A) + 1);
    std::tuple<decltype(convert_arg(std::forward<A>(a), infos[I], ""))...> args{
        convert_arg(std::forward<A>(a), infos[I], names[I].c_str())...};
    auto body = [&]() { std::apply(f, args); };
    g.params.clear();
    std::apply([](const auto&... x) { (note_param(x), ...); }, args);
    g.kernel = name;
    g.launch_line = line;
    log_launch(name, cfg.grid, cfg.block, cfg.smem, std::vector<ArgRec>{arg_rec(a)...});
    count_launch(name, pretty);
    run_launch(cfg, [](void* p) { (*static_cast<decltype(body)*>(p))(); }, &body);
  }
};

template <class F>
inline Kernel<F> kernel(const char* name, const char* params, int line, F f, const char* pretty = nullptr,
                        const void* addr = nullptr) {
  return Kernel<F>{name, params, line, f, pretty, addr};
}
/// The address of a launched kernel (the rewrite passes `kaddr(&k)` where `k` names one function,
/// `kaddr(expr)` for another expression, such as a variable holding a kernel pointer).
template <class F>
inline const void* kaddr(const F& f) {
  if constexpr (std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>)
    return reinterpret_cast<const void*>(f);
  else if constexpr (std::is_function_v<F>)
    return reinterpret_cast<const void*>(&f);
  else
    return nullptr;
}
}  // namespace cuda_emu
