// The race check: accesses to __shared__ words between barriers, += on global words.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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
}  // namespace cuda_emu
