"""Reference solutions of notebook 09's exercises, and answers their checks must refuse (see README.md)."""

SUMSQ = r'''sumsq_src = utils.cuda_begin + r"""
__global__ void sumsq_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float warp_totals[32];
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i] * x[i];
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_totals[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < blockDim.x / 32 ? warp_totals[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
        if (lane == 0) atomicAdd(out, s);
    }
}

void sumsq(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    out.zero_();
    sumsq_k<<<64, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

BYTE_HIST = r'''byte_hist_src = utils.cuda_begin + r"""
__global__ void byte_hist_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[x[i]], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);
}

void byte_hist(torch::Tensor x, torch::Tensor counts) {
    CHECK_INPUT(x); CHECK_INPUT(counts);
    TORCH_CHECK(counts.numel() == 256, "byte_hist: counts must have 256 elements");
    counts.zero_();
    byte_hist_k<<<32, 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

EXCL_SCAN = r'''excl_scan_src = utils.cuda_begin + r"""
__global__ void excl_scan_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float warp_before[32];
    int t = threadIdx.x, lane = t % 32, warp = t / 32;
    float v = t < n ? x[t] : 0.0f, incl = v;
    for (int s = 1; s < 32; s *= 2) {
        float left = __shfl_up_sync(0xffffffffu, incl, s);
        if (lane >= s) incl += left;
    }
    if (lane == 31) warp_before[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        float w = lane < blockDim.x / 32 ? warp_before[lane] : 0.0f, wi = w;
        for (int s = 1; s < 32; s *= 2) {
            float left = __shfl_up_sync(0xffffffffu, wi, s);
            if (lane >= s) wi += left;
        }
        warp_before[lane] = wi - w;
    }
    __syncthreads();
    float mine = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) mine = 0.0f;
    if (t < n) out[t] = warp_before[warp] + mine;
}

void excl_scan(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    int n = x.numel();
    TORCH_CHECK(n >= 1 && n <= 1024, "excl_scan: one block scans 1 to 1024 elements");
    excl_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

# the shared-memory tree of the cheat below, with a shuffle in a branch no thread takes
TREE_WITH_DEAD_SHUFFLE = r'''sumsq_src = utils.cuda_begin + r"""
__global__ void sumsq_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float sh[256];
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i] * x[i];
    if (n < 0) s += __shfl_down_sync(0xffffffffu, s, 16);   // never true
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, sh[0]);
}

void sumsq(torch::Tensor x, torch::Tensor out) {
    out.zero_();
    sumsq_k<<<64, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
"""
'''

SOLUTIONS = {
    "ex1-answer-09": SUMSQ,
    "ex2-answer-09": BYTE_HIST,
    "ex3-answer-09": EXCL_SCAN,
}

CHEATS = {
    "ex1-answer-09": {
        "torch computes the sum, the kernel is never launched": SUMSQ.replace(
            "sumsq_k<<<64, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());",
            "out.copy_((x * x).sum().reshape(1));"),
        "a shared-memory tree without warp shuffles": r'''sumsq_src = utils.cuda_begin + r"""
__global__ void sumsq_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float sh[256];
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i] * x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, sh[0]);
}

void sumsq(torch::Tensor x, torch::Tensor out) {
    out.zero_();
    sumsq_k<<<64, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
"""
''',
        "shuffles under #if 0, a shared-memory tree does the sum": TREE_WITH_DEAD_SHUFFLE.replace(
            "    if (n < 0) s += __shfl_down_sync(0xffffffffu, s, 16);   // never true",
            "#if 0\n    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);\n#endif"),
        "another kernel of the source sums; sumsq_k, launched after it, adds zeros": SUMSQ.replace(
            "s += x[i] * x[i];", "s += 0.0f * x[i];").replace(
            "void sumsq(torch::Tensor x, torch::Tensor out) {", """__global__ void helper_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i] * x[i]);
}

void sumsq(torch::Tensor x, torch::Tensor out) {""").replace(
            "    sumsq_k<<<64, 256>>>", "    helper_k<<<cdiv(x.numel(), 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), "
            "x.numel());\n    sumsq_k<<<64, 256>>>"),
    },
    "ex2-answer-09": {
        "torch.bincount in the host function": BYTE_HIST.replace(
            "byte_hist_k<<<32, 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), x.numel());",
            "counts.copy_(torch::bincount(x.to(torch::kLong), {}, 256));"),
        "one global atomic per element, no shared memory": r'''byte_hist_src = utils.cuda_begin + r"""
__global__ void byte_hist_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&counts[x[i]], 1);
}

void byte_hist(torch::Tensor x, torch::Tensor counts) {
    counts.zero_();
    int n = x.numel();
    byte_hist_k<<<cdiv(n, 256), 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), n);
}
"""
''',
        "__shared__ counters zeroed and read back, every element counted by a global atomic": BYTE_HIST.replace(
            "atomicAdd(&local[x[i]], 1);", "atomicAdd(&counts[x[i]], 1);"),
        "__shared__ counters under #if 0, global atomics": BYTE_HIST.replace(
            "    __shared__ int local[256];", "#if 0\n    __shared__ int local[256];").replace(
            "        atomicAdd(&local[x[i]], 1);\n    __syncthreads();", "        atomicAdd(&local[x[i]], 1);\n#endif\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            "        atomicAdd(&counts[x[i]], 1);\n#if 0\n    __syncthreads();").replace(
            "        if (local[b] > 0) atomicAdd(&counts[b], local[b]);", "        if (local[b] > 0) atomicAdd(&counts[b], local[b]);\n#endif"),
    },
    "ex3-answer-09": {
        "torch.cumsum in the host function": EXCL_SCAN.replace(
            "excl_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);",
            "out.copy_(torch::cumsum(x, 0) - x);"),
        "a shared-memory Kogge-Stone without shuffles": r'''excl_scan_src = utils.cuda_begin + r"""
__global__ void excl_scan_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float sh[1024];
    int t = threadIdx.x;
    sh[t] = t > 0 && t - 1 < n ? x[t - 1] : 0.0f;
    __syncthreads();
    for (int s = 1; s < blockDim.x; s *= 2) {
        float left = t >= s ? sh[t - s] : 0.0f;
        __syncthreads();
        sh[t] += left;
        __syncthreads();
    }
    if (t < n) out[t] = sh[t];
}

void excl_scan(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    excl_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""
''',
    },
}

# Refused only in cpu mode, where the emulation counts what every thread of the course's own launch did; on
# a GPU the evidence is the compiled kernel, where a branch whose condition depends on the arguments stays
# and the split of the work between threads does not show.
CPU_CHEATS = {
    "ex1-answer-09": {
        "shuffles in a branch no thread takes, a shared-memory tree does the sum": TREE_WITH_DEAD_SHUFFLE,
        "thread 0 of block 0 sums every element, the shuffles add zeros": SUMSQ.replace(
            "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i] * x[i];",
            "if (blockIdx.x == 0 && threadIdx.x == 0) for (int i = 0; i < n; ++i) s += x[i] * x[i];"),
    },
    "ex3-answer-09": {
        "__shfl_up_sync in a branch no thread takes, a shared-memory Kogge-Stone does the scan": r'''excl_scan_src = utils.cuda_begin + r"""
__global__ void excl_scan_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float sh[1024];
    int t = threadIdx.x;
    sh[t] = t > 0 && t - 1 < n ? x[t - 1] : 0.0f;
    if (n > (1 << 30)) sh[t] += __shfl_up_sync(0xffffffffu, sh[t], 1);   // never true
    __syncthreads();
    for (int s = 1; s < blockDim.x; s *= 2) {
        float left = t >= s ? sh[t - s] : 0.0f;
        __syncthreads();
        sh[t] += left;
        __syncthreads();
    }
    if (t < n) out[t] = sh[t];
}

void excl_scan(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    excl_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""
''',
        "thread 0 scans every element, the other threads shuffle their own": r'''excl_scan_src = utils.cuda_begin + r"""
__global__ void excl_scan_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int t = threadIdx.x;
    float v = t < n ? x[t] : 0.0f;
    float left = __shfl_up_sync(0xffffffffu, v, 1);
    if (left != left) return;   // uses left (never NaN here)
    if (t == 0) {
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) { out[i] = acc; acc += x[i]; }
    }
}

void excl_scan(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    excl_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""
''',
    },
}
