// Faults, Ctrl-C and the watchdog during a launch; what the block's threads were doing.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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
    else if (f.state == kMaskWait) what = "wait at __activemask() at cuda_src line " + std::to_string(f.line);
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
}  // namespace cuda_emu
