#ifndef GPU_COURSE_MATMUL_09_AUTOTUNED_CU
#define GPU_COURSE_MATMUL_09_AUTOTUNED_CU
#include "../common.cuh"
#include "08_warptiling.cu"   // mm_warp_k
// rung 9: rung 8's kernel in several tile shapes, the fastest one picked per size by timing them all on
// the operands at hand (matmul_ladder.autotune_rung9, in Python). No new idea in the kernel: which shape
// wins depends on the GPU (registers, shared memory, number of SMs) and on the sizes (how evenly the
// blocks fill the SMs). Every case is one more compiled kernel (a few seconds of ptxas each), so the list
// is short. matmul_ladder.RUNG_CONFIGS[9] names them in this order, as "BMxBNxBK wWMxWN AxB*TMxTN NTt":
// block tile, warp tile, A x B patches of TM x TN per thread (A = WMITER, B = WNITER), threads per block.
static const int RUNG9_CFGS = 8;

static void mm_warp_tuned(int cfg, const float* mp, const float* np_, float* op, int h, int w, int k,
                          bool vm, bool vn) {
    const auto stream = at::cuda::getCurrentCUDAStream();   // torch's current stream
    switch (cfg) {
        //                   BM   BN  BK  WM  WN WNITER TM TN  NT
        case 0:  mm_warp_k<128, 128, 16, 64, 64, 2, 4, 4, 128>    // rung 8
                 <<<dim3(cdiv(w, 128), cdiv(h, 128)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 1:  mm_warp_k<128, 128, 8, 64, 64, 2, 4, 4, 128>     // half the phase: 2x the barriers
                 <<<dim3(cdiv(w, 128), cdiv(h, 128)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 2:  mm_warp_k<128, 128, 16, 64, 64, 4, 8, 4, 128>    // 8x4 patches: m's float4s 32 B apart
                 <<<dim3(cdiv(w, 128), cdiv(h, 128)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 3:  mm_warp_k<128, 256, 16, 64, 64, 2, 4, 4, 256>    // 8 warps, one block per SM
                 <<<dim3(cdiv(w, 256), cdiv(h, 128)), 256, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 4:  mm_warp_k<256, 128, 16, 64, 64, 2, 4, 4, 256>    // the same, taller
                 <<<dim3(cdiv(w, 128), cdiv(h, 256)), 256, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 5:  mm_warp_k<64, 128, 16, 32, 64, 2, 4, 4, 128>     // half the block tile: 2x the blocks,
                 <<<dim3(cdiv(w, 128), cdiv(h, 64)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        case 6:  mm_warp_k<128, 64, 16, 64, 32, 1, 4, 4, 128>     // more of them per SM
                 <<<dim3(cdiv(w, 64), cdiv(h, 128)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
        default: mm_warp_k<64, 64, 16, 32, 32, 1, 4, 4, 128>      // small tiles, 4 blocks per SM
                 <<<dim3(cdiv(w, 64), cdiv(h, 64)), 128, 0, stream>>>(mp, np_, op, h, w, k, vm, vn); break;
    }
}
#endif  // GPU_COURSE_MATMUL_09_AUTOTUNED_CU
