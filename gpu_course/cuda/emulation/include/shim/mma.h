// CPU-emulation stand-in for <mma.h>: nvcuda::wmma for 16x16x16 __half tiles (../emu_wmma.h), on top of
// cuda_emu.h, which is force-included (precompiled) before the learner's source.
#ifndef CUDA_EMU_H
#include "../cuda_emu.h"
#endif
#include "../emu_wmma.h"
