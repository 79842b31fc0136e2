// A launch: its limits (dynamic shared memory), the block scheduler, exit/abort/assert.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
// ------------------------------------------------------------------------------------------
// Dynamic shared memory above 48 KiB: the kernel must allow it first (cudaFuncSetAttribute).
// ------------------------------------------------------------------------------------------
constexpr size_t kSmemDefault = 48 * 1024;   // without the attribute
constexpr size_t kSmemOptIn = 227 * 1024;    // an H100's maximum per block (232448 bytes)
static std::unordered_map<const void*, size_t> g_max_dyn;  // kernel -> its attribute
static size_t g_max_dyn_any = 0;  // the largest set on any kernel (for launches that name none)

int func_set_attribute(const void* fn, int attr, int value) {
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
    if (value < -1 || value > 100)
      fail("cudaFuncSetAttribute(..., cudaFuncAttributePreferredSharedMemoryCarveout, " + std::to_string(value) +
           "): the carveout is a percentage from 0 to 100 (or -1, the default); a GPU returns "
           "cudaErrorInvalidValue.");
    return cudaSuccess;  // a hint about L1 versus shared memory: nothing to emulate
  }
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    fail("cudaFuncSetAttribute: attribute " + std::to_string(attr) + " is not supported by the CPU emulation "
         "(only cudaFuncAttributeMaxDynamicSharedMemorySize and cudaFuncAttributePreferredSharedMemoryCarveout); "
         "run on a GPU.");
  if (value < 0 || static_cast<size_t>(value) > kSmemOptIn)
    fail("cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, " + std::to_string(value) +
         "): a block can have at most " + std::to_string(kSmemOptIn) + " bytes (227 KiB) of shared memory on an "
         "H100 (sm_90; 163 KiB on an A100); a GPU returns cudaErrorInvalidValue and a launch that needs more "
         "fails. Use fewer stages or smaller tiles.");
  g_max_dyn[fn] = static_cast<size_t>(value);
  g_max_dyn_any = std::max(g_max_dyn_any, static_cast<size_t>(value));
  return cudaSuccess;
}

/// Why the launch's dynamic shared memory is refused ("" if it is not).
static std::string bad_smem(const Config& c) {
  if (c.smem <= kSmemDefault) return "";
  const std::string n = std::to_string(c.smem);
  if (c.smem > kSmemOptIn)
    return n + " bytes of dynamic shared memory requested; a block can have at most " +
           std::to_string(kSmemOptIn) + " bytes (227 KiB) on an H100. Use fewer stages or smaller tiles";
  auto it = c.fn ? g_max_dyn.find(c.fn) : g_max_dyn.end();
  const bool known = it != g_max_dyn.end();
  const size_t allowed = c.fn ? (known ? it->second : 0) : g_max_dyn_any;
  if (c.smem <= allowed) return "";
  return n + " bytes of dynamic shared memory requested; above 49152 bytes (48 KiB) the kernel must allow it "
         "first, in host code: cudaFuncSetAttribute(" + std::string(g.kernel) +
         ", cudaFuncAttributeMaxDynamicSharedMemorySize, " + n + ") (" +
         (known || (!c.fn && allowed) ? "it allows " + std::to_string(allowed) + " bytes"
                                      : "it was not called for this kernel") + ")";
}

static std::string bad_config(const Config& c) {
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
  return "";
}

static std::string tid_of(long long t) {
  const dim3 b = g.block_dim;
  return fmt3(uint3{unsigned(t % b.x), unsigned((t / b.x) % b.y), unsigned(t / (b.x * b.y))});
}

/// All live threads of the block wait at a barrier: check it is one barrier for all of them.
static void check_barrier(unsigned nthreads, unsigned waiting, unsigned done) {
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
  static const bool strict = [] {
    const char* e = std::getenv("CUDA_EMU_STRICT_BARRIERS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  if ((done > 0 && strict) || other >= 0) g.in_kernel = false;  // the message names the block
  if (done > 0 && strict)
    fail("__syncthreads() at cuda_src line " + std::to_string(line) + " was reached by only " +
         std::to_string(waiting) + " of the " + std::to_string(nthreads) + " threads of block " +
         fmt3(g.block_idx) + " " + where() + "; " + std::to_string(done) +
         " threads (e.g. thread " + tid_of(first_done) + ") had already returned, while thread " +
         tid_of(first_wait) +
         " waits. Every thread of a block must reach the same __syncthreads(): on a GPU this is "
         "undefined (it may hang, give wrong results or seem to work). Move the early return or "
         "the if after the barrier (CUDA_EMU_STRICT_BARRIERS=0 lets returned threads count as "
         "arrived, as most GPUs do).");
  if (other >= 0)
    fail("threads of block " + fmt3(g.block_idx) + " " + where() +
         " wait at different __syncthreads(): thread " + tid_of(first_wait) + " at cuda_src line " +
         std::to_string(line) + ", thread " + tid_of(first_other) + " at line " +
         std::to_string(other) +
         ". Every thread of a block must reach the same __syncthreads() (a barrier inside an "
         "if/else or a loop whose condition differs between threads is undefined on a GPU).");
  g.bar_count = pred;
  if (g.race_on) next_epoch();
}

/// No thread can go on, but some wait at warp-level calls (the checks in warp_op should have
/// caught it earlier): name them rather than hang.
[[noreturn]] static void warp_deadlock(unsigned nthreads) {
  std::string msg = "the threads of block " + fmt3(g.block_idx) + " in kernel " + g.kernel +
                    " (launched at cuda_src line " + std::to_string(g.launch_line) + ") cannot go on:";
  for (unsigned w = 0; w < g_warps.size(); w++)
    for (const Rendezvous& r : g_warps[w].pending) {
      msg += " in warp " + std::to_string(w) + ", " + wait_str(r.arrived) + " at " +
             call_str(r.op, r.mask, r.line) + " for " + lanes_str(r.mask & ~r.arrived) + ";";
      for (unsigned l = 0; l < 32; l++)
        if ((r.mask & ~r.arrived) >> l & 1) {
          msg += " lane " + std::to_string(l) + " " + lane_doing(w, static_cast<int>(l)) + ";";
          break;
        }
    }
  (void)nthreads;
  g.in_kernel = false;
  fail(msg + kWarpRule);
}

static Counts* g_block_counts = nullptr;  // the current block's counters in a counted launch

/// Runs one block: every thread as a fiber, phase by phase between barriers.  Between two
/// barriers a thread runs alone, from where it was to its next barrier or warp-level call, in
/// thread order; passes repeat until every thread waits at the barrier (or is done).
static void run_block(unsigned nthreads) {
  const dim3 b = g.block_dim;
  for (unsigned t = 0; t < nthreads; t++) {
    g.fibers[t].state = kNew;
    g.fibers[t].copies.clear();  // cp.async still in flight when a thread exited: dropped
    g.fibers[t].batches = 0;
  }
  g_warps.resize((nthreads + 31) / 32);
  for (auto& W : g_warps) W.pending.clear(), W.log.clear(), W.seq = 0;
  g_pending = 0;
  if (g.race_on) next_epoch();
  g_release = false;
  for (;;) {
    unsigned waiting = 0, done = 0, blocked = 0, yielded = 0;
    g.woke = false;
    if (g_sigint) interrupted(0);  // e.g. while (true) __syncthreads();
    if (PyErr_CheckSignals() != 0) throw PyErrorAlreadySet();  // other signals (a test's time limit)
    for (unsigned t = 0; t < nthreads; t++) {
      Fiber& f = g.fibers[t];
      if (f.state == kDone) {
        done++;
        continue;
      }
      if (f.state == kWarpWait || f.state == kMaskWait || (f.state == kWaiting && !g_release)) {
        (f.state == kWaiting ? waiting : blocked)++;
        continue;
      }
      g.thread_idx = {t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
      g.tid = t;
      if (f.state == kNew) {
        f.stack = stack_alloc();
        ctx_init(f);
      }
      f.state = kRunning;
      g.cur = &f;
      g.cnt = g_block_counts ? g_block_counts + t : nullptr;
      g_switches.store(g_switches.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // no lock
      ctx_swap(g.sched, f);
      g.cur = nullptr;
      g.cnt = nullptr;
      if (f.state == kFailed) {
        if (g_interrupting) throw Interrupt(g.error);
        throw Error(g.error);
      }
      if (f.state == kDone) {
        stack_release(f.stack);  // a thread that ends without a barrier hands its stack on
        f.stack = nullptr;
        done++;
      } else if (f.state == kWaiting) {
        waiting++;
      } else if (f.state == kYield) {
        yielded++;
      } else {
        blocked++;
      }
    }
    if (resolve_active_masks()) g.woke = true;  // lanes at __activemask() whose warp cannot go on without them
    g_release = false;
    if (g.woke || yielded) continue;  // a warp-level call completed, or threads yielded: they go on
    if (blocked) warp_deadlock(nthreads);
    if (waiting == 0) return;
    check_barrier(nthreads, waiting, done);
    g_release = true;
  }
}

/// Fibers left waiting when a launch fails are abandoned; their stacks go back to the pool.
static void abandon_fibers() {
  for (auto& f : g.fibers) {
    if (f.stack) stack_release(f.stack);
    f.stack = nullptr;
    f.state = kDone;
  }
}

void run_launch(const Config& c, void (*body)(void*), void* closure) {
  std::string bad = bad_config(c);
  // CUDA's own words, quoted first: a block of more than 1024 threads is refused as "CUDA error: invalid
  // argument" (cudaErrorInvalidValue; read on an H200 with CUDA 13 and on an H100), so the message opens
  // with them; the other bad shapes keep "invalid configuration argument" (cudaErrorInvalidConfiguration).
  const bool too_many = 1ull * c.block.x * c.block.y * c.block.z > 1024 && c.block.x && c.block.y && c.block.z;
  const char* words = too_many ? "invalid argument" : "invalid configuration argument";
  if (!bad.empty())
    fail("CUDA error: " + std::string(words) + " for kernel " + std::string(g.kernel) +
         " launched at cuda_src line " + std::to_string(g.launch_line) + ": " + bad +
         ". (On a GPU, C10_CUDA_KERNEL_LAUNCH_CHECK() reports 'CUDA error: " + words + "'.)");
  bad = bad_smem(c);
  if (!bad.empty())
    fail("invalid argument for kernel " + std::string(g.kernel) + " launched at cuda_src line " +
         std::to_string(g.launch_line) + ": " + bad +
         ". (On a GPU, C10_CUDA_KERNEL_LAUNCH_CHECK() reports 'invalid argument'.)");
  static std::vector<char> dyn_store;
  if (dyn_store.size() < c.smem + 128) dyn_store.resize(c.smem + 128);
  g.dyn = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(dyn_store.data()) + 127) & ~uintptr_t(127));
  g.dyn_bytes = c.smem;
  g.dyn_info.base = g.dyn;
  g.dyn_info.shared = true;
  g.dyn_info.what = "the launch's " + std::to_string(c.smem) +
                    " bytes of dynamic shared memory (extern __shared__, the 3rd <<<>>> argument)";
  g.grid_dim = c.grid;
  g.block_dim = c.block;
  g.body = body;
  g.closure = closure;
  const unsigned nthreads = c.block.x * c.block.y * c.block.z;
  if (g.fibers.size() < nthreads) g.fibers.resize(nthreads);
  g.nthreads = nthreads;
  g.race_mode = g_race_mode_requested;
  g.race_on = g.race_mode != 0;
  g_syncwarp_used = false;
  if (g.race_on) {
    g_rmw.clear();
    g_race_warnings.clear();
    g_race_keys.clear();
    g_dyn_cells.assign((c.smem + 3) / 4, RaceCell{});
  }

  Counts* counts = nullptr;
  if (g_count_requested) {
    const unsigned long long blocks = 1ull * c.grid.x * c.grid.y * c.grid.z, total = blocks * nthreads;
    if (total > kCountMaxThreads)
      fail("the check counts what every thread of kernel " + std::string(g.kernel) + " does, and cannot for " +
           std::to_string(total) + " threads (at most " + std::to_string(kCountMaxThreads) + ").");
    g_counted.push_back({g.kernel, c.grid, c.block, std::vector<Counts>(total, Counts{})});
    counts = g_counted.back().counts.data();
  }
  struct Reset {  // whatever happens, leave the emulator idle
    ~Reset() {
      g.in_kernel = false;
      g.cur = nullptr;
      g.cnt = nullptr;
      g_block_counts = nullptr;
    }
  } reset;
  SignalGuard guard;
  guard.install();  // before sigsetjmp, so that nothing it sets is lost by the longjmp
  g_interrupting = false;
  if (sigsetjmp(g_jmp, 1) != 0) {
    guard.restore();
    std::fflush(stdout);
    if (g_signal == SIGINT) {
      std::string msg = interrupt_message(0) + " (Stopped by a second Ctrl-C: the running thread " + tid_of(g.tid) +
                        " loops without a loop statement, e.g. by goto or recursion.)";
      abandon_fibers();
      throw Interrupt(msg);
    }
    abandon_fibers();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%p", g_fault_addr);
    if (g_signal == SIGILL)
      fail("illegal instruction (SIGILL) " + where() + ": the compiler turned undefined behaviour into a trap "
           "here, e.g. an integer division by 0, or a function that should return a value ends without "
           "a return.");
    if (g_signal == SIGFPE)
      fail("integer division by zero (SIGFPE) " + where() +
           ". On a GPU the result would be undefined; check the divisor.");
    if (in_guard_page(g_fault_addr))
      fail("stack overflow " + where() + ": the thread's local variables need more than " +
           std::to_string(g.stack_bytes / 1024) +
           " KiB (the emulation's stack per thread; set CUDA_EMU_STACK_KB to raise it).");
    fail(std::string("invalid memory access at address ") + buf + " (segmentation fault) " +
         where() + ": a pointer out of bounds? (on a GPU: 'an illegal memory access was "
         "encountered')");
  }
  for (unsigned bz = 0; bz < c.grid.z; bz++)
    for (unsigned by = 0; by < c.grid.y; by++)
      for (unsigned bx = 0; bx < c.grid.x; bx++) {
        if (g_sigint) interrupted(0);  // Ctrl-C, "interrupt kernel"
        if (PyErr_CheckSignals() != 0) throw PyErrorAlreadySet();  // other signals (e.g. SIGALRM)
        g.block_idx = {bx, by, bz};
        g.in_kernel = true;
        if (counts) g_block_counts = counts + ((1ull * bz * c.grid.y + by) * c.grid.x + bx) * nthreads;
        poison_shared();
        try {
          run_block(nthreads);
        } catch (...) {
          abandon_fibers();
          std::fflush(stdout);
          throw;
        }
      }
  std::fflush(stdout);  // kernel printf must be visible when the launch returns
  g.in_kernel = false;
  guard.restore();
  for (const auto& msg : g_race_warnings)  // racecheck="warn": after the launch, from Python's side
    if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) throw PyErrorAlreadySet();
  g_race_warnings.clear();
}

void kernel_launch_check() { std::fflush(stdout); }

void cuda_check(int err, const char* expr) {
  if (err != cudaSuccess)
    fail(std::string("CUDA error in ") + expr + ": " + cudaGetErrorString(static_cast<cudaError_t>(err)));
}

void exit_(int code) {
  std::fflush(stdout);
  fail("exit(" + std::to_string(code) +
       ") was called; the CPU emulation turns it into an error so that Python keeps running.");
}

void abort_() {
  std::fflush(stdout);
  fail("abort() was called; the CPU emulation turns it into an error so that Python keeps running.");
}

void assert_fail(const char* expr, const char* file, int line) {
  std::fflush(stdout);
  std::string w = g.in_kernel ? " " + where() : "";
  fail(std::string("assertion failed: ") + expr + " at " + file + " line " + std::to_string(line) + w);
}
}  // namespace cuda_emu
