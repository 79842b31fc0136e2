// Shared memory (registration, poison) and the messages of bad accesses (bounds, alignment, wmma).
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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
}  // namespace cuda_emu
