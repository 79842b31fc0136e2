// CPU-emulation stand-in for <ATen/cuda/CUDAContext.h>: of it, the emulation has
// at::cuda::getCurrentCUDAStream() (cuda_emu.h, force-included before the learner's source).
#ifndef CUDA_EMU_H
#include "../../../cuda_emu.h"
#endif
