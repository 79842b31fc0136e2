// CPU-emulation stand-in for <cuda_fp16.h>: __half, __half2 and their functions (../emu_fp16.h), on top of
// cuda_emu.h, which is force-included (precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../cuda_emu.h"
#endif
#include "../emu_fp16.h"
