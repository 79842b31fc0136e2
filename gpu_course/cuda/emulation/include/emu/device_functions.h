// Device functions: warp-level intrinsics, atomics, cache-hint loads, math.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

// ------------------------------------------------------------------------------------------
using cuda_emu::blockDim;
using cuda_emu::blockIdx;
using cuda_emu::gridDim;
using cuda_emu::threadIdx;
static constexpr int warpSize = 32;

// Warp-level intrinsics (CUDA 9+ *_sync forms): the call's line comes from a default argument,
// evaluated where the call is (C++17, as nvcc builds it: GCC's and clang's __builtin_LINE, what
// C++20's std::source_location is made of).
struct cuda_emu_loc {
  unsigned l;
  constexpr unsigned line() const { return l; }
  static constexpr cuda_emu_loc current(unsigned l = __builtin_LINE()) { return {l}; }
};
#define CUDA_EMU_HERE cuda_emu_loc loc = cuda_emu_loc::current()
template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, CUDA_EMU_HERE) {
  return ::cuda_emu::warp_shfl(::cuda_emu::kShflIdx, loc.line(), mask, var, srcLane, width);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, CUDA_EMU_HERE) {
  return ::cuda_emu::warp_shfl(::cuda_emu::kShflUp, loc.line(), mask, var, static_cast<int>(delta), width);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize, CUDA_EMU_HERE) {
  return ::cuda_emu::warp_shfl(::cuda_emu::kShflDown, loc.line(), mask, var, static_cast<int>(delta), width);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize, CUDA_EMU_HERE) {
  return ::cuda_emu::warp_shfl(::cuda_emu::kShflXor, loc.line(), mask, var, laneMask, width);
}
inline unsigned __ballot_sync(unsigned mask, int pred, CUDA_EMU_HERE) {
  return static_cast<unsigned>(::cuda_emu::warp_op(::cuda_emu::kBallot, loc.line(), mask, pred != 0));
}
inline int __all_sync(unsigned mask, int pred, CUDA_EMU_HERE) {
  return static_cast<int>(::cuda_emu::warp_op(::cuda_emu::kAll, loc.line(), mask, pred != 0));
}
inline int __any_sync(unsigned mask, int pred, CUDA_EMU_HERE) {
  return static_cast<int>(::cuda_emu::warp_op(::cuda_emu::kAny, loc.line(), mask, pred != 0));
}
inline void __syncwarp(unsigned mask = 0xffffffffu, CUDA_EMU_HERE) {
  ::cuda_emu::warp_op(::cuda_emu::kSyncwarp, loc.line(), mask, 0);
}
inline unsigned __activemask(CUDA_EMU_HERE) { return ::cuda_emu::active_mask(static_cast<int>(loc.line())); }
#define CUDA_EMU_REDUCE(NAME, T, OP)                                                        \
  inline T NAME(unsigned mask, T value, CUDA_EMU_HERE) {                                    \
    return static_cast<T>(::cuda_emu::warp_op(OP, loc.line(), mask, static_cast<uint32_t>(value))); \
  }
CUDA_EMU_REDUCE(__reduce_add_sync, int, ::cuda_emu::kRedAdd)
CUDA_EMU_REDUCE(__reduce_add_sync, unsigned, ::cuda_emu::kRedAdd)
CUDA_EMU_REDUCE(__reduce_min_sync, int, ::cuda_emu::kRedMinS)
CUDA_EMU_REDUCE(__reduce_min_sync, unsigned, ::cuda_emu::kRedMinU)
CUDA_EMU_REDUCE(__reduce_max_sync, int, ::cuda_emu::kRedMaxS)
CUDA_EMU_REDUCE(__reduce_max_sync, unsigned, ::cuda_emu::kRedMaxU)
CUDA_EMU_REDUCE(__reduce_and_sync, unsigned, ::cuda_emu::kRedAnd)
CUDA_EMU_REDUCE(__reduce_or_sync, unsigned, ::cuda_emu::kRedOr)
CUDA_EMU_REDUCE(__reduce_xor_sync, unsigned, ::cuda_emu::kRedXor)
#undef CUDA_EMU_REDUCE
template <class T>
inline unsigned __match_any_sync(unsigned mask, T value, CUDA_EMU_HERE) {
  return static_cast<unsigned>(
      ::cuda_emu::warp_op(::cuda_emu::kMatchAny, loc.line(), mask, ::cuda_emu::warp_bits(value)));
}
template <class T>
inline unsigned __match_all_sync(unsigned mask, T value, int* pred, CUDA_EMU_HERE) {
  uint64_t r = ::cuda_emu::warp_op(::cuda_emu::kMatchAll, loc.line(), mask, ::cuda_emu::warp_bits(value));
  if (pred) *pred = static_cast<int>(r >> 32);
  return static_cast<unsigned>(r);
}

// cp.async through the pipeline primitives (<cuda_pipeline.h>): see async_copy in runtime.cpp.
inline void __pipeline_memcpy_async(void* dst_shared, const void* src_global, size_t size_and_align,
                                    size_t zfill = 0, CUDA_EMU_HERE) {
  ::cuda_emu::async_copy(dst_shared, src_global, size_and_align, zfill, loc.line(), nullptr, nullptr, nullptr);
}
template <class T>
inline void __pipeline_memcpy_async(void* dst_shared, const ::cuda_emu::gptr<T>& src_global, size_t size_and_align,
                                    size_t zfill = 0, CUDA_EMU_HERE) {
  ::cuda_emu::async_copy(dst_shared, src_global.p, size_and_align, zfill, loc.line(), src_global.lo,
                         src_global.hi, src_global.info);
}
inline void __pipeline_commit(CUDA_EMU_HERE) { ::cuda_emu::async_commit(loc.line()); }
inline void __pipeline_wait_prior(size_t prior, CUDA_EMU_HERE) { ::cuda_emu::async_wait_prior(prior, loc.line()); }
#undef CUDA_EMU_HERE

#define __syncthreads() ::cuda_emu::syncthreads(__LINE__)
#define __syncthreads_count(p) ::cuda_emu::syncthreads_count(__LINE__, (p))
#define __syncthreads_and(p) (::cuda_emu::syncthreads_count(__LINE__, (p)) == (int)(blockDim.x * blockDim.y * blockDim.z))
#define __syncthreads_or(p) (::cuda_emu::syncthreads_count(__LINE__, (p)) != 0)
inline void __threadfence() {}  // blocks run one at a time: memory is always coherent
inline void __threadfence_block() {}

// Atomics: a thread is never interrupted between barriers, so plain read-modify-write is atomic.
#define CUDA_EMU_ATOMIC(NAME, T, EXPR)               \
  inline T NAME(T* a, T v) {                          \
    ::cuda_emu::count_atomic(a);                      \
    T old = *a;                                       \
    *a = (EXPR);                                      \
    return old;                                       \
  }                                                   \
  inline T NAME##_block(T* a, T v) { return NAME(a, v); } \
  inline T NAME##_system(T* a, T v) { return NAME(a, v); }
#define CUDA_EMU_ATOMIC_INTS(NAME, EXPR)               \
  CUDA_EMU_ATOMIC(NAME, int, EXPR)                     \
  CUDA_EMU_ATOMIC(NAME, unsigned int, EXPR)            \
  CUDA_EMU_ATOMIC(NAME, unsigned long long, EXPR)
CUDA_EMU_ATOMIC_INTS(atomicAdd, old + v)
CUDA_EMU_ATOMIC(atomicAdd, float, old + v)
CUDA_EMU_ATOMIC(atomicAdd, double, old + v)
CUDA_EMU_ATOMIC(atomicSub, int, old - v)
CUDA_EMU_ATOMIC(atomicSub, unsigned int, old - v)
CUDA_EMU_ATOMIC_INTS(atomicExch, v)
CUDA_EMU_ATOMIC(atomicExch, float, v)
CUDA_EMU_ATOMIC_INTS(atomicMin, (v < old ? v : old))
CUDA_EMU_ATOMIC(atomicMin, long long, (v < old ? v : old))
CUDA_EMU_ATOMIC_INTS(atomicMax, (v > old ? v : old))
CUDA_EMU_ATOMIC(atomicMax, long long, (v > old ? v : old))
CUDA_EMU_ATOMIC_INTS(atomicAnd, old & v)
CUDA_EMU_ATOMIC_INTS(atomicOr, old | v)
CUDA_EMU_ATOMIC_INTS(atomicXor, old ^ v)
CUDA_EMU_ATOMIC(atomicInc, unsigned int, (old >= v ? 0u : old + 1))
CUDA_EMU_ATOMIC(atomicDec, unsigned int, ((old == 0u || old > v) ? v : old - 1))
#undef CUDA_EMU_ATOMIC_INTS
#undef CUDA_EMU_ATOMIC
#define CUDA_EMU_CAS(T)                                  \
  inline T atomicCAS(T* a, T compare, T v) {             \
    ::cuda_emu::count_atomic(a);                         \
    T old = *a;                                          \
    if (old == compare) *a = v;                          \
    return old;                                          \
  }                                                      \
  inline T atomicCAS_block(T* a, T c, T v) { return atomicCAS(a, c, v); }
CUDA_EMU_CAS(int)
CUDA_EMU_CAS(unsigned int)
CUDA_EMU_CAS(unsigned long long)
CUDA_EMU_CAS(unsigned short)
#undef CUDA_EMU_CAS

// Read-only / cache-hint loads: plain loads here.
// (counted as loads, of shared memory when the pointer's bounds say so, in a counted launch)
template <class T>
inline T __ldg(const T* p) {
  if (__builtin_expect(::cuda_emu::g.cnt != nullptr, 0)) ::cuda_emu::count_access<0>(::cuda_emu::in_shared(p));
  return *p;
}
template <class T>
inline std::remove_cv_t<T> __ldg(const cuda_emu::gptr<T>& p) {
  ::cuda_emu::count_access<0>(p.info && p.info->shared);
  return *p;
}
#define CUDA_EMU_LOAD_HINT(NAME)                                                            \
  template <class T> inline T NAME(const T* p) { return __ldg(p); }                         \
  template <class T> inline std::remove_cv_t<T> NAME(const cuda_emu::gptr<T>& p) { return __ldg(p); }
CUDA_EMU_LOAD_HINT(__ldca)
CUDA_EMU_LOAD_HINT(__ldcg)
CUDA_EMU_LOAD_HINT(__ldcs)
CUDA_EMU_LOAD_HINT(__ldlu)
CUDA_EMU_LOAD_HINT(__ldcv)
#undef CUDA_EMU_LOAD_HINT
#define CUDA_EMU_STORE_HINT(NAME)                                                                \
  template <class T> inline void NAME(T* p, T v) {                                               \
    if (__builtin_expect(::cuda_emu::g.cnt != nullptr, 0)) ::cuda_emu::count_access<1>(::cuda_emu::in_shared(p)); \
    *p = v;                                                                                      \
  }
CUDA_EMU_STORE_HINT(__stwb)
CUDA_EMU_STORE_HINT(__stcg)
CUDA_EMU_STORE_HINT(__stcs)
CUDA_EMU_STORE_HINT(__stwt)
#undef CUDA_EMU_STORE_HINT

// min/max as CUDA declares them for any arithmetic types (mixed types use the common type).
template <class A, class B, std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <class A, class B, std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}

// Math: the fast intrinsics are the ordinary functions here.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __frsqrt_rn(float a) { return 1.0f / std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; std::memcpy(&x, &i, 4); return x; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; std::memcpy(&x, &i, 8); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
