// Checked pointers (gptr): a kernel pointer bounded by the tensor it points into.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

namespace cuda_emu {
// ------------------------------------------------------------------------------------------
// gptr<T>: a kernel's pointer parameter, checked against the extent of the tensor it points
// into (when the host code got it from data_ptr, see track()).  Converts to T* for helpers.
// ------------------------------------------------------------------------------------------
template <class T>
struct gptr {
  T* p = nullptr;
  const char* lo = nullptr;                                         // first valid byte
  const char* hi = reinterpret_cast<const char*>(~uintptr_t(0));  // one past the last
  const PtrInfo* info = nullptr;

  gptr() = default;
  gptr(T* q) : p(q) {}  // NOLINT: unknown bounds (not checked)
  gptr(std::nullptr_t) : p(nullptr) {}  // NOLINT
  gptr(T* q, const char* l, const char* h, const PtrInfo* i) : p(q), lo(l), hi(h), info(i) {}
  template <class U, std::enable_if_t<std::is_convertible_v<U*, T*> && !std::is_same_v<U, T>, int> = 0>
  gptr(const gptr<U>& o) : p(o.p), lo(o.lo), hi(o.hi), info(o.info) {}  // NOLINT

  operator T*() const { return p; }  // NOLINT: hand a plain pointer to helpers
  template <class U, std::enable_if_t<!std::is_same_v<std::remove_cv_t<U>, std::remove_cv_t<T>> &&
                                          !std::is_void_v<U>, int> = 0>
  explicit operator U*() const {  // C-style casts such as (float4*)x
    if (reinterpret_cast<uintptr_t>(p) % alignof(U)) misaligned(addr_of(p), alignof(U), type_label<U>());
    return (U*)p;  // NOLINT
  }
  T* get() const { return p; }

  void check(const T* q) const {
    const char* c = addr_of(q);
    if (__builtin_expect(c < lo || c + sizeof(T) > hi, 0)) global_oob(info, c, sizeof(T), lo, hi);
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  T& operator[](I i) const {
    T* q = p + static_cast<ptrdiff_t>(i);
    check(q);
    return *q;
  }
  T& operator*() const {
    check(p);
    return *p;
  }
  T* operator->() const {
    check(p);
    return p;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr operator+(I i) const {
    gptr r = *this;
    r.p += static_cast<ptrdiff_t>(i);
    return r;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  friend gptr operator+(I i, const gptr& a) {
    return a + i;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr operator-(I i) const {
    gptr r = *this;
    r.p -= static_cast<ptrdiff_t>(i);
    return r;
  }
  ptrdiff_t operator-(const gptr& o) const { return p - o.p; }
  ptrdiff_t operator-(const T* o) const { return p - o; }
  friend ptrdiff_t operator-(const T* a, const gptr& b) { return a - b.p; }
  /// (uintptr_t)p, (size_t)p: the address (alignment checks).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  explicit operator I() const {
    return static_cast<I>(reinterpret_cast<uintptr_t>(p));
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr& operator+=(I i) {
    p += static_cast<ptrdiff_t>(i);
    return *this;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr& operator-=(I i) {
    p -= static_cast<ptrdiff_t>(i);
    return *this;
  }
  gptr& operator++() {
    ++p;
    return *this;
  }
  gptr& operator--() {
    --p;
    return *this;
  }
  gptr operator++(int) {
    gptr r = *this;
    ++p;
    return r;
  }
  gptr operator--(int) {
    gptr r = *this;
    --p;
    return r;
  }
  /// reinterpret_cast<U*>(x): same bounds, checked alignment.
  template <class U>
  gptr<U> cast() const {
    if constexpr (!std::is_void_v<U>)
      if (reinterpret_cast<uintptr_t>(p) % alignof(U)) misaligned(addr_of(p), alignof(U), type_label<U>());
    return gptr<U>(reinterpret_cast<U*>(p), lo, hi, info);
  }
};

/// `extern __shared__ T name[];`: the current launch's dynamic shared memory, checked against
/// the size given as the third <<<>>> argument.
template <class T>
struct dshared {
  const char* name;
  gptr<T> get() const {
    g.dyn_info.name = name;
    return gptr<T>(reinterpret_cast<T*>(g.dyn), g.dyn, g.dyn + g.dyn_bytes, &g.dyn_info);
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>, int> = 0>
  T& operator[](I i) const {
    return get()[i];
  }
  template <class U, std::enable_if_t<std::is_convertible_v<T*, U*>, int> = 0>
  operator gptr<U>() const {  // NOLINT
    return get();
  }
  operator T*() const { return reinterpret_cast<T*>(g.dyn); }  // NOLINT
  template <class U, std::enable_if_t<!std::is_same_v<std::remove_cv_t<U>, T>, int> = 0>
  explicit operator U*() const {
    return static_cast<U*>(get());
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  gptr<T> operator+(I i) const {
    return get() + i;
  }
  T& operator*() const { return *get(); }
};

template <class T>
struct is_gptr : std::false_type {};
template <class T>
struct is_gptr<gptr<T>> : std::true_type {};
template <class T>
struct is_dshared : std::false_type {};
template <class T>
struct is_dshared<dshared<T>> : std::true_type {};
template <class T>
struct is_sarr : std::false_type {};
template <class T, size_t N>
struct is_sarr<sarr<T, N>> : std::true_type {};

template <class U>
gptr<U> bounded(U* p) {
  const char* lo;
  const char* hi;
  const PtrInfo* info;
  if (p && g.in_kernel && region_of(addr_of(p), &lo, &hi, &info)) return gptr<U>(p, lo, hi, info);
  return gptr<U>(p);
}

/// What the rewrite wraps the initializer of a local pointer in (`float* row = bound(out + 5);`
/// becomes a gptr<float>): checked pointers keep their bounds, __shared__ arrays and raw pointers
/// get the bounds of what they point into (region_of), anything else is passed on.
template <class X>
inline decltype(auto) bound(X&& x) {
  using D = std::remove_cv_t<std::remove_reference_t<X>>;
  if constexpr (is_gptr<D>::value) {
    return D(x);
  } else if constexpr (is_dshared<D>::value) {
    return x.get();
  } else if constexpr (std::is_pointer_v<D> && !std::is_void_v<std::remove_pointer_t<D>> &&
                       !std::is_function_v<std::remove_pointer_t<D>>) {
    return bounded(x);
  } else {
    return std::forward<X>(x);
  }
}

/// What an argument of a call of a template __device__ function becomes: a checked pointer hands over
/// its plain pointer (so that `const T* p` deduces T), anything else passes as it is. Inside the
/// helper, accesses through such a pointer are checked and counted by gat (the bounds found again).
template <class X>
inline decltype(auto) raw(X&& x) {
  using D = std::remove_cv_t<std::remove_reference_t<X>>;
  if constexpr (is_gptr<D>::value) {
    return x.p;
  } else if constexpr (is_dshared<D>::value) {
    return x.get().p;
  } else {
    return std::forward<X>(x);
  }
}

/// `auto* p = init;` / `const auto* p = init;` become `auto p = aptr<C>(init)`: a checked pointer
/// stays one (to const elements when C), a raw pointer gets bounds as in bound().
template <bool C, class X>
inline auto aptr(X&& x) {
  auto b = bound(std::forward<X>(x));
  using B = decltype(b);
  if constexpr (is_gptr<B>::value && C) {
    return gptr<const std::remove_pointer_t<decltype(b.p)>>(b);
  } else if constexpr (std::is_pointer_v<B> && C) {
    return static_cast<const std::remove_pointer_t<B>*>(b);
  } else {
    return b;
  }
}
}  // namespace cuda_emu
