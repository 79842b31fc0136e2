#ifndef GPU_COURSE_TENSOR_CORES_06_PERSISTENT_CU
#define GPU_COURSE_TENSOR_CORES_06_PERSISTENT_CU
#include "../common.cuh"
#include "tc_common.cuh"
#include "tc_ptx.cuh"
#include "05_wgmma_tma.cu"
// rung 6: rung 5's warpgroups (one copies with TMA, two multiply with wgmma), made persistent, in clusters, with the
// results stored by TMA. Hopper (sm_90a) only.
//
// What changes from rung 5, one idea each:
// * persistent blocks: as many blocks as the SMs hold (one each), each looping over tiles of out, taken in an order
//   the host chooses (a table: raster, grouped or Hilbert; gpu_course/tile_order.py). The producer does not wait for
//   the consumers' epilogue: it copies the next tile's first stages while they store this one, so the store of one
//   tile overlaps the copies of the next (rung 5's block stored its tile while no copy was in flight).
// * the epilogue through shared memory and TMA: each consumer warpgroup writes its 64 x BN results, as fp16, into a
//   shared tile in the 128-byte swizzle (no bank conflicts), and one thread hands it to the TMA engine
//   (cp.async.bulk.tensor ... global.shared), which writes it out while the warpgroup goes on to the next tile's
//   wgmma. It waits for that store to have read its shared tile (bulk wait_group.read) only before writing the next.
// * clusters of CLUSTER blocks (thread-block clusters, sm_90): the blocks of a cluster run at once on neighbouring SMs
//   and can reach each other's shared memory. Those of a cluster take the tiles (row r + q, column c), q = 0 .. CLUSTER
//   - 1: the same columns of n. Block q copies only the 64-column boxes j of n's tile with j % CLUSTER == q, and TMA
//   *multicasts* each box into the shared memory of every block of the cluster: n is read from L2 once per cluster
//   rather than once per block. A stage may be refilled only when the consumers of every block of the cluster are done
//   with it, so each consumer arrives on the empty barrier of every block (mapa: the address of the same barrier in a
//   peer's shared memory).
//
// The tile order table `order` holds, for each unit of work u, (the first tile row of the unit's CLUSTER rows, the tile
// column); cluster i takes units i, i + clusters, i + 2 clusters, ...
#include <cuda.h>

constexpr int P6_THREADS = 384;

__device__ inline uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ inline void cluster_sync() {   // every thread of every block of the cluster
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Arrive on the mbarrier at `bar`'s offset in the shared memory of block `cta` of this cluster. With PTX's default
// semantics (.release at CTA scope), as CUTLASS's cluster barrier does: the ordering that matters, the wgmma reads of
// the stage finished before a peer's copy overwrites it, wgmma.wait_group has already given. Asked for with
// .release.cluster instead, ptxas put a MEMBAR.ALL.GPU (a fence over all of the GPU's memory) before each arrive,
// and the kernel lost about 30 % of its speed at 4096^3 (cuobjdump -sass shows the fence).
__device__ inline void mbar_arrive_cta(uint64_t* bar, uint32_t cta) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(bar)), "r"(cta));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" :: "r"(remote) : "memory");
}
// A consumer is done with a stage: it tells block `cta` of the cluster, on that block's empty barrier `bar` (this
// block's own through rung 5's local arrive).
template <int CLUSTER>
__device__ inline void free_stage(uint64_t* bar, uint32_t cta) {
    if (CLUSTER == 1 || cta == cluster_rank()) mbar_arrive(bar);
    else mbar_arrive_cta(bar, cta);
}
// rung 5's mbar_wait, acquiring what the cluster's blocks released before they arrived.
__device__ inline void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
}
// rung 5's tma_load_2d, the box written into the same place of every block of `mask` (and its bytes counted on the
// mbarrier at the same place in each).
__device__ inline void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar,
                                             uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar)),
                    "h"(mask)
                 : "memory");
}
// TMA store: the box at (x, y) of the matrix `map` describes, from shared memory at src; then the bulk group.
__device__ inline void tma_store_2d(const CUtensorMap* map, int x, int y, const void* src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 :: "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(src)) : "memory");
}
__device__ inline void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ inline void bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ inline void bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// What the threads wrote to shared memory, made visible to the TMA engine (the async proxy) before it reads it.
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// A barrier over one warpgroup's 128 threads only (id 1 or 2: __syncthreads is barrier 0).
__device__ inline void warpgroup_sync(int id) { asm volatile("bar.sync %0, 128;\n" :: "r"(id) : "memory"); }

// Part PART of a consumer's epilogue: columns PART * W .. (PART + 1) * W - 1 (W = BN / PARTS) of its 64 x BN results,
// as fp16, into the swizzled shared tile my_c (box j = columns 64j .. 64j + 63 of the part), then out by TMA. The
// store runs on while the warpgroup goes on; the next part or tile waits only until it has read my_c.
template <int BN, int PARTS, int PART>
__device__ inline void store_part(const float (&d)[BN / 2], unsigned char* my_c, const CUtensorMap* tm_out, int r0,
                                  int c0, int c, int t) {
    constexpr int BOX = 64 * 64 * 2, W = BN / PARTS;
    const int warp = t / 32, lane = t % 32;
    if (t == 0) bulk_wait_read0();                             // the last store has read my_c
    warpgroup_sync(1 + c);
#pragma unroll
    for (int i = PART * W / 2; i < (PART + 1) * W / 2; i += 2) {
        const int row = warp * 16 + lane / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (lane % 4) - PART * W;
        const int off = (col / 64) * BOX + row * 128 + ((((col % 64) / 8) ^ (row % 8)) * 16) + (col % 8) * 2;
        *reinterpret_cast<__half2*>(my_c + off) = __floats2half2_rn(d[i], d[i + 1]);
    }
    fence_async_shared();
    warpgroup_sync(1 + c);
    if (t == 0) {
        for (int j = 0; j < W / 64; ++j) tma_store_2d(tm_out, c0 + PART * W + j * 64, r0 + c * 64, my_c + j * BOX);
        bulk_commit();
    }
}

template <int BN, int STAGES, int CLUSTER, int PARTS = 1>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(P6_THREADS, 1)
persistent_k(const __grid_constant__ CUtensorMap tm_m, const __grid_constant__ CUtensorMap tm_n,
             const __grid_constant__ CUtensorMap tm_out, const int* __restrict__ order, int units, int k) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_BYTES = WG_BM * WG_BK * 2, B_BYTES = WG_BK * BN * 2, BOX = 64 * 64 * 2;   // a 64 x 64 box: 8 KB
    constexpr int C_BYTES = 64 * BN * 2 / PARTS;               // one consumer's results (a PARTS-th of them at a time)
    extern __shared__ __align__(1024) unsigned char smem6[];
    unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem6) + 1023) & ~uintptr_t(1023));
    unsigned char* as = base;                                  // STAGES tiles of m: 128 rows x 64 halves
    unsigned char* bs = as + STAGES * A_BYTES;                 // STAGES tiles of n: BN / 64 boxes of 64 x 64
    unsigned char* cs = bs + STAGES * B_BYTES;                 // 2 consumers' results
    uint64_t* full = reinterpret_cast<uint64_t*>(cs + 2 * C_BYTES);
    uint64_t* empty = full + STAGES;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const uint32_t q = CLUSTER > 1 ? cluster_rank() : 0;      // this block's place in its cluster
    const int first = blockIdx.x / CLUSTER, stride = gridDim.x / CLUSTER;
    const int tiles = (k + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);                            // this block's producer (+ every copy's bytes)
            mbar_init(&empty[s], 2 * CLUSTER);                 // both consumers of every block of the cluster
        }
        asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
    }
    if (CLUSTER > 1) cluster_sync(); else __syncthreads();     // the peers' barriers exist before anyone arrives

    if (wg == 0) {                                             // the producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (t == 0) {
            int g = 0;                                         // stages filled so far, over all of this block's tiles
            for (int u = first; u < units; u += stride) {
                const int r0 = (order[2 * u] + q) * WG_BM, c0 = order[2 * u + 1] * BN;
                for (int kt = 0; kt < tiles; ++kt, ++g) {
                    const int s = g % STAGES, use = g / STAGES;
                    if (use > 0) {                             // every consumer of the cluster is done with stage s
                        if (CLUSTER > 1) mbar_wait_cluster(&empty[s], (use - 1) % 2);
                        else mbar_wait(&empty[s], (use - 1) % 2);
                    }
                    mbar_expect_tx(&full[s], A_BYTES + B_BYTES);   // all of n's tile arrives, from every peer
                    tma_load_2d(as + s * A_BYTES, &tm_m, kt * WG_BK, r0, &full[s]);
                    for (int j = q; j < BN / 64; j += CLUSTER)
                        if (CLUSTER > 1)
                            tma_load_2d_multicast(bs + s * B_BYTES + j * BOX, &tm_n, c0 + j * 64, kt * WG_BK, &full[s],
                                                  (1 << CLUSTER) - 1);
                        else
                            tma_load_2d(bs + s * B_BYTES + j * BOX, &tm_n, c0 + j * 64, kt * WG_BK, &full[s]);
                }
            }
        }
    } else {                                                   // the consumers: 64 rows of each tile
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1;
        unsigned char* my_c = cs + c * C_BYTES;
        float d[BN / 2];
        int g = 0;
        for (int u = first; u < units; u += stride) {
            const int r0 = (order[2 * u] + q) * WG_BM, c0 = order[2 * u + 1] * BN;
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
            wg_touch(d);
            for (int kt = 0; kt < tiles; ++kt, ++g) {
                const int s = g % STAGES;
                mbar_wait(&full[s], (g / STAGES) % 2);
                const unsigned char* a = as + s * A_BYTES + c * 64 * 128;
                const unsigned char* b = bs + s * B_BYTES;
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < WG_BK / 16; ++kk)
                    wgmma_step<BN, 1>(d, wg_desc(a + kk * 32, 16, 1024), wg_desc(b + kk * 16 * 128, BOX, 1024));
                wg_commit();
                wg_wait<1>();                                  // the stage before this one is read ...
                if (kt > 0 && t < CLUSTER) free_stage<CLUSTER>(&empty[(g - 1) % STAGES], t);   // ... free it everywhere
            }
            wg_wait<0>();
            wg_touch(d);
            if (t < CLUSTER) free_stage<CLUSTER>(&empty[(g - 1) % STAGES], t);   // this tile's last stage, too
            store_part<BN, PARTS, 0>(d, my_c, &tm_out, r0, c0, c, t);   // the epilogue, in PARTS parts
            if constexpr (PARTS > 1) store_part<BN, PARTS, 1>(d, my_c, &tm_out, r0, c0, c, t);
        }
        if (t == 0) bulk_wait0();                              // every store done before the block ends
    }
    __syncwarp();
    if (CLUSTER > 1) cluster_sync();                           // no block leaves while a peer may still arrive on it
#else
    __trap();   // built for a GPU without wgmma (sm_90a): tc_persistent refuses to launch it there
#endif
}

// The compiled shapes (tensor_cores.P6_VARIANTS names them, in this order): block tile 128 x BN, STAGES, CLUSTER.
constexpr int P6_VARIANTS = 6;

// Dynamic shared memory of a block: the stages, the two consumers' results, alignment slack and the mbarriers.
constexpr int p6_smem(int bn, int stages, int parts = 1) {
    return stages * (WG_BM + bn) * WG_BK * 2 + 2 * 64 * bn * 2 / parts + 1024 + 2 * stages * 8;
}

// The grid: one block per SM (the kernel's shared memory allows one), in whole clusters, at most one per unit of
// work and at most max_blocks (0: no limit). Clusters of 2 fill an H100's or H200's 132 SMs (66 clusters).
static int p6_blocks(int sms, int cluster, int units, int max_blocks) {
    int clusters = std::min(sms / cluster, units);
    if (max_blocks > 0) clusters = std::min(clusters, std::max(1, max_blocks / cluster));
    return clusters * cluster;
}

// out = m @ n by rung 6: compiled shape `variant`, the units of work in the order of `order` (int32, units x 2: the
// first tile row of each unit's CLUSTER rows, and its tile column; tensor_cores.run makes it), at most `max_blocks`
// blocks (0: one per SM).
torch::Tensor tc_persistent(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t variant, torch::Tensor order,
                            int64_t max_blocks) {
    tc_check(m, n, out, "tc_persistent");
    tc_check_rows16(m, n, out, "tc_persistent");
    TORCH_CHECK(variant >= 0 && variant < P6_VARIANTS, ("tc_persistent: variant must be 0.." +
                std::to_string(P6_VARIANTS - 1) + ", got " + std::to_string(variant)).c_str());
    CHECK_INPUT(order);
    TORCH_CHECK(order.scalar_type() == torch::kInt && order.dim() == 2 && order.size(1) == 2 && order.size(0) > 0,
                ("tc_persistent: order must be an int32 tensor of (tile row, tile column) pairs, units x 2; got " +
                 tc_shape(order)).c_str());
    int dev = 0, major = 0, minor = 0, sms = 0;
    C10_CUDA_CHECK(cudaGetDevice(&dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    TORCH_CHECK(major == 9 && minor == 0, ("tc_persistent: wgmma, TMA and clusters as used here exist on Hopper GPUs "
                "(sm_90) only; this GPU is sm_" + std::to_string(major) + std::to_string(minor)).c_str());
    const int k = m.size(1), units = order.size(0);
    const CUtensorMap tm_m = tensor_map(m, WG_BM, WG_BK);
    const CUtensorMap tm_n = tensor_map(n, WG_BK, 64);
    const CUtensorMap tm_out = tensor_map(out, 64, 64);
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
    const int* table = order.data_ptr<int>();
    static bool allowed[P6_VARIANTS] = {};
    switch (variant) {   // the clusters' size is the kernel's own (__cluster_dims__): a plain <<<>>> launch
        case 0: {   // 128 x 256 tiles, 3 stages, clusters of 2
            constexpr int smem = p6_smem(256, 3);
            if (!allowed[0]) C10_CUDA_CHECK(cudaFuncSetAttribute(persistent_k<256, 3, 2>, attr, smem));
            allowed[0] = true;
            persistent_k<256, 3, 2><<<p6_blocks(sms, 2, units, max_blocks), P6_THREADS, smem, stream>>>(
                tm_m, tm_n, tm_out, table, units, k);
            break;
        }
        case 1: {   // 128 x 256 tiles, 3 stages, no clusters
            constexpr int smem = p6_smem(256, 3);
            if (!allowed[1]) C10_CUDA_CHECK(cudaFuncSetAttribute(persistent_k<256, 3, 1>, attr, smem));
            allowed[1] = true;
            persistent_k<256, 3, 1><<<p6_blocks(sms, 1, units, max_blocks), P6_THREADS, smem, stream>>>(
                tm_m, tm_n, tm_out, table, units, k);
            break;
        }
        case 2: {   // 128 x 128 tiles, 5 stages, clusters of 2
            constexpr int smem = p6_smem(128, 5);
            if (!allowed[2]) C10_CUDA_CHECK(cudaFuncSetAttribute(persistent_k<128, 5, 2>, attr, smem));
            allowed[2] = true;
            persistent_k<128, 5, 2><<<p6_blocks(sms, 2, units, max_blocks), P6_THREADS, smem, stream>>>(
                tm_m, tm_n, tm_out, table, units, k);
            break;
        }
        case 4: {   // 128 x 256 tiles, 4 stages, clusters of 2, results stored in 2 parts
            constexpr int smem = p6_smem(256, 4, 2);
            if (!allowed[4]) C10_CUDA_CHECK(cudaFuncSetAttribute(persistent_k<256, 4, 2, 2>, attr, smem));
            allowed[4] = true;
            persistent_k<256, 4, 2, 2><<<p6_blocks(sms, 2, units, max_blocks), P6_THREADS, smem, stream>>>(
                tm_m, tm_n, tm_out, table, units, k);
            break;
        }
        case 5: {   // 128 x 256 tiles, 4 stages, no clusters, results stored in 2 parts
            constexpr int smem = p6_smem(256, 4, 2);
            if (!allowed[5]) C10_CUDA_CHECK(cudaFuncSetAttribute(persistent_k<256, 4, 1, 2>, attr, smem));
            allowed[5] = true;
            persistent_k<256, 4, 1, 2><<<p6_blocks(sms, 1, units, max_blocks), P6_THREADS, smem, stream>>>(
                tm_m, tm_n, tm_out, table, units, k);
            break;
        }
        case 3: {   // 128 x 128 tiles, 5 stages, no clusters
            constexpr int smem = p6_smem(128, 5);
            if (!allowed[3]) C10_CUDA_CHECK(cudaFuncSetAttribute(persistent_k<128, 5, 1>, attr, smem));
            allowed[3] = true;
            persistent_k<128, 5, 1><<<p6_blocks(sms, 1, units, max_blocks), P6_THREADS, smem, stream>>>(
                tm_m, tm_n, tm_out, table, units, k);
            break;
        }
        default: break;   // variant checked above
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
#endif  // GPU_COURSE_TENSOR_CORES_06_PERSISTENT_CU
