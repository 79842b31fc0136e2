// emu_bf16.h: <cuda_bf16.h> for the CPU emulation: __nv_bfloat16 (nv_bfloat16), __nv_bfloat162 (nv_bfloat162),
// their conversions and arithmetic, with the GPU's rounding (round to nearest even; an operation computes in
// float and rounds once to bfloat16). The API mirrors CUDA's header as nvcc compiles it for sm_80+ (implicit
// conversions from and to float, the operators and comparisons, the __h* intrinsics overloaded for bfloat16),
// so that a source that compiles here compiles for a GPU. A tensor of torch.bfloat16 reaches a kernel as
// reinterpret_cast<__nv_bfloat16*>(x.data_ptr<at::BFloat16>()): the same 16 bits.
#pragma once
#ifndef CUDA_EMU_BF16_H
#define CUDA_EMU_BF16_H 1

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cuda_emu {
/// float -> bfloat16 bits, round to nearest even; NaN -> 0x7fff (the GPU's canonical NaN).
inline unsigned short f2bf_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<unsigned short>(x >> 16);
}
/// bfloat16 bits -> float (exact).
inline float bf2f_bits(unsigned short h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
}  // namespace cuda_emu

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct __nv_bfloat162_raw {
  unsigned short x, y;
};

struct alignas(2) __nv_bfloat16 {
 protected:
  unsigned short __x;

 public:
  __nv_bfloat16() = default;
  __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}  // NOLINT
  __nv_bfloat16(float f) : __x(::cuda_emu::f2bf_bits(f)) {}  // NOLINT: implicit, as in CUDA
  __nv_bfloat16(double f) : __x(::cuda_emu::f2bf_bits(static_cast<float>(f))) {}  // NOLINT
  __nv_bfloat16(short v) : __nv_bfloat16(static_cast<float>(v)) {}  // NOLINT
  __nv_bfloat16(unsigned short v) : __nv_bfloat16(static_cast<float>(v)) {}  // NOLINT
  __nv_bfloat16(int v) : __nv_bfloat16(static_cast<float>(v)) {}  // NOLINT
  __nv_bfloat16(unsigned int v) : __nv_bfloat16(static_cast<float>(v)) {}  // NOLINT
  __nv_bfloat16(long long v) : __nv_bfloat16(static_cast<float>(v)) {}  // NOLINT
  __nv_bfloat16(unsigned long long v) : __nv_bfloat16(static_cast<float>(v)) {}  // NOLINT
  operator __nv_bfloat16_raw() const { return {__x}; }
  operator float() const { return ::cuda_emu::bf2f_bits(__x); }
  operator short() const { return static_cast<short>(static_cast<float>(*this)); }
  operator unsigned short() const { return static_cast<unsigned short>(static_cast<float>(*this)); }
  operator int() const { return static_cast<int>(static_cast<float>(*this)); }
  operator unsigned int() const { return static_cast<unsigned int>(static_cast<float>(*this)); }
  operator long long() const { return static_cast<long long>(static_cast<float>(*this)); }
  operator unsigned long long() const { return static_cast<unsigned long long>(static_cast<float>(*this)); }
  __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) {
    __x = r.x;
    return *this;
  }
  __nv_bfloat16& operator=(float f) {
    __x = ::cuda_emu::f2bf_bits(f);
    return *this;
  }
  __nv_bfloat16& operator=(double f) {
    __x = ::cuda_emu::f2bf_bits(static_cast<float>(f));
    return *this;
  }
  __nv_bfloat16& operator=(int v) { return *this = static_cast<float>(v); }
};
typedef __nv_bfloat16 nv_bfloat16;

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  __nv_bfloat162(const __nv_bfloat162_raw& r) : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}  // NOLINT
  operator __nv_bfloat162_raw() const {
    return {static_cast<__nv_bfloat16_raw>(x).x, static_cast<__nv_bfloat16_raw>(y).x};
  }
};
typedef __nv_bfloat162 nv_bfloat162;

// ---- conversions -------------------------------------------------------------------------------
inline __nv_bfloat16 __float2bfloat16(float a) { return __nv_bfloat16(a); }
inline __nv_bfloat16 __float2bfloat16_rn(float a) { return __nv_bfloat16(a); }
inline __nv_bfloat16 __double2bfloat16(double a) { return __nv_bfloat16(a); }
inline float __bfloat162float(__nv_bfloat16 a) { return static_cast<float>(a); }
inline __nv_bfloat16 __int2bfloat16_rn(int i) { return __nv_bfloat16(static_cast<float>(i)); }
inline int __bfloat162int_rn(__nv_bfloat16 h) { return static_cast<int>(std::nearbyint(static_cast<float>(h))); }
inline int __bfloat162int_rz(__nv_bfloat16 h) { return static_cast<int>(static_cast<float>(h)); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return static_cast<__nv_bfloat16_raw>(h).x; }
inline short __bfloat16_as_short(__nv_bfloat16 h) { return static_cast<short>(__bfloat16_as_ushort(h)); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short i) { return __nv_bfloat16_raw{i}; }
inline __nv_bfloat16 __short_as_bfloat16(short i) { return __nv_bfloat16_raw{static_cast<unsigned short>(i)}; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162(a, a); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(a, b); }
inline __nv_bfloat162 __float22bfloat162_rn(float2 a) { return __nv_bfloat162(a.x, a.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 a) {
  return make_float2(static_cast<float>(a.x), static_cast<float>(a.y));
}
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 a) { return a.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 a) { return a.y; }
inline float __low2float(__nv_bfloat162 a) { return static_cast<float>(a.x); }
inline float __high2float(__nv_bfloat162 a) { return static_cast<float>(a.y); }
inline __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x, b.x); }
inline __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.y, b.y); }

// ---- arithmetic: computed in float, rounded once to bfloat16 (the __h* names are overloaded, as in CUDA) ----
#define CUDA_EMU_BF(a) static_cast<float>(a)
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(CUDA_EMU_BF(a) + CUDA_EMU_BF(b)); }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(CUDA_EMU_BF(a) - CUDA_EMU_BF(b)); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(CUDA_EMU_BF(a) * CUDA_EMU_BF(b)); }
inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(CUDA_EMU_BF(a) / CUDA_EMU_BF(b)); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16(std::fma(CUDA_EMU_BF(a), CUDA_EMU_BF(b), CUDA_EMU_BF(c)));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(__bfloat16_as_ushort(a) ^ 0x8000u));
}
inline __nv_bfloat16 __habs(__nv_bfloat16 a) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(__bfloat16_as_ushort(a) & 0x7fffu));
}
inline bool __hisnan(__nv_bfloat16 a) { return (__bfloat16_as_ushort(a) & 0x7fffu) > 0x7f80u; }
inline bool __hisinf(__nv_bfloat16 a) { return (__bfloat16_as_ushort(a) & 0x7fffu) == 0x7f80u; }
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return CUDA_EMU_BF(a) < CUDA_EMU_BF(b) ? b : a;
}
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return CUDA_EMU_BF(b) < CUDA_EMU_BF(a) ? b : a;
}
inline bool __heq(__nv_bfloat16 a, __nv_bfloat16 b) { return CUDA_EMU_BF(a) == CUDA_EMU_BF(b); }
inline bool __hne(__nv_bfloat16 a, __nv_bfloat16 b) { return CUDA_EMU_BF(a) != CUDA_EMU_BF(b) && !__hisnan(a) && !__hisnan(b); }
inline bool __hlt(__nv_bfloat16 a, __nv_bfloat16 b) { return CUDA_EMU_BF(a) < CUDA_EMU_BF(b); }
inline bool __hle(__nv_bfloat16 a, __nv_bfloat16 b) { return CUDA_EMU_BF(a) <= CUDA_EMU_BF(b); }
inline bool __hgt(__nv_bfloat16 a, __nv_bfloat16 b) { return CUDA_EMU_BF(a) > CUDA_EMU_BF(b); }
inline bool __hge(__nv_bfloat16 a, __nv_bfloat16 b) { return CUDA_EMU_BF(a) >= CUDA_EMU_BF(b); }
inline __nv_bfloat16 hsqrt(__nv_bfloat16 a) { return __nv_bfloat16(std::sqrt(CUDA_EMU_BF(a))); }
inline __nv_bfloat16 hrsqrt(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / std::sqrt(CUDA_EMU_BF(a))); }
inline __nv_bfloat16 hexp(__nv_bfloat16 a) { return __nv_bfloat16(std::exp(CUDA_EMU_BF(a))); }
inline __nv_bfloat16 hlog(__nv_bfloat16 a) { return __nv_bfloat16(std::log(CUDA_EMU_BF(a))); }
inline __nv_bfloat16 hrcp(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / CUDA_EMU_BF(a)); }
inline __nv_bfloat16 htanh(__nv_bfloat16 a) { return __nv_bfloat16(std::tanh(CUDA_EMU_BF(a))); }
#undef CUDA_EMU_BF

#define CUDA_EMU_BF2(NAME, ONE)                                                                       \
  inline __nv_bfloat162 NAME(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(ONE(a.x, b.x), ONE(a.y, b.y)); }
CUDA_EMU_BF2(__hadd2, __hadd)
CUDA_EMU_BF2(__hsub2, __hsub)
CUDA_EMU_BF2(__hmul2, __hmul)
CUDA_EMU_BF2(__h2div, __hdiv)
CUDA_EMU_BF2(__hmax2, __hmax)
CUDA_EMU_BF2(__hmin2, __hmin)
#undef CUDA_EMU_BF2
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __nv_bfloat162 __hneg2(__nv_bfloat162 a) { return __nv_bfloat162(__hneg(a.x), __hneg(a.y)); }
inline __nv_bfloat162 __habs2(__nv_bfloat162 a) { return __nv_bfloat162(__habs(a.x), __habs(a.y)); }

// ---- operators ----------------------------------------------------------------------------------------------
inline __nv_bfloat16 operator+(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hadd(a, b); }
inline __nv_bfloat16 operator-(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hsub(a, b); }
inline __nv_bfloat16 operator*(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hmul(a, b); }
inline __nv_bfloat16 operator/(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hdiv(a, b); }
inline __nv_bfloat16& operator+=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hadd(a, b); }
inline __nv_bfloat16& operator-=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hsub(a, b); }
inline __nv_bfloat16& operator*=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hmul(a, b); }
inline __nv_bfloat16& operator/=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hdiv(a, b); }
inline __nv_bfloat16 operator+(const __nv_bfloat16& a) { return a; }
inline __nv_bfloat16 operator-(const __nv_bfloat16& a) { return __hneg(a); }
inline bool operator==(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __heq(a, b); }
inline bool operator!=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return !__heq(a, b); }
inline bool operator<(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hlt(a, b); }
inline bool operator<=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hle(a, b); }
inline bool operator>(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hgt(a, b); }
inline bool operator>=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hge(a, b); }
inline __nv_bfloat162 operator+(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hadd2(a, b); }
inline __nv_bfloat162 operator-(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hsub2(a, b); }
inline __nv_bfloat162 operator*(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hmul2(a, b); }
inline __nv_bfloat162 operator/(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __h2div(a, b); }
inline __nv_bfloat162& operator+=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __hadd2(a, b); }
inline __nv_bfloat162& operator*=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __hmul2(a, b); }
inline __nv_bfloat162 operator-(const __nv_bfloat162& a) { return __hneg2(a); }

// ---- warp shuffles and atomics of bfloat16 values ------------------------------------------------------------
#define CUDA_EMU_BF16_HERE cuda_emu_loc loc = cuda_emu_loc::current()
#define CUDA_EMU_BF16_SHFL(NAME, OP, ARG)                                                                      \
  inline __nv_bfloat16 NAME(unsigned mask, __nv_bfloat16 var, ARG a, int width = warpSize, CUDA_EMU_BF16_HERE) { \
    return __ushort_as_bfloat16(::cuda_emu::warp_shfl(OP, loc.line(), mask, __bfloat16_as_ushort(var),         \
                                                      static_cast<int>(a), width));                           \
  }                                                                                                             \
  inline __nv_bfloat162 NAME(unsigned mask, __nv_bfloat162 var, ARG a, int width = warpSize, CUDA_EMU_BF16_HERE) { \
    uint32_t bits;                                                                                              \
    std::memcpy(&bits, &var, 4);                                                                                \
    bits = ::cuda_emu::warp_shfl(OP, loc.line(), mask, bits, static_cast<int>(a), width);                       \
    std::memcpy(&var, &bits, 4);                                                                                \
    return var;                                                                                                 \
  }
CUDA_EMU_BF16_SHFL(__shfl_sync, ::cuda_emu::kShflIdx, int)
CUDA_EMU_BF16_SHFL(__shfl_up_sync, ::cuda_emu::kShflUp, unsigned)
CUDA_EMU_BF16_SHFL(__shfl_down_sync, ::cuda_emu::kShflDown, unsigned)
CUDA_EMU_BF16_SHFL(__shfl_xor_sync, ::cuda_emu::kShflXor, int)
#undef CUDA_EMU_BF16_SHFL
#undef CUDA_EMU_BF16_HERE
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* a, __nv_bfloat16 v) {
  ::cuda_emu::count_atomic(a);
  __nv_bfloat16 old = *a;
  *a = __hadd(old, v);
  return old;
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* a, __nv_bfloat162 v) {
  ::cuda_emu::count_atomic(a);
  __nv_bfloat162 old = *a;
  *a = __hadd2(old, v);
  return old;
}

#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)

#endif  // CUDA_EMU_BF16_H
