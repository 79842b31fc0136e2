// CPU-emulation stand-in for <cuda_bf16.h>: __nv_bfloat16, __nv_bfloat162 and their functions (../emu_bf16.h),
// on top of cuda_emu.h, which is force-included (precompiled) before the learner's source. Like CUDA's, it
// brings <cuda_fp16.h> along.
#ifndef CUDA_EMU_H
#include "../cuda_emu.h"
#endif
#include "../emu_fp16.h"
#include "../emu_bf16.h"
