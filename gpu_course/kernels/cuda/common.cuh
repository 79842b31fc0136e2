// common.cuh: what every CUDA C source of the course starts with. Each .cu file under gpu_course/kernels/cuda/
// includes it (so that it compiles on its own: nvcc -c, an editor's language server), and utils.cuda_begin,
// which a notebook's own CUDA C starts with, is its text inside the include guard.
// Every launch names at::cuda::getCurrentCUDAStream(), the stream torch queues its own kernels on, as its 4th
// <<<>>> argument: the kernel then runs in order with torch's work under torch.cuda.stream(s) and in a CUDA
// graph capture (torch.compile's "reduce-overhead" mode); a bare <<<grid, block>>> uses the default stream.
#ifndef GPU_COURSE_COMMON_CUH
#define GPU_COURSE_COMMON_CUH

#include <torch/extension.h>
#include <stdio.h>
#include <c10/cuda/CUDAStream.h>   // at::cuda::getCurrentCUDAStream(); it includes c10/cuda/CUDAException.h

// Checks with messages a learner can act on. They raise a Python RuntimeError, never exit().
#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor (on the GPU): pass x.to(utils.DEVICE)")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous: call .contiguous() on it first")
#define CHECK_INPUT(x) do { CHECK_CUDA(x); CHECK_CONTIGUOUS(x); } while (0)
// Wrap a CUDA runtime call: a failure becomes a Python exception naming the call and the error.
#define CUDA_CHECK(call) do { cudaError_t err_ = (call); TORCH_CHECK(err_ == cudaSuccess, "CUDA error: ", cudaGetErrorString(err_), " in ", #call); } while (0)

inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b; }
#endif  // GPU_COURSE_COMMON_CUH
