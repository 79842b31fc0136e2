// Host side: which tensor each data_ptr() came from, to bound the kernel's pointers.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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
}  // namespace cuda_emu
