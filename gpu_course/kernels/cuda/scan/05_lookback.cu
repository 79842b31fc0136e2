#ifndef GPU_COURSE_SCAN_05_LOOKBACK_CU
#define GPU_COURSE_SCAN_05_LOOKBACK_CU
#include "../common.cuh"
#include "03_tiles.cu"                 // load_tile, store_tile, scan_tile
#include "04_three_pass.cu"            // check_scan
#include "../reduce/06_warp_shuffle.cu" // warp_sum
// Single-pass scan with decoupled look-back (notebook 09; the scheme of CUB's DeviceScan, which
// torch.cumsum calls): x is read once and out written once. Each block takes the next tile number
// from a counter (so every tile before it has started; our addition: CUB's AgentScan takes
// blockIdx.x and relies on blocks being launched in increasing order), scans its tile, publishes the tile's total
// (flag AGG), then looks back at the tiles before it, 32 at a time with one warp: it adds their
// totals until it meets one that published its inclusive prefix (flag PREFIX), publishes its own
// prefix, and writes its tile. A status word is a flag (high 32 bits) and a float (low 32 bits),
// written with a 64-bit atomic and read with a 64-bit volatile load, so value and flag travel together
// (volatile: the load is made again on every turn of the waiting loop, never kept in a register).
constexpr unsigned long long SCAN_AGG = 1ull << 32, SCAN_PREFIX = 2ull << 32, SCAN_FLAGS = ~0xffffffffull;

__device__ __forceinline__ unsigned long long scan_status(unsigned long long flag, float v) {
    return flag | __float_as_uint(v);
}

__global__ void scan_lookback_k(const float* __restrict__ x, float* __restrict__ out,
                                unsigned long long* status, unsigned int* ticket, int n) {
    __shared__ float seg[33];
    __shared__ int tile_sh;
    __shared__ float prefix_sh;
    if (threadIdx.x == 0) tile_sh = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = tile_sh;
    float4 v[SI];
    load_tile(x, n, tile, v);
    float total = scan_tile(v, seg);
    if (threadIdx.x < 32) {                     // warp 0 talks to the other tiles
        const volatile unsigned long long* seen = status;
        int lane = threadIdx.x;
        float before = 0.0f;                    // the sum of all earlier tiles (valid in lane 0)
        if (tile == 0) {
            if (lane == 0) atomicExch(&status[0], scan_status(SCAN_PREFIX, total));
        } else {
            if (lane == 0) atomicExch(&status[tile], scan_status(SCAN_AGG, total));
            int base = tile - 1;                // lane i looks at tile base - i
            for (long spins = 0;; spins++) {
                int p = base - lane;
                unsigned long long st = p >= 0 ? seen[p] : SCAN_PREFIX;
                unsigned long long flag = st & SCAN_FLAGS;
                if (__any_sync(0xffffffffu, flag == 0)) {   // a tile has not published yet: look again
                    if (spins < (1L << 22)) continue;
                    before = __int_as_float(0x7fffffff);     // never on a correct GPU: give NaN, not a hang
                    break;
                }
                unsigned prefixes = __ballot_sync(0xffffffffu, flag == SCAN_PREFIX);
                int stop = prefixes ? __ffs(prefixes) - 1 : 31;  // the nearest tile with a prefix
                before += warp_sum(lane <= stop ? __uint_as_float(static_cast<unsigned>(st)) : 0.0f);
                if (prefixes) break;
                base -= 32;
            }
            if (lane == 0) atomicExch(&status[tile], scan_status(SCAN_PREFIX, before + total));
        }
        if (lane == 0) prefix_sh = before;
    }
    __syncthreads();
    store_tile(out, n, tile, v, prefix_sh);
}

void scan_lookback(torch::Tensor x, torch::Tensor out) {
    check_scan(x, out, "scan_lookback");
    int n = x.numel(), tiles = cdiv(n, STILE);
    if (n == 0) return;
    // one zeroed allocation: a status word per tile, then the tile counter
    auto state = torch::zeros({tiles + 1}, x.options().dtype(torch::kLong));
    auto* status = reinterpret_cast<unsigned long long*>(state.data_ptr<int64_t>());
    scan_lookback_k<<<tiles, ST, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), out.data_ptr<float>(), status, reinterpret_cast<unsigned int*>(status + tiles), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_SCAN_05_LOOKBACK_CU
