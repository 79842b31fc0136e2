// Warps: warp-level calls as rendezvous of the lanes of a mask, wmma's collective calls.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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
  if (o.state == kMaskWait) return "waits at __activemask() at cuda_src line " + std::to_string(o.line);
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
      // a lane outside the mask has no value to give (undefined on a GPU): an error naming both lanes
      each([&](unsigned l) {
        if (m >> W.src[l] & 1) return;
        g.in_kernel = false;
        const unsigned w = static_cast<unsigned>(&W - g_warps.data());
        fail(call_str(r.op, m, r.line) + ": lane " + std::to_string(l) + " (thread " + tid_of(32 * w + l) +
             ") reads lane " + std::to_string(W.src[l]) + ", which is not in the mask, " + warp_where(w) +
             ". A shuffle may only read lanes named in its mask (on a GPU the value is undefined): shuffle with "
             "the mask of the lanes that take part and keep the source lane among them, or use "
             "__reduce_add_sync(mask, v) to sum over a partial mask.");
      });
      each([&](unsigned l) { W.res[l] = W.val[W.src[l]]; });
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

unsigned active_mask(int line) {
  Fiber* f = kernel_thread("__activemask()", line);
  f->state = kMaskWait;
  f->line = line;
  ctx_swap(*f, g.sched);
  return g_warps[g.tid / 32].res[g.tid % 32] & 0xffffffffu;
}

/// After a pass of the scheduler: in each warp whose lanes all wait (none can run before another lane moves),
/// the lanes waiting at one __activemask() get the mask of those lanes and go on: the lanes that execute that
/// statement together, as a GPU's converged branch. True if any went on.
static bool resolve_active_masks() {
  bool any = false;
  for (unsigned w = 0; w < g_warps.size(); w++) {
    const unsigned n = std::min(32u, g.nthreads - 32 * w);
    bool all_wait = true, some = false;
    for (unsigned l = 0; l < n; l++) {
      const int st = g.fibers[32 * w + l].state;
      some = some || st == kMaskWait;
      all_wait = all_wait && (st == kDone || st == kWarpWait || st == kMaskWait || st == kWaiting);
    }
    if (!some || !all_wait) continue;
    for (unsigned l = 0; l < n; l++) {
      Fiber& f = g.fibers[32 * w + l];
      if (f.state != kMaskWait) continue;
      unsigned m = 0;
      for (unsigned k = 0; k < n; k++)
        if (g.fibers[32 * w + k].state == kMaskWait && g.fibers[32 * w + k].line == f.line) m |= 1u << k;
      g_warps[w].res[l] = m;
    }
    for (unsigned l = 0; l < n; l++)
      if (g.fibers[32 * w + l].state == kMaskWait) g.fibers[32 * w + l].state = kReady;
    any = true;
  }
  return any;
}
}  // namespace cuda_emu
