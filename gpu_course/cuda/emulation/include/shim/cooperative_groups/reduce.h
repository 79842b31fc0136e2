// CPU-emulation stand-in for <cooperative_groups/reduce.h>: cg::reduce and cg::plus/less/greater/bit_* are in
// ../../emu_cg.h, with the rest of cooperative groups.
#ifndef CUDA_EMU_H
#include "../../cuda_emu.h"
#endif
#include "../../emu_cg.h"
