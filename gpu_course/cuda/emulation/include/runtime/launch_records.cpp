// Launch counts, the launch log and counted launches (read from Python), the race mode.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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

#if defined(__clang__)
std::string clang_kernel_spelling(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string t = d ? d : mangled;
  std::free(d);
  // "cuda_emu::KernelTag<&(void ns::k<16>(float*))>" or "cuda_emu::KernelTag<&ns::k>"
  size_t a = t.find('<');
  std::string f = a == std::string::npos ? t : t.substr(a + 1, t.size() - a - 2);
  if (f.rfind("&(", 0) == 0) f = f.substr(2, f.size() - 3);   // "void ns::k<16>(float*)"
  else if (!f.empty() && f[0] == '&') f = f.substr(1);
  if (f.rfind("void ", 0) == 0) f = f.substr(5);
  int depth = 0;  // cut the parameter list: the first '(' outside <...>
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '<') ++depth;
    else if (f[i] == '>') --depth;
    else if (f[i] == '(' && depth == 0) { f = f.substr(0, i); break; }
  }
  return "const char* cuda_emu::kname() [with auto F = " + f + "]";
}
#endif

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
}  // namespace cuda_emu
