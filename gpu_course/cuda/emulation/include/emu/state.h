// The emulator's state: errors, fibers, per-thread counts, the launch in progress.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

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
// kMaskWait: at __activemask(), until every lane of its warp waits somewhere (resolve_active_masks).
enum FiberState { kNew, kRunning, kWaiting, kDone, kFailed, kWarpWait, kReady, kYield, kMaskWait };

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
}  // namespace cuda_emu
