// Threads of a block: where a message is, fibers and their stacks, __syncthreads().
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

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
}  // namespace cuda_emu
