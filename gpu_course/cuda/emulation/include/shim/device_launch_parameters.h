// CPU-emulation stand-in for <device_launch_parameters.h>: everything it would provide is in cuda_emu.h,
// which is force-included (precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../cuda_emu.h"
#endif
