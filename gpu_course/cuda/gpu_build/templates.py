"""The C++ that the split build generates around the learner's code: what each unit includes first
(:data:`DEVICE_PRELUDE`, :data:`HOST_TORCH`), the launch helper and host prelude of the host unit,
the launch counters and launch log of the device unit, and the binding and init units' parts.
(:func:`.units.assemble` puts them together.)"""
from __future__ import annotations

import re

# What the device unit includes before the learner's code: the CUDA runtime, and the C and C++ headers
# that torch/extension.h brings into one load_inline unit and that device code uses (assert, printf,
# INT_MAX, FLT_MAX, uint8_t, memcpy, std::numeric_limits, std::min, std::swap ...). They cost nvcc
# ~0.1 s; the heavy ones torch brings too (<vector>, <string>, <iostream>: 2.4 s more on every kernel
# edit) come from the learner's own #include, or else the source builds as one unit (attribution.py).
DEVICE_PRELUDE = "".join(f"#include <{h}>\n" for h in (
    "cuda_runtime.h", "cassert", "cstdio", "cstdlib", "cstdint", "cstddef", "cstring", "cfloat", "climits",
    "cmath", "limits", "type_traits", "utility", "algorithm", "array", "tuple"))
# The half and bfloat16 types: nvcc sees them in one load_inline unit (torch's Half.h and BFloat16.h include
# these under nvcc), kernels and their host wrappers name them (reinterpret_cast<__half*>(...)); both split
# units include them where the source names such a type or function (they cost nvcc ~0.6 s).
HALF_HEADERS = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"


def names_half(names) -> bool:
    """Does a source with these identifiers need :data:`HALF_HEADERS` (``__half``, ``half2``,
    ``__float2half``, ``__nv_bfloat16`` ...)?

    >>> names_half({"__half", "x"}), names_half({"__nv_bfloat16"}), names_half({"at", "Half", "as_half"})
    (True, True, False)
    """
    return any(_HALF_NAME.match(n) for n in names)


_HALF_NAME = re.compile(r"__\w*(half|bfloat16)|(half2?|nv_bfloat16\w*)$")


# What the host unit includes first: torch/types.h is ATen plus the torch namespace as one load_inline
# unit has it (torch::Tensor, torch::empty, torch::kInt32, torch::kFloat16 ...), and cuda_begin's CUDA
# checks; a source that uses torch's C++ frontend (torch::nn, py:: ...) gets all of torch/extension.h.
HOST_TORCH = "#include <torch/types.h>\n#include <c10/cuda/CUDAException.h>\n"
HOST_TORCH_FULL = "#include <torch/extension.h>\n#include <c10/cuda/CUDAException.h>\n"
# the learner's includes that those already cover (left out of the host unit)
HOST_TORCH_COVERS = {"torch/extension.h", "torch/types.h", "ATen/ATen.h", "c10/cuda/CUDAException.h"}
LAUNCH_HELPER = r"""
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <cuda_runtime.h>
// Arguments of a kernel launch, converted to the kernel's parameter types (as <<<>>> would) and
// laid out for cudaLaunchKernel: one pointer per argument.
namespace course_launch {
template <typename F> struct pack;
template <typename... P> struct pack<void (*)(P...)> {
    std::tuple<std::decay_t<P>...> vals;
    void* ptrs[sizeof...(P) + 1];
    template <typename... A> explicit pack(A&&... a) : vals(std::forward<A>(a)...) {
        fill(std::index_sequence_for<P...>{});
    }
    template <std::size_t... I> void fill(std::index_sequence<I...>) {
        ((ptrs[I] = (void*)&std::get<I>(vals)), ...);
    }
};
}  // namespace course_launch
"""
HOST_PRELUDE = r"""
// CUDA keywords mean nothing to the host compiler: kernels appear here only as declarations.
#undef __global__
#undef __host__
#undef __device__
#undef __constant__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __host__
#define __device__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
// nvcc gives host code min() and max() over mixed integer types; a plain C++ compiler does not.
// (by value: a conditional of two lvalues is itself an lvalue, so decltype(a > b ? a : b) would be a
// reference to a parameter that dies on return)
template <typename A, typename B> inline std::common_type_t<A, B> max(A a, B b) { return a > b ? a : b; }
template <typename A, typename B> inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
// The symbol API's C++ overloads, which cuda_runtime.h declares for nvcc only: they take the
// variable itself (here a reference to the host shadow nvcc registered, see make_units).
template <class T> inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    return ::cudaMemcpyToSymbol((const void*)&symbol, src, count, offset, kind);
}
template <class T> inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t stream = 0) {
    return ::cudaMemcpyToSymbolAsync((const void*)&symbol, src, count, offset, kind, stream);
}
template <class T> inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    return ::cudaMemcpyFromSymbol(dst, (const void*)&symbol, count, offset, kind);
}
template <class T> inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t stream = 0) {
    return ::cudaMemcpyFromSymbolAsync(dst, (const void*)&symbol, count, offset, kind, stream);
}
template <class T> inline cudaError_t cudaGetSymbolAddress(void** devPtr, const T& symbol) {
    return ::cudaGetSymbolAddress(devPtr, (const void*)&symbol);
}
template <class T> inline cudaError_t cudaGetSymbolSize(size_t* size, const T& symbol) {
    return ::cudaGetSymbolSize(size, (const void*)&symbol);
}
"""
# the calls that HOST_PRELUDE's overloads serve (other cudaXxxSymbol calls need one unit)
SYMBOL_API = {"cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync", "cudaMemcpyFromSymbol",
              "cudaMemcpyFromSymbolAsync", "cudaGetSymbolAddress", "cudaGetSymbolSize"}
# the launch log of the device unit: the latest launches (kernel, grid, block, shared bytes and the
# arguments as the kernel received them), read through the binding unit as gpu_course.cuda.launch_log(module, since)
# (the format of the CPU emulation's log), so that an exercise check can make the same
# launch on memory of its own (gpu_course.exercises.cuda_launch)
LAUNCH_LOG = r"""
#include <cstdint>
#include <cstring>
#include <type_traits>
namespace course_launch_log {
struct Arg { char kind; unsigned char size; unsigned long long bits; };
struct Rec { long long seq; int site; unsigned dims[6]; unsigned long long smem; int nargs; Arg args[24]; };
static Rec recs[256];
static long long total = 0;
// one argument, read where cudaLaunchKernel's argument array points: 'p' pointer, 'i'/'u' signed /
// unsigned integer, 'f' floating point (a double's bits), 'b' bool, '?' anything else
template <typename T> inline Arg arg(void* p) {
    typedef typename std::decay<T>::type D;
    Arg r = {'?', (unsigned char)(sizeof(D) < 255 ? sizeof(D) : 255), 0ull};
    if constexpr (std::is_pointer<D>::value) {
        r.kind = 'p'; r.bits = (unsigned long long)(uintptr_t)(*static_cast<D*>(p));
    } else if constexpr (std::is_same<D, bool>::value) {
        r.kind = 'b'; r.bits = *static_cast<D*>(p) ? 1ull : 0ull;
    } else if constexpr (std::is_enum<D>::value) {
        r.kind = 'i'; r.bits = (unsigned long long)(long long)(*static_cast<D*>(p));
    } else if constexpr (std::is_integral<D>::value && std::is_signed<D>::value) {
        r.kind = 'i'; r.bits = (unsigned long long)(long long)(*static_cast<D*>(p));
    } else if constexpr (std::is_integral<D>::value) {
        r.kind = 'u'; r.bits = (unsigned long long)(*static_cast<D*>(p));
    } else if constexpr (std::is_floating_point<D>::value) {
        double v = (double)(*static_cast<D*>(p));
        r.kind = 'f'; std::memcpy(&r.bits, &v, sizeof v);
    }
    return r;
}
template <typename T> inline void put(void** a, Rec& r, int& i) {
    if (i < 24) r.args[i] = arg<T>(a[i]);
    ++i;
}
template <typename F> struct args_of;
template <typename... P> struct args_of<void (*)(P...)> {
    static int fill(void** a, Rec& r) {
        int i = 0;
        (void)a; (void)r;
        (put<P>(a, r, i), ...);
        return i < 24 ? i : 24;
    }
};
template <typename F> inline void record(int site, dim3 g, dim3 b, size_t s, void** a) {
    long long seq = __atomic_fetch_add(&total, 1ll, __ATOMIC_RELAXED);
    Rec& r = recs[seq % 256];
    r.site = site;
    r.dims[0] = g.x; r.dims[1] = g.y; r.dims[2] = g.z; r.dims[3] = b.x; r.dims[4] = b.y; r.dims[5] = b.z;
    r.smem = s;
    r.nargs = args_of<F>::fill(a, r);
    __atomic_store_n(&r.seq, seq, __ATOMIC_RELEASE);
}
}  // namespace course_launch_log
"""
LAUNCH_LOG_TABLE = r"""
extern "C" long long __course_launch_log_total() { return __atomic_load_n(&course_launch_log::total, __ATOMIC_ACQUIRE); }
extern "C" int __course_launch_log_get(long long seq, const char** name, unsigned* dims, unsigned long long* smem,
                                       char* kinds, unsigned char* sizes, unsigned long long* bits) {
    if (seq < 0) return -1;
    const course_launch_log::Rec& r = course_launch_log::recs[seq % 256];
    if (__atomic_load_n(&r.seq, __ATOMIC_ACQUIRE) != seq) return -1;
    *name = __course_launch_names[r.site];
    for (int k = 0; k < 6; ++k) dims[k] = r.dims[k];
    *smem = r.smem;
    for (int k = 0; k < r.nargs; ++k) { kinds[k] = r.args[k].kind; sizes[k] = r.args[k].size; bits[k] = r.args[k].bits; }
    return r.nargs;
}
"""
# the launch counters, read through the binding unit (see gpu_course.cuda.launch_counts)
LAUNCH_TABLE = r"""
extern "C" int __course_launch_table(const char* const** names, unsigned long long** counts) {
    *names = __course_launch_names;
    *counts = __course_launch_counts;
    return __course_launch_n;
}
"""
BINDING_LAUNCHES = r"""
// the launch counts of the device unit's stubs, by kernel (gpu_course.cuda.launch_counts)
extern "C" int __course_launch_table(const char* const** names, unsigned long long** counts);
extern "C" long long __course_launch_log_total();
extern "C" int __course_launch_log_get(long long seq, const char** name, unsigned* dims, unsigned long long* smem,
                                       char* kinds, unsigned char* sizes, unsigned long long* bits);
// (launches so far, [(seq, kernel, grid, block, shared bytes, ((kind, size, bits), ...)), ...]) of the
// latest launches whose seq >= since: what the CPU emulation's launch log returns (gpu_course/cuda/counters.py)
static pybind11::tuple course_launch_log(long long since) {
    long long total = __course_launch_log_total();
    pybind11::list out;
    for (long long s = since > total - 256 ? since : total - 256; s < total; ++s) {
        const char* name = ""; unsigned d[6]; unsigned long long smem = 0; char kinds[24];
        unsigned char sizes[24]; unsigned long long bits[24];
        int n = __course_launch_log_get(s, &name, d, &smem, kinds, sizes, bits);
        if (n < 0) continue;
        pybind11::tuple args(n);
        for (int k = 0; k < n; ++k) args[k] = pybind11::make_tuple(std::string(1, kinds[k]), (int)sizes[k], bits[k]);
        out.append(pybind11::make_tuple(s, std::string(name), pybind11::make_tuple(d[0], d[1], d[2]),
                                        pybind11::make_tuple(d[3], d[4], d[5]), smem, args));
    }
    return pybind11::make_tuple(total, out);
}
static pybind11::dict course_launches(bool reset) {
    const char* const* names; unsigned long long* counts; pybind11::dict d;
    for (int i = 0, n = __course_launch_table(&names, &counts); i < n; ++i) {
        unsigned long long c = reset ? __atomic_exchange_n(&counts[i], 0ull, __ATOMIC_RELAXED)
                                     : __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
        pybind11::str k(names[i]);
        d[k] = c + (d.contains(k) ? d[k].cast<unsigned long long>() : 0ull);
    }
    return d;
}
"""


BINDING_MAKE_MODULE = r"""
static pybind11::module_::module_def course_module_def;  // this library's own (static: never shared)
extern "C" PyObject* course_make_module(const char* name) {
    try {
        auto m = pybind11::module_::create_extension_module(name, nullptr, &course_module_def);
        course_bind(m);
        return m.release().ptr();
    } catch (pybind11::error_already_set& e) {
        e.restore();
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_ImportError, e.what());
    }
    return nullptr;
}
"""


def init_unit(module: str) -> str:
    """The two-line unit that names a build's module: ``PyInit_<module>`` asks the binding unit to
    make it under that name.

    >>> "PyInit_course_cuda_ab12(void)" in init_unit("course_cuda_ab12")
    True
    """
    return ("// init unit (g++), generated by gpu_course/cuda/gpu_build\n#include <Python.h>\n"
            'extern "C" PyObject* course_make_module(const char* name);\n'
            f'extern "C" __attribute__((visibility("default"))) PyObject* PyInit_{module}(void) '
            f'{{ return course_make_module("{module}"); }}\n')

