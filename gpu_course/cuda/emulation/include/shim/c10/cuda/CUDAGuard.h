// CPU-emulation stand-in for <c10/cuda/CUDAGuard.h>: c10::cuda::CUDAGuard, OptionalCUDAGuard and CUDAStreamGuard (emu/streams.h), in cuda_emu.h, which is
// force-included (precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../../../cuda_emu.h"
#endif
