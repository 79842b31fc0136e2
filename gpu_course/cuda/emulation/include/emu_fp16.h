// emu_fp16.h: <cuda_fp16.h> for the CPU emulation: __half (half), __half2 (half2), the conversions and the
// arithmetic a kernel uses, with the GPU's rounding (round to nearest even; an fp16 operation computes in float
// and rounds once, as the GPU's hadd/hmul/hfma do).
//
// The API mirrors CUDA's header as a kernel compiled by nvcc sees it (implicit conversions from and to float,
// the operators + - * / and comparisons on __half and __half2), so that a source that compiles here compiles for
// a GPU and the other way round; see the shim <cuda_fp16.h>, which includes this file. Left out: the bfloat16 and
// fp8 types (<cuda_bf16.h> is refused), vector loads of half8, and most of the math library (hexp, hlog ... are
// here; the rarer ones are not).
#pragma once
#ifndef CUDA_EMU_FP16_H
#define CUDA_EMU_FP16_H 1

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cuda_emu {
/// float -> fp16 bits, round to nearest even; overflow to infinity; NaN -> 0x7fff (the GPU's canonical NaN).
inline unsigned short f2h_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, u = x & 0x7fffffffu;
  if (u >= 0x7f800000u) return static_cast<unsigned short>(u == 0x7f800000u ? (sign | 0x7c00u) : 0x7fffu);
  if (u >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);   // rounds to 65536 or more: inf
  if (u >= 0x38800000u) {                                                     // a normal fp16 number
    const uint32_t m = u - 0x38000000u;                                       // rebias the exponent (127 -> 15)
    uint32_t r = m >> 13;
    const uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) r++;                // nearest, ties to even
    return static_cast<unsigned short>(sign | r);
  }
  if (u < 0x33000000u) return static_cast<unsigned short>(sign);             // below half the smallest subnormal
  const uint32_t e = u >> 23, shift = 126u - e;                             // a subnormal fp16 number
  const uint32_t mant = (u & 0x7fffffu) | 0x800000u;
  uint32_t r = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  if (rest > halfway || (rest == halfway && (r & 1u))) r++;
  return static_cast<unsigned short>(sign | r);
}
/// fp16 bits -> float (exact).
inline float h2f_bits(unsigned short h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0x1f) {
    x = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    x = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    x = sign;
  } else {  // subnormal: m * 2^-24
    float v = static_cast<float>(m) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
}  // namespace cuda_emu

struct __half_raw {
  unsigned short x;
};
struct __half2_raw {
  unsigned short x, y;
};

struct alignas(2) __half {
 protected:
  unsigned short __x;

 public:
  __half() = default;
  __half(const __half_raw& r) : __x(r.x) {}  // NOLINT
  __half(float f) : __x(::cuda_emu::f2h_bits(f)) {}  // NOLINT: implicit, as in CUDA
  __half(double f) : __x(::cuda_emu::f2h_bits(static_cast<float>(f))) {}  // NOLINT
  __half(short v) : __half(static_cast<float>(v)) {}  // NOLINT
  __half(unsigned short v) : __half(static_cast<float>(v)) {}  // NOLINT
  __half(int v) : __half(static_cast<float>(v)) {}  // NOLINT
  __half(unsigned int v) : __half(static_cast<float>(v)) {}  // NOLINT
  __half(long long v) : __half(static_cast<float>(v)) {}  // NOLINT
  __half(unsigned long long v) : __half(static_cast<float>(v)) {}  // NOLINT
  operator __half_raw() const { return {__x}; }
  operator float() const { return ::cuda_emu::h2f_bits(__x); }
  operator short() const { return static_cast<short>(static_cast<float>(*this)); }
  operator unsigned short() const { return static_cast<unsigned short>(static_cast<float>(*this)); }
  operator int() const { return static_cast<int>(static_cast<float>(*this)); }
  operator unsigned int() const { return static_cast<unsigned int>(static_cast<float>(*this)); }
  operator long long() const { return static_cast<long long>(static_cast<float>(*this)); }
  operator unsigned long long() const { return static_cast<unsigned long long>(static_cast<float>(*this)); }
  __half& operator=(const __half_raw& r) {
    __x = r.x;
    return *this;
  }
  __half& operator=(float f) {
    __x = ::cuda_emu::f2h_bits(f);
    return *this;
  }
  __half& operator=(double f) {
    __x = ::cuda_emu::f2h_bits(static_cast<float>(f));
    return *this;
  }
  __half& operator=(int v) { return *this = static_cast<float>(v); }
};
typedef __half half;

struct alignas(4) __half2 {
  __half x, y;
  __half2() = default;
  __half2(const __half& a, const __half& b) : x(a), y(b) {}
  __half2(const __half2_raw& r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}  // NOLINT
  operator __half2_raw() const {
    return {static_cast<__half_raw>(x).x, static_cast<__half_raw>(y).x};
  }
  __half2& operator=(const __half2_raw& r) {
    x = __half_raw{r.x};
    y = __half_raw{r.y};
    return *this;
  }
};
typedef __half2 half2;

// ---- conversions -------------------------------------------------------------------------------
inline __half __float2half(float a) { return __half(a); }
inline __half __float2half_rn(float a) { return __half(a); }
inline __half __double2half(double a) { return __half(a); }
inline float __half2float(__half a) { return static_cast<float>(a); }
inline __half __int2half_rn(int i) { return __half(static_cast<float>(i)); }
inline int __half2int_rn(__half h) { return static_cast<int>(std::nearbyint(static_cast<float>(h))); }
inline int __half2int_rz(__half h) { return static_cast<int>(static_cast<float>(h)); }
inline unsigned short __half_as_ushort(__half h) { return static_cast<__half_raw>(h).x; }
inline short __half_as_short(__half h) { return static_cast<short>(static_cast<__half_raw>(h).x); }
inline __half __ushort_as_half(unsigned short i) { return __half_raw{i}; }
inline __half __short_as_half(short i) { return __half_raw{static_cast<unsigned short>(i)}; }
inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __half2half2(__half a) { return __half2(a, a); }
inline __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
inline __half2 __float22half2_rn(float2 a) { return __half2(__half(a.x), __half(a.y)); }
inline float2 __half22float2(__half2 a) { return make_float2(static_cast<float>(a.x), static_cast<float>(a.y)); }
inline __half __low2half(__half2 a) { return a.x; }
inline __half __high2half(__half2 a) { return a.y; }
inline float __low2float(__half2 a) { return static_cast<float>(a.x); }
inline float __high2float(__half2 a) { return static_cast<float>(a.y); }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }

// ---- arithmetic: computed in float, rounded once to fp16 ----------------------------------------------
inline __half __hadd(__half a, __half b) { return __half(static_cast<float>(a) + static_cast<float>(b)); }
inline __half __hsub(__half a, __half b) { return __half(static_cast<float>(a) - static_cast<float>(b)); }
inline __half __hmul(__half a, __half b) { return __half(static_cast<float>(a) * static_cast<float>(b)); }
inline __half __hdiv(__half a, __half b) { return __half(static_cast<float>(a) / static_cast<float>(b)); }
inline __half __hfma(__half a, __half b, __half c) {
  return __half(std::fma(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)));
}
inline __half __hneg(__half a) { return __ushort_as_half(static_cast<unsigned short>(__half_as_ushort(a) ^ 0x8000u)); }
inline __half __habs(__half a) { return __ushort_as_half(static_cast<unsigned short>(__half_as_ushort(a) & 0x7fffu)); }
inline bool __hisnan(__half a) { return (__half_as_ushort(a) & 0x7fffu) > 0x7c00u; }
inline bool __hisinf(__half a) { return (__half_as_ushort(a) & 0x7fffu) == 0x7c00u; }
inline __half __hmax(__half a, __half b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return static_cast<float>(a) < static_cast<float>(b) ? b : a;
}
inline __half __hmin(__half a, __half b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return static_cast<float>(b) < static_cast<float>(a) ? b : a;
}
inline bool __heq(__half a, __half b) { return static_cast<float>(a) == static_cast<float>(b); }
inline bool __hne(__half a, __half b) { return static_cast<float>(a) != static_cast<float>(b) && !__hisnan(a) && !__hisnan(b); }
inline bool __hneu(__half a, __half b) { return !(static_cast<float>(a) == static_cast<float>(b)); }
inline bool __hlt(__half a, __half b) { return static_cast<float>(a) < static_cast<float>(b); }
inline bool __hle(__half a, __half b) { return static_cast<float>(a) <= static_cast<float>(b); }
inline bool __hgt(__half a, __half b) { return static_cast<float>(a) > static_cast<float>(b); }
inline bool __hge(__half a, __half b) { return static_cast<float>(a) >= static_cast<float>(b); }
inline __half hsqrt(__half a) { return __half(std::sqrt(static_cast<float>(a))); }
inline __half hrsqrt(__half a) { return __half(1.0f / std::sqrt(static_cast<float>(a))); }
inline __half hexp(__half a) { return __half(std::exp(static_cast<float>(a))); }
inline __half hexp2(__half a) { return __half(std::exp2(static_cast<float>(a))); }
inline __half hlog(__half a) { return __half(std::log(static_cast<float>(a))); }
inline __half hlog2(__half a) { return __half(std::log2(static_cast<float>(a))); }
inline __half hrcp(__half a) { return __half(1.0f / static_cast<float>(a)); }
inline __half htanh(__half a) { return __half(std::tanh(static_cast<float>(a))); }

inline __half2 __hadd2(__half2 a, __half2 b) { return __half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
inline __half2 __hsub2(__half2 a, __half2 b) { return __half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
inline __half2 __h2div(__half2 a, __half2 b) { return __half2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
inline __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }

// ---- operators (CUDA defines them for device code unless __CUDA_NO_HALF_OPERATORS__) -------------------
inline __half operator+(const __half& a, const __half& b) { return __hadd(a, b); }
inline __half operator-(const __half& a, const __half& b) { return __hsub(a, b); }
inline __half operator*(const __half& a, const __half& b) { return __hmul(a, b); }
inline __half operator/(const __half& a, const __half& b) { return __hdiv(a, b); }
inline __half& operator+=(__half& a, const __half& b) { return a = __hadd(a, b); }
inline __half& operator-=(__half& a, const __half& b) { return a = __hsub(a, b); }
inline __half& operator*=(__half& a, const __half& b) { return a = __hmul(a, b); }
inline __half& operator/=(__half& a, const __half& b) { return a = __hdiv(a, b); }
inline __half operator+(const __half& a) { return a; }
inline __half operator-(const __half& a) { return __hneg(a); }
inline bool operator==(const __half& a, const __half& b) { return __heq(a, b); }
inline bool operator!=(const __half& a, const __half& b) { return __hneu(a, b); }
inline bool operator<(const __half& a, const __half& b) { return __hlt(a, b); }
inline bool operator<=(const __half& a, const __half& b) { return __hle(a, b); }
inline bool operator>(const __half& a, const __half& b) { return __hgt(a, b); }
inline bool operator>=(const __half& a, const __half& b) { return __hge(a, b); }
inline __half2 operator+(const __half2& a, const __half2& b) { return __hadd2(a, b); }
inline __half2 operator-(const __half2& a, const __half2& b) { return __hsub2(a, b); }
inline __half2 operator*(const __half2& a, const __half2& b) { return __hmul2(a, b); }
inline __half2 operator/(const __half2& a, const __half2& b) { return __h2div(a, b); }
inline __half2& operator+=(__half2& a, const __half2& b) { return a = __hadd2(a, b); }
inline __half2& operator-=(__half2& a, const __half2& b) { return a = __hsub2(a, b); }
inline __half2& operator*=(__half2& a, const __half2& b) { return a = __hmul2(a, b); }
inline __half2 operator-(const __half2& a) { return __hneg2(a); }

// ---- warp shuffles and atomics of fp16 values -------------------------------------------------------
#define CUDA_EMU_FP16_HERE cuda_emu_loc loc = cuda_emu_loc::current()
#define CUDA_EMU_FP16_SHFL(NAME, OP, ARG)                                                                 \
  inline __half NAME(unsigned mask, __half var, ARG a, int width = warpSize, CUDA_EMU_FP16_HERE) {       \
    return __ushort_as_half(::cuda_emu::warp_shfl(OP, loc.line(), mask, __half_as_ushort(var),           \
                                                  static_cast<int>(a), width));                         \
  }                                                                                                      \
  inline __half2 NAME(unsigned mask, __half2 var, ARG a, int width = warpSize, CUDA_EMU_FP16_HERE) {     \
    uint32_t bits;                                                                                       \
    std::memcpy(&bits, &var, 4);                                                                         \
    bits = ::cuda_emu::warp_shfl(OP, loc.line(), mask, bits, static_cast<int>(a), width);                \
    std::memcpy(&var, &bits, 4);                                                                         \
    return var;                                                                                          \
  }
CUDA_EMU_FP16_SHFL(__shfl_sync, ::cuda_emu::kShflIdx, int)
CUDA_EMU_FP16_SHFL(__shfl_up_sync, ::cuda_emu::kShflUp, unsigned)
CUDA_EMU_FP16_SHFL(__shfl_down_sync, ::cuda_emu::kShflDown, unsigned)
CUDA_EMU_FP16_SHFL(__shfl_xor_sync, ::cuda_emu::kShflXor, int)
#undef CUDA_EMU_FP16_SHFL
#undef CUDA_EMU_FP16_HERE
inline __half atomicAdd(__half* a, __half v) {
  ::cuda_emu::count_atomic(a);
  __half old = *a;
  *a = __hadd(old, v);
  return old;
}
inline __half2 atomicAdd(__half2* a, __half2 v) {
  ::cuda_emu::count_atomic(a);
  __half2 old = *a;
  *a = __hadd2(old, v);
  return old;
}

#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)

#endif  // CUDA_EMU_FP16_H
