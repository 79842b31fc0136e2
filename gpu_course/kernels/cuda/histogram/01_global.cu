#ifndef GPU_COURSE_HISTOGRAM_01_GLOBAL_CU
#define GPU_COURSE_HISTOGRAM_01_GLOBAL_CU
#include "../common.cuh"
// Histograms (notebook 09) with torch.histc's rule: `bins` equal bins over [lo, hi], hi itself in
// the last bin, values outside (and NaN) not counted. Counts are int32: integer atomics give the
// same counts whatever order the threads add in.
__device__ __forceinline__ int bin_of(float v, float lo, float hi, int bins) {
    if (!(v >= lo && v <= hi)) return -1;
    int b = static_cast<int>((v - lo) * bins / (hi - lo));   // the same float operations as torch.histc
    return b == bins ? bins - 1 : b;
}

// naive: one thread per element, one atomicAdd on the global counts per element
__global__ void histogram_global_k(const float* __restrict__ x, int* __restrict__ counts, int n,
                                   float lo, float hi, int bins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int b = bin_of(x[i], lo, hi, bins);
        if (b >= 0) atomicAdd(&counts[b], 1);
    }
}
#endif  // GPU_COURSE_HISTOGRAM_01_GLOBAL_CU
