// cuda_emu.h: runs the course's subset of CUDA C on the CPU.
//
// The emulation (source.py) rewrites a learner's CUDA source a little (launches, __shared__ declarations, kernel
// pointer parameters, see its docstring) and compiles it against this header, which is
// precompiled once; the non-template code is in runtime.cpp, also compiled once and linked into
// every module.  Design, in short:
//   * blocks run one after another; the threads of a block run as cooperative fibers on one OS
//     thread, and a fiber switches only at __syncthreads() and warp-level calls.  Between two
//     barriers a thread runs alone, so a missing barrier shows up as a real race,
//     deterministically; only a thread that loops for ~10 ms without a barrier yields (tick).
//   * Ctrl-C during a launch raises KeyboardInterrupt (tick, runtime.cpp).
//   * a barrier that only part of a block reaches is detected (no hang) and raised as an error.
//   * warp-level calls (__shfl_*_sync, __ballot_sync, __syncwarp, ...) are rendezvous of the lanes
//     named in the mask: a lane waits (switches fiber) until all of them arrived at the same call;
//     a lane that exited or waits elsewhere is an error, never a hang.
//   * racecheck (on by default): accesses to __shared__ arrays are recorded per 4-byte word
//     between barriers; two threads touching one word without a barrier between them is an error.
//   * cp.async (__pipeline_memcpy_async): checked and its source read at the issue; the write to
//     shared memory is deferred to the issuing thread's __pipeline_wait_prior that completes its
//     batch (pending copies live in the thread's Fiber), so reading too early shows.
//   * dynamic shared memory above 48 KiB needs cudaFuncSetAttribute on the launched kernel
//     (found by address), up to 227 KiB.
//   * kernel pointer parameters, __device__ functions' pointer parameters and local pointers
//     become bounds-checked pointers (gptr; accesses through gat/gderef name the line) and
//     __shared__ arrays bounds-checked arrays (sarr); shared memory is poisoned (all bits set: NaN
//     for floats) at the start of every block, so reading before writing shows.
//   * errors are C++ exceptions (cuda_emu::Error) that the Python binding raises as
//     cuda_emu.CudaEmulationError; segfaults inside a kernel are caught and raised too.
#pragma once
#define CUDA_EMU_H 1

#include <Python.h>  // first, as Python asks

#include "torch_api.h"  // the torch C++ API, in tiers (see there)

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
// Everything that is not a template lives in runtime.cpp, compiled once per machine.
// ------------------------------------------------------------------------------------------
namespace cuda_emu {

/// An emulation error (bad launch, out-of-bounds access, divergent barrier, ...).
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Ctrl-C (SIGINT) stopped a launch: raised as KeyboardInterrupt with the message.
struct Interrupt : Error {
  using Error::Error;
};
/// A Python exception is already set (e.g. KeyboardInterrupt): just return NULL.
struct PyErrorAlreadySet {};

// kWaiting: at __syncthreads(); kWarpWait: at a warp-level call; kReady: may resume.
// kYield: left the CPU in a long loop (see tick) so that the block's other threads can run.
enum FiberState { kNew, kRunning, kWaiting, kDone, kFailed, kWarpWait, kReady, kYield };

/// Where a bounds-checked pointer came from, for error messages.
struct PtrInfo {
  const char* name = "";       // "x" (kernel parameter) or "smem" (extern __shared__)
  const char* base = nullptr;  // the pointer as passed to the kernel
  std::string what;            // "a float tensor of 1000 elements"
  size_t esize = 0;            // the size of the parameter's element type (0: unknown)
  bool shared = false;         // shared memory (per block: not race-checked as global memory)
};

/// A kernel pointer parameter of the current launch with known bounds (cp.async's source check).
struct ParamRange {
  const char* lo;
  const char* hi;
  const PtrInfo* info;
};

struct Fiber {
#if CUDA_EMU_USE_UCONTEXT
  ucontext_t uc;
#else
  void* sp = nullptr;
#endif
  char* stack = nullptr;
  int state = kNew;
  int line = 0;  // line of the __syncthreads() or warp-level call it waits at
  int loop_line = 0;  // the loop it was in when it last yielded (see tick), for messages
  int pred = 0;  // predicate of __syncthreads_count/and/or
  int wop = 0;   // the warp-level call it waits at (WarpOp) and its mask
  unsigned wmask = 0;
  // cp.async (__pipeline_memcpy_async): the thread's copies not yet completed, oldest first, and
  // the number of batches it committed (copies issued since the last commit carry that number).
  struct AsyncCopy {
    char* dst;
    const void* region;  // the __shared__ variable (or the dynamic shared memory) it writes
    uint32_t batch;
    int line;
    unsigned size;
    unsigned char data[16];  // what it read from global memory at issue (zero-filled tail)
  };
  std::vector<AsyncCopy> copies;
  uint32_t batches = 0;
};

/// What one thread did in a counted launch (the course's own launch of an exercise kernel, see
/// count_requested in runtime.cpp): global and shared loads/stores, atomics by space, barriers
/// passed, warp shuffles by kind and other warp-level calls.  Keep in the order of kCountFields.
struct Counts {
  uint32_t gload, gstore, gatomic, sload, sstore, satomic, barrier, shfl_idx, shfl_up, shfl_down, shfl_xor,
      warp_other, mma;  // mma: wmma::mma_sync calls (emu_wmma.h)
};
#define CUDA_EMU_COUNT_FIELDS \
  "gload,gstore,gatomic,sload,sstore,satomic,barrier,shfl_idx,shfl_up,shfl_down,shfl_xor,warp_other,mma"

struct State {
  uint3 thread_idx{0, 0, 0}, block_idx{0, 0, 0};
  dim3 block_dim{1, 1, 1}, grid_dim{1, 1, 1};
  bool in_kernel = false;
  const char* kernel = "";
  int launch_line = 0;
  Fiber* cur = nullptr;
  Fiber sched;                    // the scheduler's own context
  std::vector<Fiber> fibers;
  void (*body)(void*) = nullptr;  // runs the kernel for the current thread
  void* closure = nullptr;
  std::string error;              // set by a failing fiber
  int bar_count = 0;              // result of __syncthreads_count for the current phase
  char* dyn = nullptr;            // dynamic shared memory of the current launch
  size_t dyn_bytes = 0;
  PtrInfo dyn_info;
  std::vector<std::pair<void*, size_t>> shared_regions;  // static __shared__ variables
  std::vector<std::pair<std::string, const char*>> shared_names;
  size_t stack_bytes = 0;
  std::vector<char*> free_stacks, all_stacks;
  unsigned tid = 0;               // linear index (x fastest) of the running thread in its block
  unsigned nthreads = 0;          // threads per block of the current launch
  bool woke = false;              // a warp-level call completed: some fibers became kReady
  bool race_on = false;           // racecheck: record __shared__ accesses (see race_shared)
  int race_mode = 0;              // 0 off, 1 a race is an error, 2 a race is a warning
  std::vector<ParamRange> params;  // the current launch's bounded pointer parameters
  Counts* cnt = nullptr;          // the running thread's counters in a counted launch, else null
};
extern State g;  // defined in runtime.cpp

static const uint3& threadIdx = g.thread_idx;
static const uint3& blockIdx = g.block_idx;
static const dim3& blockDim = g.block_dim;
static const dim3& gridDim = g.grid_dim;

// ---- runtime.cpp ------------------------------------------------------------------------
std::string fmt3(uint3 v);
/// "in kernel k (launched at cuda_src line 40), block (1,0,0), thread (3,0,0)"
std::string where();
[[noreturn]] __attribute__((cold)) void fail(const std::string& msg);
/// The calling thread waits at a barrier; returns the number of threads whose predicate held.
int barrier_wait(int line, int pred);
[[noreturn]] __attribute__((cold)) void shared_oob(const void* arr, long long i, size_t n);
[[noreturn]] __attribute__((cold)) void misaligned(const void* p, size_t align, const char* type);
[[noreturn]] __attribute__((cold)) void global_oob(const PtrInfo* info, const void* q, size_t esize,
                                                  const char* lo, const char* hi);
/// An access through a checked pointer `var` (its value `p`) at `var[idx]` = q fell outside
/// [lo, hi): the message names the variable, the element of the buffer it reached, and `line`.
[[noreturn]] __attribute__((cold)) void ptr_oob(const PtrInfo* info, const void* q, size_t esize, const char* lo,
                                               const char* hi, const char* var, const void* p, long long idx,
                                               int line);
/// The bounds of the memory p points into, as far as the emulation knows it inside a kernel: the
/// dynamic shared memory, a __shared__ variable, or the tensor of one of the launch's pointer
/// parameters.  False (nothing set) for anything else (local arrays, unknown memory).
bool region_of(const void* p, const char** lo, const char** hi, const PtrInfo** info);
void track_tensor(const at::TensorBase& t);
struct Bounds {
  const char* lo;
  const char* hi;
  std::string what;
};
/// Bounds of the live tracked tensor that contains p (newest first); false if none.
bool find_tracked(const void* p, Bounds* out);
std::vector<std::string> param_names(const char* params, size_t n);
struct Config {
  dim3 grid, block;
  size_t smem = 0;
  const void* fn = nullptr;  // the kernel's address when the launch names it (cudaFuncSetAttribute)
};
/// Runs a whole launch; `body(closure)` runs the kernel for the current thread.
void run_launch(const Config& c, void (*body)(void*), void* closure);
void kernel_launch_check();
void cuda_check(int err, const char* expr);
[[noreturn]] void exit_(int code);
[[noreturn]] void abort_();
[[noreturn]] void assert_fail(const char* expr, const char* file, int line);

inline void syncthreads(int line) { barrier_wait(line, 0); }

/// Loops in kernels and __device__ functions poll this once per iteration (see tick): set by
/// Ctrl-C (SIGINT) during a launch, and by the launch's watchdog when the running thread has not
/// left the CPU for a while (then it yields, so that a spin-wait on another thread's write ends).
extern int g_poll;
void tick_slow(int line);
/// What the rewrite puts in every loop condition of device code: `while (tick(LINE), (cond))`.
constexpr void tick(int line) {
  if (!__builtin_is_constant_evaluated())
    if (__builtin_expect(__atomic_load_n(&g_poll, __ATOMIC_RELAXED), 0)) tick_slow(line);
}
[[noreturn]] __attribute__((cold)) void div_zero(int line);
/// What the rewrite makes of the divisor of `/` and `%` in device code: an integer 0 raises an
/// error naming the line (instead of SIGFPE, or the trap gcc emits for a literal 0).
template <class T>
constexpr T divisor(T v, int line) {
  if constexpr (std::is_integral_v<T>)
    if (!__builtin_is_constant_evaluated() && __builtin_expect(v == 0, 0)) div_zero(line);
  return v;
}

/// Warp-level calls.  Each is a rendezvous of the lanes named in `mask` at one call (see
/// runtime.cpp): every lane deposits `value` (and `arg`: a lane, delta or lane mask), the last
/// to arrive computes every lane's result, and each lane returns its own.
enum WarpOp {
  kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kAll, kAny, kSyncwarp, kRedAdd, kRedMinS,
  kRedMinU, kRedMaxS, kRedMaxU, kRedAnd, kRedOr, kRedXor, kMatchAny, kMatchAll,
  kWmmaLoad, kWmmaStore, kWmmaMma  // nvcuda::wmma (emu_wmma.h): the warp-collective matrix operations
};
uint64_t warp_op(int op, int line, unsigned mask, uint64_t value, int arg = 0, int width = 32);
/// A wmma operation (op: kWmmaLoad, kWmmaStore, kWmmaMma) is a rendezvous of all 32 lanes of the caller's warp
/// (a partial warp is an error). For kWmmaMma the last lane to arrive calls fn(lanes) once, lanes[l] the `mine`
/// of lane l, before any lane goes on: the operation reads every lane's fragments and writes every lane's result.
void wmma_sync(int op, int line, void* mine, void (*fn)(void* const* lanes));
/// A wmma load or store (call: its name) touched element (row, col) of its 16x16 tile at q, outside [lo, hi).
[[noreturn]] __attribute__((cold)) void wmma_oob(const char* call, int line, int row, int col, const void* q,
                                                size_t esize, const char* lo, const char* hi, const PtrInfo* info);
/// A wmma load or store was given a pointer or a leading dimension ldm (in elements of esize bytes) that a GPU
/// refuses: each row (or column) of the tile must start on a 16-byte boundary.
[[noreturn]] __attribute__((cold)) void wmma_misaligned(const char* call, int line, const void* p, unsigned ldm,
                                                       size_t esize);
/// Lanes of the caller's warp that exist and have not exited (see __activemask).
unsigned active_mask();

template <class T>
inline T warp_shfl(int op, int line, unsigned mask, T var, int arg, int width) {
  static_assert(std::is_arithmetic_v<T> && sizeof(T) <= 8,
                "__shfl_*_sync takes an int, unsigned, long long, float or double (shuffle a "
                "float4 or a struct one member at a time)");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = warp_op(op, line, mask, bits, arg, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
template <class T>
inline uint64_t warp_bits(const T& v) {
  static_assert(std::is_arithmetic_v<T> && sizeof(T) <= 8, "__match_*_sync takes a number");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

/// Launch counts of this module: {kernel name: launches}, read by gpu_course.cuda.launch_counts in Python.
void count_launch(const char* name, const char* pretty);
PyObject* py_launches(PyObject*, PyObject* const*, Py_ssize_t);
PyObject* py_reset_launches(PyObject*, PyObject* const*, Py_ssize_t);
/// One argument of a launch as the host code gave it: kind 'p' (a pointer: its address), 'i' / 'u'
/// (a signed / unsigned integer), 'f' (a floating-point number: a double's bits), 'b' (a bool),
/// '?' (anything else); its size in bytes.
struct ArgRec {
  char kind;
  unsigned char size;
  uint64_t bits;
};
/// The launch log (gpu_course.cuda.launch_log(module, since) in Python): kernel, grid, block, shared bytes and
/// arguments of the latest launches, so that a check can make the same launch on memory of its own.
void log_launch(const char* name, dim3 grid, dim3 block, size_t smem, std::vector<ArgRec>&& args);
PyObject* py_launch_log(PyObject*, PyObject* const*, Py_ssize_t);
/// Counted launches (_cuda_emu_count(True) ... _cuda_emu_counts()): per thread, what it did (Counts).
PyObject* py_count(PyObject*, PyObject* const*, Py_ssize_t);
PyObject* py_counts(PyObject*, PyObject* const*, Py_ssize_t);
/// Sets g.race_mode for this module (the loader's racecheck option, baked into the binding).
bool set_race_mode(int mode);
inline int syncthreads_count(int line, int pred) { return barrier_wait(line, pred != 0); }

/// cp.async (__pipeline_memcpy_async & co, runtime.cpp): the copy is checked and its source read
/// when issued, its shared-memory write happens when the issuing thread waits for its batch.
/// `lo`/`hi`/`info`: the source's bounds when it is a checked pointer (else nullptr).
void async_copy(void* dst, const void* src, size_t size, size_t zfill, int line, const char* lo, const char* hi,
                const PtrInfo* info);
void async_commit(int line);
void async_wait_prior(size_t prior, int line);
/// cudaFuncSetAttribute: the kernel's maximum dynamic shared memory (checked at its launches).
int func_set_attribute(const void* fn, int attr, int value);

// ------------------------------------------------------------------------------------------
// Static __shared__ variables: function-local statics that register themselves once, so that
// the launcher can poison them (all bits set: NaN for float, -1 for int) at every block start.
// ------------------------------------------------------------------------------------------
struct shared_reg {
  shared_reg(void* p, size_t n, const char* name);
};

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

template <class T>
struct gptr;
/// The address of any object pointer (volatile too), for bounds checks and messages.
template <class T>
inline const char* addr_of(T* q) {
  if constexpr (std::is_volatile_v<T>)
    return static_cast<const char*>(const_cast<const void*>(static_cast<const volatile void*>(q)));
  else
    return reinterpret_cast<const char*>(q);
}
/// p as a checked pointer with the bounds of what it points into (region_of), unchecked if unknown.
template <class U>
gptr<U> bounded(U* p);

/// A bounds-checked array: what `__shared__ T name[N]...` becomes (nested for 2D/3D).
template <class T, size_t N>
struct sarr {
  T d[N];
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
  operator T*() { return d; }  // NOLINT: decays like an array
  operator const T*() const { return d; }  // NOLINT
  /// `float* p = tile[r];`: a checked pointer bounded by the whole __shared__ variable.
  template <class U, std::enable_if_t<std::is_convertible_v<T*, U*>, int> = 0>
  operator gptr<U>() {  // NOLINT
    return bounded<U>(d);
  }
  template <class U, std::enable_if_t<std::is_convertible_v<const T*, U*>, int> = 0>
  operator gptr<U>() const {  // NOLINT
    return bounded<U>(d);
  }
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
template <class T>
struct gptr {
  T* p = nullptr;
  const char* lo = nullptr;                                         // first valid byte
  const char* hi = reinterpret_cast<const char*>(~uintptr_t(0));  // one past the last
  const PtrInfo* info = nullptr;

  gptr() = default;
  gptr(T* q) : p(q) {}  // NOLINT: unknown bounds (not checked)
  gptr(std::nullptr_t) : p(nullptr) {}  // NOLINT
  gptr(T* q, const char* l, const char* h, const PtrInfo* i) : p(q), lo(l), hi(h), info(i) {}
  template <class U, std::enable_if_t<std::is_convertible_v<U*, T*> && !std::is_same_v<U, T>, int> = 0>
  gptr(const gptr<U>& o) : p(o.p), lo(o.lo), hi(o.hi), info(o.info) {}  // NOLINT

  operator T*() const { return p; }  // NOLINT: hand a plain pointer to helpers
  template <class U, std::enable_if_t<!std::is_same_v<std::remove_cv_t<U>, std::remove_cv_t<T>> &&
                                          !std::is_void_v<U>, int> = 0>
  explicit operator U*() const {  // C-style casts such as (float4*)x
    if (reinterpret_cast<uintptr_t>(p) % alignof(U)) misaligned(addr_of(p), alignof(U), type_label<U>());
    return (U*)p;  // NOLINT
  }
  T* get() const { return p; }

  void check(const T* q) const {
    const char* c = addr_of(q);
    if (__builtin_expect(c < lo || c + sizeof(T) > hi, 0)) global_oob(info, c, sizeof(T), lo, hi);
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
  ptrdiff_t operator-(const T* o) const { return p - o; }
  friend ptrdiff_t operator-(const T* a, const gptr& b) { return a - b.p; }
  /// (uintptr_t)p, (size_t)p: the address (alignment checks).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  explicit operator I() const {
    return static_cast<I>(reinterpret_cast<uintptr_t>(p));
  }
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
      if (reinterpret_cast<uintptr_t>(p) % alignof(U)) misaligned(addr_of(p), alignof(U), type_label<U>());
    return gptr<U>(reinterpret_cast<U*>(p), lo, hi, info);
  }
};

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
  template <class U, std::enable_if_t<std::is_convertible_v<T*, U*>, int> = 0>
  operator gptr<U>() const {  // NOLINT
    return get();
  }
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
struct is_gptr : std::false_type {};
template <class T>
struct is_gptr<gptr<T>> : std::true_type {};
template <class T>
struct is_dshared : std::false_type {};
template <class T>
struct is_dshared<dshared<T>> : std::true_type {};
template <class T>
struct is_sarr : std::false_type {};
template <class T, size_t N>
struct is_sarr<sarr<T, N>> : std::true_type {};

template <class U>
gptr<U> bounded(U* p) {
  const char* lo;
  const char* hi;
  const PtrInfo* info;
  if (p && g.in_kernel && region_of(addr_of(p), &lo, &hi, &info)) return gptr<U>(p, lo, hi, info);
  return gptr<U>(p);
}

/// What the rewrite wraps the initializer of a local pointer in (`float* row = bound(out + 5);`
/// becomes a gptr<float>): checked pointers keep their bounds, __shared__ arrays and raw pointers
/// get the bounds of what they point into (region_of), anything else is passed on.
template <class X>
inline decltype(auto) bound(X&& x) {
  using D = std::remove_cv_t<std::remove_reference_t<X>>;
  if constexpr (is_gptr<D>::value) {
    return D(x);
  } else if constexpr (is_dshared<D>::value) {
    return x.get();
  } else if constexpr (std::is_pointer_v<D> && !std::is_void_v<std::remove_pointer_t<D>> &&
                       !std::is_function_v<std::remove_pointer_t<D>>) {
    return bounded(x);
  } else {
    return std::forward<X>(x);
  }
}

/// `auto* p = init;` / `const auto* p = init;` become `auto p = aptr<C>(init)`: a checked pointer
/// stays one (to const elements when C), a raw pointer gets bounds as in bound().
template <bool C, class X>
inline auto aptr(X&& x) {
  auto b = bound(std::forward<X>(x));
  using B = decltype(b);
  if constexpr (is_gptr<B>::value && C) {
    return gptr<const std::remove_pointer_t<decltype(b.p)>>(b);
  } else if constexpr (std::is_pointer_v<B> && C) {
    return static_cast<const std::remove_pointer_t<B>*>(b);
  } else {
    return b;
  }
}

// ------------------------------------------------------------------------------------------
// sat<K>(a, line, i, j): what `a[i][j]` becomes in kernels when `a` is a __shared__ array used
// with all its indices (K: 0 read, 1 write, 2 read-modify-write such as +=), or a kernel pointer
// parameter updated with +=/++ (K = 2).  Same result as a[i][j] (bounds-checked as before); with
// racecheck it also records the access, for the race checks in runtime.cpp.
// ------------------------------------------------------------------------------------------
enum AccessKind { kRead = 0, kWrite = 1, kRMW = 2 };
/// Counted launches only (g.cnt set): one access of kind K to global or shared memory.
template <int K>
inline void count_access(bool shared) {
  Counts* c = g.cnt;
  if (__builtin_expect(c == nullptr, 1)) return;
  if (shared) {
    if (K != kWrite) c->sload++;
    if (K != kRead) c->sstore++;
  } else {
    if (K != kWrite) c->gload++;
    if (K != kRead) c->gstore++;
  }
}
/// Whether p is in the launch's shared memory (static __shared__ variables or the dynamic part).
bool in_shared(const void* p);
/// Counted launches only: an atomic on p (shared or global memory).
inline void count_atomic(const void* p) {
  if (__builtin_expect(g.cnt == nullptr, 1)) return;
  if (in_shared(p)) g.cnt->satomic++;
  else g.cnt->gatomic++;
}
void race_shared(int kind, const void* region, const void* p, size_t size, int line, const long long* ix,
                 int nix);
void race_global(const void* p, size_t size, const PtrInfo* info, int line);

template <class A, class I0>
inline decltype(auto) index_all(A&& a, I0 i0) { return std::forward<A>(a)[i0]; }
template <class A, class I0, class I1>
inline decltype(auto) index_all(A&& a, I0 i0, I1 i1) { return std::forward<A>(a)[i0][i1]; }
template <class A, class I0, class I1, class I2>
inline decltype(auto) index_all(A&& a, I0 i0, I1 i1, I2 i2) { return std::forward<A>(a)[i0][i1][i2]; }
template <class A, class I0, class I1, class I2, class I3>
inline decltype(auto) index_all(A&& a, I0 i0, I1 i1, I2 i2, I3 i3) {
  return std::forward<A>(a)[i0][i1][i2][i3];
}

template <class... I>
__attribute__((noinline)) void race_shared_at(int kind, const void* region, const void* p, size_t size, int line,
                                              I... i) {
  if constexpr ((std::is_integral_v<I> && ...)) {
    const long long ix[] = {static_cast<long long>(i)...};
    race_shared(kind, region, p, size, line, ix, static_cast<int>(sizeof...(I)));
  } else {
    race_shared(kind, region, p, size, line, nullptr, 0);
  }
}

template <int K, class A, class... I>
inline decltype(auto) sat(A&& a, int line, I... i) {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (is_sarr<D>::value) {
    auto& e = index_all(a, i...);
    if (__builtin_expect(g.race_on, 0)) race_shared_at(K, &a, &e, sizeof(e), line, i...);
    count_access<K>(true);
    return (e);
  } else if constexpr (is_dshared<D>::value && sizeof...(I) == 1) {
    auto& e = index_all(a.get(), i...);
    if (__builtin_expect(g.race_on, 0)) race_shared_at(K, g.dyn, &e, sizeof(e), line, i...);
    count_access<K>(true);
    return (e);
  } else if constexpr (is_gptr<D>::value && K == kRMW && sizeof...(I) == 1) {
    auto& e = index_all(a, i...);
    if (__builtin_expect(g.race_on, 0)) race_global(&e, sizeof(e), a.info, line);
    count_access<K>(a.info && a.info->shared);
    return (e);
  } else {
    // a local of the same name, a plain array (a volatile __shared__ one: counted as shared) ...
    decltype(auto) e = index_all(std::forward<A>(a), i...);
    if constexpr (std::is_lvalue_reference_v<decltype(e)>)
      if (__builtin_expect(g.cnt != nullptr, 0) && in_shared(addr_of(&e))) count_access<K>(true);
    return static_cast<decltype(e)>(e);
  }
}

/// gat<K>(p, line, "p", i): what `p[i]` becomes in kernels and __device__ functions when `p` is a
/// checked pointer (a pointer parameter, or a local pointer the rewrite made one): the same
/// element, bounds-checked with a message that names p, the element it reached and the line; a
/// read-modify-write (K = 2) of global memory is recorded for the race check.  Anything else
/// named p (a local array shadowing it ...) is indexed as written.
template <int K, class A, class I>
inline decltype(auto) gat(A&& a, int line, const char* var, I i) {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (is_gptr<D>::value && (std::is_integral_v<I> || std::is_enum_v<I>)) {
    auto* q = a.p + static_cast<ptrdiff_t>(i);
    const char* c = addr_of(q);
    if (__builtin_expect(c < a.lo || c + sizeof(*q) > a.hi, 0))
      ptr_oob(a.info, c, sizeof(*q), a.lo, a.hi, var, addr_of(a.p), static_cast<long long>(i), line);
    if constexpr (K == kRMW)
      if (__builtin_expect(g.race_on, 0) && a.info && !a.info->shared) race_global(c, sizeof(*q), a.info, line);
    count_access<K>(a.info && a.info->shared);
    return (*q);
  } else if constexpr (is_dshared<D>::value) {
    return gat<K>(a.get(), line, var, i);
  } else {
    return std::forward<A>(a)[i];
  }
}

/// gderef<K>(line, "*(p + k)", p + k): what a dereference `*p`, `*(p + k)` or `*reinterpret_cast<float4*>(q)`
/// becomes in device code: checked like gat (the message quotes the expression), `*x` for anything else.
template <int K, class A>
inline decltype(auto) gderef(int line, const char* expr, A&& a) {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (is_gptr<D>::value || is_dshared<D>::value) {
    return gat<K>(std::forward<A>(a), line, expr, 0);
  } else {
    return *std::forward<A>(a);
  }
}

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
  } else if constexpr (std::is_integral_v<To> && is_gptr<F>::value) {
    return static_cast<To>(f);  // reinterpret_cast<uintptr_t>(p): the address
  } else {
    return reinterpret_cast<To>(f);
  }
}

/// Wraps `x` in `x.data_ptr<float>()`: registers x's extent, returns x unchanged.
template <class T>
inline T&& track(T&& t) {
  if constexpr (std::is_base_of_v<at::TensorBase, std::decay_t<T>>) track_tensor(t);
  return std::forward<T>(t);
}

}  // namespace cuda_emu

// torch's current stream (at::cuda::getCurrentCUDAStream(), which at:: reaches through its
// `using namespace c10::cuda`): the 4th <<<>>> argument of a kernel that torch.cuda.stream(s), a
// CUDA graph capture or torch.compile may run on a stream of their choice. The emulation runs every
// launch to completion, in order, on the calling thread: one stream, always the current one.
namespace c10::cuda {
struct CUDAStream {
  CUDAStream stream() const { return *this; }  // NOLINT: cudaStream_t in CUDA; here the same object
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

/// `kname<&k<16>>()`: the compiler's spelling of an instantiated kernel ("... [with auto F = k<16>]").
template <auto F>
inline const char* kname() {
  return __PRETTY_FUNCTION__;
}

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

// __constant__ and __device__ variables are plain globals here; the source check (source.py)
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
inline unsigned __activemask() { return ::cuda_emu::active_mask(); }
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


// ------------------------------------------------------------------------------------------
// Python binding without pybind11 (its templates cost ~10 s per build): each function in
// `funcs` becomes a METH_FASTCALL builtin that converts its arguments by their C++ types.
// ------------------------------------------------------------------------------------------
__attribute__((visibility("default"))) PyObject* THPVariable_Wrap(const at::TensorBase& var);

namespace cuda_emu {
template <class T>
inline constexpr bool dependent_false = false;

/// Raises TypeError "f(): argument i must be <want>, not <type>".
[[noreturn]] void arg_type_error(const char* fn, int i, const char* want, PyObject* o);
/// Sets the Python error for the C++ exception being handled.
void set_py_error(const char* fn);
PyObject* make_module(PyModuleDef* def);
PyObject* set_error_type(PyObject*, PyObject* const* args, Py_ssize_t nargs);
long long int_arg(PyObject* o, const char* fn, int i);
double float_arg(PyObject* o, const char* fn, int i);
bool bool_arg(PyObject* o, const char* fn, int i);
std::string str_arg(PyObject* o, const char* fn, int i);
/// The items of a list/tuple argument (new reference to a fast sequence).
PyObject* seq_arg(PyObject* o, const char* fn, int i);

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
  void load(PyObject* o, const char* fn, int i);  // runtime.cpp
  at::Tensor& get() { return v; }
};

template <class T>
struct from_py<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  T v{};
  void load(PyObject* o, const char* fn, int i) { v = static_cast<T>(int_arg(o, fn, i)); }
  T& get() { return v; }
};

template <class T>
struct from_py<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  T v{};
  void load(PyObject* o, const char* fn, int i) { v = static_cast<T>(float_arg(o, fn, i)); }
  T& get() { return v; }
};

template <>
struct from_py<bool> {
  bool v = false;
  void load(PyObject* o, const char* fn, int i) { v = bool_arg(o, fn, i); }
  bool& get() { return v; }
};

template <>
struct from_py<std::string> {
  std::string v;
  void load(PyObject* o, const char* fn, int i) { v = str_arg(o, fn, i); }
  std::string& get() { return v; }
};

template <class T>
struct from_py<std::vector<T>> {
  std::vector<T> v;
  void load(PyObject* o, const char* fn, int i) {
    PyObject* seq = seq_arg(o, fn, i);
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

/// Converts a C++ result to a new Python reference (nullptr with an exception set on failure).
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
  bool ok = true;
  for (size_t k = 0; k < sizeof...(I); k++) ok = ok && items[k] != nullptr;
  PyObject* t = ok ? PyTuple_New(sizeof...(I)) : nullptr;
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
}  // namespace cuda_emu

#define CUDA_EMU_FN(NAME, ...)                                                      \
  {NAME,                                                                            \
   (PyCFunction)(void (*)(void))(+[](PyObject*, PyObject* const* a, Py_ssize_t n) { \
     return ::cuda_emu::pyfn<(__VA_ARGS__)>::call(NAME, a, n);                       \
   }),                                                                              \
   METH_FASTCALL, NAME}
#define CUDA_EMU_BUILTINS                                                                      \
  {"_cuda_emu_set_error_type", (PyCFunction)(void (*)(void))::cuda_emu::set_error_type,        \
   METH_FASTCALL, "internal: the exception class for emulation errors"},                       \
  {"_cuda_emu_count", (PyCFunction)(void (*)(void))::cuda_emu::py_count, METH_FASTCALL,          \
   "count what every thread does in the launches that follow (True) or stop (False); clears"},  \
  {"_cuda_emu_counts", (PyCFunction)(void (*)(void))::cuda_emu::py_counts, METH_FASTCALL,        \
   "(field names, [(kernel, grid, block, bytes of uint32 counts per thread), ...]) since _cuda_emu_count(True)"}
/// The launch counters and log, under the names that gpu_course/cuda/counters.py gives them (COUNTS, RESET,
/// LOG): the binding (source.py) passes the names in, so that both back ends spell them once.
#define CUDA_EMU_LAUNCH_METHODS(COUNTS, RESET, LOG)                                              \
  {COUNTS, (PyCFunction)(void (*)(void))::cuda_emu::py_launches, METH_FASTCALL,                  \
   "{kernel name: launches} since the module was loaded (or reset); a templated kernel is "     \
   "counted under its name and under its instantiation, e.g. 'matmul_k' and 'matmul_k<16>'"}, \
  {RESET, (PyCFunction)(void (*)(void))::cuda_emu::py_reset_launches,                           \
   METH_FASTCALL, "set every launch count of this module to zero"},                            \
  {LOG, (PyCFunction)(void (*)(void))::cuda_emu::py_launch_log, METH_FASTCALL,                  \
   "(launches so far, [(seq, kernel, grid, block, shared bytes, ((kind, size, bits), ...)), ...]) " \
   "of the latest launches whose seq >= the argument"}
#define CUDA_EMU_MODULE(NAME, METHODS)                                                     \
  static PyModuleDef cuda_emu_module_def = {PyModuleDef_HEAD_INIT, #NAME,                  \
                                            "CUDA C built for the CPU by cuda_emu", -1,    \
                                            METHODS, nullptr, nullptr, nullptr, nullptr};  \
  extern "C" __attribute__((visibility("default"))) PyObject* PyInit_##NAME() {            \
    return ::cuda_emu::make_module(&cuda_emu_module_def);                                  \
  }
