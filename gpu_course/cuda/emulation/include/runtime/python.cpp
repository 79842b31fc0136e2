// Python binding helpers: tensors and errors across the CPython API.
// A part of runtime.cpp's one translation unit, included from there in order (it uses the static names
// of the parts before it); not compiled alone.

namespace cuda_emu {
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
}  // namespace cuda_emu
