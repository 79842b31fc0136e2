// CPU-emulation stand-in for <c10/cuda/CUDAStream.h>: c10::cuda::getCurrentCUDAStream() (also reached as
// at::cuda::getCurrentCUDAStream()) is in cuda_emu.h, which is force-included (precompiled) before the
// learner's source.
#ifndef CUDA_EMU_H
#include "../../../cuda_emu.h"
#endif
