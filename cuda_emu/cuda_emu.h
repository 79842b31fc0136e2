// cuda_emu.h: runs the course's subset of CUDA C on the CPU.
//
// cuda_emu.py rewrites a learner's CUDA source a little (launches, __shared__ declarations, kernel
// pointer parameters, see its docstring) and compiles it against this header, which is
// precompiled once.  Design, in short:
//   * blocks run one after another; the threads of a block run as cooperative fibers on one OS
//     thread, and a fiber switches only at __syncthreads().  Between two barriers a thread runs
//     alone, so a missing barrier shows up as a real race, deterministically.
//   * a barrier that only part of a block reaches is detected (no hang) and raised as an error.
//   * kernel pointer parameters become bounds-checked pointers (gptr) and __shared__ arrays
//     bounds-checked arrays (sarr); shared memory is poisoned (all bits set: NaN for floats) at
//     the start of every block, so reading before writing shows.
//   * errors are C++ exceptions (cuda_emu::Error) that the Python binding raises as
//     cuda_emu.CudaEmulationError; segfaults inside a kernel are caught and raised too.
#pragma once
#define CUDA_EMU_H 1

#include <Python.h>  // first, as Python asks

#if defined(CUDA_EMU_FULL_TORCH)
#include <torch/all.h>  // fallback build: the whole C++ API (slow to compile)
#else
#include <ATen/ATen.h>  // all at:: operators, much lighter than torch/extension.h
#endif
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <csetjmp>
#include <csignal>
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

#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__) || defined(CUDA_EMU_UCONTEXT)
#define CUDA_EMU_USE_UCONTEXT 1
#include <ucontext.h>
#else
#define CUDA_EMU_USE_UCONTEXT 0
#endif

#if !defined(CUDA_EMU_FULL_TORCH)
// What torch/types.h adds on top of ATen, so that torch::Tensor, torch::empty_like, torch::kFloat32
// ... work without the (heavy) full C++ frontend.
namespace torch {
using namespace at;  // NOLINT
using std::nullopt;
using std::optional;
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
#endif

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
#define __shared__ static  // only reached where cuda_emu.py could not rewrite (inside macros)
#define __CUDA_ARCH_EMULATED__ 1

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

// ------------------------------------------------------------------------------------------
// The emulator's state: one launch at a time (the GIL is held while a kernel runs).
// ------------------------------------------------------------------------------------------
namespace cuda_emu {

/// An emulation error (bad launch, out-of-bounds access, divergent barrier, ...).
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A Python exception is already set (e.g. KeyboardInterrupt): just return NULL.
struct PyErrorAlreadySet {};

enum FiberState { kNew, kRunning, kWaiting, kDone, kFailed };

/// Where a bounds-checked pointer came from, for error messages.
struct PtrInfo {
  const char* name = "";  // "x" (kernel parameter) or "smem" (extern __shared__)
  const char* base = nullptr;  // the pointer as passed to the kernel
  std::string what;       // "a float tensor of 1000 elements"
};

struct Fiber {
#if CUDA_EMU_USE_UCONTEXT
  ucontext_t uc;
#else
  void* sp = nullptr;
#endif
  char* stack = nullptr;
  int state = kNew;
  int line = 0;  // line of the __syncthreads() it waits at
  int pred = 0;  // predicate of __syncthreads_count/and/or
};

struct State {
  uint3 thread_idx{0, 0, 0}, block_idx{0, 0, 0};
  dim3 block_dim{1, 1, 1}, grid_dim{1, 1, 1};
  bool in_kernel = false;
  const char* kernel = "";
  int launch_line = 0;
  Fiber* cur = nullptr;
  Fiber sched;                        // the scheduler's own context
  std::vector<Fiber> fibers;
  void (*body)(void*) = nullptr;      // runs the kernel for the current thread
  void* closure = nullptr;
  std::string error;                  // set by a failing fiber
  int bar_count = 0;                  // result of __syncthreads_count for the current phase
  char* dyn = nullptr;                // dynamic shared memory of the current launch
  size_t dyn_bytes = 0;
  PtrInfo dyn_info;
  std::vector<std::pair<void*, size_t>> shared_regions;  // static __shared__ variables
  std::vector<std::pair<std::string, const char*>> shared_names;
  size_t stack_bytes = 0;
  std::vector<char*> free_stacks, all_stacks;
};
static State g;

static const uint3& threadIdx = g.thread_idx;
static const uint3& blockIdx = g.block_idx;
static const dim3& blockDim = g.block_dim;
static const dim3& gridDim = g.grid_dim;

inline std::string fmt3(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}
inline std::string fmt3(dim3 v) { return fmt3(uint3(v)); }

/// "in kernel k (launched at cuda_src line 40), block (1,0,0), thread (3,0,0)"
inline std::string where() {
  std::string s = std::string("in kernel ") + g.kernel + " (launched at cuda_src line " +
                  std::to_string(g.launch_line) + ")";
  if (g.in_kernel) s += ", block " + fmt3(g.block_idx) + ", thread " + fmt3(g.thread_idx);
  return s;
}

[[noreturn]] __attribute__((noinline, cold)) inline void fail(const std::string& msg) {
  throw Error(msg);
}

// ------------------------------------------------------------------------------------------
// Fibers: a tiny context switch on x86-64 (callee-saved registers + stack pointer), ucontext
// elsewhere.  Stacks come from a pool of mmap'ed regions with a guard page below each.
// ------------------------------------------------------------------------------------------
#if !CUDA_EMU_USE_UCONTEXT
// ctx_switch(save, to): push callee-saved registers and the FP control words, store rsp in
// *save, load `to` as rsp, pop the same things from there and return into that context.
__attribute__((naked, noinline)) static void ctx_switch(void** /*save*/, void* /*to*/) {
  __asm__ volatile(
      "pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $8, %rsp\n\t"
      "stmxcsr (%rsp)\n\t"
      "fnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\t"
      "fldcw 4(%rsp)\n\t"
      "addq $8, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}
// First code a new fiber runs: call r12(r13) on the fresh stack.
__attribute__((naked, noinline)) static void ctx_entry() {
  __asm__ volatile(
      "movq %r13, %rdi\n\t"
      "callq *%r12\n\t"
      "ud2\n\t");
}
#endif

static void fiber_main(void*);

#if CUDA_EMU_USE_UCONTEXT
static void fiber_main_uc(int, int) { fiber_main(nullptr); }
#endif

inline void ctx_init(Fiber& f) {
#if CUDA_EMU_USE_UCONTEXT
  getcontext(&f.uc);
  f.uc.uc_stack.ss_sp = f.stack;
  f.uc.uc_stack.ss_size = g.stack_bytes;
  f.uc.uc_link = nullptr;
  makecontext(&f.uc, (void (*)())fiber_main_uc, 2, 0, 0);
#else
  uintptr_t top = (reinterpret_cast<uintptr_t>(f.stack) + g.stack_bytes) & ~uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = reinterpret_cast<void*>(&ctx_entry);  // "return address" of ctx_switch
  *--sp = nullptr;                               // rbp
  *--sp = nullptr;                               // rbx
  *--sp = reinterpret_cast<void*>(&fiber_main);  // r12: function
  *--sp = nullptr;                               // r13: its argument
  *--sp = nullptr;                               // r14
  *--sp = nullptr;                               // r15
  uint32_t mxcsr;
  uint16_t fpucw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fpucw));
  *--sp = reinterpret_cast<void*>(uintptr_t(mxcsr) | (uintptr_t(fpucw) << 32));
  f.sp = sp;
#endif
}

inline void ctx_swap(Fiber& from, Fiber& to) {
#if CUDA_EMU_USE_UCONTEXT
  swapcontext(&from.uc, &to.uc);
#else
  ctx_switch(&from.sp, to.sp);
#endif
}

inline size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

inline char* stack_alloc() {
  if (!g.free_stacks.empty()) {
    char* s = g.free_stacks.back();
    g.free_stacks.pop_back();
    return s;
  }
  if (g.stack_bytes == 0) {
    const char* kb = std::getenv("CUDA_EMU_STACK_KB");
    size_t k = kb ? std::strtoul(kb, nullptr, 10) : 0;
    g.stack_bytes = (k >= 16 ? k : 256) * 1024;
  }
  size_t page = page_bytes();
  void* m = mmap(nullptr, g.stack_bytes + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) fail("cuda_emu: out of memory for thread stacks");
  mprotect(m, page, PROT_NONE);  // guard page: a stack overflow faults instead of corrupting
  char* s = static_cast<char*>(m) + page;
  g.all_stacks.push_back(s);
  return s;
}

inline void stack_release(char* s) { g.free_stacks.push_back(s); }

/// Is `addr` in the guard page of one of the fiber stacks?
inline bool in_guard_page(const void* addr) {
  const char* a = static_cast<const char*>(addr);
  size_t page = page_bytes();
  for (char* s : g.all_stacks)
    if (a >= s - page && a < s) return true;
  return false;
}

// The body of every fiber: run the kernel for one thread, record how it ended, go back to the
// scheduler.  Exceptions are caught here, on the fiber's own stack.
static void fiber_main(void*) {
  Fiber* f = g.cur;
  try {
    g.body(g.closure);
    f->state = kDone;
  } catch (const Error& e) {
    f->state = kFailed;
    g.error = e.what();
  } catch (const c10::Error& e) {
    f->state = kFailed;
    g.error = std::string("error ") + where() + ": " + e.what_without_backtrace();
  } catch (const std::exception& e) {
    f->state = kFailed;
    g.error = std::string("C++ exception ") + where() + ": " + e.what();
  } catch (...) {
    f->state = kFailed;
    g.error = "unknown C++ exception " + where();
  }
  ctx_swap(*f, g.sched);  // never comes back: a finished fiber is not resumed
  std::abort();
}

// ------------------------------------------------------------------------------------------
// __syncthreads and friends: the calling fiber waits; the scheduler resumes it once every
// thread of the block has arrived at the same barrier.
// ------------------------------------------------------------------------------------------
inline void barrier_wait(int line, int pred) {
  if (!g.in_kernel || !g.cur)
    fail("__syncthreads() called outside a kernel (cuda_src line " + std::to_string(line) + ")");
  Fiber* f = g.cur;
  f->state = kWaiting;
  f->line = line;
  f->pred = pred;
  ctx_swap(*f, g.sched);
}
inline void syncthreads(int line) { barrier_wait(line, 0); }
inline int syncthreads_count(int line, int pred) {
  barrier_wait(line, pred != 0);
  return g.bar_count;
}

// ------------------------------------------------------------------------------------------
// Static __shared__ variables: function-local statics that register themselves once, so that
// the launcher can poison them at the start of every block.
// ------------------------------------------------------------------------------------------
constexpr unsigned char kPoison = 0xff;  // float NaN, int -1

struct shared_reg {
  shared_reg(void* p, size_t n, const char* name) {
    std::memset(p, kPoison, n);
    g.shared_regions.emplace_back(p, n);
    g.shared_names.emplace_back(name, static_cast<const char*>(p));
  }
};

inline void poison_shared() {
  for (auto& r : g.shared_regions) std::memset(r.first, kPoison, r.second);
  if (g.dyn_bytes) std::memset(g.dyn, kPoison, g.dyn_bytes);
}

/// Name of the registered __shared__ variable that contains address p.
inline std::string shared_name(const void* p) {
  const char* a = static_cast<const char*>(p);
  for (size_t i = 0; i < g.shared_regions.size(); i++) {
    const char* s = static_cast<const char*>(g.shared_regions[i].first);
    if (a >= s && a < s + g.shared_regions[i].second) return g.shared_names[i].first;
  }
  return "a __shared__ array";
}

[[noreturn]] __attribute__((noinline, cold)) inline void shared_oob(const void* arr, long long i,
                                                                   size_t n) {
  fail("out-of-bounds index " + std::to_string(i) + " into __shared__ " + shared_name(arr) +
       " (that dimension has " + std::to_string(n) + " elements, valid 0.." +
       std::to_string(static_cast<long long>(n) - 1) + ") " + where() + ".");
}

[[noreturn]] __attribute__((noinline, cold)) inline void misaligned(const void* p, size_t align,
                                                                   const char* type) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%p", p);
  fail(std::string("misaligned address ") + buf + ": a " + type + " access needs " +
       std::to_string(align) + "-byte alignment " + where() +
       ". On a GPU this is the error 'misaligned address'.");
}

template <class T>
inline const char* type_label() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return "float";
  else if constexpr (std::is_same_v<U, double>) return "double";
  else if constexpr (std::is_same_v<U, int>) return "int";
  else if constexpr (std::is_same_v<U, unsigned>) return "unsigned int";
  else if constexpr (std::is_same_v<U, float2>) return "float2";
  else if constexpr (std::is_same_v<U, float4>) return "float4";
  else if constexpr (std::is_same_v<U, int4>) return "int4";
  else return "vector";
}

/// A bounds-checked array: what `__shared__ T name[N]...` becomes (nested for 2D/3D).
template <class T, size_t N>
struct sarr {
  T d[N];
  using elem = T;
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  T& operator[](I i) {
    if (static_cast<unsigned long long>(static_cast<long long>(i)) >= N)
      shared_oob(this, static_cast<long long>(i), N);
    return d[i];
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  const T& operator[](I i) const {
    if (static_cast<unsigned long long>(static_cast<long long>(i)) >= N)
      shared_oob(this, static_cast<long long>(i), N);
    return d[i];
  }
  operator T*() { return d; }
  operator const T*() const { return d; }
  template <class U, std::enable_if_t<!std::is_same_v<std::remove_cv_t<U>, T>, int> = 0>
  explicit operator U*() {
    if (reinterpret_cast<uintptr_t>(d) % alignof(U)) misaligned(d, alignof(U), type_label<U>());
    return reinterpret_cast<U*>(d);
  }
};
template <class T, size_t N, size_t... M>
struct sarr_nd {
  using type = sarr<typename sarr_nd<T, M...>::type, N>;
};
template <class T, size_t N>
struct sarr_nd<T, N> {
  using type = sarr<T, N>;
};
template <class T, size_t... N>
using shared_array = typename sarr_nd<T, N...>::type;

// ------------------------------------------------------------------------------------------
// gptr<T>: a kernel's pointer parameter, checked against the extent of the tensor it points
// into (when the host code got it from data_ptr, see track()).  Converts to T* for helpers.
// ------------------------------------------------------------------------------------------
[[noreturn]] __attribute__((noinline, cold)) inline void global_oob(const PtrInfo* info,
                                                                   const void* q, size_t esize,
                                                                   const char* lo,
                                                                   const char* hi) {
  std::string msg = "out-of-bounds access ";
  if (info) {
    long long off = static_cast<const char*>(q) - info->base;
    long long idx = off >= 0 ? off / static_cast<long long>(esize)
                             : -((-off + static_cast<long long>(esize) - 1) / static_cast<long long>(esize));
    long long n = static_cast<long long>((hi - info->base)) / static_cast<long long>(esize);
    msg += std::string("to ") + info->name + "[" + std::to_string(idx) + "] " + where() + ": " + info->name +
           " points to " + info->what;
    if (lo == info->base) msg += " (valid indices 0.." + std::to_string(n - 1) + ")";
    msg += ". Guard the access (e.g. if (i < n)) or fix the index.";
  } else {
    msg += where() + ".";
  }
  (void)lo;
  fail(msg);
}

template <class T>
struct gptr {
  T* p = nullptr;
  const char* lo = nullptr;                                             // first valid byte
  const char* hi = reinterpret_cast<const char*>(~uintptr_t(0));      // one past the last
  const PtrInfo* info = nullptr;

  gptr() = default;
  gptr(T* q) : p(q) {}  // NOLINT: unknown bounds (not checked)
  gptr(std::nullptr_t) : p(nullptr) {}
  gptr(T* q, const char* l, const char* h, const PtrInfo* i) : p(q), lo(l), hi(h), info(i) {}
  template <class U, std::enable_if_t<std::is_convertible_v<U*, T*> && !std::is_same_v<U, T>, int> = 0>
  gptr(const gptr<U>& o) : p(o.p), lo(o.lo), hi(o.hi), info(o.info) {}  // NOLINT

  operator T*() const { return p; }  // NOLINT: hand a plain pointer to helpers
  template <class U, std::enable_if_t<!std::is_same_v<std::remove_cv_t<U>, std::remove_cv_t<T>> &&
                                          !std::is_void_v<U>, int> = 0>
  explicit operator U*() const {  // C-style casts such as (float4*)x
    if (reinterpret_cast<uintptr_t>(p) % alignof(U)) misaligned(p, alignof(U), type_label<U>());
    return (U*)p;  // NOLINT
  }
  T* get() const { return p; }

  void check(const T* q) const {
    const char* c = reinterpret_cast<const char*>(q);
    if (__builtin_expect(c < lo || c + sizeof(T) > hi, 0)) global_oob(info, q, sizeof(T), lo, hi);
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  T& operator[](I i) const {
    T* q = p + static_cast<ptrdiff_t>(i);
    check(q);
    return *q;
  }
  T& operator*() const {
    check(p);
    return *p;
  }
  T* operator->() const {
    check(p);
    return p;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr operator+(I i) const {
    gptr r = *this;
    r.p += static_cast<ptrdiff_t>(i);
    return r;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  friend gptr operator+(I i, const gptr& a) {
    return a + i;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr operator-(I i) const {
    gptr r = *this;
    r.p -= static_cast<ptrdiff_t>(i);
    return r;
  }
  ptrdiff_t operator-(const gptr& o) const { return p - o.p; }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr& operator+=(I i) {
    p += static_cast<ptrdiff_t>(i);
    return *this;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr& operator-=(I i) {
    p -= static_cast<ptrdiff_t>(i);
    return *this;
  }
  gptr& operator++() {
    ++p;
    return *this;
  }
  gptr& operator--() {
    --p;
    return *this;
  }
  gptr operator++(int) {
    gptr r = *this;
    ++p;
    return r;
  }
  gptr operator--(int) {
    gptr r = *this;
    --p;
    return r;
  }
  /// reinterpret_cast<U*>(x): same bounds, checked alignment.
  template <class U>
  gptr<U> cast() const {
    if constexpr (!std::is_void_v<U>)
      if (reinterpret_cast<uintptr_t>(p) % alignof(U)) misaligned(p, alignof(U), type_label<U>());
    return gptr<U>(reinterpret_cast<U*>(p), lo, hi, info);
  }
};

template <class T>
struct is_gptr : std::false_type {};
template <class T>
struct is_gptr<gptr<T>> : std::true_type {};

/// `extern __shared__ T name[];`: the current launch's dynamic shared memory, checked against
/// the size given as the third <<<>>> argument.
template <class T>
struct dshared {
  const char* name;
  gptr<T> get() const {
    g.dyn_info.name = name;
    return gptr<T>(reinterpret_cast<T*>(g.dyn), g.dyn, g.dyn + g.dyn_bytes, &g.dyn_info);
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  T& operator[](I i) const {
    return get()[i];
  }
  operator gptr<T>() const { return get(); }  // NOLINT
  operator T*() const { return reinterpret_cast<T*>(g.dyn); }  // NOLINT
  template <class U, std::enable_if_t<!std::is_same_v<std::remove_cv_t<U>, T>, int> = 0>
  explicit operator U*() const {
    return static_cast<U*>(get());
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr<T> operator+(I i) const {
    return get() + i;
  }
  T& operator*() const { return *get(); }
};
template <class T>
struct is_dshared : std::false_type {};
template <class T>
struct is_dshared<dshared<T>> : std::true_type {};
template <class T>
struct is_sarr : std::false_type {};
template <class T, size_t N>
struct is_sarr<sarr<T, N>> : std::true_type {};

/// What reinterpret_cast becomes: keeps the bounds of checked pointers.
template <class To, class From>
inline decltype(auto) rcast(From&& f) {
  using F = std::remove_cv_t<std::remove_reference_t<From>>;
  if constexpr (std::is_pointer_v<To> && is_gptr<F>::value) {
    return f.template cast<std::remove_pointer_t<To>>();
  } else if constexpr (std::is_pointer_v<To> && is_dshared<F>::value) {
    return f.get().template cast<std::remove_pointer_t<To>>();
  } else if constexpr (std::is_pointer_v<To> && is_sarr<F>::value) {
    return static_cast<To>(f);
  } else {
    return reinterpret_cast<To>(f);
  }
}

// ------------------------------------------------------------------------------------------
// Host side: remember which tensor each data_ptr() came from, to bound the kernel's pointers.
// ------------------------------------------------------------------------------------------
struct Tracked {
  const char* lo;
  const char* hi;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  const void* storage_data;
  std::string what;
};
static std::vector<Tracked> g_tracked;

inline void track_tensor(const at::TensorBase& t) {
  if (!t.defined() || !t.has_storage()) return;
  const char* lo = static_cast<const char*>(t.data_ptr());
  int64_t span = 0;  // offset of the last element, in elements
  for (int64_t d = 0; d < t.dim(); d++) span += (t.size(d) - 1) * t.stride(d);
  const char* hi = t.numel() == 0 ? lo : lo + (span + 1) * static_cast<int64_t>(t.element_size());
  std::ostringstream what;
  what << "a " << c10::toString(t.scalar_type()) << " tensor of " << t.numel() << " elements";
  if (g_tracked.size() > 256) {  // forget tensors that were freed or reallocated
    std::vector<Tracked> keep;
    for (auto& e : g_tracked) {
      auto s = e.storage.lock();
      if (s && s->data() == e.storage_data) keep.push_back(e);
    }
    g_tracked.swap(keep);
    if (g_tracked.size() > 256) g_tracked.erase(g_tracked.begin(), g_tracked.begin() + 128);
  }
  const c10::Storage& st = t.storage();
  g_tracked.push_back({lo, hi, st.getWeakStorageImpl(), st.data(), what.str()});
}

/// Wraps `x` in `x.data_ptr<float>()`; registers x's extent and returns x unchanged.
template <class T>
inline T&& track(T&& t) {
  if constexpr (std::is_base_of_v<at::TensorBase, std::decay_t<T>>) track_tensor(t);
  return std::forward<T>(t);
}

/// Bounds of the live tracked tensor that contains p (newest first), or nullptr.
inline const Tracked* find_tracked(const void* p) {
  const char* c = static_cast<const char*>(p);
  const Tracked* edge = nullptr;
  for (size_t k = g_tracked.size(); k-- > 0;) {
    Tracked& e = g_tracked[k];
    if (c < e.lo || c > e.hi) continue;
    auto s = e.storage.lock();
    if (!s || s->data() != e.storage_data) continue;
    if (c < e.hi) return &e;
    if (!edge) edge = &e;  // one past the end (an empty tensor): only if nothing better
  }
  return edge;
}

// ------------------------------------------------------------------------------------------
// Launching: <<<grid, block, smem, stream>>> becomes kernel(...).config(...)(args...).
// ------------------------------------------------------------------------------------------
struct StreamArg {
  StreamArg() = default;
  StreamArg(std::nullptr_t) {}  // NOLINT
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  StreamArg(I v) {  // NOLINT
    if (v != 0)
      fail("the 4th <<<>>> argument (a CUDA stream) must be 0 in the CPU emulation: "
           "streams are not supported by the CPU emulation; run on a GPU.");
  }
};

struct Config {
  dim3 grid, block;
  size_t smem = 0;
};

// Signal handling: a segfault (or integer division by zero) inside a kernel jumps back to the
// launcher, which raises an error, instead of killing the Python process.
static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_signal = 0;
static void* volatile g_fault_addr = nullptr;

static void on_fault(int sig, siginfo_t* si, void*) {
  g_signal = sig;
  g_fault_addr = si ? si->si_addr : nullptr;
  siglongjmp(g_jmp, 1);
}

struct SignalGuard {
  struct sigaction old_segv{}, old_bus{}, old_fpe{};
  stack_t old_stack{};
  bool active = false;
  void install() {
    static char* alt = static_cast<char*>(std::malloc(1 << 16));
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = 1 << 16;
    ss.ss_flags = 0;
    sigaltstack(&ss, &old_stack);
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    sigaction(SIGFPE, &sa, &old_fpe);
    active = true;
  }
  void restore() {
    if (!active) return;
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    sigaction(SIGFPE, &old_fpe, nullptr);
    sigaltstack(&old_stack, nullptr);
    active = false;
  }
  ~SignalGuard() { restore(); }
};

inline std::string bad_config(const Config& c) {
  const dim3 &gr = c.grid, &b = c.block;
  unsigned long long threads = 1ull * b.x * b.y * b.z;
  if (gr.x == 0 || gr.y == 0 || gr.z == 0)
    return "gridDim " + fmt3(gr) + " has a zero dimension (was the problem size 0?)";
  if (b.x == 0 || b.y == 0 || b.z == 0) return "blockDim " + fmt3(b) + " has a zero dimension";
  if (b.x > 1024 || b.y > 1024 || b.z > 64)
    return "blockDim " + fmt3(b) + " exceeds the limits (1024, 1024, 64)";
  if (threads > 1024)
    return "blockDim " + fmt3(b) + " has " + std::to_string(threads) +
           " threads; a block has at most 1024";
  if (gr.x > 2147483647u || gr.y > 65535 || gr.z > 65535)
    return "gridDim " + fmt3(gr) + " exceeds the limits (2^31-1, 65535, 65535)";
  if (c.smem > 48 * 1024)
    return std::to_string(c.smem) +
           " bytes of dynamic shared memory requested; the default limit is 49152 (48 KiB)";
  return "";
}

/// Runs one block: every thread as a fiber, phase by phase between barriers.
inline void run_block(unsigned nthreads) {
  const dim3 b = g.block_dim;
  for (unsigned t = 0; t < nthreads; t++) g.fibers[t].state = kNew;
  for (;;) {
    unsigned waiting = 0, done = 0;
    for (unsigned t = 0; t < nthreads; t++) {
      Fiber& f = g.fibers[t];
      if (f.state == kDone) {
        done++;
        continue;
      }
      g.thread_idx = {t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
      if (f.state == kNew) {
        f.stack = stack_alloc();
        ctx_init(f);
      }
      f.state = kRunning;
      g.cur = &f;
      ctx_swap(g.sched, f);
      g.cur = nullptr;
      if (f.state == kFailed) throw Error(g.error);
      if (f.state == kDone) {
        stack_release(f.stack);
        f.stack = nullptr;
        done++;
      } else {
        waiting++;
      }
    }
    if (waiting == 0) return;
    // Every live thread waits at a barrier: check that it is one barrier for the whole block.
    int line = -1, other = -1, pred = 0;
    long long first_wait = -1, first_done = -1, first_other = -1;
    for (unsigned t = 0; t < nthreads; t++) {
      Fiber& f = g.fibers[t];
      if (f.state == kDone) {
        if (first_done < 0) first_done = t;
        continue;
      }
      if (line < 0) line = f.line, first_wait = t;
      if (f.line != line && other < 0) other = f.line, first_other = t;
      pred += f.pred;
    }
    auto tid = [&](long long t) {
      return fmt3(uint3{unsigned(t % b.x), unsigned((t / b.x) % b.y), unsigned(t / (b.x * b.y))});
    };
    g.thread_idx = {0, 0, 0};
    g.in_kernel = false;  // the message names the block, not one thread
    if (done > 0) {
      fail("__syncthreads() at cuda_src line " + std::to_string(line) + " was reached by only " +
           std::to_string(waiting) + " of the " + std::to_string(nthreads) +
           " threads of block " + fmt3(g.block_idx) + " " + where() + "; " +
           std::to_string(done) + " threads (e.g. thread " + tid(first_done) +
           ") had already returned, while thread " + tid(first_wait) +
           " waits. Every thread of a block must reach the same __syncthreads() (on a GPU this "
           "hangs or gives wrong results): move the early return/if after the barrier.");
    }
    if (other >= 0) {
      fail("threads of block " + fmt3(g.block_idx) + " " + where() +
           " wait at different __syncthreads(): thread " + tid(first_wait) + " at cuda_src line " +
           std::to_string(line) + ", thread " + tid(first_other) + " at line " +
           std::to_string(other) +
           ". Every thread of a block must reach the same __syncthreads() (a barrier inside "
           "an if/else or a loop whose condition differs between threads is undefined on a "
           "GPU).");
    }
    g.in_kernel = true;
    g.bar_count = pred;
  }
}

/// Runs a whole launch; `body` runs the kernel for the current thread.
inline void run_launch(const Config& c, void (*body)(void*), void* closure) {
  std::string bad = bad_config(c);
  if (!bad.empty())
    fail("invalid configuration argument for kernel " + std::string(g.kernel) +
         " launched at cuda_src line " + std::to_string(g.launch_line) + ": " + bad +
         ". (On a GPU, C10_CUDA_KERNEL_LAUNCH_CHECK() reports 'invalid configuration "
         "argument'.)");
  static std::vector<char> dyn_store;
  if (dyn_store.size() < c.smem + 128) dyn_store.resize(c.smem + 128);
  g.dyn = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(dyn_store.data()) + 127) & ~uintptr_t(127));
  g.dyn_bytes = c.smem;
  g.dyn_info.base = g.dyn;
  g.dyn_info.what = "the launch's " + std::to_string(c.smem) +
                    " bytes of dynamic shared memory (extern __shared__, the 3rd <<<>>> argument)";
  g.grid_dim = c.grid;
  g.block_dim = c.block;
  g.body = body;
  g.closure = closure;
  const unsigned nthreads = c.block.x * c.block.y * c.block.z;
  if (g.fibers.size() < nthreads) g.fibers.resize(nthreads);

  struct Reset {  // whatever happens, leave the emulator idle
    ~Reset() {
      g.in_kernel = false;
      g.cur = nullptr;
    }
  } reset;
  SignalGuard guard;
  guard.install();  // before sigsetjmp, so that nothing it sets is lost by the longjmp
  if (sigsetjmp(g_jmp, 1) != 0) {
    guard.restore();
    std::fflush(stdout);
    int sig = g_signal;
    void* addr = g_fault_addr;
    // Stacks of the interrupted fibers are lost to the pool; release what is known free.
    for (auto& f : g.fibers) {
      if (f.stack) stack_release(f.stack);
      f.stack = nullptr;
      f.state = kDone;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%p", addr);
    if (sig == SIGFPE)
      fail("integer division by zero (SIGFPE) " + where() +
           ". On a GPU the result would be undefined; check the divisor.");
    if (in_guard_page(addr))
      fail("stack overflow " + where() + ": the thread's local variables need more than " +
           std::to_string(g.stack_bytes / 1024) +
           " KiB (the emulation's stack per thread; set CUDA_EMU_STACK_KB to raise it).");
    fail(std::string("invalid memory access at address ") + buf + " (segmentation fault) " + where() +
         ": a pointer out of bounds? (on a GPU: 'an illegal memory access was encountered')");
  }
  for (unsigned bz = 0; bz < c.grid.z; bz++)
    for (unsigned by = 0; by < c.grid.y; by++)
      for (unsigned bx = 0; bx < c.grid.x; bx++) {
        if (PyErr_CheckSignals() != 0) throw PyErrorAlreadySet();  // Ctrl-C / interrupt kernel
        g.block_idx = {bx, by, bz};
        g.in_kernel = true;
        poison_shared();
        try {
          run_block(nthreads);
        } catch (...) {
          for (auto& f : g.fibers) {  // fibers left waiting are abandoned; reuse their stacks
            if (f.stack) stack_release(f.stack);
            f.stack = nullptr;
            f.state = kDone;
          }
          std::fflush(stdout);
          throw;
        }
      }
  std::fflush(stdout);  // kernel printf must be visible when the launch returns
}

/// A kernel argument as the kernel receives it: raw pointers become checked pointers.
template <class A>
inline auto convert_arg(A&& a, PtrInfo& info, const char* pname) {
  using D = std::decay_t<A>;
  if constexpr (std::is_pointer_v<D> && !std::is_void_v<std::remove_pointer_t<D>> &&
                !std::is_function_v<std::remove_pointer_t<D>>) {
    using T = std::remove_pointer_t<D>;
    info.name = pname;
    info.base = reinterpret_cast<const char*>(a);
    const Tracked* tr = a ? find_tracked(a) : nullptr;
    if (!tr) return gptr<T>(a);  // not from a tracked tensor: unchecked
    info.what = tr->what;
    return gptr<T>(a, tr->lo, tr->hi, &info);
  } else {
    return D(std::forward<A>(a));
  }
}

/// Splits "x,out,n" into names, padding with "argument k".
inline std::vector<std::string> param_names(const char* params, size_t n) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = params; *p; p++) {
    if (*p == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty() || (params[0] && out.size() < n)) out.push_back(cur);
  for (size_t k = 0; k < out.size(); k++)
    if (out[k].empty()) out[k] = "argument " + std::to_string(k + 1);
  while (out.size() < n) out.push_back("argument " + std::to_string(out.size() + 1));
  return out;
}

template <class F>
struct Kernel {
  const char* name;
  const char* params;
  int line;
  F f;

  struct Launch {
    Kernel* k;
    Config cfg;
    template <class... A>
    void operator()(A&&... a) {
      k->launch(cfg, std::forward<A>(a)...);
    }
  };
  Launch config(dim3 grid, dim3 block, size_t smem = 0, StreamArg = {}) { return {this, {grid, block, smem}}; }

  template <class... A>
  void launch(const Config& cfg, A&&... a) {
    launch_idx(cfg, std::index_sequence_for<A...>{}, std::forward<A>(a)...);
  }
  template <size_t... I, class... A>
  void launch_idx(const Config& cfg, std::index_sequence<I...>, A&&... a) {
    if (g.in_kernel)
      fail("kernel launch inside a kernel (dynamic parallelism) is not supported by the CPU emulation; run on a GPU.");
    std::vector<std::string> names = param_names(params, sizeof...(A));
    std::vector<PtrInfo> infos(sizeof...(A) + 1);
    std::tuple<decltype(convert_arg(std::forward<A>(a), infos[I], ""))...> args{
        convert_arg(std::forward<A>(a), infos[I], names[I].c_str())...};
    auto body = [&]() { std::apply(f, args); };
    g.kernel = name;
    g.launch_line = line;
    run_launch(cfg, [](void* p) { (*static_cast<decltype(body)*>(p))(); }, &body);
  }
};

template <class F>
inline Kernel<F> kernel(const char* name, const char* params, int line, F f) {
  return Kernel<F>{name, params, line, f};
}

// ------------------------------------------------------------------------------------------
// CUDA runtime error API (the part that makes sense here) and C10_CUDA_* macros.
// ------------------------------------------------------------------------------------------
}  // namespace cuda_emu

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorInvalidConfiguration = 9 };
typedef cudaError_t cudaError;
inline cudaError_t cudaGetLastError() { return cudaSuccess; }   // errors are raised at once
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() {
  std::fflush(stdout);
  return cudaSuccess;
}
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "CUDA error"; }
inline const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaError"; }

namespace cuda_emu {
inline void cuda_check(cudaError_t e, const char* expr) {
  if (e != cudaSuccess) fail(std::string("CUDA error in ") + expr + ": " + cudaGetErrorString(e));
}
[[noreturn]] inline void exit_(int code) {
  std::fflush(stdout);
  fail("exit(" + std::to_string(code) +
       ") was called; the CPU emulation turns it into an error so that Python keeps running.");
}
[[noreturn]] inline void abort_() {
  std::fflush(stdout);
  fail("abort() was called; the CPU emulation turns it into an error so that Python keeps running.");
}
inline void assert_fail(const char* expr, const char* file, int line) {
  std::fflush(stdout);
  std::string w = g.in_kernel ? " " + where() : "";
  fail(std::string("assertion failed: ") + expr + " at " + file + " line " + std::to_string(line) + w);
}
}  // namespace cuda_emu

#define CUDA_EMU_ASSERT(...) \
  ((__VA_ARGS__) ? (void)0 : ::cuda_emu::assert_fail(#__VA_ARGS__, __FILE__, __LINE__))
#define C10_CUDA_KERNEL_LAUNCH_CHECK() ((void)0)  /* launch errors are raised at the launch */
#define C10_CUDA_CHECK(EXPR) ::cuda_emu::cuda_check((EXPR), #EXPR)
#define C10_CUDA_CHECK_WARN(EXPR) ((void)(EXPR))
#define C10_CUDA_IGNORE_ERROR(EXPR) ((void)(EXPR))

// ------------------------------------------------------------------------------------------
// Device built-ins.  threadIdx & co are references to the emulator's state.
// ------------------------------------------------------------------------------------------
using cuda_emu::blockDim;
using cuda_emu::blockIdx;
using cuda_emu::gridDim;
using cuda_emu::threadIdx;
static constexpr int warpSize = 32;

#define __syncthreads() ::cuda_emu::syncthreads(__LINE__)
#define __syncthreads_count(p) ::cuda_emu::syncthreads_count(__LINE__, (p))
#define __syncthreads_and(p) (::cuda_emu::syncthreads_count(__LINE__, (p)) == (int)(blockDim.x * blockDim.y * blockDim.z))
#define __syncthreads_or(p) (::cuda_emu::syncthreads_count(__LINE__, (p)) != 0)
inline void __threadfence() {}  // blocks run one at a time: memory is always coherent
inline void __threadfence_block() {}

// Atomics: a thread is never interrupted between barriers, so plain read-modify-write is atomic.
#define CUDA_EMU_ATOMIC(NAME, T, EXPR)               \
  inline T NAME(T* a, T v) {                          \
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
template <class T>
inline T __ldg(const T* p) { return *p; }
template <class T>
inline std::remove_cv_t<T> __ldg(const cuda_emu::gptr<T>& p) { return *p; }
#define CUDA_EMU_LOAD_HINT(NAME)                                                            \
  template <class T> inline T NAME(const T* p) { return *p; }                               \
  template <class T> inline std::remove_cv_t<T> NAME(const cuda_emu::gptr<T>& p) { return *p; }
CUDA_EMU_LOAD_HINT(__ldca)
CUDA_EMU_LOAD_HINT(__ldcg)
CUDA_EMU_LOAD_HINT(__ldcs)
CUDA_EMU_LOAD_HINT(__ldlu)
CUDA_EMU_LOAD_HINT(__ldcv)
#undef CUDA_EMU_LOAD_HINT
#define CUDA_EMU_STORE_HINT(NAME) \
  template <class T> inline void NAME(T* p, T v) { *p = v; }
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

// ------------------------------------------------------------------------------------------
// Python binding without pybind11 (its templates cost ~10 s per build): each function in
// `funcs` becomes a METH_FASTCALL builtin that converts its arguments by their C++ types.
// ------------------------------------------------------------------------------------------
__attribute__((visibility("default"))) PyObject* THPVariable_Wrap(const at::TensorBase& var);

namespace cuda_emu {
static PyObject* g_tensor_type = nullptr;  // torch.Tensor
static PyObject* g_error_type = nullptr;   // cuda_emu.CudaEmulationError (set by cuda_emu.py)

template <class T>
inline constexpr bool dependent_false = false;

inline std::string py_type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

[[noreturn]] inline void arg_type_error(const char* fn, int i, const char* want, PyObject* o) {
  PyErr_Format(PyExc_TypeError, "%s(): argument %d must be %s, not %s", fn, i + 1, want,
               Py_TYPE(o)->tp_name);
  throw PyErrorAlreadySet();
}

/// Converts a Python argument to C++ type T (primary template: unsupported types).
template <class T, class = void>
struct from_py {
  static_assert(dependent_false<T>,
                "this parameter type of a function in `funcs` is not supported by the CPU "
                "emulation's Python binding (use torch::Tensor, int, int64_t, float, double, bool, "
                "std::string, std::vector<...> or std::optional<...>)");
};

template <>
struct from_py<at::Tensor> {
  at::Tensor v;
  void load(PyObject* o, const char* fn, int i) {
    if (!g_tensor_type || PyObject_IsInstance(o, g_tensor_type) != 1) arg_type_error(fn, i, "a torch.Tensor", o);
    PyObject* cd = PyObject_GetAttrString(o, "_cdata");
    if (!cd) throw PyErrorAlreadySet();
    void* impl = PyLong_AsVoidPtr(cd);
    Py_DECREF(cd);
    v = at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(
        static_cast<c10::TensorImpl*>(impl)));
  }
  at::Tensor& get() { return v; }
};

template <class T>
struct from_py<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  T v{};
  void load(PyObject* o, const char* fn, int i) {
    if (PyFloat_Check(o) || PyBool_Check(o)) arg_type_error(fn, i, "an int", o);
    PyObject* idx = PyNumber_Index(o);
    if (!idx) {
      PyErr_Clear();
      arg_type_error(fn, i, "an int", o);
    }
    long long x = PyLong_AsLongLong(idx);
    Py_DECREF(idx);
    if (x == -1 && PyErr_Occurred()) throw PyErrorAlreadySet();
    v = static_cast<T>(x);
  }
  T& get() { return v; }
};

template <class T>
struct from_py<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  T v{};
  void load(PyObject* o, const char* fn, int i) {
    if (!PyFloat_Check(o) && !PyLong_Check(o) && !PyNumber_Check(o)) arg_type_error(fn, i, "a float", o);
    double x = PyFloat_AsDouble(o);
    if (x == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      arg_type_error(fn, i, "a float", o);
    }
    v = static_cast<T>(x);
  }
  T& get() { return v; }
};

template <>
struct from_py<bool> {
  bool v = false;
  void load(PyObject* o, const char* fn, int i) {
    if (!PyBool_Check(o) && std::strcmp(Py_TYPE(o)->tp_name, "numpy.bool") != 0 &&
        std::strcmp(Py_TYPE(o)->tp_name, "numpy.bool_") != 0)
      arg_type_error(fn, i, "a bool", o);
    v = PyObject_IsTrue(o) == 1;
  }
  bool& get() { return v; }
};

template <>
struct from_py<std::string> {
  std::string v;
  void load(PyObject* o, const char* fn, int i) {
    if (!PyUnicode_Check(o)) arg_type_error(fn, i, "a str", o);
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) throw PyErrorAlreadySet();
    v.assign(s, n);
  }
  std::string& get() { return v; }
};

template <class T>
struct from_py<std::vector<T>> {
  std::vector<T> v;
  void load(PyObject* o, const char* fn, int i) {
    if (!PyList_Check(o) && !PyTuple_Check(o)) arg_type_error(fn, i, "a list or tuple", o);
    PyObject* seq = PySequence_Fast(o, "expected a sequence");
    if (!seq) throw PyErrorAlreadySet();
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    v.clear();
    try {
      for (Py_ssize_t k = 0; k < n; k++) {
        from_py<T> c;
        c.load(PySequence_Fast_GET_ITEM(seq, k), fn, i);
        v.push_back(std::move(c.get()));
      }
    } catch (...) {
      Py_DECREF(seq);
      throw;
    }
    Py_DECREF(seq);
  }
  std::vector<T>& get() { return v; }
};

template <>
struct from_py<c10::IntArrayRef> {
  from_py<std::vector<int64_t>> inner;
  c10::IntArrayRef v;
  void load(PyObject* o, const char* fn, int i) {
    inner.load(o, fn, i);
    v = c10::IntArrayRef(inner.get());
  }
  c10::IntArrayRef& get() { return v; }
};

template <class T>
struct from_py<std::optional<T>> {
  std::optional<T> v;
  void load(PyObject* o, const char* fn, int i) {
    if (o == Py_None) {
      v.reset();
      return;
    }
    from_py<T> c;
    c.load(o, fn, i);
    v = std::move(c.get());
  }
  std::optional<T>& get() { return v; }
};

template <class T>
inline PyObject* to_py(T&& r);

template <class T>
inline PyObject* to_py_compound(const std::vector<T>& r) {
  PyObject* l = PyList_New(static_cast<Py_ssize_t>(r.size()));
  if (!l) return nullptr;
  for (size_t k = 0; k < r.size(); k++) {
    PyObject* item = to_py(r[k]);
    if (!item) {
      Py_DECREF(l);
      return nullptr;
    }
    PyList_SET_ITEM(l, static_cast<Py_ssize_t>(k), item);
  }
  return l;
}
template <class T>
inline PyObject* to_py_compound(const std::optional<T>& r) {
  if (!r) Py_RETURN_NONE;
  return to_py(*r);
}
template <class Tup, size_t... I>
inline PyObject* tuple_to_py(const Tup& r, std::index_sequence<I...>) {
  PyObject* items[] = {to_py(std::get<I>(r))..., nullptr};
  PyObject* t = nullptr;
  bool ok = true;
  for (size_t k = 0; k < sizeof...(I); k++) ok = ok && items[k] != nullptr;
  if (ok) t = PyTuple_New(sizeof...(I));
  for (size_t k = 0; k < sizeof...(I); k++) {
    if (t) PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(k), items[k]);
    else Py_XDECREF(items[k]);
  }
  return t;
}
template <class... T>
inline PyObject* to_py_compound(const std::tuple<T...>& r) {
  return tuple_to_py(r, std::index_sequence_for<T...>{});
}
template <class A, class B>
inline PyObject* to_py_compound(const std::pair<A, B>& r) {
  return to_py_compound(std::tuple<A, B>(r.first, r.second));
}
template <class T>
inline PyObject* to_py_compound(const T&) {
  static_assert(dependent_false<T>,
                "this return type of a function in `funcs` is not supported by the CPU "
                "emulation's Python binding (use torch::Tensor, a number, bool, std::string, void, "
                "std::vector, std::tuple or std::optional)");
  return nullptr;
}

/// Converts a C++ result to a new Python reference.
template <class T>
inline PyObject* to_py(T&& r) {
  using D = std::decay_t<T>;
  if constexpr (std::is_base_of_v<at::TensorBase, D>) {
    return THPVariable_Wrap(r);
  } else if constexpr (std::is_same_v<D, bool>) {
    return PyBool_FromLong(r);
  } else if constexpr (std::is_integral_v<D> && std::is_signed_v<D>) {
    return PyLong_FromLongLong(r);
  } else if constexpr (std::is_integral_v<D>) {
    return PyLong_FromUnsignedLongLong(r);
  } else if constexpr (std::is_floating_point_v<D>) {
    return PyFloat_FromDouble(r);
  } else if constexpr (std::is_same_v<D, std::string>) {
    return PyUnicode_FromStringAndSize(r.data(), static_cast<Py_ssize_t>(r.size()));
  } else if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
    return PyUnicode_FromString(r);
  } else {
    return to_py_compound(std::forward<T>(r));
  }
}

/// Sets the Python error for a C++ exception from a bound function.
inline void set_py_error(const char* fn) {
  std::fflush(stdout);
  try {
    throw;
  } catch (const PyErrorAlreadySet&) {
  } catch (const Error& e) {
    PyErr_SetString(g_error_type ? g_error_type : PyExc_RuntimeError, e.what());
  } catch (const c10::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
  } catch (const c10::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
  } catch (const c10::NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "%s(): %s", fn, e.what());
  } catch (...) {
    PyErr_Format(PyExc_RuntimeError, "%s(): unknown C++ exception", fn);
  }
}

template <auto F, class Sig>
struct pyfn_impl;

template <auto F, class R, class... A>
struct pyfn_impl<F, R (*)(A...)> {
  template <size_t... I>
  static PyObject* call_with(const char* fn, PyObject* const* args, std::index_sequence<I...>) {
    std::tuple<from_py<std::remove_cv_t<std::remove_reference_t<A>>>...> cs;
    (std::get<I>(cs).load(args[I], fn, static_cast<int>(I)), ...);
    if constexpr (std::is_void_v<R>) {
      F(std::get<I>(cs).get()...);
      std::fflush(stdout);
      Py_RETURN_NONE;
    } else {
      R r = F(std::get<I>(cs).get()...);
      std::fflush(stdout);
      return to_py(std::move(r));
    }
  }
  static PyObject* call(const char* fn, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != static_cast<Py_ssize_t>(sizeof...(A))) {
      PyErr_Format(PyExc_TypeError, "%s() takes %d positional argument(s) but %d were given", fn,
                   static_cast<int>(sizeof...(A)), static_cast<int>(nargs));
      return nullptr;
    }
    try {
      return call_with(fn, args, std::index_sequence_for<A...>{});
    } catch (...) {
      set_py_error(fn);
      return nullptr;
    }
  }
};

template <auto F>
struct pyfn : pyfn_impl<F, decltype(F)> {};

inline PyObject* set_error_type(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "expected one exception class");
    return nullptr;
  }
  Py_XDECREF(g_error_type);
  Py_INCREF(args[0]);
  g_error_type = args[0];
  Py_RETURN_NONE;
}

inline PyObject* make_module(PyModuleDef* def) {
  if (!g_tensor_type) {
    PyObject* torch_mod = PyImport_ImportModule("torch");
    if (!torch_mod) return nullptr;
    g_tensor_type = PyObject_GetAttrString(torch_mod, "Tensor");
    Py_DECREF(torch_mod);
    if (!g_tensor_type) return nullptr;
  }
  return PyModule_Create(def);
}
}  // namespace cuda_emu

#define CUDA_EMU_FN(NAME, ...)                                                        \
  {NAME,                                                                              \
   (PyCFunction)(void (*)(void))(+[](PyObject*, PyObject* const* a, Py_ssize_t n) {   \
     return ::cuda_emu::pyfn<(__VA_ARGS__)>::call(NAME, a, n);                         \
   }),                                                                                \
   METH_FASTCALL, NAME}
#define CUDA_EMU_BUILTINS                                                              \
  {"_cuda_emu_set_error_type", (PyCFunction)(void (*)(void))::cuda_emu::set_error_type, \
   METH_FASTCALL, "internal: the exception class for emulation errors"}
#define CUDA_EMU_MODULE(NAME, METHODS)                                                  \
  static PyModuleDef cuda_emu_module_def = {PyModuleDef_HEAD_INIT, #NAME,               \
                                            "CUDA C built for the CPU by cuda_emu", -1, METHODS, \
                                            nullptr, nullptr, nullptr, nullptr};         \
  extern "C" __attribute__((visibility("default"))) PyObject* PyInit_##NAME() {         \
    return ::cuda_emu::make_module(&cuda_emu_module_def);                               \
  }
