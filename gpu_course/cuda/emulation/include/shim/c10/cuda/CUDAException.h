// CPU-emulation stand-in for <c10/cuda/CUDAException.h>: everything it would provide is in cuda_emu.h,
// which is force-included (precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../../../cuda_emu.h"
#endif
