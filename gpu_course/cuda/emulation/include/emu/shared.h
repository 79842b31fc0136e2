// __shared__ memory: static variables that register themselves, bounds-checked arrays.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

namespace cuda_emu {
// ------------------------------------------------------------------------------------------
// Static __shared__ variables: function-local statics that register themselves once, so that
// the launcher can poison them (all bits set: NaN for float, -1 for int) at every block start.
// ------------------------------------------------------------------------------------------
struct shared_reg {
  shared_reg(void* p, size_t n, const char* name);
};

template <class T>
inline const char* type_label() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return "float";
  else if constexpr (std::is_same_v<U, double>) return "double";
  else if constexpr (std::is_same_v<U, int>) return "int";
  else if constexpr (std::is_same_v<U, unsigned>) return "unsigned int";
  else if constexpr (std::is_same_v<U, float2>) return "float2";
  else if constexpr (std::is_same_v<U, float4>) return "float4";
  else if constexpr (std::is_same_v<U, int4>) return "int4";
  else return "vector";
}

template <class T>
struct gptr;
/// The address of any object pointer (volatile too), for bounds checks and messages.
template <class T>
inline const char* addr_of(T* q) {
  if constexpr (std::is_volatile_v<T>)
    return static_cast<const char*>(const_cast<const void*>(static_cast<const volatile void*>(q)));
  else
    return reinterpret_cast<const char*>(q);
}
/// p as a checked pointer with the bounds of what it points into (region_of), unchecked if unknown.
template <class U>
gptr<U> bounded(U* p);

/// A bounds-checked array: what `__shared__ T name[N]...` becomes (nested for 2D/3D).
template <class T, size_t N>
struct sarr {
  T d[N];
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  T& operator[](I i) {
    if (static_cast<unsigned long long>(static_cast<long long>(i)) >= N)
      shared_oob(this, static_cast<long long>(i), N);
    return d[i];
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  const T& operator[](I i) const {
    if (static_cast<unsigned long long>(static_cast<long long>(i)) >= N)
      shared_oob(this, static_cast<long long>(i), N);
    return d[i];
  }
  operator T*() { return d; }  // NOLINT: decays like an array
  operator const T*() const { return d; }  // NOLINT
  /// `float* p = tile[r];`: a checked pointer bounded by the whole __shared__ variable.
  template <class U, std::enable_if_t<std::is_convertible_v<T*, U*>, int> = 0>
  operator gptr<U>() {  // NOLINT
    return bounded<U>(d);
  }
  template <class U, std::enable_if_t<std::is_convertible_v<const T*, U*>, int> = 0>
  operator gptr<U>() const {  // NOLINT
    return bounded<U>(d);
  }
  template <class U, std::enable_if_t<!std::is_same_v<std::remove_cv_t<U>, T>, int> = 0>
  explicit operator U*() {
    if (reinterpret_cast<uintptr_t>(d) % alignof(U)) misaligned(d, alignof(U), type_label<U>());
    return reinterpret_cast<U*>(d);
  }
};
template <class T, size_t N, size_t... M>
struct sarr_nd {
  using type = sarr<typename sarr_nd<T, M...>::type, N>;
};
template <class T, size_t N>
struct sarr_nd<T, N> {
  using type = sarr<T, N>;
};
template <class T, size_t... N>
using shared_array = typename sarr_nd<T, N...>::type;
}  // namespace cuda_emu
