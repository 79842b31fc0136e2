// What runtime.cpp defines: barriers, warp-level calls, launch counts and log, races, cp.async.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

namespace cuda_emu {
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
/// __activemask() at `line`: the lanes of the caller's warp that reach this call together (the caller waits
/// until every lane of its warp waits somewhere; see resolve_active_masks in runtime.cpp), as on sm_70+.
unsigned active_mask(int line);

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
}  // namespace cuda_emu
