// cp.async: __pipeline_memcpy_async, __pipeline_commit, __pipeline_wait_prior.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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
}  // namespace cuda_emu
