#ifndef GPU_COURSE_SCAN_03_TILES_CU
#define GPU_COURSE_SCAN_03_TILES_CU
#include "../common.cuh"
// Multi-block scans (notebook 09): x is cut into tiles of ST threads x SI float4 = 4096 floats, one
// block per tile. This file has what both multi-block scans share: loading and storing a tile, and
// scanning it inside its block with warp shuffles (a Kogge-Stone of 32 lanes is 5 __shfl_up_sync).
constexpr int ST = 256, SI = 4, SW = ST / 32, STILE = ST * SI * 4;
static_assert(SI * SW == 32, "scan_tile: one warp scans the SI x SW segment totals");

// float4 number j*ST + t of tile `tile` into v[j] (coalesced); zeros past n. x is 16-byte aligned.
__device__ __forceinline__ void load_tile(const float* __restrict__ x, int n, int tile, float4 (&v)[SI]) {
#pragma unroll
    for (int j = 0; j < SI; j++) {
        int e = tile * STILE + (j * ST + threadIdx.x) * 4;   // its first element
        if (e + 4 <= n) v[j] = reinterpret_cast<const float4*>(x)[e / 4];
        else v[j] = make_float4(e < n ? x[e] : 0.0f, e + 1 < n ? x[e + 1] : 0.0f,
                                e + 2 < n ? x[e + 2] : 0.0f, e + 3 < n ? x[e + 3] : 0.0f);
    }
}

// v[j] + offset into out, the same places load_tile read from (only the elements < n).
__device__ __forceinline__ void store_tile(float* __restrict__ out, int n, int tile, float4 (&v)[SI], float offset) {
#pragma unroll
    for (int j = 0; j < SI; j++) {
        int e = tile * STILE + (j * ST + threadIdx.x) * 4;
        float4 r = make_float4(v[j].x + offset, v[j].y + offset, v[j].z + offset, v[j].w + offset);
        if (e + 4 <= n) reinterpret_cast<float4*>(out)[e / 4] = r;
        else {
            if (e < n) out[e] = r.x;
            if (e + 1 < n) out[e + 1] = r.y;
            if (e + 2 < n) out[e + 2] = r.z;
        }
    }
}

// Inclusive Kogge-Stone scan across the 32 lanes of a warp; all 32 lanes must call it.
__device__ __forceinline__ float warp_scan(float v) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int s = 1; s < 32; s *= 2) {
        float left = __shfl_up_sync(0xffffffffu, v, s);   // the value of lane - s
        if (lane >= s) v += left;
    }
    return v;
}

// Scan a tile held in registers, in place: v[j] becomes the inclusive scan within the tile. Returns
// the tile's total (in every thread). The tile is 32 segments (float4 row j, warp w) of 128 floats,
// in the order (j, w); seg (33 floats of shared memory) receives their totals, then their offsets.
__device__ float scan_tile(float4 (&v)[SI], float* seg) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float before[SI];                         // sum of this warp's lanes < lane, per row j
#pragma unroll
    for (int j = 0; j < SI; j++) {
        v[j].y += v[j].x; v[j].z += v[j].y; v[j].w += v[j].z;   // scan inside the float4
        float incl = warp_scan(v[j].w);
        before[j] = __shfl_up_sync(0xffffffffu, incl, 1);
        if (lane == 0) before[j] = 0.0f;
        if (lane == 31) seg[j * SW + warp] = incl;    // the segment's total
    }
    __syncthreads();
    if (warp == 0) {                          // scan the 32 segment totals, in tile order
        float total = seg[lane];
        float incl = warp_scan(total);
        float excl = __shfl_up_sync(0xffffffffu, incl, 1);
        seg[lane] = lane == 0 ? 0.0f : excl;  // each lane rewrites only its own word
        if (lane == 31) seg[32] = incl;       // the tile's total
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < SI; j++) {
        float off = seg[j * SW + warp] + before[j];
        v[j].x += off; v[j].y += off; v[j].z += off; v[j].w += off;
    }
    return seg[32];
}
#endif  // GPU_COURSE_SCAN_03_TILES_CU
