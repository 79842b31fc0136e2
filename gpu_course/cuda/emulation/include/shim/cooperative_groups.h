// CPU-emulation stand-in for <cooperative_groups.h>: groups within a block (../emu_cg.h), on top of cuda_emu.h,
// which is force-included (precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../cuda_emu.h"
#endif
#include "../emu_cg.h"
