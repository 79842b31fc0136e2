// Checked accesses (sat, gat): the race check's record and the counted launches' counts.
// A part of cuda_emu.h, included from there in order (it builds on the parts before it); not included alone.
#pragma once

namespace cuda_emu {
// ------------------------------------------------------------------------------------------
// sat<K>(a, line, i, j): what `a[i][j]` becomes in kernels when `a` is a __shared__ array used
// with all its indices (K: 0 read, 1 write, 2 read-modify-write such as +=), or a kernel pointer
// parameter updated with +=/++ (K = 2).  Same result as a[i][j] (bounds-checked as before); with
// racecheck it also records the access, for the race checks in runtime.cpp.
// ------------------------------------------------------------------------------------------
enum AccessKind { kRead = 0, kWrite = 1, kRMW = 2 };
/// Counted launches only (g.cnt set): one access of kind K to global or shared memory.
template <int K>
inline void count_access(bool shared) {
  Counts* c = g.cnt;
  if (__builtin_expect(c == nullptr, 1)) return;
  if (shared) {
    if (K != kWrite) c->sload++;
    if (K != kRead) c->sstore++;
  } else {
    if (K != kWrite) c->gload++;
    if (K != kRead) c->gstore++;
  }
}
/// Whether p is in the launch's shared memory (static __shared__ variables or the dynamic part).
bool in_shared(const void* p);
/// Counted launches only: an atomic on p (shared or global memory).
inline void count_atomic(const void* p) {
  if (__builtin_expect(g.cnt == nullptr, 1)) return;
  if (in_shared(p)) g.cnt->satomic++;
  else g.cnt->gatomic++;
}
void race_shared(int kind, const void* region, const void* p, size_t size, int line, const long long* ix,
                 int nix);
void race_global(const void* p, size_t size, const PtrInfo* info, int line);

/// Counted launches only, and bounds: `n` bytes at p read (K = kRead), written or both by one operation
/// (n = 0: one element, bounds checked by the caller). Counted, where p lies in shared memory or in a
/// launch's tensor, as the fewest accesses of at most 16 bytes (a float4's) that move them; the bytes of a
/// thread's local variables are not counted.
template <int K>
inline void span_access(const void* p, size_t n) {
  const char* lo;
  const char* hi;
  const PtrInfo* info;
  if (p == nullptr || !g.in_kernel || !region_of(p, &lo, &hi, &info)) return;
  const char* c = static_cast<const char*>(p);
  if (n && c + n > hi) global_oob(info, c, n, lo, hi);
  for (size_t k = 0, m = n ? (n + 15) / 16 : 1; k < m; k++) count_access<K>(info && info->shared);
}

template <class X>
inline const void* vaddr(const X& x) {
  if constexpr (is_gptr<X>::value) {
    return x.p;
  } else if constexpr (is_dshared<X>::value) {
    return x.get().p;
  } else {
    return static_cast<const void*>(x);
  }
}

/// What memcpy, memmove and memset become in device code: the same bytes moved, each side counted as
/// what it moves (see span_access) and checked against the bounds of what it points into.
template <class D, class S>
inline void* dmemcpy(D&& d, S&& s, size_t n) {
  void* dp = const_cast<void*>(vaddr(d));
  const void* sp = vaddr(s);
  span_access<kRead>(sp, n);
  span_access<kWrite>(dp, n);
  return n ? std::memmove(dp, sp, n) : dp;
}
template <class D>
inline void* dmemset(D&& d, int v, size_t n) {
  void* dp = const_cast<void*>(vaddr(d));
  span_access<kWrite>(dp, n);
  return n ? std::memset(dp, v, n) : dp;
}

template <class A, class I0>
inline decltype(auto) index_all(A&& a, I0 i0) { return std::forward<A>(a)[i0]; }
template <class A, class I0, class I1>
inline decltype(auto) index_all(A&& a, I0 i0, I1 i1) { return std::forward<A>(a)[i0][i1]; }
template <class A, class I0, class I1, class I2>
inline decltype(auto) index_all(A&& a, I0 i0, I1 i1, I2 i2) { return std::forward<A>(a)[i0][i1][i2]; }
template <class A, class I0, class I1, class I2, class I3>
inline decltype(auto) index_all(A&& a, I0 i0, I1 i1, I2 i2, I3 i3) {
  return std::forward<A>(a)[i0][i1][i2][i3];
}

template <class... I>
__attribute__((noinline)) void race_shared_at(int kind, const void* region, const void* p, size_t size, int line,
                                              I... i) {
  if constexpr ((std::is_integral_v<I> && ...)) {
    const long long ix[] = {static_cast<long long>(i)...};
    race_shared(kind, region, p, size, line, ix, static_cast<int>(sizeof...(I)));
  } else {
    race_shared(kind, region, p, size, line, nullptr, 0);
  }
}

template <int K, class A, class... I>
inline decltype(auto) sat(A&& a, int line, I... i) {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (is_sarr<D>::value) {
    auto& e = index_all(a, i...);
    if (__builtin_expect(g.race_on, 0)) race_shared_at(K, &a, &e, sizeof(e), line, i...);
    count_access<K>(true);
    return (e);
  } else if constexpr (is_dshared<D>::value && sizeof...(I) == 1) {
    auto& e = index_all(a.get(), i...);
    if (__builtin_expect(g.race_on, 0)) race_shared_at(K, g.dyn, &e, sizeof(e), line, i...);
    count_access<K>(true);
    return (e);
  } else if constexpr (is_gptr<D>::value && K == kRMW && sizeof...(I) == 1) {
    auto& e = index_all(a, i...);
    if (__builtin_expect(g.race_on, 0)) race_global(&e, sizeof(e), a.info, line);
    count_access<K>(a.info && a.info->shared);
    return (e);
  } else {
    // a local of the same name, a plain array (a volatile __shared__ one: counted as shared) ...
    decltype(auto) e = index_all(std::forward<A>(a), i...);
    if constexpr (std::is_lvalue_reference_v<decltype(e)>)
      if (__builtin_expect(g.cnt != nullptr, 0) && in_shared(addr_of(&e))) count_access<K>(true);
    return static_cast<decltype(e)>(e);
  }
}

/// gat<K>(p, line, "p", i): what `p[i]` becomes in kernels and __device__ functions when `p` is a
/// checked pointer (a pointer parameter, or a local pointer the rewrite made one): the same
/// element, bounds-checked with a message that names p, the element it reached and the line; a
/// read-modify-write (K = 2) of global memory is recorded for the race check.  Anything else
/// named p (a local array shadowing it ...) is indexed as written.
template <int K, class A, class I>
inline decltype(auto) gat(A&& a, int line, const char* var, I i) {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (is_gptr<D>::value && (std::is_integral_v<I> || std::is_enum_v<I>)) {
    auto* q = a.p + static_cast<ptrdiff_t>(i);
    const char* c = addr_of(q);
    if (__builtin_expect(c < a.lo || c + sizeof(*q) > a.hi, 0))
      ptr_oob(a.info, c, sizeof(*q), a.lo, a.hi, var, addr_of(a.p), static_cast<long long>(i), line);
    if constexpr (K == kRMW)
      if (__builtin_expect(g.race_on, 0) && a.info && !a.info->shared) race_global(c, sizeof(*q), a.info, line);
    if (a.info) count_access<K>(a.info->shared);
    else if (__builtin_expect(g.cnt != nullptr, 0)) span_access<K>(c, 0);   // counted only where it lies in
    return (*q);                                     // shared or global memory: not a thread's local variable
  } else if constexpr (is_dshared<D>::value) {
    return gat<K>(a.get(), line, var, i);
  } else if constexpr (std::is_pointer_v<D> && !std::is_void_v<std::remove_pointer_t<D>> &&
                       !std::is_function_v<std::remove_pointer_t<D>> &&
                       (std::is_integral_v<I> || std::is_enum_v<I>)) {
    // a raw pointer (a template helper's parameter): checked and counted where it points into known memory
    auto b = bounded(a);
    if (b.info) return gat<K>(b, line, var, i);
    return (a[i]);
  } else {
    // a local array, a struct's array member, a class with operator[]: counted where the element lies in
    // shared or global memory (p->row[i], a __constant__ table is neither)
    decltype(auto) e = std::forward<A>(a)[i];
    if constexpr (std::is_lvalue_reference_v<decltype(e)>)
      if (__builtin_expect(g.cnt != nullptr, 0)) span_access<K>(addr_of(&e), 0);
    return static_cast<decltype(e)>(e);
  }
}

/// gderef<K>(line, "*(p + k)", p + k): what a dereference `*p`, `*(p + k)` or `*reinterpret_cast<float4*>(q)`
/// becomes in device code: checked like gat (the message quotes the expression), `*x` for anything else.
template <int K, class A>
inline decltype(auto) gderef(int line, const char* expr, A&& a) {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (is_gptr<D>::value || is_dshared<D>::value) {
    return gat<K>(std::forward<A>(a), line, expr, 0);
  } else if constexpr (std::is_pointer_v<D> && !std::is_void_v<std::remove_pointer_t<D>> &&
                       !std::is_function_v<std::remove_pointer_t<D>>) {
    return gat<K>(a, line, expr, 0);
  } else {
    return *std::forward<A>(a);
  }
}

/// arrow(p)->m: what `p->m` becomes in device code (not `p->row[i]`, which gat counts): p as it was, and in a
/// counted launch one read where p points into shared memory or a launch's tensor (a struct's member there).
template <class P>
inline decltype(auto) arrow(P&& p) {
  using D = std::remove_cv_t<std::remove_reference_t<P>>;
  if (__builtin_expect(g.cnt != nullptr, 0)) {
    if constexpr (is_gptr<D>::value) {
      if (p.info) count_access<kRead>(p.info->shared);
    } else if constexpr (std::is_pointer_v<D> && !std::is_function_v<std::remove_pointer_t<D>>) {
      span_access<kRead>(static_cast<const void*>(p), 0);
    }
  }
  return std::forward<P>(p);
}

/// What reinterpret_cast becomes: keeps the bounds of checked pointers.
template <class To, class From>
inline decltype(auto) rcast(From&& f) {
  using F = std::remove_cv_t<std::remove_reference_t<From>>;
  if constexpr (std::is_pointer_v<To> && is_gptr<F>::value) {
    return f.template cast<std::remove_pointer_t<To>>();
  } else if constexpr (std::is_pointer_v<To> && is_dshared<F>::value) {
    return f.get().template cast<std::remove_pointer_t<To>>();
  } else if constexpr (std::is_pointer_v<To> && is_sarr<F>::value) {
    return static_cast<To>(f);
  } else if constexpr (std::is_integral_v<To> && is_gptr<F>::value) {
    return static_cast<To>(f);  // reinterpret_cast<uintptr_t>(p): the address
  } else {
    return reinterpret_cast<To>(f);
  }
}

/// Wraps `x` in `x.data_ptr<float>()`: registers x's extent, returns x unchanged.
template <class T>
inline T&& track(T&& t) {
  if constexpr (std::is_base_of_v<at::TensorBase, std::decay_t<T>>) track_tensor(t);
  return std::forward<T>(t);
}

}  // namespace cuda_emu
