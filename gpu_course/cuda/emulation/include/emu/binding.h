// The Python binding without pybind11: argument conversion, CUDA_EMU_FN, the module macros.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

// ------------------------------------------------------------------------------------------
// Python binding without pybind11 (its templates cost ~10 s per build): each function in
// `funcs` becomes a METH_FASTCALL builtin that converts its arguments by their C++ types.
// ------------------------------------------------------------------------------------------
__attribute__((visibility("default"))) PyObject* THPVariable_Wrap(const at::TensorBase& var);

namespace cuda_emu {
template <class T>
inline constexpr bool dependent_false = false;

/// Raises TypeError "f(): argument i must be <want>, not <type>".
[[noreturn]] void arg_type_error(const char* fn, int i, const char* want, PyObject* o);
/// Sets the Python error for the C++ exception being handled.
void set_py_error(const char* fn);
PyObject* make_module(PyModuleDef* def);
PyObject* set_error_type(PyObject*, PyObject* const* args, Py_ssize_t nargs);
long long int_arg(PyObject* o, const char* fn, int i);
double float_arg(PyObject* o, const char* fn, int i);
bool bool_arg(PyObject* o, const char* fn, int i);
std::string str_arg(PyObject* o, const char* fn, int i);
/// The items of a list/tuple argument (new reference to a fast sequence).
PyObject* seq_arg(PyObject* o, const char* fn, int i);

/// Converts a Python argument to C++ type T (primary template: unsupported types).
template <class T, class = void>
struct from_py {
  static_assert(dependent_false<T>,
                "this parameter type of a function in `funcs` is not supported by the CPU "
                "emulation's Python binding (use torch::Tensor, int, int64_t, float, double, bool, "
                "std::string, std::vector<...> or std::optional<...>)");
};

template <>
struct from_py<at::Tensor> {
  at::Tensor v;
  void load(PyObject* o, const char* fn, int i);  // runtime.cpp
  at::Tensor& get() { return v; }
};

template <class T>
struct from_py<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  T v{};
  void load(PyObject* o, const char* fn, int i) { v = static_cast<T>(int_arg(o, fn, i)); }
  T& get() { return v; }
};

template <class T>
struct from_py<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  T v{};
  void load(PyObject* o, const char* fn, int i) { v = static_cast<T>(float_arg(o, fn, i)); }
  T& get() { return v; }
};

template <>
struct from_py<bool> {
  bool v = false;
  void load(PyObject* o, const char* fn, int i) { v = bool_arg(o, fn, i); }
  bool& get() { return v; }
};

template <>
struct from_py<std::string> {
  std::string v;
  void load(PyObject* o, const char* fn, int i) { v = str_arg(o, fn, i); }
  std::string& get() { return v; }
};

template <class T>
struct from_py<std::vector<T>> {
  std::vector<T> v;
  void load(PyObject* o, const char* fn, int i) {
    PyObject* seq = seq_arg(o, fn, i);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    v.clear();
    try {
      for (Py_ssize_t k = 0; k < n; k++) {
        from_py<T> c;
        c.load(PySequence_Fast_GET_ITEM(seq, k), fn, i);
        v.push_back(std::move(c.get()));
      }
    } catch (...) {
      Py_DECREF(seq);
      throw;
    }
    Py_DECREF(seq);
  }
  std::vector<T>& get() { return v; }
};

template <>
struct from_py<c10::IntArrayRef> {
  from_py<std::vector<int64_t>> inner;
  c10::IntArrayRef v;
  void load(PyObject* o, const char* fn, int i) {
    inner.load(o, fn, i);
    v = c10::IntArrayRef(inner.get());
  }
  c10::IntArrayRef& get() { return v; }
};

template <class T>
struct from_py<std::optional<T>> {
  std::optional<T> v;
  void load(PyObject* o, const char* fn, int i) {
    if (o == Py_None) {
      v.reset();
      return;
    }
    from_py<T> c;
    c.load(o, fn, i);
    v = std::move(c.get());
  }
  std::optional<T>& get() { return v; }
};

/// Converts a C++ result to a new Python reference (nullptr with an exception set on failure).
template <class T>
inline PyObject* to_py(T&& r);

template <class T>
inline PyObject* to_py_compound(const std::vector<T>& r) {
  PyObject* l = PyList_New(static_cast<Py_ssize_t>(r.size()));
  if (!l) return nullptr;
  for (size_t k = 0; k < r.size(); k++) {
    PyObject* item = to_py(r[k]);
    if (!item) {
      Py_DECREF(l);
      return nullptr;
    }
    PyList_SET_ITEM(l, static_cast<Py_ssize_t>(k), item);
  }
  return l;
}
template <class T>
inline PyObject* to_py_compound(const std::optional<T>& r) {
  if (!r) Py_RETURN_NONE;
  return to_py(*r);
}
template <class Tup, size_t... I>
inline PyObject* tuple_to_py(const Tup& r, std::index_sequence<I...>) {
  PyObject* items[] = {to_py(std::get<I>(r))..., nullptr};
  bool ok = true;
  for (size_t k = 0; k < sizeof...(I); k++) ok = ok && items[k] != nullptr;
  PyObject* t = ok ? PyTuple_New(sizeof...(I)) : nullptr;
  for (size_t k = 0; k < sizeof...(I); k++) {
    if (t) PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(k), items[k]);
    else Py_XDECREF(items[k]);
  }
  return t;
}
template <class... T>
inline PyObject* to_py_compound(const std::tuple<T...>& r) {
  return tuple_to_py(r, std::index_sequence_for<T...>{});
}
template <class A, class B>
inline PyObject* to_py_compound(const std::pair<A, B>& r) {
  return to_py_compound(std::tuple<A, B>(r.first, r.second));
}
template <class T>
inline PyObject* to_py_compound(const T&) {
  static_assert(dependent_false<T>,
                "this return type of a function in `funcs` is not supported by the CPU "
                "emulation's Python binding (use torch::Tensor, a number, bool, std::string, void, "
                "std::vector, std::tuple or std::optional)");
  return nullptr;
}

template <class T>
inline PyObject* to_py(T&& r) {
  using D = std::decay_t<T>;
  if constexpr (std::is_base_of_v<at::TensorBase, D>) {
    return THPVariable_Wrap(r);
  } else if constexpr (std::is_same_v<D, bool>) {
    return PyBool_FromLong(r);
  } else if constexpr (std::is_integral_v<D> && std::is_signed_v<D>) {
    return PyLong_FromLongLong(r);
  } else if constexpr (std::is_integral_v<D>) {
    return PyLong_FromUnsignedLongLong(r);
  } else if constexpr (std::is_floating_point_v<D>) {
    return PyFloat_FromDouble(r);
  } else if constexpr (std::is_same_v<D, std::string>) {
    return PyUnicode_FromStringAndSize(r.data(), static_cast<Py_ssize_t>(r.size()));
  } else if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
    return PyUnicode_FromString(r);
  } else {
    return to_py_compound(std::forward<T>(r));
  }
}

template <auto F, class Sig>
struct pyfn_impl;

template <auto F, class R, class... A>
struct pyfn_impl<F, R (*)(A...)> {
  template <size_t... I>
  static PyObject* call_with(const char* fn, PyObject* const* args, std::index_sequence<I...>) {
    std::tuple<from_py<std::remove_cv_t<std::remove_reference_t<A>>>...> cs;
    (std::get<I>(cs).load(args[I], fn, static_cast<int>(I)), ...);
    if constexpr (std::is_void_v<R>) {
      F(std::get<I>(cs).get()...);
      std::fflush(stdout);
      Py_RETURN_NONE;
    } else {
      R r = F(std::get<I>(cs).get()...);
      std::fflush(stdout);
      return to_py(std::move(r));
    }
  }
  static PyObject* call(const char* fn, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != static_cast<Py_ssize_t>(sizeof...(A))) {
      PyErr_Format(PyExc_TypeError, "%s() takes %d positional argument(s) but %d were given", fn,
                   static_cast<int>(sizeof...(A)), static_cast<int>(nargs));
      return nullptr;
    }
    try {
      return call_with(fn, args, std::index_sequence_for<A...>{});
    } catch (...) {
      set_py_error(fn);
      return nullptr;
    }
  }
};

template <auto F>
struct pyfn : pyfn_impl<F, decltype(F)> {};
}  // namespace cuda_emu

#define CUDA_EMU_FN(NAME, ...)                                                      \
  {NAME,                                                                            \
   (PyCFunction)(void (*)(void))(+[](PyObject*, PyObject* const* a, Py_ssize_t n) { \
     return ::cuda_emu::pyfn<(__VA_ARGS__)>::call(NAME, a, n);                       \
   }),                                                                              \
   METH_FASTCALL, NAME}
#define CUDA_EMU_BUILTINS                                                                      \
  {"_cuda_emu_set_error_type", (PyCFunction)(void (*)(void))::cuda_emu::set_error_type,        \
   METH_FASTCALL, "internal: the exception class for emulation errors"},                       \
  {"_cuda_emu_count", (PyCFunction)(void (*)(void))::cuda_emu::py_count, METH_FASTCALL,          \
   "count what every thread does in the launches that follow (True) or stop (False); clears"},  \
  {"_cuda_emu_counts", (PyCFunction)(void (*)(void))::cuda_emu::py_counts, METH_FASTCALL,        \
   "(field names, [(kernel, grid, block, bytes of uint32 counts per thread), ...]) since _cuda_emu_count(True)"}
/// The launch counters and log, under the names that gpu_course/cuda/counters.py gives them (COUNTS, RESET,
/// LOG): the binding (source/binding.py) passes the names in, so that both back ends spell them once.
#define CUDA_EMU_LAUNCH_METHODS(COUNTS, RESET, LOG)                                              \
  {COUNTS, (PyCFunction)(void (*)(void))::cuda_emu::py_launches, METH_FASTCALL,                  \
   "{kernel name: launches} since the module was loaded (or reset); a templated kernel is "     \
   "counted under its name and under its instantiation, e.g. 'matmul_k' and 'matmul_k<16>'"}, \
  {RESET, (PyCFunction)(void (*)(void))::cuda_emu::py_reset_launches,                           \
   METH_FASTCALL, "set every launch count of this module to zero"},                            \
  {LOG, (PyCFunction)(void (*)(void))::cuda_emu::py_launch_log, METH_FASTCALL,                  \
   "(launches so far, [(seq, kernel, grid, block, shared bytes, ((kind, size, bits), ...)), ...]) " \
   "of the latest launches whose seq >= the argument"}
#define CUDA_EMU_MODULE(NAME, METHODS)                                                     \
  static PyModuleDef cuda_emu_module_def = {PyModuleDef_HEAD_INIT, #NAME,                  \
                                            "CUDA C built for the CPU by cuda_emu", -1,    \
                                            METHODS, nullptr, nullptr, nullptr, nullptr};  \
  extern "C" __attribute__((visibility("default"))) PyObject* PyInit_##NAME() {            \
    return ::cuda_emu::make_module(&cuda_emu_module_def);                                  \
  }
