// emu_wmma.h: <mma.h>'s nvcuda::wmma for the CPU emulation: 16x16x16 tiles of __half with float or __half
// accumulators, row- or column-major, as a GPU's tensor cores compute them (fp16 products, accumulated in the
// accumulator's type).
//
// A fragment is what one lane holds of a 16x16 tile: fragment.x[i], i < fragment.num_elements (16 __half for
// matrix_a and matrix_b, 8 for an accumulator, as nvcc declares them). Which lane holds which element:
//   accumulator (all GPUs since sm_80): the C layout of the PTX instruction mma.m16n8k16 twice, for columns 0-7
//     and 8-15: lane l, element i holds row l/4 + 8*((i/2)%2), column 8*(i/4) + 2*(l%4) + i%2;
//   matrix_a: x[0..7] as the A operand of mma.m16n8k16 (row l/4 + 8*((i/2)%2), column 2*(l%4) + i%2 + 8*(i/4));
//   matrix_b: x[0..3] the B operand of mma.m16n8k16 for columns 0-7, x[4..7] for columns 8-15 (row
//     2*(l%4) + i%2 + 8*((i/2)%2), column 8*(i/4) + l/4); x[8..15] of matrix_a and matrix_b repeat x[0..7].
// CUDA leaves the layout of a fragment unspecified (a kernel that depends on it is not portable); the course's
// GPU test records an H100's. wmma_rc() below is the one place that says it.
//
// load_matrix_sync, store_matrix_sync and mma_sync are warp-collective, as on a GPU: all 32 lanes of a warp must
// call them together (runtime.cpp's wmma_sync: a rendezvous like __syncwarp's, which never hangs). Each lane
// loads and stores its own elements through checked accesses (bounds, 16-byte alignment of every row of the
// tile, the race check for float tiles in shared memory, the launch counts); mma_sync is computed once for the
// warp by the last lane to arrive, from every lane's fragments. fill_fragment is a plain per-lane assignment.
// Other shapes (m32n8k16, m8n32k16), types (bf16, tf32, int8, double) and sub-byte operations are refused at
// compile time with a message.
#pragma once
#ifndef CUDA_EMU_WMMA_H
#define CUDA_EMU_WMMA_H 1

#include <cstdlib>
#include <type_traits>

#include "emu_fp16.h"

namespace cuda_emu {
enum WmmaKind { kWmmaA = 0, kWmmaB = 1, kWmmaAcc = 2 };
/// (row, col) in its 16x16 tile of element i of lane `lane`'s fragment of kind `kind` (see the top of this file).
constexpr void wmma_rc(int kind, unsigned lane, int i, int& row, int& col) {
  const int g = static_cast<int>(lane >> 2), t = static_cast<int>(lane & 3u), j = i & 7;
  if (kind == kWmmaAcc) {
    row = g + 8 * ((j >> 1) & 1);
    col = 8 * (j >> 2) + 2 * t + (j & 1);
  } else if (kind == kWmmaA) {
    row = g + 8 * ((j >> 1) & 1);
    col = 2 * t + (j & 1) + 8 * (j >> 2);
  } else {
    row = 2 * t + (j & 1) + 8 * ((j >> 1) & 1);
    col = 8 * (j >> 2) + g;
  }
}

/// The pointer a wmma load or store was given, as a checked pointer to E (bounds where the emulation knows them).
template <class E, class P>
inline gptr<E> wmma_ptr(const P& p) {
  if constexpr (is_gptr<P>::value) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(p.p)>>;
    static_assert(std::is_same_v<T, std::remove_cv_t<E>>,
                  "wmma: the pointer's element type must be the fragment's (__half for matrix_a/matrix_b and __half "
                  "accumulators, float for float accumulators)");
    return gptr<E>(p.p, p.lo, p.hi, p.info);
  } else if constexpr (is_dshared<P>::value) {
    return wmma_ptr<E>(p.get());
  } else if constexpr (is_sarr<P>::value) {  // a row of a __shared__ array, e.g. tile[r]
    return wmma_ptr<E>(&const_cast<P&>(p).d[0]);
  } else {
    static_assert(std::is_pointer_v<P>, "wmma: pass a pointer to the tile's first element");
    using T = std::remove_cv_t<std::remove_pointer_t<P>>;
    static_assert(std::is_same_v<T, std::remove_cv_t<E>>,
                  "wmma: the pointer's element type must be the fragment's (__half for matrix_a/matrix_b and __half "
                  "accumulators, float for float accumulators)");
    return bounded(const_cast<E*>(p));
  }
}

/// Element (row, col) of a tile at q with leading dimension ldm: checked, counted, race-checked; returns its address.
template <int K, class E>
inline E* wmma_elem(const gptr<E>& q, unsigned ldm, bool col_major, int row, int col, const char* call, int line) {
  E* e = q.p + (col_major ? static_cast<size_t>(col) * ldm + row : static_cast<size_t>(row) * ldm + col);
  const char* c = addr_of(e);
  if (__builtin_expect(c < q.lo || c + sizeof(E) > q.hi, 0)) wmma_oob(call, line, row, col, e, sizeof(E), q.lo, q.hi, q.info);
  const bool shared = q.info && q.info->shared;
  if (__builtin_expect(g.race_on, 0) && shared) race_shared(K, q.lo, e, sizeof(E), line, nullptr, 0);
  count_access<K>(shared);
  return e;
}

template <class E>
inline void wmma_check_aligned(const gptr<E>& q, unsigned ldm, const char* call, int line) {
  if ((reinterpret_cast<uintptr_t>(q.p) % 16) || (ldm * sizeof(E)) % 16) wmma_misaligned(call, line, q.p, ldm, sizeof(E));
}

template <class U>
struct nondeduced {
  using type = U;
};
}  // namespace cuda_emu

namespace nvcuda {
namespace wmma {
struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
namespace precision {
struct tf32;
}
enum layout_t { mem_row_major, mem_col_major };

template <class T, int size>
struct __frag_base {
  T x[size];
  enum { num_elements = size };
  typedef T element_type;
  typedef T storage_element_type;
};

template <class Use, int m, int n, int k, class T, class Layout = void>
class fragment {
  static_assert(::cuda_emu::dependent_false<T>,
                "the CPU emulation runs wmma::fragment<matrix_a | matrix_b, 16, 16, 16, __half, row_major | "
                "col_major> and wmma::fragment<accumulator, 16, 16, 16, float | __half> only; other shapes and "
                "types (bf16, tf32, int8, double) run on a GPU");
};
template <> class fragment<matrix_a, 16, 16, 16, __half, row_major> : public __frag_base<__half, 16> {};
template <> class fragment<matrix_a, 16, 16, 16, __half, col_major> : public __frag_base<__half, 16> {};
template <> class fragment<matrix_b, 16, 16, 16, __half, row_major> : public __frag_base<__half, 16> {};
template <> class fragment<matrix_b, 16, 16, 16, __half, col_major> : public __frag_base<__half, 16> {};
template <> class fragment<accumulator, 16, 16, 16, float> : public __frag_base<float, 8> {};
template <> class fragment<accumulator, 16, 16, 16, __half> : public __frag_base<__half, 8> {};

template <class T, int size>
inline void fill_fragment(__frag_base<T, size>& f, const typename ::cuda_emu::nondeduced<T>::type& v) {
  for (int i = 0; i < size; i++) f.x[i] = v;
}

#define CUDA_EMU_WMMA_HERE cuda_emu_loc loc = cuda_emu_loc::current()

// matrix_a / matrix_b: each lane reads its 8 elements of the tile (and repeats them in x[8..15])
template <class Use, class L, class P,
          std::enable_if_t<std::is_same_v<Use, matrix_a> || std::is_same_v<Use, matrix_b>, int> = 0>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __half, L>& f, const P& p, unsigned ldm, CUDA_EMU_WMMA_HERE) {
  const char* call = "wmma::load_matrix_sync";
  const auto q = ::cuda_emu::wmma_ptr<const __half>(p);
  ::cuda_emu::wmma_check_aligned(q, ldm, call, static_cast<int>(loc.line()));
  const unsigned lane = ::cuda_emu::g.tid % 32;
  const int kind = std::is_same_v<Use, matrix_a> ? ::cuda_emu::kWmmaA : ::cuda_emu::kWmmaB;
  for (int i = 0; i < 8; i++) {
    int r = 0, c = 0;
    ::cuda_emu::wmma_rc(kind, lane, i, r, c);
    f.x[i] = *::cuda_emu::wmma_elem<::cuda_emu::kRead>(q, ldm, std::is_same_v<L, col_major>, r, c, call,
                                                        static_cast<int>(loc.line()));
  }
  for (int i = 8; i < 16; i++) f.x[i] = f.x[i - 8];
  ::cuda_emu::wmma_sync(::cuda_emu::kWmmaLoad, static_cast<int>(loc.line()), nullptr, nullptr);
}

// accumulators: loaded and stored with the memory layout given at the call
template <class T, class P>
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, T>& f, const P& p, unsigned ldm, layout_t layout,
                             CUDA_EMU_WMMA_HERE) {
  const char* call = "wmma::load_matrix_sync";
  const auto q = ::cuda_emu::wmma_ptr<const T>(p);
  ::cuda_emu::wmma_check_aligned(q, ldm, call, static_cast<int>(loc.line()));
  const unsigned lane = ::cuda_emu::g.tid % 32;
  for (int i = 0; i < 8; i++) {
    int r = 0, c = 0;
    ::cuda_emu::wmma_rc(::cuda_emu::kWmmaAcc, lane, i, r, c);
    f.x[i] = *::cuda_emu::wmma_elem<::cuda_emu::kRead>(q, ldm, layout == mem_col_major, r, c, call,
                                                        static_cast<int>(loc.line()));
  }
  ::cuda_emu::wmma_sync(::cuda_emu::kWmmaLoad, static_cast<int>(loc.line()), nullptr, nullptr);
}

template <class T, class P>
inline void store_matrix_sync(const P& p, const fragment<accumulator, 16, 16, 16, T>& f, unsigned ldm, layout_t layout,
                              CUDA_EMU_WMMA_HERE) {
  const char* call = "wmma::store_matrix_sync";
  const auto q = ::cuda_emu::wmma_ptr<T>(p);
  ::cuda_emu::wmma_check_aligned(q, ldm, call, static_cast<int>(loc.line()));
  const unsigned lane = ::cuda_emu::g.tid % 32;
  for (int i = 0; i < 8; i++) {
    int r = 0, c = 0;
    ::cuda_emu::wmma_rc(::cuda_emu::kWmmaAcc, lane, i, r, c);
    *::cuda_emu::wmma_elem<::cuda_emu::kWrite>(q, ldm, layout == mem_col_major, r, c, call,
                                                static_cast<int>(loc.line())) = f.x[i];
  }
  ::cuda_emu::wmma_sync(::cuda_emu::kWmmaStore, static_cast<int>(loc.line()), nullptr, nullptr);
}

}  // namespace wmma
}  // namespace nvcuda

namespace cuda_emu {
template <class FD, class FA, class FB, class FC>
struct WmmaMma {
  FD* d;
  const FA* a;
  const FB* b;
  const FC* c;
};
/// The factor every product of mma_sync is multiplied by: 1, unless the environment variable CUDA_EMU_WMMA_SCALE
/// says otherwise (the exercise checks launch a kernel again with products doubled: its output must change).
inline float wmma_product_scale() {
  const char* e = std::getenv("CUDA_EMU_WMMA_SCALE");
  return e && *e ? std::strtof(e, nullptr) : 1.0f;
}
/// D = A B + C for the whole warp (runs once, in the last lane to arrive at mma_sync): gathers every lane's
/// fragments into 16x16 tiles, multiplies (exact fp16 products, summed in float from C in the order of k),
/// and scatters D into every lane's d. (With wmma_product_scale() s other than 1: D = C + s (A B).)
template <class FD, class FA, class FB, class FC>
void wmma_mma_all(void* const* lanes) {
  float A[16][16], B[16][16], C[16][16];
  for (unsigned l = 0; l < 32; l++) {
    const auto* m = static_cast<const WmmaMma<FD, FA, FB, FC>*>(lanes[l]);
    for (int i = 0; i < 8; i++) {
      int r = 0, c = 0;
      wmma_rc(kWmmaA, l, i, r, c);
      A[r][c] = static_cast<float>(m->a->x[i]);
      wmma_rc(kWmmaB, l, i, r, c);
      B[r][c] = static_cast<float>(m->b->x[i]);
      wmma_rc(kWmmaAcc, l, i, r, c);
      C[r][c] = static_cast<float>(m->c->x[i]);
    }
  }
  float D[16][16];
  const float scale = wmma_product_scale();
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) {
      if (scale == 1.0f) {
        float s = C[r][c];
        for (int k = 0; k < 16; k++) s += A[r][k] * B[k][c];
        D[r][c] = s;
      } else {
        float p = 0.0f;
        for (int k = 0; k < 16; k++) p += A[r][k] * B[k][c];
        D[r][c] = C[r][c] + scale * p;
      }
    }
  for (unsigned l = 0; l < 32; l++) {
    auto* m = static_cast<const WmmaMma<FD, FA, FB, FC>*>(lanes[l]);
    for (int i = 0; i < 8; i++) {
      int r = 0, c = 0;
      wmma_rc(kWmmaAcc, l, i, r, c);
      m->d->x[i] = D[r][c];
    }
  }
}
}  // namespace cuda_emu

namespace nvcuda {
namespace wmma {
template <class TD, class LA, class LB, class TC>
inline void mma_sync(fragment<accumulator, 16, 16, 16, TD>& d, const fragment<matrix_a, 16, 16, 16, __half, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, __half, LB>& b,
                     const fragment<accumulator, 16, 16, 16, TC>& c, CUDA_EMU_WMMA_HERE) {
  using FD = fragment<accumulator, 16, 16, 16, TD>;
  using FA = fragment<matrix_a, 16, 16, 16, __half, LA>;
  using FB = fragment<matrix_b, 16, 16, 16, __half, LB>;
  using FC = fragment<accumulator, 16, 16, 16, TC>;
  ::cuda_emu::WmmaMma<FD, FA, FB, FC> mine{&d, &a, &b, &c};
  ::cuda_emu::wmma_sync(::cuda_emu::kWmmaMma, static_cast<int>(loc.line()), &mine,
                        &::cuda_emu::wmma_mma_all<FD, FA, FB, FC>);
}
#undef CUDA_EMU_WMMA_HERE
}  // namespace wmma
}  // namespace nvcuda

#endif  // CUDA_EMU_WMMA_H
