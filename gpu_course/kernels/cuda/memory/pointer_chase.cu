#ifndef GPU_COURSE_MEMORY_POINTER_CHASE_CU
#define GPU_COURSE_MEMORY_POINTER_CHASE_CU
#include "../common.cuh"
// A pointer chase (notebook 03): one thread follows next[] for `steps` loads, each load's address the value
// of the load before, so no two loads are ever in flight together: the time per step is the latency of one
// load. next[] holds one random cycle over its elements, so each step lands on a line far from the last one
// (in L2 when next[] fits there, in DRAM when it is several times larger).
__global__ void pointer_chase_k(const int* __restrict__ next, int start, long long steps, int* __restrict__ end) {
    int j = start;
    for (long long s = 0; s < steps; s++) j = next[j];
    *end = j;   // the result depends on every load, so the compiler keeps them all
}

void pointer_chase(torch::Tensor next, torch::Tensor end, int64_t start, int64_t steps) {
    CHECK_INPUT(next); CHECK_INPUT(end);
    TORCH_CHECK(next.scalar_type() == torch::kInt && end.scalar_type() == torch::kInt, "next and end must be int32");
    TORCH_CHECK(start >= 0 && start < next.numel() && steps >= 0, "start must index next, steps must be >= 0");
    pointer_chase_k<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(
            next.data_ptr<int>(), (int)start, (long long)steps, end.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_MEMORY_POINTER_CHASE_CU
