// cuda_emu.h: runs the course's subset of CUDA C on the CPU.
//
// The emulation (source/) rewrites a learner's CUDA source a little (launches, __shared__ declarations, kernel
// pointer parameters, see its docstring) and compiles it against this header, which is
// precompiled once; the non-template code is in runtime.cpp, also compiled once and linked into
// every module.  Design, in short:
//   * blocks run one after another; the threads of a block run as cooperative fibers on one OS
//     thread, and a fiber switches only at __syncthreads() and warp-level calls.  Between two
//     barriers a thread runs alone, so a missing barrier shows up as a real race,
//     deterministically; only a thread that loops for ~10 ms without a barrier yields (tick).
//   * Ctrl-C during a launch raises KeyboardInterrupt (tick, runtime.cpp).
//   * a barrier that only part of a block reaches is detected (no hang) and raised as an error.
//   * warp-level calls (__shfl_*_sync, __ballot_sync, __syncwarp, ...) are rendezvous of the lanes
//     named in the mask: a lane waits (switches fiber) until all of them arrived at the same call;
//     a lane that exited or waits elsewhere is an error, never a hang.
//   * racecheck (on by default): accesses to __shared__ arrays are recorded per 4-byte word
//     between barriers; two threads touching one word without a barrier between them is an error.
//   * cp.async (__pipeline_memcpy_async): checked and its source read at the issue; the write to
//     shared memory is deferred to the issuing thread's __pipeline_wait_prior that completes its
//     batch (pending copies live in the thread's Fiber), so reading too early shows.
//   * dynamic shared memory above 48 KiB needs cudaFuncSetAttribute on the launched kernel
//     (found by address), up to 227 KiB.
//   * kernel pointer parameters, __device__ functions' pointer parameters and local pointers
//     become bounds-checked pointers (gptr; accesses through gat/gderef name the line) and
//     __shared__ arrays bounds-checked arrays (sarr); shared memory is poisoned (all bits set: NaN
//     for floats) at the start of every block, so reading before writing shows.
//   * errors are C++ exceptions (cuda_emu::Error) that the Python binding raises as
//     cuda_emu.CudaEmulationError; segfaults inside a kernel are caught and raised too.
#pragma once
#define CUDA_EMU_H 1

#include <Python.h>  // first, as Python asks

#include "torch_api.h"  // the torch C++ API, in tiers (see there)

// The parts, by concern, in the order they build on each other:
#include "emu/basics.h"
#include "emu/state.h"
#include "emu/runtime_api.h"
#include "emu/shared.h"
#include "emu/gptr.h"
#include "emu/access.h"
#include "emu/launch.h"
#include "emu/runtime_errors.h"
#include "emu/streams.h"
#include "emu/device_functions.h"
#include "emu/binding.h"
