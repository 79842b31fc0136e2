// runtime.cpp: the non-template part of the CUDA emulation (see cuda_emu.h), compiled once per
// machine by gpu_course/cuda/emulation and linked into every module it builds.
#include "cuda_emu.h"

#include <csetjmp>
#include <csignal>
#include <ctime>
#include <deque>
#include <map>
#include <unordered_map>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

namespace cuda_emu {

State g;

std::string fmt3(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

std::string where() {
  std::string s = std::string("in kernel ") + g.kernel + " (launched at cuda_src line " +
                  std::to_string(g.launch_line) + ")";
  if (g.in_kernel) s += ", block " + fmt3(g.block_idx) + ", thread " + fmt3(g.thread_idx);
  return s;
}

void fail(const std::string& msg) { throw Error(msg); }

// ------------------------------------------------------------------------------------------
// Fibers: a tiny context switch on x86-64 (callee-saved registers, FP control words, stack
// pointer), ucontext elsewhere.  Stacks come from a pool of mmap'ed regions, each with a guard
// page below it so that an overflow faults instead of corrupting a neighbour.
// ------------------------------------------------------------------------------------------
static void fiber_main(void*);

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
#else
static void fiber_main_uc(int, int) { fiber_main(nullptr); }
#endif

static void ctx_init(Fiber& f) {
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

static inline void ctx_swap(Fiber& from, Fiber& to) {
#if CUDA_EMU_USE_UCONTEXT
  swapcontext(&from.uc, &to.uc);
#else
  ctx_switch(&from.sp, to.sp);
#endif
}

static size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

static char* stack_alloc() {
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
  mprotect(m, page, PROT_NONE);  // the guard page
  char* s = static_cast<char*>(m) + page;
  g.all_stacks.push_back(s);
  return s;
}

static void stack_release(char* s) { g.free_stacks.push_back(s); }

/// Is `addr` in the guard page of one of the fiber stacks?
static bool in_guard_page(const void* addr) {
  const char* a = static_cast<const char*>(addr);
  size_t page = page_bytes();
  for (char* s : g.all_stacks)
    if (a >= s - page && a < s) return true;
  return false;
}

static unsigned g_pending = 0;  // warp-level calls of the block that wait for lanes
static bool g_release = false;  // the barrier completed: this pass resumes the threads waiting at it
static void check_not_awaited(const char* what, int line);

// The body of every fiber: run the kernel for one thread, record how it ended, go back to the
// scheduler.  Exceptions are caught here, on the fiber's own stack.
static bool g_interrupting = false;  // the failing fiber was stopped by Ctrl-C (Interrupt)

static void fiber_main(void*) {
  Fiber* f = g.cur;
  try {
    g.body(g.closure);
    if (g_pending) check_not_awaited("returned (exited)", 0);
    f->state = kDone;
  } catch (const Interrupt& e) {
    f->state = kFailed;
    g.error = e.what();
    g_interrupting = true;
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
  ctx_swap(*f, g.sched);  // a finished fiber is never resumed
  std::abort();
}

/// The calling thread's fiber; `call` (e.g. "__syncthreads()") made from host code is an error.
static Fiber* kernel_thread(const std::string& call, int line) {
  if (!g.in_kernel || !g.cur) fail(call + " called outside a kernel (cuda_src line " + std::to_string(line) + ")");
  return g.cur;
}

int barrier_wait(int line, int pred) {
  Fiber* f = kernel_thread("__syncthreads()", line);
  if (g_pending) check_not_awaited("reached __syncthreads()", line);
  if (g.cnt) g.cnt->barrier++;
  f->state = kWaiting;
  f->line = line;
  f->pred = pred;
  ctx_swap(*f, g.sched);
  return g.bar_count;
}

// ------------------------------------------------------------------------------------------
// Warps: lanes 32*w .. 32*w+31 of the block's linear thread index.  A warp-level call is a
// rendezvous: the lanes of `mask` deposit their values at one call (same function, same line;
// __syncwarp() may be at different lines, as on sm_70+), and the last one to arrive computes
// every lane's result.  Lanes that wait switch fiber; the scheduler resumes them (kReady).
// Every lane named in a mask must come: one that exited, waits at __syncthreads() or at another
// warp-level call is an error at once, so a divergent warp never hangs.
// ------------------------------------------------------------------------------------------
struct Rendezvous {
  int op, line;
  unsigned mask, arrived;
};
struct Warp {
  uint64_t val[32];  // what each lane deposited
  uint64_t res[32];  // each lane's result
  int src[32];       // shuffles: the lane each lane reads
  std::vector<Rendezvous> pending;
  uint32_t seq = 0;  // completed __syncwarp() calls (race check)
  std::vector<std::pair<uint32_t, unsigned>> log;  // (seq, mask) of __syncwarp() since the last barrier
  void (*collective)(void* const*) = nullptr;  // what the last lane at a wmma::mma_sync runs (wmma_sync)
};
static std::vector<Warp> g_warps;
static bool g_syncwarp_used = false;  // this launch called __syncwarp(): race messages mention it

static const char* op_name(int op) {
  static const char* names[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
                                "__ballot_sync", "__all_sync", "__any_sync", "__syncwarp",
                                "__reduce_add_sync", "__reduce_min_sync", "__reduce_min_sync",
                                "__reduce_max_sync", "__reduce_max_sync", "__reduce_and_sync",
                                "__reduce_or_sync", "__reduce_xor_sync", "__match_any_sync",
                                "__match_all_sync", "wmma::load_matrix_sync", "wmma::store_matrix_sync",
                                "wmma::mma_sync"};
  return op >= 0 && op < int(sizeof names / sizeof names[0]) ? names[op] : "warp-level call";
}

static std::string hex(unsigned m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", m);
  return buf;
}

/// "lane 3", "lanes 0-15", "lanes 0-3, 8, 10-12".
static std::string lanes_str(unsigned m) {
  std::string s;
  int n = 0;
  for (int l = 0; l < 32; l++) {
    if (!(m >> l & 1)) continue;
    int e = l;
    while (e + 1 < 32 && (m >> (e + 1) & 1)) e++;
    s += (n++ ? ", " : "") + std::to_string(l) + (e > l ? "-" + std::to_string(e) : "");
    l = e;
  }
  return (__builtin_popcount(m) == 1 ? "lane " : "lanes ") + s;
}
/// "lane 3 waits" / "lanes 0-15 wait".
static std::string wait_str(unsigned m) { return lanes_str(m) + (__builtin_popcount(m) == 1 ? " waits" : " wait"); }

static std::string tid_of(long long t);

/// Lanes of warp w that exist (the last warp of a block may be partial).
static unsigned lanes_existing(unsigned w) {
  unsigned n = g.nthreads - 32 * w;
  return n >= 32 ? 0xffffffffu : (1u << n) - 1;
}

static std::string warp_where(unsigned w) {
  return std::string("in kernel ") + g.kernel + " (launched at cuda_src line " + std::to_string(g.launch_line) +
         "), block " + fmt3(g.block_idx) + ", warp " + std::to_string(w) + " (threads " + tid_of(32 * w) +
         ".." + tid_of(std::min(32 * w + 31, g.nthreads - 1)) + ")";
}

static std::string call_str(int op, unsigned mask, int line) {
  if (op >= kWmmaLoad)  // the whole warp, no mask
    return std::string(op_name(op)) + "(...) at cuda_src line " + std::to_string(line);
  return std::string(op_name(op)) + "(" + hex(mask) + ", ...) at cuda_src line " + std::to_string(line);
}

/// What lane l of warp w is doing, for messages: "has exited", "waits at __syncthreads() at line 9".
static std::string lane_doing(unsigned w, int l) {
  const Fiber& o = g.fibers[32 * w + l];
  if (o.state == kDone) return "has already exited (returned)";
  if (o.state == kWaiting) return "waits at __syncthreads() at cuda_src line " + std::to_string(o.line);
  if (o.state == kWarpWait) return "waits at " + call_str(o.wop, o.wmask, o.line);
  return "has not arrived";
}

static const char* kWarpRule =
    " Every lane named in the mask must reach the same warp-level call (on a GPU anything else is "
    "undefined: it may hang or return garbage). If only some lanes take part, pass their mask, e.g. "
    "unsigned m = __ballot_sync(0xffffffff, cond); before the if, then use m inside it.";
static const char* kWmmaRule =
    " All 32 lanes of a warp must reach the same wmma call together (on a GPU anything else is undefined: it may "
    "hang or compute garbage): keep wmma calls out of branches that only some lanes of a warp take.";
static const char* warp_rule(int op) { return op >= kWmmaLoad ? kWmmaRule : kWarpRule; }

/// The running lane is about to return or wait at __syncthreads(): no warp-level call may be
/// waiting for it.
static void check_not_awaited(const char* what, int line) {
  const unsigned w = g.tid / 32, bit = 1u << (g.tid % 32);
  for (const Rendezvous& r : g_warps[w].pending)
    if ((r.mask & bit) && !(r.arrived & bit)) {
      g.in_kernel = false;  // the message names the warp
      fail("lane " + std::to_string(g.tid % 32) + " (thread " + tid_of(g.tid) + ") " + what +
           (line ? " at cuda_src line " + std::to_string(line) : std::string()) + " while " +
           wait_str(r.arrived) + " for it at " + call_str(r.op, r.mask, r.line) + ", " +
           warp_where(w) + "." + warp_rule(r.op));
    }
}

/// The last lane arrived: compute every lane's result, wake the others.
static void complete(Warp& W, size_t k) {
  const Rendezvous r = W.pending[k];
  W.pending.erase(W.pending.begin() + static_cast<long>(k));
  g_pending--;
  const unsigned m = r.mask;
  auto each = [m](auto fn) {
    for (unsigned l = 0; l < 32; l++)
      if (m >> l & 1) fn(l);
  };
  uint64_t acc = 0;
  switch (r.op) {
    case kShflIdx: case kShflUp: case kShflDown: case kShflXor:
      // a lane outside the mask has no value to give: poison (all bits set, NaN for floats)
      each([&](unsigned l) { W.res[l] = (m >> W.src[l] & 1) ? W.val[W.src[l]] : ~uint64_t(0); });
      break;
    case kBallot: case kAll: case kAny:
      each([&](unsigned l) { acc |= W.val[l] ? uint64_t(1) << l : 0; });
      if (r.op == kAll) acc = acc == m;
      if (r.op == kAny) acc = acc != 0;
      each([&](unsigned l) { W.res[l] = acc; });
      break;
    case kSyncwarp:
      if (g.race_on) W.log.emplace_back(++W.seq, m);
      g_syncwarp_used = true;
      break;
    case kRedAdd: case kRedMinS: case kRedMinU: case kRedMaxS: case kRedMaxU: case kRedAnd: case kRedOr:
    case kRedXor: {
      bool first = true;
      uint32_t a = 0;
      each([&](unsigned l) {
        uint32_t v = static_cast<uint32_t>(W.val[l]);
        if (first) a = v, first = false;
        else if (r.op == kRedAdd) a += v;
        else if (r.op == kRedMinS) a = int32_t(v) < int32_t(a) ? v : a;
        else if (r.op == kRedMinU) a = v < a ? v : a;
        else if (r.op == kRedMaxS) a = int32_t(v) > int32_t(a) ? v : a;
        else if (r.op == kRedMaxU) a = v > a ? v : a;
        else if (r.op == kRedAnd) a &= v;
        else if (r.op == kRedOr) a |= v;
        else a ^= v;
      });
      each([&](unsigned l) { W.res[l] = a; });
      break;
    }
    case kMatchAny:
      each([&](unsigned l) {
        uint64_t same = 0;
        each([&](unsigned k2) { same |= W.val[k2] == W.val[l] ? uint64_t(1) << k2 : 0; });
        W.res[l] = same;
      });
      break;
    case kMatchAll: {
      bool all = true;
      const unsigned l0 = static_cast<unsigned>(__builtin_ctz(m));
      each([&](unsigned l) { all = all && W.val[l] == W.val[l0]; });
      each([&](unsigned l) { W.res[l] = all ? (uint64_t(1) << 32) | m : 0; });
      break;
    }
    case kWmmaLoad: case kWmmaStore:  // each lane moved its own elements before it arrived
      break;
    case kWmmaMma: {  // every lane's fragments in, every lane's result out, before anyone goes on
      void* lanes[32] = {};
      each([&](unsigned l) { lanes[l] = reinterpret_cast<void*>(static_cast<uintptr_t>(W.val[l])); });
      W.collective(lanes);
      break;
    }
  }
  const unsigned w = static_cast<unsigned>(&W - g_warps.data());
  each([&](unsigned l) {
    Fiber& f = g.fibers[32 * w + l];
    if (f.state == kWarpWait) f.state = kReady;
  });
  g.woke = true;
}

uint64_t warp_op(int op, int line, unsigned mask, uint64_t value, int arg, int width) {
  kernel_thread(std::string(op_name(op)) + "()", line);
  if (Counts* c = g.cnt) {
    switch (op) {
      case kShflIdx: c->shfl_idx++; break;
      case kShflUp: c->shfl_up++; break;
      case kShflDown: c->shfl_down++; break;
      case kShflXor: c->shfl_xor++; break;
      case kWmmaMma: c->mma++; break;
      case kWmmaLoad: case kWmmaStore: break;  // their elements are counted as loads and stores
      default: c->warp_other++;
    }
  }
  const unsigned tid = g.tid, w = tid / 32, lane = tid % 32, bit = 1u << lane;
  Warp& W = g_warps[w];
  if (!(mask & bit))
    fail(call_str(op, mask, line) + " " + where() + ": the mask does not name the calling lane " +
         std::to_string(lane) + ". A lane that calls a warp-level function must be in its mask.");
  const unsigned exists = lanes_existing(w);
  if (mask & ~exists)
    fail(call_str(op, mask, line) + " " + where() + ": the mask names " + lanes_str(mask & ~exists) + " of warp " +
         std::to_string(w) + ", which do not exist: the block has " + std::to_string(g.nthreads) +
         " threads, so this warp has only " + lanes_str(exists) + ". Use a mask of the lanes that exist (here " +
         hex(exists) + "), or blocks whose size is a multiple of 32.");
  int src = static_cast<int>(lane);
  if (op <= kShflXor) {
    if (width < 1 || width > 32 || (width & (width - 1)))
      fail(call_str(op, mask, line) + " " + where() + ": width " + std::to_string(width) +
           " must be a power of 2 from 1 to 32.");
    // PTX shfl.sync: a segment of `width` lanes; up/down/xor outside the segment keep their own value
    const int seg = static_cast<int>(lane) & ~(width - 1), last = seg + width - 1, l = static_cast<int>(lane);
    long long j = l;
    if (op == kShflIdx) j = seg + (arg & (width - 1));
    else if (op == kShflUp) j = static_cast<long long>(l) - static_cast<unsigned>(arg);
    else if (op == kShflDown) j = static_cast<long long>(l) + static_cast<unsigned>(arg);
    else j = l ^ arg;
    const bool ok = op == kShflUp ? j >= seg : (j >= 0 && j <= last);
    src = ok ? static_cast<int>(j) : l;
  }
  W.val[lane] = value;
  W.src[lane] = src;
  // join the rendezvous that waits for this lane at this call, or start one
  size_t k = W.pending.size(), other = W.pending.size();
  for (size_t q = 0; q < W.pending.size(); q++) {
    const Rendezvous& r = W.pending[q];
    if (!(r.mask & bit) || (r.arrived & bit)) continue;
    if (r.op == op && r.mask == mask && (r.line == line || op == kSyncwarp)) {
      k = q;
      break;
    }
    other = q;
  }
  if (k == W.pending.size()) {
    if (other < W.pending.size()) {
      const Rendezvous& r = W.pending[other];
      g.in_kernel = false;
      fail("lane " + std::to_string(lane) + " (thread " + tid_of(tid) + ") reached " + call_str(op, mask, line) +
           ", while " + wait_str(r.arrived) + " for it at " + call_str(r.op, r.mask, r.line) + ", " +
           warp_where(w) + "." + warp_rule(op));
    }
    for (unsigned l = 0; l < 32; l++) {
      if (!(mask >> l & 1) || l == lane) continue;
      const int st = g.fibers[32 * w + l].state;
      if (st == kDone || (st == kWaiting && !g_release) || st == kWarpWait) {
        g.in_kernel = false;
        fail(call_str(op, mask, line) + " was reached by lane " + std::to_string(lane) + " (thread " +
             tid_of(tid) + "), but lane " + std::to_string(l) + " (thread " + tid_of(32 * w + l) + "), named in " +
             "the mask, " + lane_doing(w, static_cast<int>(l)) + ", " + warp_where(w) + "." + warp_rule(op));
      }
    }
    W.pending.push_back({op, line, mask, 0});
    g_pending++;
  }
  W.pending[k].arrived |= bit;
  if (W.pending[k].arrived == mask) {
    complete(W, k);  // the last lane to arrive goes on without switching
    return W.res[lane];
  }
  Fiber* f = g.cur;
  f->state = kWarpWait;
  f->line = line;
  f->wop = op;
  f->wmask = mask;
  ctx_swap(*f, g.sched);
  return W.res[lane];
}

void wmma_sync(int op, int line, void* mine, void (*fn)(void* const* lanes)) {
  kernel_thread(std::string(op_name(op)) + "()", line);
  const unsigned w = g.tid / 32, exists = lanes_existing(w);
  if (exists != 0xffffffffu)
    fail(call_str(op, 0, line) + " " + where() + ": warp " + std::to_string(w) + " has only " + lanes_str(exists) +
         " (the block has " + std::to_string(g.nthreads) + " threads). A wmma operation is done by all 32 lanes of "
         "a warp together: launch blocks whose number of threads is a multiple of 32.");
  if (fn) g_warps[w].collective = fn;
  warp_op(op, line, 0xffffffffu, reinterpret_cast<uintptr_t>(mine));
}

unsigned active_mask() {
  if (!g.in_kernel || !g.cur) fail("__activemask() called outside a kernel");
  const unsigned w = g.tid / 32;
  unsigned m = 0;
  for (unsigned l = 0; l < 32 && 32 * w + l < g.nthreads; l++)
    if (g.fibers[32 * w + l].state != kDone) m |= 1u << l;
  return m;
}

// ------------------------------------------------------------------------------------------
// Race check (racecheck): every access to a __shared__ array through sat<K>() is recorded in a
// shadow cell per 4-byte word: the last writer and up to two readers since the last barrier
// (cells of an older epoch are empty).  A thread touching a word that another thread wrote, or
// writing one that another thread read, with no __syncthreads() between (or, in one warp, no
// __syncwarp() naming both), is a race.  Global memory: non-atomic read-modify-writes (+=, ++)
// through a kernel's pointer parameters, by two threads of one launch.
// ------------------------------------------------------------------------------------------
struct Acc {
  int32_t tid = -1;  // -1: none
  int32_t line = 0;
  uint32_t wseq = 0;  // the warp's __syncwarp() count at the access
};
struct RaceCell {
  uint32_t epoch = 0;
  Acc w, r1, r2;
};
static uint32_t g_epoch = 1;  // bumped at every block start and every completed __syncthreads()
static std::vector<std::vector<RaceCell>> g_shared_cells;  // per registered __shared__ variable
static std::vector<RaceCell> g_dyn_cells;                 // the launch's dynamic shared memory
struct GlobalRMW {
  uint32_t block, epoch, wseq;
  int32_t tid, line;
};
static std::unordered_map<const void*, GlobalRMW> g_rmw;
static std::vector<std::string> g_race_warnings, g_race_keys;

static void next_epoch() {
  if (++g_epoch == 0) {  // wrapped (after 4e9 barriers): forget everything
    for (auto& v : g_shared_cells) std::fill(v.begin(), v.end(), RaceCell{});
    std::fill(g_dyn_cells.begin(), g_dyn_cells.end(), RaceCell{});
    g_rmw.clear();
    g_epoch = 1;
  }
  for (auto& W : g_warps) W.log.clear();
}

/// Is the earlier access `a` ordered before the running thread's access?
static bool ordered(const Acc& a, unsigned t) {
  if (a.tid == static_cast<int32_t>(t)) return true;
  if (static_cast<unsigned>(a.tid) / 32 != t / 32) return false;  // different warps: only a barrier
  const Warp& W = g_warps[t / 32];
  const unsigned both = (1u << (a.tid % 32)) | (1u << (t % 32));
  for (auto it = W.log.rbegin(); it != W.log.rend() && it->first > a.wseq; ++it)
    if ((it->second & both) == both) return true;
  return false;
}

/// A race: raise, or with racecheck="warn" keep one warning per `key` (array and lines).
static void race_report(const std::string& msg, const std::string& key) {
  if (g.race_mode == 2) {
    for (const auto& k : g_race_keys)
      if (k == key) return;
    g_race_keys.push_back(key);
    if (g_race_warnings.size() < 3) g_race_warnings.push_back(msg);
    return;
  }
  g.in_kernel = false;  // the message names the block and threads itself
  fail(msg);
}

static const char* verb(int kind) { return kind == kRead ? "read" : kind == kWrite ? "wrote" : "updated"; }

static void shared_race(const std::string& elem, const Acc& first, int first_kind, int kind, int line) {
  const unsigned t = g.tid;
  const bool warp = static_cast<unsigned>(first.tid) / 32 == t / 32;
  std::string msg = "race on __shared__ " + elem + " in kernel " + g.kernel + " (launched at cuda_src line " +
                    std::to_string(g.launch_line) + "), block " + fmt3(g.block_idx) + ": thread " +
                    tid_of(first.tid) + " " + verb(first_kind) + " " + elem + " at cuda_src line " +
                    std::to_string(first.line) + " and thread " + tid_of(t) + " " + verb(kind) +
                    " it at line " + std::to_string(line) + " with no __syncthreads() between" +
                    (warp && g_syncwarp_used ? " (nor a __syncwarp(), though both are in warp " +
                                                   std::to_string(t / 32) + ")" : "") +
                    ". On a GPU the two may happen in either order: a data race (compute-sanitizer --tool "
                    "racecheck reports it too). ";
  if (first_kind != kRead && kind != kRead)
    msg += "Two threads write the same element: check the index, or separate the writes with __syncthreads().";
  else
    msg += "A __syncthreads() must separate the two: after the write and before the read if the reader needs "
           "the new value; after the read and before the write if it needs the old one (in a loop over "
           "tiles, that is a barrier at the end of the loop body).";
  race_report(msg, elem.substr(0, elem.find('[')) + ":" + std::to_string(first.line) + ":" +
                       std::to_string(line) + ":" + std::to_string(first_kind) + std::to_string(kind));
}

void race_shared(int kind, const void* region, const void* p, size_t size, int line, const long long* ix, int nix) {
  if (!g.in_kernel || size < 4) return;  // elements smaller than a word are not checked
  static size_t hint = 0;
  const char* lo;
  const char* name;
  std::vector<RaceCell>* cells;
  if (region == g.dyn) {
    lo = g.dyn, name = g.dyn_info.name, cells = &g_dyn_cells;
  } else {
    size_t k = hint;
    if (k >= g.shared_regions.size() || g.shared_regions[k].first != region) {
      for (k = 0; k < g.shared_regions.size() && g.shared_regions[k].first != region; k++) {
      }
      if (k == g.shared_regions.size()) return;  // not registered (cannot happen)
      hint = k;
    }
    if (g_shared_cells.size() < g.shared_regions.size()) g_shared_cells.resize(g.shared_regions.size());
    cells = &g_shared_cells[k];
    if (cells->empty()) cells->resize((g.shared_regions[k].second + 3) / 4);
    lo = static_cast<const char*>(region), name = g.shared_names[k].first.c_str();
  }
  const size_t off = static_cast<size_t>(static_cast<const char*>(p) - lo);
  const unsigned t = g.tid;
  const Acc cur{static_cast<int32_t>(t), line, g_warps[t / 32].seq};
  for (size_t c = off / 4; c <= (off + size - 1) / 4 && c < cells->size(); c++) {
    RaceCell& e = (*cells)[c];
    if (e.epoch != g_epoch) e = RaceCell{g_epoch, {}, {}, {}};
    auto elem = [&] {
      std::string s = name;
      for (int q = 0; q < nix; q++) s += "[" + std::to_string(ix[q]) + "]";
      return nix ? s : s + " (byte " + std::to_string(off) + ")";
    };
    if (e.w.tid >= 0 && !ordered(e.w, t)) {  // read-after-write or write-after-write
      shared_race(elem(), e.w, kWrite, kind, line);
      return;
    }
    if (kind != kRead) {  // write-after-read
      for (const Acc* r : {&e.r1, &e.r2})
        if (r->tid >= 0 && !ordered(*r, t)) {
          shared_race(elem(), *r, kRead, kind, line);
          return;
        }
      e.w = cur;
    }
    if (kind != kWrite) {
      if (e.r1.tid < 0 || e.r1.tid == cur.tid) e.r1 = cur;
      else e.r2 = cur;  // the latest other reader
    }
  }
}

void race_global(const void* p, size_t size, const PtrInfo* info, int line) {
  if (!g.in_kernel) return;
  const uint32_t block = g.block_idx.x + g.grid_dim.x * (g.block_idx.y + g.grid_dim.y * g.block_idx.z);
  const unsigned t = g.tid;
  const GlobalRMW cur{block, g_epoch, g_warps[t / 32].seq, static_cast<int32_t>(t), line};
  auto it = g_rmw.find(p);
  if (it == g_rmw.end()) {
    if (g_rmw.size() < (1u << 22)) g_rmw.emplace(p, cur);  // bounded memory on huge launches
    return;
  }
  const GlobalRMW prev = it->second;
  it->second = cur;
  if (prev.block == block && (prev.epoch != g_epoch || ordered(Acc{prev.tid, prev.line, prev.wseq}, t))) return;
  std::string elem = "a word of global memory";
  if (info && info->base) {
    const long long off = static_cast<const char*>(p) - info->base;
    elem = std::string(info->name) + "[" + std::to_string(off / static_cast<long long>(size)) + "]";
  }
  const dim3 gd = g.grid_dim;
  const uint3 pb{prev.block % gd.x, (prev.block / gd.x) % gd.y, prev.block / (gd.x * gd.y)};
  race_report("race on " + elem + " in kernel " + g.kernel + " (launched at cuda_src line " +
              std::to_string(g.launch_line) + "): thread " + tid_of(prev.tid) + " of block " + fmt3(pb) +
              " (cuda_src line " + std::to_string(prev.line) + ") and thread " + tid_of(t) + " of block " +
              fmt3(g.block_idx) + " (line " + std::to_string(line) + ") both update " + elem +
              " with a plain read-modify-write (+=, ++, ...), not an atomic. On a GPU they run at the same "
              "time and updates are lost. Use " + (info && info->base ? "atomicAdd(&" + elem + ", v)" : "atomicAdd") +
              " (or reduce within the block first, then one atomicAdd per block).",
              elem.substr(0, elem.find('[')) + ":" + std::to_string(prev.line) + ":" + std::to_string(line));
}

// ------------------------------------------------------------------------------------------
// Launch counts: {kernel name: launches} since load, so that a check can prove a kernel ran.
// ------------------------------------------------------------------------------------------
static std::map<std::string, long long> g_launches;

/// "ns::k<T>" -> "k"; "... [with auto F = ns::k<16>]" -> "k<16>".
static std::string bare_name(std::string s) {
  size_t lt = s.find('<');
  size_t colon = s.rfind("::", lt);
  if (colon != std::string::npos) s = s.substr(colon + 2);
  return s;
}

void count_launch(const char* name, const char* pretty) {
  std::string base = bare_name(name);
  base = base.substr(0, base.find('<'));
  while (!base.empty() && base.back() == ' ') base.pop_back();
  g_launches[base]++;
  if (pretty) {
    std::string p = pretty;
    size_t a = p.find("F = ");
    if (a != std::string::npos && p.size() > a + 5 && p.back() == ']') {
      std::string inst = bare_name(p.substr(a + 4, p.size() - a - 5));
      if (!inst.empty() && inst[0] == '&') inst = inst.substr(1);
      if (inst != base) g_launches[inst]++;
      static std::string current;  // messages name the instance: k<16> rather than k<TW>
      current = inst;
      g.kernel = current.c_str();
    }
  }
}

PyObject* py_launches(PyObject*, PyObject* const*, Py_ssize_t) {
  PyObject* d = PyDict_New();
  if (!d) return nullptr;
  for (const auto& [k, v] : g_launches) {
    PyObject* n = PyLong_FromLongLong(v);
    if (!n || PyDict_SetItemString(d, k.c_str(), n) < 0) {
      Py_XDECREF(n);
      Py_DECREF(d);
      return nullptr;
    }
    Py_DECREF(n);
  }
  return d;
}

PyObject* py_reset_launches(PyObject*, PyObject* const*, Py_ssize_t) {
  g_launches.clear();
  Py_RETURN_NONE;
}

// ------------------------------------------------------------------------------------------
// The launch log: the latest launches (kernel, configuration, arguments as the host code gave
// them), numbered since load, so that a check can make the same launch on memory of its own.
// ------------------------------------------------------------------------------------------
struct LaunchRec {
  long long seq;
  std::string name;
  dim3 grid, block;
  size_t smem;
  std::vector<ArgRec> args;
};
static std::deque<LaunchRec> g_log;
static long long g_log_total = 0;
constexpr size_t kLogKeep = 256;

void log_launch(const char* name, dim3 grid, dim3 block, size_t smem, std::vector<ArgRec>&& args) {
  std::string base = bare_name(name);
  base = base.substr(0, base.find('<'));
  while (!base.empty() && base.back() == ' ') base.pop_back();
  g_log.push_back({g_log_total++, std::move(base), grid, block, smem, std::move(args)});
  while (g_log.size() > kLogKeep) g_log.pop_front();
}

static PyObject* dim3_py(dim3 d) { return Py_BuildValue("(kkk)", (unsigned long)d.x, (unsigned long)d.y, (unsigned long)d.z); }

PyObject* py_launch_log(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  long long since = 0;
  if (nargs >= 1) {
    since = PyLong_AsLongLong(args[0]);
    if (since == -1 && PyErr_Occurred()) return nullptr;
  }
  PyObject* list = PyList_New(0);
  if (!list) return nullptr;
  for (const LaunchRec& r : g_log) {
    if (r.seq < since) continue;
    PyObject* a = PyTuple_New(static_cast<Py_ssize_t>(r.args.size()));
    if (!a) {
      Py_DECREF(list);
      return nullptr;
    }
    for (size_t k = 0; k < r.args.size(); k++) {
      const char kind[2] = {r.args[k].kind, 0};
      PyTuple_SET_ITEM(a, static_cast<Py_ssize_t>(k),
                       Py_BuildValue("(siK)", kind, static_cast<int>(r.args[k].size),
                                     static_cast<unsigned long long>(r.args[k].bits)));
    }
    PyObject* item = Py_BuildValue("(LsNNKN)", r.seq, r.name.c_str(), dim3_py(r.grid), dim3_py(r.block),
                                   static_cast<unsigned long long>(r.smem), a);
    if (!item || PyList_Append(list, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return Py_BuildValue("(LN)", g_log_total, list);
}

// ------------------------------------------------------------------------------------------
// Counted launches: while requested, every launch counts, per thread, what it did (Counts).
// ------------------------------------------------------------------------------------------
struct CountedLaunch {
  std::string name;
  dim3 grid, block;
  std::vector<Counts> counts;  // thread t of block (x, y, z): index ((z * gy + y) * gx + x) * threads + t
};
static bool g_count_requested = false;
static std::vector<CountedLaunch> g_counted;
constexpr unsigned long long kCountMaxThreads = 1ull << 22;

bool in_shared(const void* p) {
  const char* a = static_cast<const char*>(p);
  if (g.dyn && a >= g.dyn && a < g.dyn + g.dyn_bytes) return true;
  for (const auto& r : g.shared_regions) {
    const char* s = static_cast<const char*>(r.first);
    if (a >= s && a < s + r.second) return true;
  }
  return false;
}

PyObject* py_count(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  g_count_requested = nargs >= 1 && PyObject_IsTrue(args[0]) == 1;
  g_counted.clear();
  Py_RETURN_NONE;
}

PyObject* py_counts(PyObject*, PyObject* const*, Py_ssize_t) {
  PyObject* list = PyList_New(0);
  if (!list) return nullptr;
  for (const CountedLaunch& c : g_counted) {
    PyObject* bytes = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(c.counts.data()),
                                                static_cast<Py_ssize_t>(c.counts.size() * sizeof(Counts)));
    PyObject* item = bytes ? Py_BuildValue("(sNNN)", c.name.c_str(), dim3_py(c.grid), dim3_py(c.block), bytes)
                           : nullptr;
    if (!item || PyList_Append(list, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return Py_BuildValue("(sN)", CUDA_EMU_COUNT_FIELDS, list);
}

// Set by the module's static initializer, which may run before g is constructed: a plain int
// (constant-initialized), copied into g at every launch.
static int g_race_mode_requested = 0;

bool set_race_mode(int mode) {
  g_race_mode_requested = mode;
  return true;
}

// ------------------------------------------------------------------------------------------
// Shared memory and bounds errors.
// ------------------------------------------------------------------------------------------
constexpr unsigned char kPoison = 0xff;  // float NaN, int -1

shared_reg::shared_reg(void* p, size_t n, const char* name) {
  std::memset(p, kPoison, n);
  g.shared_regions.emplace_back(p, n);
  g.shared_names.emplace_back(name, static_cast<const char*>(p));
}

static void poison_shared() {
  for (auto& r : g.shared_regions) std::memset(r.first, kPoison, r.second);
  if (g.dyn_bytes) std::memset(g.dyn, kPoison, g.dyn_bytes);
}

/// Name of the registered __shared__ variable that contains address p.
static std::string shared_name(const void* p) {
  const char* a = static_cast<const char*>(p);
  for (size_t i = 0; i < g.shared_regions.size(); i++) {
    const char* s = static_cast<const char*>(g.shared_regions[i].first);
    if (a >= s && a < s + g.shared_regions[i].second) return g.shared_names[i].first;
  }
  return "array";
}

void shared_oob(const void* arr, long long i, size_t n) {
  fail("out-of-bounds index " + std::to_string(i) + " into __shared__ " + shared_name(arr) +
       " (that dimension has " + std::to_string(n) + " elements, valid 0.." +
       std::to_string(static_cast<long long>(n) - 1) + ") " + where() + ".");
}

void misaligned(const void* p, size_t align, const char* type) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%p", p);
  fail(std::string("misaligned address ") + buf + ": a " + type + " access needs " +
       std::to_string(align) + "-byte alignment " + where() +
       ". On a GPU this is the error 'misaligned address'.");
}

/// PtrInfo of registered __shared__ variable k (made when first needed; stable addresses).
static const PtrInfo* shared_info(size_t k) {
  static std::deque<PtrInfo> infos;
  while (infos.size() <= k) infos.emplace_back();
  PtrInfo& i = infos[k];
  const char* start = static_cast<const char*>(g.shared_regions[k].first);
  if (i.base != start) {
    i.name = g.shared_names[k].first.c_str();
    i.base = start;
    i.what = "__shared__ " + g.shared_names[k].first + " (" + std::to_string(g.shared_regions[k].second) + " bytes)";
    i.shared = true;
  }
  return &i;
}

bool region_of(const void* p, const char** lo, const char** hi, const PtrInfo** info) {
  const char* a = static_cast<const char*>(p);
  if (g.dyn && a >= g.dyn && a < g.dyn + g.dyn_bytes) {
    *lo = g.dyn, *hi = g.dyn + g.dyn_bytes, *info = &g.dyn_info;
    return true;
  }
  for (size_t k = 0; k < g.shared_regions.size(); k++) {
    const char* s = static_cast<const char*>(g.shared_regions[k].first);
    if (a >= s && a < s + g.shared_regions[k].second) {
      *lo = s, *hi = s + g.shared_regions[k].second, *info = shared_info(k);
      return true;
    }
  }
  for (const ParamRange& r : g.params)
    if (a >= r.lo && a < r.hi) {
      *lo = r.lo, *hi = r.hi, *info = r.info;
      return true;
    }
  return false;
}

/// "out[8]" (the element at byte offset `off` of what info names, for an access of esize bytes),
/// "out[8..11]" (a float4 through a float pointer), else "byte 32 of out".
static std::string element_of(const PtrInfo* info, long long off, size_t esize) {
  const long long e = static_cast<long long>(info->esize), n = static_cast<long long>(esize);
  const std::string name = info->name && *info->name ? info->name : "the buffer";
  if (e > 0 && off % e == 0) {
    const long long i = off / e;
    return name + "[" + std::to_string(i) + (n > e && n % e == 0 ? ".." + std::to_string(i + n / e - 1) : "") + "]";
  }
  return "byte " + std::to_string(off) + " of " + name;
}

void ptr_oob(const PtrInfo* info, const void* q, size_t esize, const char* lo, const char* hi, const char* var,
             const void* p, long long idx, int line) {
  const bool deref = var[0] == '*';  // gderef: var is the dereference as written, e.g. "*(p + k)"
  const std::string acc = deref ? std::string(var) : std::string(var) + "[" + std::to_string(idx) + "]";
  std::string msg = "out-of-bounds access to " + acc + " " + where() +
                    (line > 0 ? " at cuda_src line " + std::to_string(line) : std::string()) + ": ";
  const char* c = static_cast<const char*>(q);
  const bool before = c < lo;
  if (!info) {
    msg += acc + " is " + (before ? std::to_string(lo - c) + " bytes before the start" :
                                    std::to_string(c + esize - hi) + " bytes past the end") +
           " of the " + std::to_string(hi - lo) + " bytes that " + var + " points into";
  } else {
    const char* base = info->base ? info->base : lo;
    const bool itself = p == base && info->name && std::strcmp(var + deref, info->name) == 0;
    const long long es = static_cast<long long>(info->esize ? info->esize : esize);
    const std::string valid = lo == base && info->esize && (hi - base) % es == 0
                                  ? " (valid indices 0.." + std::to_string((hi - base) / es - 1) + ")"
                                  : std::string();
    if (itself) {
      msg += std::string(info->name) + " points to " + info->what + valid;
    } else {
      msg += acc + " is " + element_of(info, c - base, esize) +
             (deref ? std::string(", ")
                    : " (" + std::string(var) + " points to " +
                          element_of(info, static_cast<const char*>(p) - base, info->esize ? info->esize : esize) +
                          "), ") +
             (before ? "before the start of " : "past the end of ") + info->name + ", which points to " + info->what +
             valid;
    }
  }
  fail(msg + ". Guard the access (e.g. if (i < n)) or fix the index" +
       (info && !(p == info->base && std::strcmp(var + deref, info->name) == 0) ? " or the pointer arithmetic." : "."));
}

void div_zero(int line) {
  fail("integer division by zero " + (g.in_kernel ? where() + " " : std::string()) + "at cuda_src line " +
       std::to_string(line) + ": the divisor of / or % is 0. On a GPU there is no error: the result is "
       "undefined (garbage) and the kernel goes on. Check the divisor.");
}

void global_oob(const PtrInfo* info, const void* q, size_t esize, const char* lo, const char* hi) {
  std::string msg = "out-of-bounds access ";
  if (!info) fail(msg + where() + ".");
  const long long es = static_cast<long long>(info->esize ? info->esize : esize);
  long long off = static_cast<const char*>(q) - info->base;
  long long idx = off >= 0 ? off / es : -((-off + es - 1) / es);
  long long n = static_cast<long long>(hi - info->base) / es;
  // x[8..11]: a float4 read through a float pointer, in x's elements
  std::string elem = info->esize && off % es == 0 ? element_of(info, off, esize)
                                                  : std::string(info->name) + "[" + std::to_string(idx) + "]";
  msg += "to " + elem + " " + where() + ": " + info->name + " points to " + info->what;
  if (lo == info->base) msg += " (valid indices 0.." + std::to_string(n - 1) + ")";
  fail(msg + ". Guard the access (e.g. if (i < n)) or fix the index.");
}

// ------------------------------------------------------------------------------------------
// wmma (emu_wmma.h): the messages of a tile that reaches outside its matrix, or that a GPU cannot load.
// ------------------------------------------------------------------------------------------
void wmma_oob(const char* call, int line, int row, int col, const void* q, size_t esize, const char* lo,
              const char* hi, const PtrInfo* info) {
  const char* c = static_cast<const char*>(q);
  std::string msg = std::string("out-of-bounds access by ") + call + " at cuda_src line " + std::to_string(line) +
                    " " + where() + ": element (row " + std::to_string(row) + ", column " + std::to_string(col) +
                    ") of the 16x16 tile ";
  if (info && info->base) {
    msg += "is " + element_of(info, c - info->base, esize) + ", " + (c < lo ? "before the start" : "past the end") +
           " of " + (info->name && *info->name ? info->name : "the buffer") + ", which points to " + info->what;
  } else {
    msg += "is " + (c < lo ? std::to_string(lo - c) + " bytes before the start" :
                             std::to_string(c + esize - hi) + " bytes past the end") +
           " of the " + std::to_string(hi - lo) + " bytes it points into";
  }
  fail(msg + ". A wmma load or store always moves a whole 16x16 tile: at the edges of a matrix whose sizes are "
             "not multiples of 16, pad the matrix, or go through a zero-filled tile in shared memory.");
}

static std::string ptr_str_of(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

void wmma_misaligned(const char* call, int line, const void* p, unsigned ldm, size_t esize) {
  const char* lo;
  const char* hi;
  const PtrInfo* info = nullptr;
  std::string at = ptr_str_of(p);
  if (region_of(p, &lo, &hi, &info) && info && info->base)
    at = element_of(info, static_cast<const char*>(p) - info->base, esize);
  const bool bad_ldm = (ldm * esize) % 16 != 0;
  fail(std::string("misaligned address: ") + call + " at cuda_src line " + std::to_string(line) + " " + where() +
       ": " + (bad_ldm ? "ldm = " + std::to_string(ldm) + " elements is " + std::to_string(ldm * esize) +
                             " bytes, not a multiple of 16"
                       : "the tile starts at " + at + ", which is not 16-byte aligned") +
       ". Every row (column, for col_major) of a wmma tile must start on a 16-byte boundary: ldm a multiple of " +
       std::to_string(16 / esize) + " elements and the pointer 16-byte aligned (CUDA documents 32 bytes for the "
       "pointer); on a GPU a misaligned tile is an error or garbage. Pad the rows, or stage the tile in shared memory.");
}

// ------------------------------------------------------------------------------------------
// cp.async (__pipeline_memcpy_async, __pipeline_commit, __pipeline_wait_prior).  On a GPU the copy
// runs in the background: its shared-memory write lands at some moment between the issue and the
// wait for its batch.  Here everything about it is checked, and the source read, at the issue;
// the write happens at the wait (the latest moment), in the issuing thread, so reading the
// destination before waiting shows the poison or stale data.  With racecheck the write is
// recorded both at the issue and at the wait (the two ends of the window), as the thread's write.
// ------------------------------------------------------------------------------------------
static std::string ptr_str(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

/// The __shared__ variable (or dynamic shared memory) containing p: its start, size and name.
static bool shared_region_of(const void* p, const char** lo, size_t* n, std::string* name) {
  const char* a = static_cast<const char*>(p);
  if (g.dyn && a >= g.dyn && a < g.dyn + std::max<size_t>(g.dyn_bytes, 1)) {
    *lo = g.dyn, *n = g.dyn_bytes;
    *name = std::string("the dynamic shared memory (extern __shared__") +
            (g.dyn_info.name && *g.dyn_info.name ? std::string(" ") + g.dyn_info.name : std::string()) + ")";
    return true;
  }
  for (size_t i = 0; i < g.shared_regions.size(); i++) {
    const char* s = static_cast<const char*>(g.shared_regions[i].first);
    if (a >= s && a < s + g.shared_regions[i].second) {
      *lo = s, *n = g.shared_regions[i].second, *name = "__shared__ " + g.shared_names[i].first;
      return true;
    }
  }
  return false;
}

static std::string copy_call(size_t size, size_t zfill, int line) {
  return "__pipeline_memcpy_async(dst, src, " + std::to_string(size) + (zfill ? ", " + std::to_string(zfill) : "") +
         ") at cuda_src line " + std::to_string(line);
}

/// The source [p, p + n) of a copy must lie in one tensor: the checked pointer's, else a kernel
/// parameter's or a tracked tensor's.  A pointer the emulation cannot bound is not checked.
static void check_async_src(const char* p, size_t n, const char* lo, const char* hi, const PtrInfo* info,
                            const std::string& call) {
  const PtrInfo* who = info;
  if (!lo || !info) {  // a plain pointer: the parameter whose tensor contains it, else the nearest
    lo = hi = nullptr, who = nullptr;
    long long best = -1;
    for (const ParamRange& r : g.params) {
      long long d = p < r.lo ? r.lo - p : p >= r.hi ? p - r.hi + 1 : 0;
      if (d == 0) {
        lo = r.lo, hi = r.hi, who = r.info;
        break;
      }
      if (d <= r.hi - r.lo && (best < 0 || d < best)) best = d, lo = r.lo, hi = r.hi, who = r.info;
    }
    if (!who) {
      Bounds b;
      if (!find_tracked(p, &b)) return;  // unknown memory: not checked
      if (p >= b.lo && p + n <= b.hi) return;
      fail("out-of-bounds read by " + call + " " + where() + ": it reads " + std::to_string(n) + " bytes at " +
           ptr_str(p) + ", past the end of " + b.what + ". On a GPU this reads another allocation or faults, "
           "even if the data is never used: guard the copy, or pass zfill = size (it then reads nothing).");
    }
  }
  if (p >= lo && p + n <= hi) return;
  const long long off = p - who->base;
  const long long total = static_cast<long long>(hi - who->base);
  fail("out-of-bounds read by " + call + " " + where() + ": the source is byte " + std::to_string(off) +
       " of " + who->name + ", which points to " + who->what + " (" + std::to_string(total) +
       " bytes), and the copy reads bytes " + std::to_string(off) + ".." + std::to_string(off + (long long)n - 1) +
       ". On a GPU this reads another allocation or faults, even if the data is never used: guard the copy "
       "(e.g. if (i < n)), or pass zfill = size for the out-of-range part (it then reads nothing).");
}

void async_copy(void* dst, const void* src, size_t size, size_t zfill, int line, const char* lo, const char* hi,
                const PtrInfo* info) {
  Fiber* f = kernel_thread("__pipeline_memcpy_async", line);
  const std::string call = copy_call(size, zfill, line);
  if (size != 4 && size != 8 && size != 16)
    fail(call + " " + where() + ": the size must be 4, 8 or 16 bytes (cp.async copies one 4-, 8- or "
         "16-byte item per call; copy more with more calls).");
  if (zfill > size)
    fail(call + " " + where() + ": zfill (" + std::to_string(zfill) + ") is larger than the size (" +
         std::to_string(size) + ").");
  const size_t n = size - zfill;  // the bytes read from global memory
  const char* d = static_cast<const char*>(dst);
  const char* s = static_cast<const char*>(src);
  const char* slo;
  size_t sn;
  std::string sname;
  if (!shared_region_of(d, &slo, &sn, &sname))
    fail(call + " " + where() + ": dst (" + ptr_str(dst) + ") is not shared memory. cp.async copies from "
         "global memory into __shared__ memory: dst must point into a __shared__ array or the extern "
         "__shared__ buffer.");
  if (reinterpret_cast<uintptr_t>(d) % size)
    fail("misaligned address: " + call + " " + where() + ": dst is byte " + std::to_string(d - slo) + " of " +
         sname + ", not a multiple of " + std::to_string(size) + ". The destination and the source of a " +
         std::to_string(size) + "-byte cp.async must be " + std::to_string(size) + "-byte aligned (on a GPU: "
         "'misaligned address').");
  if (d + size > slo + sn)
    fail("out-of-bounds write by " + call + " " + where() + ": dst is byte " + std::to_string(d - slo) + " of " +
         sname + ", which has " + std::to_string(sn) + " bytes.");
  if (n > 0) {
    const char* xlo;
    size_t xn;
    std::string xname;
    if (shared_region_of(s, &xlo, &xn, &xname))
      fail(call + " " + where() + ": src points into " + xname + "; cp.async reads global memory (a kernel's "
           "pointer parameter), not shared memory.");
    if (reinterpret_cast<uintptr_t>(s) % size)
      fail("misaligned address: " + call + " " + where() + ": src (" + ptr_str(src) + ") is not " +
           std::to_string(size) + "-byte aligned. The destination and the source of a " + std::to_string(size) +
           "-byte cp.async must be " + std::to_string(size) + "-byte aligned (on a GPU: 'misaligned "
           "address'); e.g. a row of a matrix whose width is not a multiple of " + std::to_string(size / 4) +
           " floats starts unaligned.");
    check_async_src(s, n, lo, hi, info, call);
  }
  Fiber::AsyncCopy c{const_cast<char*>(d), slo == g.dyn ? static_cast<const void*>(g.dyn) : slo, f->batches, line,
                     static_cast<unsigned>(size), {}};
  if (n) std::memcpy(c.data, s, n);  // the rest stays zero: zfill
  if (g.race_on) race_shared(kWrite, c.region, d, size, line, nullptr, 0);  // the window opens
  if (g.cnt) {
    g.cnt->sstore++;
    if (n) g.cnt->gload++;
  }
  f->copies.push_back(c);
}

void async_commit(int line) {
  kernel_thread("__pipeline_commit", line)->batches++;
}

void async_wait_prior(size_t prior, int line) {
  Fiber* f = kernel_thread("__pipeline_wait_prior", line);
  if (prior >= f->batches) return;  // the newest `prior` batches may stay in flight: that is all of them
  const uint32_t done = f->batches - static_cast<uint32_t>(prior);  // batches 0 .. done-1 complete
  size_t k = 0;
  for (; k < f->copies.size() && f->copies[k].batch < done; k++) {
    const Fiber::AsyncCopy& c = f->copies[k];
    std::memcpy(c.dst, c.data, c.size);
    if (g.race_on) race_shared(kWrite, c.region, c.dst, c.size, c.line, nullptr, 0);  // ... and closes
  }
  f->copies.erase(f->copies.begin(), f->copies.begin() + static_cast<long>(k));
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

static bool alive(const Tracked& e) {
  auto s = e.storage.lock();
  return s && s->data() == e.storage_data;
}

void track_tensor(const at::TensorBase& t) {
  if (!t.defined() || !t.has_storage()) return;
  const char* lo = static_cast<const char*>(t.data_ptr());
  int64_t span = 0;  // offset of the last element, in elements
  for (int64_t d = 0; d < t.dim(); d++) span += (t.size(d) - 1) * t.stride(d);
  const char* hi = t.numel() == 0 ? lo : lo + (span + 1) * static_cast<int64_t>(t.element_size());
  std::string what = std::string("a ") + c10::toString(t.scalar_type()) + " tensor of " +
                     std::to_string(t.numel()) + " elements";
  if (g_tracked.size() > 256) {  // forget tensors that were freed or reallocated
    std::vector<Tracked> keep;
    for (auto& e : g_tracked)
      if (alive(e)) keep.push_back(e);
    g_tracked.swap(keep);
    if (g_tracked.size() > 256) g_tracked.erase(g_tracked.begin(), g_tracked.begin() + 128);
  }
  const c10::Storage& st = t.storage();
  g_tracked.push_back({lo, hi, st.getWeakStorageImpl(), st.data(), what});
}

bool find_tracked(const void* p, Bounds* out) {
  const char* c = static_cast<const char*>(p);
  const Tracked* edge = nullptr;
  for (size_t k = g_tracked.size(); k-- > 0;) {
    const Tracked& e = g_tracked[k];
    if (c < e.lo || c > e.hi || !alive(e)) continue;
    if (c < e.hi) {
      *out = {e.lo, e.hi, e.what};
      return true;
    }
    if (!edge) edge = &e;  // one past the end (an empty tensor): only if nothing better
  }
  if (edge) *out = {edge->lo, edge->hi, edge->what};
  return edge != nullptr;
}

std::vector<std::string> param_names(const char* params, size_t n) {
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
  if (params[0]) out.push_back(cur);
  for (size_t k = 0; k < out.size(); k++)
    if (out[k].empty()) out[k] = "argument " + std::to_string(k + 1);
  while (out.size() < n) out.push_back("argument " + std::to_string(out.size() + 1));
  return out;
}

// ------------------------------------------------------------------------------------------
// Launching.  A segfault (or integer division by zero, or a trap) inside a kernel jumps back to
// the launcher, which raises an error instead of letting it kill the Python process.
//
// Ctrl-C (SIGINT, also JupyterLab's "interrupt kernel") during a launch: the handler only sets a
// flag and g_poll; every loop of device code polls g_poll (tick), and the scheduler checks the flag
// between threads, so the launch stops at the next loop iteration or barrier with a
// KeyboardInterrupt naming the kernel and the threads still running.  A second Ctrl-C that comes
// more than half a second after an unanswered first one (code that loops without a loop
// statement) jumps out at once, like a segfault.
//
// A watchdog thread sets g_poll when the running thread has not left the CPU for kWatchMs: it
// then yields (tick_slow), so that the other threads of its block run, as they would on a GPU,
// and a spin-wait on a flag that a later thread sets ends.
// ------------------------------------------------------------------------------------------
static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_signal = 0;
static void* volatile g_fault_addr = nullptr;
static volatile sig_atomic_t g_sigint = 0;  // Ctrl-C during the launch, not yet answered
static struct timespec g_sigint_at{};
static pthread_t g_launch_thread;
int g_poll = 0;
static std::atomic<unsigned> g_switches{0};  // fiber switches so far (the watchdog's sign of progress)
constexpr int kWatchMs = 10;

static void on_fault(int sig, siginfo_t* si, void*) {
  g_signal = sig;
  g_fault_addr = si ? si->si_addr : nullptr;
  siglongjmp(g_jmp, 1);
}

static void on_sigint(int sig, siginfo_t*, void*) {
  if (!pthread_equal(pthread_self(), g_launch_thread)) {  // delivered to another thread: pass it on
    pthread_kill(g_launch_thread, sig);
    return;
  }
  struct timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (g_sigint && g.in_kernel &&
      (now.tv_sec - g_sigint_at.tv_sec) * 1000000000L + (now.tv_nsec - g_sigint_at.tv_nsec) > 500000000L) {
    g_signal = sig;  // the first one was not answered: the code loops without polling
    g_fault_addr = nullptr;
    siglongjmp(g_jmp, 1);
  }
  if (!g_sigint) g_sigint_at = now;
  g_sigint = 1;
  __atomic_store_n(&g_poll, 1, __ATOMIC_RELAXED);
}

// The watchdog: one thread per module, asleep unless a launch runs (pthread primitives, so that a
// forked child can start afresh).
static pthread_mutex_t g_wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wd_cv = PTHREAD_COND_INITIALIZER;
static bool g_wd_active = false, g_wd_started = false;

static void* watchdog(void*) {
  pthread_mutex_lock(&g_wd_mu);
  unsigned last = g_switches.load(std::memory_order_relaxed);
  for (;;) {
    if (!g_wd_active) {
      pthread_cond_wait(&g_wd_cv, &g_wd_mu);
      last = g_switches.load(std::memory_order_relaxed);
      continue;
    }
    struct timespec t{};
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += kWatchMs * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&g_wd_cv, &g_wd_mu, &t);
    const unsigned now = g_switches.load(std::memory_order_relaxed);
    if (g_wd_active && now == last) __atomic_store_n(&g_poll, 1, __ATOMIC_RELAXED);
    last = now;
  }
  return nullptr;
}

static void watchdog_after_fork() {
  g_wd_mu = PTHREAD_MUTEX_INITIALIZER;
  g_wd_cv = PTHREAD_COND_INITIALIZER;
  g_wd_started = g_wd_active = false;
}

static void watchdog_set(bool active) {
  if (active && !g_wd_started) {
    static bool registered = false;
    if (!registered) registered = pthread_atfork(nullptr, nullptr, watchdog_after_fork) == 0;
    sigset_t all, old;  // the watchdog never handles signals
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    g_wd_started = pthread_create(&t, &attr, watchdog, nullptr) == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  pthread_mutex_lock(&g_wd_mu);
  g_wd_active = active;
  pthread_cond_signal(&g_wd_cv);
  pthread_mutex_unlock(&g_wd_mu);
}

/// "thread (0,0,0) runs the loop at cuda_src line 5; threads (1,0,0)..(31,0,0) wait at __syncthreads() at
/// cuda_src line 9": what the live threads of the block do (consecutive threads doing the same, together).
static std::string threads_doing(int cur_line) {
  std::vector<std::pair<std::string, std::pair<unsigned, unsigned>>> groups;  // (what, (first, last))
  unsigned done = 0;
  for (unsigned t = 0; t < g.nthreads && t < g.fibers.size(); t++) {
    const Fiber& f = g.fibers[t];
    std::string what;
    auto loop = [](int line) {
      return line > 0 ? "runs the loop at cuda_src line " + std::to_string(line) : std::string("runs");
    };
    if (&f == g.cur) what = loop(cur_line > 0 ? cur_line : f.loop_line);
    else if (f.state == kDone || f.state == kFailed) { done++; continue; }
    else if (f.state == kYield) what = loop(f.loop_line);
    else if (f.state == kWaiting) what = "wait at __syncthreads() at cuda_src line " + std::to_string(f.line);
    else if (f.state == kWarpWait) what = "wait at " + call_str(f.wop, f.wmask, f.line);
    else if (f.state == kNew) what = "have not started";
    else what = "are about to go on";
    if (!groups.empty() && groups.back().first == what && groups.back().second.second + 1 == t)
      groups.back().second.second = t;
    else
      groups.push_back({what, {t, t}});
  }
  std::string out;
  for (size_t k = 0; k < groups.size() && k < 6; k++) {
    const auto& [what, r] = groups[k];
    std::string w = what;
    if (r.first == r.second) {  // one thread: "waits", "has not started", "is about to"
      if (w.rfind("wait ", 0) == 0) w = "waits " + w.substr(5);
      else if (w.rfind("have ", 0) == 0) w = "has " + w.substr(5);
      else if (w.rfind("are ", 0) == 0) w = "is " + w.substr(4);
      out += (k ? "; thread " : "thread ") + tid_of(r.first) + " " + w;
    } else {
      if (w.rfind("runs ", 0) == 0) w = "run " + w.substr(5);
      out += (k ? "; threads " : "threads ") + tid_of(r.first) + ".." + tid_of(r.second) + " " + w;
    }
  }
  if (groups.size() > 6) out += "; ...";
  if (done) out += " (" + std::to_string(done) + " of the block's " + std::to_string(g.nthreads) + " threads have finished)";
  return out;
}

static std::string interrupt_message(int cur_line) {
  return std::string("kernel ") + g.kernel + " (launched at cuda_src line " + std::to_string(g.launch_line) +
         ") was interrupted in block " + fmt3(g.block_idx) + " of gridDim " + fmt3(g.grid_dim) +
         "; its unfinished threads: " + threads_doing(cur_line) +
         ". (The CPU emulation runs the blocks one after another, so a thread that waits for something a "
         "later block writes waits forever; on a GPU such a wait can hang too.)";
}

[[noreturn]] static void interrupted(int cur_line) {
  g_sigint = 0;
  __atomic_store_n(&g_poll, 0, __ATOMIC_RELAXED);
  throw Interrupt(interrupt_message(cur_line));
}

void tick_slow(int line) {
  if (!g.in_kernel || !g.cur) {  // host code (a __host__ __device__ function): nothing to do
    if (!g_sigint) __atomic_store_n(&g_poll, 0, __ATOMIC_RELAXED);
    return;
  }
  Fiber* f = g.cur;
  f->loop_line = line;
  if (g_sigint) interrupted(line);
  __atomic_store_n(&g_poll, 0, __ATOMIC_RELAXED);
  f->state = kYield;  // the watchdog: let the other threads of the block run
  ctx_swap(*f, g.sched);
}

struct SignalGuard {
  struct sigaction old_segv{}, old_bus{}, old_fpe{}, old_ill{}, old_int{};
  stack_t old_stack{};
  bool active = false, int_active = false;
  void install() {
    static char* alt = static_cast<char*>(std::malloc(1 << 16));
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = 1 << 16;
    sigaltstack(&ss, &old_stack);  // a stack overflow needs another stack to run the handler
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    sigaction(SIGFPE, &sa, &old_fpe);
    sigaction(SIGILL, &sa, &old_ill);  // gcc's trap for undefined behaviour (e.g. x / 0)
    g_launch_thread = pthread_self();
    g_sigint = 0;
    __atomic_store_n(&g_poll, 0, __ATOMIC_RELAXED);
    struct sigaction cur{};
    sigaction(SIGINT, nullptr, &cur);
    int_active = cur.sa_handler != SIG_IGN;  // Ctrl-C ignored by the process stays ignored
    if (int_active) {
      struct sigaction si{};
      si.sa_sigaction = on_sigint;
      si.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&si.sa_mask);
      sigaction(SIGINT, &si, &old_int);
    }
    watchdog_set(true);
    active = true;
  }
  void restore() {
    if (!active) return;
    watchdog_set(false);
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    sigaction(SIGFPE, &old_fpe, nullptr);
    sigaction(SIGILL, &old_ill, nullptr);
    if (int_active) sigaction(SIGINT, &old_int, nullptr);
    sigaltstack(&old_stack, nullptr);
    active = false;
    if (int_active && g_sigint) {  // Ctrl-C came as the launch ended: Python raises KeyboardInterrupt
      g_sigint = 0;
      PyErr_SetInterruptEx(SIGINT);
    }
    __atomic_store_n(&g_poll, 0, __ATOMIC_RELAXED);
  }
  ~SignalGuard() { restore(); }
};

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
      if (f.state == kWarpWait || (f.state == kWaiting && !g_release)) {
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
  if (!bad.empty())
    fail("invalid configuration argument for kernel " + std::string(g.kernel) +
         " launched at cuda_src line " + std::to_string(g.launch_line) + ": " + bad +
         ". (On a GPU, C10_CUDA_KERNEL_LAUNCH_CHECK() reports 'invalid configuration "
         "argument'.)");
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

// ------------------------------------------------------------------------------------------
// Python binding helpers.
// ------------------------------------------------------------------------------------------
static PyObject* g_tensor_type = nullptr;  // torch.Tensor
static PyObject* g_error_type = nullptr;   // cuda_emu.CudaEmulationError (set by the emulation loader)

void arg_type_error(const char* fn, int i, const char* want, PyObject* o) {
  PyErr_Format(PyExc_TypeError, "%s(): argument %d must be %s, not %s", fn, i + 1, want,
               Py_TYPE(o)->tp_name);
  throw PyErrorAlreadySet();
}

void from_py<at::Tensor>::load(PyObject* o, const char* fn, int i) {
  if (!g_tensor_type || PyObject_IsInstance(o, g_tensor_type) != 1) arg_type_error(fn, i, "a torch.Tensor", o);
  // Tensor._cdata is the address of the tensor's TensorImpl; share it (one more reference).
  PyObject* cd = PyObject_GetAttrString(o, "_cdata");
  if (!cd) throw PyErrorAlreadySet();
  void* impl = PyLong_AsVoidPtr(cd);
  Py_DECREF(cd);
  v = at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(
      static_cast<c10::TensorImpl*>(impl)));
}

long long int_arg(PyObject* o, const char* fn, int i) {
  if (PyFloat_Check(o) || PyBool_Check(o)) arg_type_error(fn, i, "an int", o);
  PyObject* idx = PyNumber_Index(o);
  if (!idx) {
    PyErr_Clear();
    arg_type_error(fn, i, "an int", o);
  }
  long long x = PyLong_AsLongLong(idx);
  Py_DECREF(idx);
  if (x == -1 && PyErr_Occurred()) throw PyErrorAlreadySet();
  return x;
}

double float_arg(PyObject* o, const char* fn, int i) {
  if (PyBool_Check(o)) arg_type_error(fn, i, "a float", o);
  double x = PyFloat_AsDouble(o);
  if (x == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    arg_type_error(fn, i, "a float", o);
  }
  return x;
}

bool bool_arg(PyObject* o, const char* fn, int i) {
  const char* t = Py_TYPE(o)->tp_name;
  if (!PyBool_Check(o) && std::strcmp(t, "numpy.bool") != 0 && std::strcmp(t, "numpy.bool_") != 0)
    arg_type_error(fn, i, "a bool", o);
  return PyObject_IsTrue(o) == 1;
}

std::string str_arg(PyObject* o, const char* fn, int i) {
  if (!PyUnicode_Check(o)) arg_type_error(fn, i, "a str", o);
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(o, &n);
  if (!s) throw PyErrorAlreadySet();
  return std::string(s, n);
}

PyObject* seq_arg(PyObject* o, const char* fn, int i) {
  if (!PyList_Check(o) && !PyTuple_Check(o)) arg_type_error(fn, i, "a list or tuple", o);
  PyObject* seq = PySequence_Fast(o, "expected a sequence");
  if (!seq) throw PyErrorAlreadySet();
  return seq;
}

void set_py_error(const char* fn) {
  std::fflush(stdout);
  try {
    throw;
  } catch (const PyErrorAlreadySet&) {
  } catch (const Interrupt& e) {
    PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
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

PyObject* set_error_type(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "expected one exception class");
    return nullptr;
  }
  Py_XDECREF(g_error_type);
  Py_INCREF(args[0]);
  g_error_type = args[0];
  Py_RETURN_NONE;
}

PyObject* make_module(PyModuleDef* def) {
  if (!g_tensor_type) {
    PyObject* torch_mod = PyImport_ImportModule("torch");
    if (!torch_mod) return nullptr;
    g_tensor_type = PyObject_GetAttrString(torch_mod, "Tensor");
    Py_DECREF(torch_mod);
    if (!g_tensor_type) return nullptr;
  }
  return PyModule_Create(def);
}

// ------------------------------------------------------------------------------------------
// torch_api.h's "lite" factories: torch::empty(...) etc. forward to the operators' dispatcher
// entry points (at::_ops); its operators as functions (torch::cumsum...) call the Tensor methods.
// Only declared in tier 1: tiers 2 and 3 have ATen's own.
// ------------------------------------------------------------------------------------------
#if CUDA_EMU_TORCH == 1
namespace lite {
static c10::SymIntArrayRef sym(IntArrayRef size) { return c10::fromIntArrayRefSlow(size); }
static std::optional<at::ScalarType> dtype(const TensorOptions& o) {
  return c10::optTypeMetaToScalarType(o.dtype_opt());
}
static MF memory_format(const TensorOptions& o, MF mf) {
  return c10::impl::check_tensor_options_and_extract_memory_format(o, mf);
}

Tensor empty(IntArrayRef size, TensorOptions o, MF mf) {
  return at::_ops::empty_memory_format::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(),
                                             o.pinned_memory_opt(), memory_format(o, mf));
}
Tensor empty_like(const Tensor& t, TensorOptions o, MF mf) {
  return at::_ops::empty_like::call(t, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                    memory_format(o, mf));
}
Tensor zeros(IntArrayRef size, TensorOptions o) {
  return at::_ops::zeros::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor zeros_like(const Tensor& t, TensorOptions o, MF mf) {
  return at::_ops::zeros_like::call(t, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                    memory_format(o, mf));
}
Tensor ones(IntArrayRef size, TensorOptions o) {
  return at::_ops::ones::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor ones_like(const Tensor& t, TensorOptions o, MF mf) {
  return at::_ops::ones_like::call(t, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                   memory_format(o, mf));
}
Tensor full(IntArrayRef size, const Scalar& v, TensorOptions o) {
  return at::_ops::full::call(sym(size), v, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor full_like(const Tensor& t, const Scalar& v, TensorOptions o, MF mf) {
  return at::_ops::full_like::call(t, v, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt(),
                                   memory_format(o, mf));
}
Tensor arange(const Scalar& end, TensorOptions o) {
  return at::_ops::arange::call(end, dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions o) {
  return at::_ops::arange_start::call(start, end, dtype(o), o.layout_opt(), o.device_opt(),
                                      o.pinned_memory_opt());
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o) {
  return at::_ops::arange_start_step::call(start, end, step, dtype(o), o.layout_opt(), o.device_opt(),
                                           o.pinned_memory_opt());
}
Tensor rand(IntArrayRef size, TensorOptions o) {
  return at::_ops::rand::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
Tensor randn(IntArrayRef size, TensorOptions o) {
  return at::_ops::randn::call(sym(size), dtype(o), o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}

// The operators as functions: each is its Tensor method.
Tensor sum(const Tensor& self, OptDtype dtype) { return self.sum(dtype); }
Tensor sum(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype) {
  return self.sum(dim, keepdim, dtype);
}
Tensor mean(const Tensor& self, OptDtype dtype) { return self.mean(dtype); }
Tensor mean(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype) {
  return self.mean(dim, keepdim, dtype);
}
Tensor max(const Tensor& self) { return self.max(); }
std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim) { return self.max(dim, keepdim); }
Tensor max(const Tensor& self, const Tensor& other) { return self.max(other); }
Tensor min(const Tensor& self) { return self.min(); }
std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim) { return self.min(dim, keepdim); }
Tensor min(const Tensor& self, const Tensor& other) { return self.min(other); }
Tensor amax(const Tensor& self, IntArrayRef dim, bool keepdim) { return self.amax(dim, keepdim); }
Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) { return self.argmax(dim, keepdim); }
Tensor cumsum(const Tensor& self, int64_t dim, OptDtype dtype) { return self.cumsum(dim, dtype); }
Tensor cumprod(const Tensor& self, int64_t dim, OptDtype dtype) { return self.cumprod(dim, dtype); }
Tensor bincount(const Tensor& self, const std::optional<Tensor>& weights, int64_t minlength) {
  return self.bincount(weights, minlength);
}
Tensor matmul(const Tensor& self, const Tensor& other) { return self.matmul(other); }
Tensor mm(const Tensor& self, const Tensor& mat2) { return self.mm(mat2); }
Tensor bmm(const Tensor& self, const Tensor& mat2) { return self.bmm(mat2); }
Tensor softmax(const Tensor& self, int64_t dim, OptDtype dtype) { return self.softmax(dim, dtype); }
Tensor log_softmax(const Tensor& self, int64_t dim, OptDtype dtype) { return self.log_softmax(dim, dtype); }
Tensor exp(const Tensor& self) { return self.exp(); }
Tensor sqrt(const Tensor& self) { return self.sqrt(); }
Tensor abs(const Tensor& self) { return self.abs(); }
Tensor relu(const Tensor& self) { return self.relu(); }
Tensor sigmoid(const Tensor& self) { return self.sigmoid(); }
Tensor tanh(const Tensor& self) { return self.tanh(); }
}  // namespace lite
#endif
}  // namespace cuda_emu

#if CUDA_EMU_TORCH == 1
namespace at {
// Same meaning as ATen/TensorOperators.h: `scalar op tensor` is computed on the tensor.
#define CUDA_EMU_TENSOR_OP(op, body, reverse_scalar_body)                      \
  Tensor operator op(const Tensor& x, const Tensor& y) { return body; }        \
  Tensor operator op(const Tensor& x, const Scalar& y) { return body; }        \
  Tensor operator op(const Scalar& x, const Tensor& y) { return reverse_scalar_body; }
CUDA_EMU_TENSOR_OP(+, x.add(y), y.add(x))
CUDA_EMU_TENSOR_OP(*, x.mul(y), y.mul(x))
CUDA_EMU_TENSOR_OP(-, x.sub(y), cuda_emu::lite::empty_like(y).fill_(x).sub_(y))
CUDA_EMU_TENSOR_OP(/, x.div(y), cuda_emu::lite::empty_like(y).fill_(x).div_(y))
CUDA_EMU_TENSOR_OP(%, x.remainder(y), cuda_emu::lite::empty_like(y).fill_(x).remainder_(y))
CUDA_EMU_TENSOR_OP(&, x.bitwise_and(y), y.bitwise_and(x))
CUDA_EMU_TENSOR_OP(|, x.bitwise_or(y), y.bitwise_or(x))
CUDA_EMU_TENSOR_OP(^, x.bitwise_xor(y), y.bitwise_xor(x))
CUDA_EMU_TENSOR_OP(<, x.lt(y), y.gt(x))
CUDA_EMU_TENSOR_OP(>, x.gt(y), y.lt(x))
CUDA_EMU_TENSOR_OP(<=, x.le(y), y.ge(x))
CUDA_EMU_TENSOR_OP(>=, x.ge(y), y.le(x))
CUDA_EMU_TENSOR_OP(==, x.eq(y), y.eq(x))
CUDA_EMU_TENSOR_OP(!=, x.ne(y), y.ne(x))
#undef CUDA_EMU_TENSOR_OP
}  // namespace at
#endif
