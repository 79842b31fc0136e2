// CPU-emulation stand-in for <ATen/cuda/Exceptions.h>: AT_CUDA_CHECK (emu/streams.h), in cuda_emu.h, which is
// force-included (precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../../../cuda_emu.h"
#endif
