// runtime.cpp: the non-template part of the CUDA emulation (see cuda_emu.h), compiled once per
// machine by gpu_course/cuda/emulation and linked into every module it builds.
#include "cuda_emu.h"

#include <csetjmp>
#include <cstdlib>
#include <cxxabi.h>
#include <csignal>
#include <ctime>
#include <deque>
#include <map>
#include <unordered_map>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

// The parts, by concern, in the order they build on each other (one translation unit: the static names
// of a part are seen by the parts after it):
#include "runtime/threads.cpp"
#include "runtime/warps.cpp"
#include "runtime/races.cpp"
#include "runtime/launch_records.cpp"
#include "runtime/memory_errors.cpp"
#include "runtime/async_copy.cpp"
#include "runtime/tensors.cpp"
#include "runtime/interrupts.cpp"
#include "runtime/launch.cpp"
#include "runtime/python.cpp"
#include "runtime/torch_lite.cpp"
