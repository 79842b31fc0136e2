#ifndef GPU_COURSE_TENSOR_CORES_TC_PTX_CUH
#define GPU_COURSE_TENSOR_CORES_TC_PTX_CUH
#include "../common.cuh"
#include "tc_common.cuh"
// The PTX instructions of rungs 3 and 4 (sm_80 and later), each wrapped in a small function: what the CUDA C of
// the kernels calls. `asm volatile("instruction" : outputs : inputs)` puts one PTX instruction into the kernel;
// "r" is a 32-bit register, "f" a float register, "l" a 64-bit one, "+f" a register both read and written.

// The address of a shared-memory variable as PTX's shared-state space counts it (32 bits).
__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// ldmatrix: the warp loads four 8x8 matrices of halves from shared memory. Lanes 8j..8j+7 give the addresses of
// the 8 rows of matrix j (16 bytes each); lane l receives, in r[j], the two halves (row l/4, columns 2(l%4) and
// 2(l%4)+1) of matrix j: exactly the register of an mma fragment. .trans delivers each matrix transposed.
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(row_addr)));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(row_addr)));
}

// mma.sync m16n8k16: d (16x8, fp32) += a (16x16, fp16, row-major) b (16x8, fp16, column-major), by the warp; the
// fragments' layouts are mma_a_rc, mma_b_rc and mma_c_rc (tc_common.cuh).
__device__ inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cp.async: start a 16-byte copy global -> shared that no register holds; `in` false copies nothing and fills
// the 16 bytes with zeros (src-size 0). commit closes this thread's batch of copies; wait<N> waits until at most
// N of its batches are still in flight (notebook 04's rung 10 spells them __pipeline_memcpy_async & co).
__device__ inline void cp_async16(void* smem, const void* gmem, bool in) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_addr(smem)), "l"(gmem), "r"(in ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }
#endif  // GPU_COURSE_TENSOR_CORES_TC_PTX_CUH
