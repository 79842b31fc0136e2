// Standard headers, CUDA's keywords on the CPU, vector types (float4, dim3, ...).
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>


#if !defined(__x86_64__) || defined(CUDA_EMU_UCONTEXT)
#define CUDA_EMU_USE_UCONTEXT 1
#include <ucontext.h>
#else
#define CUDA_EMU_USE_UCONTEXT 0
#endif

// torch declares RestrictPtrTraits (for packed_accessor32<float, 2, torch::RestrictPtrTraits>)
// only when compiled by nvcc.
namespace at {
template <typename T>
struct RestrictPtrTraits {
  typedef T* __restrict__ PtrType;
};
}  // namespace at

// ------------------------------------------------------------------------------------------
// CUDA keywords: on the CPU every function is a host function.
// ------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static  // only reached where the emulation could not rewrite (inside macros)
#define __CUDA_ARCH_EMULATED__ 1
// The architecture the emulation stands for: sm_80 (Ampere, A100), whose features it has (cp.async,
// __reduce_*_sync, bfloat16, independent thread scheduling). Code written `#if __CUDA_ARCH__ >= 800` takes the
// branch a modern GPU takes; sm_90's own features (clusters, TMA, wgmma) are not emulated, so `>= 900` is false.
#define __CUDA_ARCH__ 800

// ------------------------------------------------------------------------------------------
// Vector types (alignment as in CUDA's vector_types.h) and make_* helpers.
// ------------------------------------------------------------------------------------------
#define CUDA_EMU_VEC(T, N, A2, A4)                                                           \
  struct N##1 { T x; };                                                                      \
  struct alignas(A2) N##2 { T x, y; };                                                       \
  struct N##3 { T x, y, z; };                                                                \
  struct alignas(A4) N##4 { T x, y, z, w; };                                                 \
  inline N##1 make_##N##1(T x) { return {x}; }                                               \
  inline N##2 make_##N##2(T x, T y) { return {x, y}; }                                       \
  inline N##3 make_##N##3(T x, T y, T z) { return {x, y, z}; }                               \
  inline N##4 make_##N##4(T x, T y, T z, T w) { return {x, y, z, w}; }
CUDA_EMU_VEC(signed char, char, 2, 4)
CUDA_EMU_VEC(unsigned char, uchar, 2, 4)
CUDA_EMU_VEC(short, short, 4, 8)
CUDA_EMU_VEC(unsigned short, ushort, 4, 8)
CUDA_EMU_VEC(int, int, 8, 16)
CUDA_EMU_VEC(long, long, 16, 16)
CUDA_EMU_VEC(unsigned long, ulong, 16, 16)
CUDA_EMU_VEC(long long, longlong, 16, 16)
CUDA_EMU_VEC(unsigned long long, ulonglong, 16, 16)
CUDA_EMU_VEC(float, float, 8, 16)
CUDA_EMU_VEC(double, double, 16, 16)
#undef CUDA_EMU_VEC
// uint3 is also the type of threadIdx/blockIdx, so it is spelled out.
struct uint1 { unsigned int x; };
struct alignas(8) uint2 { unsigned int x, y; };
struct uint3 { unsigned int x, y, z; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
inline uint1 make_uint1(unsigned x) { return {x}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};
