// CPU-emulation stand-in for <cuda_pipeline_primitives.h>: __pipeline_memcpy_async, __pipeline_commit and
// __pipeline_wait_prior are in cuda_emu.h (force-included, precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../cuda_emu.h"
#endif
