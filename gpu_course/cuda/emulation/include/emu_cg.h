// emu_cg.h: <cooperative_groups.h> and <cooperative_groups/reduce.h> for the CPU emulation, within a block:
// this_thread_block() (sync, thread_rank, size, thread_index ...), tiled_partition<N> (N a power of 2 up to 32:
// sync, shfl*, any/all/ballot, match_any, meta_group_rank ...), coalesced_threads() (the lanes that execute the
// call together, as __activemask()), cg::reduce with cg::plus/less/greater/bit_and/bit_or/bit_xor, and the free
// functions sync(g), thread_rank(g), group_size(g). Each group's calls are the warp-level calls and barriers of
// the emulation, with their checks (a lane that does not come is an error naming it and the line).
// this_grid() exists (thread_rank, size, is_valid() == false), but its sync() is an error: a grid-wide barrier
// needs a cooperative launch, which the emulation (blocks run one after another) cannot make.
#pragma once
#ifndef CUDA_EMU_CG_H
#define CUDA_EMU_CG_H 1

namespace cooperative_groups {
#define CUDA_EMU_CG_HERE cuda_emu_loc loc = cuda_emu_loc::current()
namespace cuda_emu_cg {
inline unsigned block_rank() { return ::cuda_emu::g.tid; }
inline unsigned block_threads() { return ::cuda_emu::g.nthreads; }
/// The lane of `mask` whose rank (its position among the mask's lanes) is r.
inline unsigned lane_of_rank(unsigned mask, unsigned r) {
  for (unsigned l = 0; l < 32; l++)
    if ((mask >> l & 1) && r-- == 0) return l;
  return 0;
}
/// The bits of `bits` at the lanes of `mask`, packed by rank (bit r: the lane of rank r).
inline unsigned pack(unsigned bits, unsigned mask) {
  unsigned out = 0, r = 0;
  for (unsigned l = 0; l < 32; l++)
    if (mask >> l & 1) out |= (bits >> l & 1u) << r++;
  return out;
}
}  // namespace cuda_emu_cg

/// The whole block: sync() is __syncthreads().
struct thread_block {
  void sync(CUDA_EMU_CG_HERE) const { ::cuda_emu::syncthreads(static_cast<int>(loc.line())); }
  unsigned thread_rank() const { return cuda_emu_cg::block_rank(); }
  unsigned size() const { return cuda_emu_cg::block_threads(); }
  unsigned num_threads() const { return cuda_emu_cg::block_threads(); }
  dim3 group_index() const { return dim3(blockIdx); }
  dim3 thread_index() const { return dim3(threadIdx); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
  bool is_valid() const { return true; }
};
inline thread_block this_thread_block() { return {}; }

/// N consecutive threads of the block (N a power of 2 up to 32): a part of one warp.
template <unsigned N, class Parent = void>
struct thread_block_tile;
template <unsigned N>
struct thread_block_tile<N, void> {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                "tiled_partition<N>: N must be a power of 2 from 1 to 32 (larger tiles are not emulated)");
  static unsigned base() { return (cuda_emu_cg::block_rank() % 32) & ~(N - 1); }
  /// The tile's lanes in its warp, as the mask of the warp-level calls.
  static unsigned mask() { return N == 32 ? 0xffffffffu : ((1u << N) - 1) << base(); }
  void sync(CUDA_EMU_CG_HERE) const { __syncwarp(mask(), loc); }
  unsigned thread_rank() const { return cuda_emu_cg::block_rank() % N; }
  static constexpr unsigned size() { return N; }
  static constexpr unsigned num_threads() { return N; }
  unsigned meta_group_rank() const { return cuda_emu_cg::block_rank() / N; }
  unsigned meta_group_size() const { return (cuda_emu_cg::block_threads() + N - 1) / N; }
  bool is_valid() const { return true; }
  template <class T>
  T shfl(T v, int src, CUDA_EMU_CG_HERE) const { return __shfl_sync(mask(), v, src, N, loc); }
  template <class T>
  T shfl_down(T v, unsigned d, CUDA_EMU_CG_HERE) const { return __shfl_down_sync(mask(), v, d, N, loc); }
  template <class T>
  T shfl_up(T v, unsigned d, CUDA_EMU_CG_HERE) const { return __shfl_up_sync(mask(), v, d, N, loc); }
  template <class T>
  T shfl_xor(T v, unsigned m, CUDA_EMU_CG_HERE) const {
    return __shfl_xor_sync(mask(), v, static_cast<int>(m), N, loc);
  }
  int any(int p, CUDA_EMU_CG_HERE) const { return __any_sync(mask(), p, loc); }
  int all(int p, CUDA_EMU_CG_HERE) const { return __all_sync(mask(), p, loc); }
  unsigned ballot(int p, CUDA_EMU_CG_HERE) const { return __ballot_sync(mask(), p, loc) >> base(); }
  template <class T>
  unsigned match_any(T v, CUDA_EMU_CG_HERE) const { return __match_any_sync(mask(), v, loc) >> base(); }
};
template <unsigned N, class Parent>
struct thread_block_tile : thread_block_tile<N, void> {};

template <unsigned N, class P>
inline thread_block_tile<N, P> tiled_partition(const P&) {
  return {};
}

/// The lanes of a warp that execute coalesced_threads() together (see __activemask()), ranked in lane order.
struct coalesced_group {
  unsigned m;
  static unsigned lane() { return cuda_emu_cg::block_rank() % 32; }
  unsigned thread_rank() const { return static_cast<unsigned>(__builtin_popcount(m & ((1u << lane()) - 1))); }
  unsigned size() const { return static_cast<unsigned>(__builtin_popcount(m)); }
  unsigned num_threads() const { return size(); }
  unsigned meta_group_rank() const { return 0; }
  unsigned meta_group_size() const { return 1; }
  bool is_valid() const { return m != 0; }
  void sync(CUDA_EMU_CG_HERE) const { __syncwarp(m, loc); }
  template <class T>
  T shfl(T v, unsigned rank, CUDA_EMU_CG_HERE) const {
    return __shfl_sync(m, v, static_cast<int>(cuda_emu_cg::lane_of_rank(m, rank % size())), 32, loc);
  }
  template <class T>
  T shfl_down(T v, unsigned d, CUDA_EMU_CG_HERE) const {
    const unsigned r = thread_rank() + d;
    return __shfl_sync(m, v, static_cast<int>(r < size() ? cuda_emu_cg::lane_of_rank(m, r) : lane()), 32, loc);
  }
  template <class T>
  T shfl_up(T v, unsigned d, CUDA_EMU_CG_HERE) const {
    const unsigned r = thread_rank();
    return __shfl_sync(m, v, static_cast<int>(r >= d ? cuda_emu_cg::lane_of_rank(m, r - d) : lane()), 32, loc);
  }
  int any(int p, CUDA_EMU_CG_HERE) const { return __any_sync(m, p, loc); }
  int all(int p, CUDA_EMU_CG_HERE) const { return __all_sync(m, p, loc); }
  unsigned ballot(int p, CUDA_EMU_CG_HERE) const { return cuda_emu_cg::pack(__ballot_sync(m, p, loc), m); }
};
inline coalesced_group coalesced_threads(CUDA_EMU_CG_HERE) { return {__activemask(loc)}; }

/// The whole grid. Its sync() needs a cooperative launch: refused.
struct grid_group {
  void sync(CUDA_EMU_CG_HERE) const {
    ::cuda_emu::fail("grid_group::sync() (this_grid().sync()) at cuda_src line " + std::to_string(loc.line()) +
                     " " + ::cuda_emu::where() +
                     ": a grid-wide barrier needs a cooperative launch (cudaLaunchCooperativeKernel, with every "
                     "block resident at once), and the CPU emulation runs the blocks one after another, so no "
                     "block could wait for the others. Run it on a GPU, or split the kernel into two launches at "
                     "the barrier (a launch boundary is a grid-wide barrier).");
  }
  unsigned long long thread_rank() const {
    const unsigned long long b = blockIdx.x + gridDim.x * (blockIdx.y + static_cast<unsigned long long>(gridDim.y) * blockIdx.z);
    return b * cuda_emu_cg::block_threads() + cuda_emu_cg::block_rank();
  }
  unsigned long long size() const {
    return static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z * cuda_emu_cg::block_threads();
  }
  unsigned long long num_threads() const { return size(); }
  bool is_valid() const { return false; }  // not launched cooperatively, as on a GPU after a <<<>>> launch
  dim3 group_dim() const { return gridDim; }
};
inline grid_group this_grid() { return {}; }

template <class G>
inline void sync(const G& g, CUDA_EMU_CG_HERE) { g.sync(loc); }
template <class G>
inline unsigned long long thread_rank(const G& g) { return g.thread_rank(); }
template <class G>
inline unsigned long long group_size(const G& g) { return g.size(); }

// ---- <cooperative_groups/reduce.h> ----------------------------------------------------------------------
template <class T = void>
struct plus {
  T operator()(const T& a, const T& b) const { return a + b; }
};
template <class T = void>
struct less {
  T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <class T = void>
struct greater {
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <class T = void>
struct bit_and {
  T operator()(const T& a, const T& b) const { return a & b; }
};
template <class T = void>
struct bit_or {
  T operator()(const T& a, const T& b) const { return a | b; }
};
template <class T = void>
struct bit_xor {
  T operator()(const T& a, const T& b) const { return a ^ b; }
};
/// op over the group's values, the result in every thread: a butterfly of shfl_xor on a tile, the values
/// gathered rank by rank on a coalesced group (any size).
template <unsigned N, class P, class T, class Op>
inline std::decay_t<T> reduce(const thread_block_tile<N, P>& g, T&& value, Op&& op, CUDA_EMU_CG_HERE) {
  std::decay_t<T> v = value;
  for (unsigned o = N / 2; o > 0; o /= 2) v = op(v, g.shfl_xor(v, o, loc));
  return v;
}
template <class T, class Op>
inline std::decay_t<T> reduce(const coalesced_group& g, T&& value, Op&& op, CUDA_EMU_CG_HERE) {
  std::decay_t<T> v = g.shfl(static_cast<std::decay_t<T>>(value), 0, loc);
  for (unsigned r = 1; r < g.size(); r++) v = op(v, g.shfl(static_cast<std::decay_t<T>>(value), r, loc));
  return v;
}
#undef CUDA_EMU_CG_HERE
}  // namespace cooperative_groups

#endif  // CUDA_EMU_CG_H
