"""Reference solutions of notebook 09's exercises, and answers their checks must refuse (see README.md)."""

ABSMAX = r'''absmax_src = utils.cuda_begin + r"""
// (|v|, i) beats (|w|, j) when |v| > |w|, or |v| == |w| and i < j: the first index of the largest |x|
__device__ __forceinline__ void better(float& v, int& i, float w, int j) {
    if (w > v || (w == v && j < i)) { v = w; i = j; }
}

__device__ __forceinline__ void warp_best(float& v, int& i) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_down_sync(0xffffffffu, v, o);   // lane + o's pair
        int j = __shfl_down_sync(0xffffffffu, i, o);
        better(v, i, w, j);
    }
}

__global__ void absmax_k(const float* __restrict__ x, int* __restrict__ idx, int n) {
    __shared__ float wv[32];
    __shared__ int wi[32];
    float v = -1.0f;
    int i = 0x7fffffff;
    for (int k = threadIdx.x; k < n; k += blockDim.x) better(v, i, fabsf(x[k]), k);
    warp_best(v, i);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) { wv[warp] = v; wi[warp] = i; }
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? wv[lane] : -1.0f;
        i = lane < blockDim.x / 32 ? wi[lane] : 0x7fffffff;
        warp_best(v, i);
        if (lane == 0) *idx = i;
    }
}

void absmax(torch::Tensor x, torch::Tensor idx) {
    CHECK_INPUT(x); CHECK_INPUT(idx);
    absmax_k<<<1, 1024>>>(x.data_ptr<float>(), idx.data_ptr<int>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

HIST32 = r'''hist32_src = utils.cuda_begin + r"""
constexpr int CHUNK = 32;   // each thread counts CHUNK neighbouring bytes

__global__ void hist32_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[32];
    for (int b = threadIdx.x; b < 32; b += blockDim.x) local[b] = 0;
    __syncthreads();
    int start = (blockIdx.x * blockDim.x + threadIdx.x) * CHUNK, stride = gridDim.x * blockDim.x * CHUNK;
    for (int s = start; s < n; s += stride) {
        int run_bin = -1, run = 0;
        for (int i = s; i < min(s + CHUNK, n); i++) {
            int b = x[i] >> 3;
            if (b == run_bin) { run++; continue; }          // the run goes on: count it in a register
            if (run > 0) atomicAdd(&local[run_bin], run);   // one atomic for the whole run
            run_bin = b; run = 1;
        }
        if (run > 0) atomicAdd(&local[run_bin], run);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < 32; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);
}

void hist32(torch::Tensor x, torch::Tensor counts) {
    CHECK_INPUT(x); CHECK_INPUT(counts);
    TORCH_CHECK(counts.numel() == 32, "hist32: counts must have 32 elements");
    counts.zero_();
    int n = x.numel();
    hist32_k<<<min(cdiv(n, 256 * CHUNK), 64), 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

SEG_SCAN = r'''seg_scan_src = utils.cuda_begin + r"""
// (v, f): a sum v and whether a segment starts in it. Left (a, fa) then right (b, fb): fb ? b : a + b.
__device__ __forceinline__ void seg_warp_scan(float& v, int& f) {
    int lane = threadIdx.x % 32;
    for (int s = 1; s < 32; s *= 2) {
        float lv = __shfl_up_sync(0xffffffffu, v, s);
        int lf = __shfl_up_sync(0xffffffffu, f, s);
        if (lane >= s) { if (!f) v += lv; f |= lf; }
    }
}

__global__ void seg_scan_k(const float* __restrict__ x, const int* __restrict__ flags, float* __restrict__ out, int n) {
    __shared__ float wv[32];
    __shared__ int wf[32];
    int t = threadIdx.x, lane = t % 32, warp = t / 32;
    float v = t < n ? x[t] : 0.0f;
    int f = t < n ? (t == 0 || flags[t] != 0) : 0;
    float x_own = v;
    int f_own = f;
    seg_warp_scan(v, f);                       // inclusive within the warp
    if (lane == 31) { wv[warp] = v; wf[warp] = f; }
    __syncthreads();
    if (warp == 0) {                           // scan the warps' (sum, flag) pairs, then make it exclusive
        float a = lane < blockDim.x / 32 ? wv[lane] : 0.0f;
        int af = lane < blockDim.x / 32 ? wf[lane] : 0;
        seg_warp_scan(a, af);
        float pa = __shfl_up_sync(0xffffffffu, a, 1);
        wv[lane] = lane == 0 ? 0.0f : pa;      // what the warps before this one carry in
    }
    __syncthreads();
    if (!f) v += wv[warp];                     // no start in this warp up to me: add the carry
    if (t < n) out[t] = f_own ? 0.0f : v - x_own;
}

void seg_scan(torch::Tensor x, torch::Tensor flags, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(flags); CHECK_INPUT(out);
    int n = x.numel();
    TORCH_CHECK(n >= 1 && n <= 1024, "seg_scan: one block scans 1 to 1024 elements");
    seg_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), flags.data_ptr<int>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

SOLUTIONS = {"ex1-answer-09": ABSMAX, "ex2-answer-09": HIST32, "ex3-answer-09": SEG_SCAN}

# rung 6's kernel of the printed ladder, copied under the exercise's name with max for +: the value, no index
RUNG6_COPIED = r'''absmax_src = utils.cuda_begin + r"""
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

__global__ void absmax_k(const float* __restrict__ x, int* __restrict__ out, int n) {
    __shared__ float warp_maxes[32];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s = fmaxf(s, fabsf(x[i]));
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    s = warp_max(s);
    if (lane == 0) warp_maxes[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = warp_max(lane < blockDim.x / 32 ? warp_maxes[lane] : 0.0f);
        if (lane == 0) atomicMax(out, __float_as_int(s));
    }
}

void absmax(torch::Tensor x, torch::Tensor idx) {
    idx.zero_();
    absmax_k<<<1, 1024>>>(x.data_ptr<float>(), idx.data_ptr<int>(), x.numel());
}
"""
'''

# the notebook's privatized histogram (PMPP's privatization, no aggregation), for 32 bins of bytes
PRIVATIZED_ONLY = (HIST32[:HIST32.index("    for (int s = start;")]
                   + """    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[x[i] >> 3], 1);"""
                   + HIST32[HIST32.index("\n    __syncthreads();\n    for (int b = threadIdx.x; b < 32"):])

# scan_offsets_k of the printed three-pass scan, under the exercise's name: an exclusive scan, flags ignored
def _printed(path: str, start: str) -> str:
    """The lines of the notebook's CUDA file ``path`` from the one that starts with ``start`` to the
    function's closing brace: what a learner copies from the printed listing."""
    from gpu_course.kernels import cuda_source
    lines = cuda_source(path).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next(i for i in range(first, len(lines)) if lines[i] == "}")
    return "\n".join(lines[first:last + 1]) + "\n"


# scan_offsets_k of the printed three-pass scan (and warp_scan, which it calls), under the exercise's name, reading
# x instead of scanning in place: an exclusive scan that ignores the flags
OFFSETS_COPIED = ("seg_scan_src = utils.cuda_begin + r\"\"\"\n"
                  + _printed("scan/03_tiles.cu", "__device__ __forceinline__ float warp_scan(")
                  + _printed("scan/04_three_pass.cu", "__global__ void scan_offsets_k(").replace(
                      "scan_offsets_k(float* __restrict__ sums, int m)",
                      "seg_scan_k(const float* __restrict__ x, float* __restrict__ sums, int m)").replace(
                      "float a = i < m ? sums[i] : 0.0f;", "float a = i < m ? x[i] : 0.0f;")
                  + """
void seg_scan(torch::Tensor x, torch::Tensor flags, torch::Tensor out) {
    seg_scan_k<<<1, 1024>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
\"\"\"
""")

CHEATS = {
    "ex1-answer-09": {
        "one launch of two blocks (each scans all of x): the exercise asks for one block": ABSMAX.replace(
            "absmax_k<<<1, 1024>>>", "absmax_k<<<2, 512>>>"),
        "torch finds the index, the kernel is never launched": ABSMAX.replace(
            "    absmax_k<<<1, 1024>>>(x.data_ptr<float>(), idx.data_ptr<int>(), x.numel());",
            "    idx.copy_(x.abs().argmax().reshape(1));"),
        "rung 6's warp_sum copied with fmaxf: the largest |x|, not its index": RUNG6_COPIED,
        "no tie-break: the first index of the largest |x| is not always the one kept": ABSMAX.replace(
            "if (w > v || (w == v && j < i))", "if (w > v)"),
        "the host function finds the index in a C++ loop and passes it; the kernel reduces, then writes that number":
            ABSMAX.replace("int* __restrict__ idx, int n) {", "int* __restrict__ idx, int n, int found) {").replace(
            "if (lane == 0) *idx = i;", "if (lane == 0) *idx = found + 0 * i;").replace(
            "    absmax_k<<<1, 1024>>>(x.data_ptr<float>(), idx.data_ptr<int>(), x.numel());", """\
    int n = x.numel(), found = 0;
    std::vector<float> h(n);
    cudaMemcpy(h.data(), x.data_ptr<float>(), n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int k = 1; k < n; ++k) if (fabsf(h[k]) > fabsf(h[found])) found = k;
    absmax_k<<<1, 1024>>>(x.data_ptr<float>(), idx.data_ptr<int>(), n, found);"""),
        "a shared-memory tree without warp shuffles": ABSMAX[:ABSMAX.index("    warp_best(v, i);\n    int lane")] + """\
    __shared__ float sv[1024];
    __shared__ int si[1024];
    sv[threadIdx.x] = v; si[threadIdx.x] = i;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            better(v, i, sv[threadIdx.x + k], si[threadIdx.x + k]);
            sv[threadIdx.x] = v; si[threadIdx.x] = i;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) *idx = i;""" + ABSMAX[ABSMAX.index("\n}\n\nvoid absmax"):],
    },
    "ex2-answer-09": {
        "torch.bincount in the host function": HIST32.replace(
            "hist32_k<<<min(cdiv(n, 256 * CHUNK), 64), 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), n);",
            "counts.copy_(torch::bincount(x.to(torch::kLong).div(8, \"floor\"), {}, 32));"),
        "the host counts the bytes in a C++ loop into a __device__ array; the kernel counts, then adds that array":
            HIST32.replace("__global__ void hist32_k", "__device__ int stash[32];\n\n__global__ void hist32_k").replace(
            "        if (local[b] > 0) atomicAdd(&counts[b], local[b]);",
            "        if (blockIdx.x == 0) atomicAdd(&counts[b], stash[b] + 0 * local[b]);").replace(
            "    counts.zero_();\n", """    counts.zero_();
    std::vector<unsigned char> h(x.numel());
    cudaMemcpy(h.data(), x.data_ptr<unsigned char>(), h.size(), cudaMemcpyDeviceToHost);
    int found[32] = {0};
    for (unsigned char v : h) found[v >> 3]++;
    cudaMemcpyToSymbol(stash, found, sizeof found);
"""),
        "runs aggregated in registers, one global atomic per run, no shared bins": HIST32.replace(
            "atomicAdd(&local[run_bin], run)", "atomicAdd(&counts[run_bin], run)").replace(
            """    for (int b = threadIdx.x; b < 32; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);""", ""),
        "no runs: a private histogram per thread over its whole share (two blocks), flushed once": HIST32.replace(
            HIST32[HIST32.index("    for (int s = start; s < n; s += stride) {"):HIST32.index("    __syncthreads();\n    for (int b")],
            """    int mine[32] = {0};                                  // far-apart bytes counted together
    for (int s = start; s < n; s += stride)
        for (int i = s; i < min(s + CHUNK, n); i++) mine[x[i] >> 3]++;
    for (int b = 0; b < 32; b++) if (mine[b] > 0) atomicAdd(&local[b], mine[b]);
""").replace("hist32_k<<<min(cdiv(n, 256 * CHUNK), 64), 256>>>", "hist32_k<<<2, 128>>>"),
    },
    "ex3-answer-09": {
        "torch in the host function": SEG_SCAN.replace(
            "seg_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), flags.data_ptr<int>(), out.data_ptr<float>(), n);",
            "out.copy_(torch::cumsum(x, 0) - x);   // flags ignored: refused already as torch in the host"),
        "scan_offsets_k of the three-pass scan, copied: an exclusive scan that ignores the flags": OFFSETS_COPIED,
        "a shared-memory Kogge-Stone of (sum, flag) pairs, without shuffles": r'''seg_scan_src = utils.cuda_begin + r"""
__global__ void seg_scan_k(const float* __restrict__ x, const int* __restrict__ flags, float* __restrict__ out, int n) {
    __shared__ float sv[1024];
    __shared__ int sf[1024];
    int t = threadIdx.x;
    sv[t] = t < n ? x[t] : 0.0f;
    sf[t] = t < n ? (t == 0 || flags[t] != 0) : 0;
    float own = sv[t];
    int own_f = sf[t];
    __syncthreads();
    for (int s = 1; s < blockDim.x; s *= 2) {
        float lv = t >= s ? sv[t - s] : 0.0f;
        int lf = t >= s ? sf[t - s] : 0;
        __syncthreads();
        if (t >= s) { if (!sf[t]) sv[t] += lv; sf[t] |= lf; }
        __syncthreads();
    }
    if (t < n) out[t] = own_f ? 0.0f : sv[t] - own;
}

void seg_scan(torch::Tensor x, torch::Tensor flags, torch::Tensor out) {
    int n = x.numel();
    seg_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), flags.data_ptr<int>(), out.data_ptr<float>(), n);
}
"""
''',
    },
}

# Refused only in cpu mode, where the emulation counts what every thread of the course's own launch did; on
# a GPU the evidence is the compiled kernel, where the split of the work between threads and the number of
# shared-memory atomics do not show.
CPU_CHEATS = {
    "ex1-answer-09": {
        "thread 0 scans everything, the shuffles compare what the others hold": ABSMAX.replace(
            "for (int k = threadIdx.x; k < n; k += blockDim.x)", "if (threadIdx.x == 0) for (int k = 0; k < n; ++k)"),
    },
    "ex2-answer-09": {
        "privatized bins without aggregation: one shared atomic per byte": PRIVATIZED_ONLY,
    },
    "ex3-answer-09": {
        "thread 0 scans every segment, the other threads shuffle their own": SEG_SCAN.replace(
            "    if (t < n) out[t] = f_own ? 0.0f : v - x_own;",
            "    if (t == 0) {\n        float acc = 0.0f;\n        for (int i = 0; i < n; ++i) {\n"
            "            if (i == 0 || flags[i]) acc = 0.0f;\n            out[i] = acc;\n            acc += x[i];\n        }\n    }"),
    },
}

_HIST_HOST = HIST32[HIST32.index("void hist32("):]   # the solution's host function, to the end of the source
_HIST_LAUNCH = "    hist32_k<<<min(cdiv(n, 256 * CHUNK), 64), 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), n);\n"
assert _HIST_LAUNCH in _HIST_HOST and "    counts.zero_();\n" in _HIST_HOST
_CARRY_LINE = "    if (!f) v += wv[warp];                     // no start in this warp up to me: add the carry\n"
assert _CARRY_LINE in SEG_SCAN

# right answers written otherwise than the solutions: each must be accepted (more, judged by their counts, are in
# tests/unit/test_exercises_learners_launch.py)
UNUSUAL = {
    "ex1-answer-09": {
        "|x| and the index as one 64-bit key, 64-bit shuffles, blocks of 256": r'''absmax_src = utils.cuda_begin + r"""
// |x| >= 0, so its bits order as an unsigned int does; below them 0x7fffffff - i, so that on a tie the smaller
// index makes the larger key
__device__ __forceinline__ unsigned long long key_of(float a, int i) {
    return ((unsigned long long)__float_as_uint(a) << 32) | (unsigned)(0x7fffffff - i);
}

__device__ __forceinline__ unsigned long long warp_max_key(unsigned long long kv) {
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long c = __shfl_down_sync(0xffffffffu, kv, o);
        kv = c > kv ? c : kv;
    }
    return kv;
}

__global__ void absmax_k(const float* __restrict__ x, int* __restrict__ idx, int n) {
    __shared__ unsigned long long best[32];
    unsigned long long kv = 0;                  // below every element's key
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const unsigned long long c = key_of(fabsf(x[i]), i);
        kv = c > kv ? c : kv;
    }
    kv = warp_max_key(kv);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) best[warp] = kv;
    __syncthreads();
    if (warp == 0) {
        kv = warp_max_key(lane < blockDim.x / 32 ? best[lane] : 0ull);
        if (lane == 0) *idx = 0x7fffffff - (int)(kv & 0xffffffffu);
    }
}

void absmax(torch::Tensor x, torch::Tensor idx) {
    CHECK_INPUT(x); CHECK_INPUT(idx);
    absmax_k<<<1, 256>>>(x.data_ptr<float>(), idx.data_ptr<int>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
''',
        "a shared-memory tree down to 32 pairs, one warp's shuffles for the rest, blocks of 512": r'''absmax_src = utils.cuda_begin + r"""
__global__ void absmax_k(const float* __restrict__ x, int* __restrict__ idx, int n) {
    __shared__ float sv[512];
    __shared__ int si[512];
    const int t = threadIdx.x;
    float v = -1.0f;
    int i = 0x7fffffff;
    for (int k = t; k < n; k += blockDim.x) {   // k grows: on a tie the first index stays
        const float a = fabsf(x[k]);
        if (a > v) { v = a; i = k; }
    }
    sv[t] = v; si[t] = i;
    __syncthreads();
    for (int s = blockDim.x / 2; s >= 32; s >>= 1) {
        if (t < s) {
            const float w = sv[t + s];
            const int j = si[t + s];
            if (w > v || (w == v && j < i)) { v = w; i = j; sv[t] = v; si[t] = i; }
        }
        __syncthreads();
    }
    if (t < 32) {
        for (int o = 16; o > 0; o >>= 1) {
            const float w = __shfl_down_sync(0xffffffffu, v, o);
            const int j = __shfl_down_sync(0xffffffffu, i, o);
            if (w > v || (w == v && j < i)) { v = w; i = j; }
        }
        if (t == 0) *idx = i;
    }
}

void absmax(torch::Tensor x, torch::Tensor idx) {
    CHECK_INPUT(x); CHECK_INPUT(idx);
    absmax_k<<<1, 512>>>(x.data_ptr<float>(), idx.data_ptr<int>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
''',
    },
    "ex2-answer-09": {
        "each warp groups its 32 neighbouring bytes by bin (__match_any_sync), one atomic per group": r'''hist32_src = utils.cuda_begin + r"""
__global__ void hist32_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[32];
    if (threadIdx.x < 32) local[threadIdx.x] = 0;
    __syncthreads();
    const int lane = threadIdx.x % 32;
    // a warp's lanes read 32 neighbouring bytes; the loop's bounds are the warp's, so all 32 lanes match together
    for (int base = blockIdx.x * blockDim.x + threadIdx.x - lane; base < n; base += gridDim.x * blockDim.x) {
        const int i = base + lane;
        const int b = i < n ? x[i] >> 3 : 32 + lane;               // past the end: a bin no other lane has
        const unsigned same = __match_any_sync(0xffffffffu, b);   // the lanes whose byte has my bin
        if (i < n && lane == __ffs(same) - 1) atomicAdd(&local[b], __popc(same));
    }
    __syncthreads();
    if (threadIdx.x < 32 && local[threadIdx.x] > 0) atomicAdd(&counts[threadIdx.x], local[threadIdx.x]);
}

''' + _HIST_HOST.replace(_HIST_LAUNCH, _HIST_LAUNCH.replace("min(cdiv(n, 256 * CHUNK), 64), 256", "min(cdiv(n, 256), 128), 256")),
        "16 bytes a load (uint4), runs counted within them, blocks of 128": r'''hist32_src = utils.cuda_begin + r"""
__global__ void hist32_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[32];
    for (int b = threadIdx.x; b < 32; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const int n16 = n / 16, tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    for (int v = tid; v < n16; v += stride) {
        const uint4 q = reinterpret_cast<const uint4*>(x)[v];     // 16 neighbouring bytes in one load
        const unsigned words[4] = {q.x, q.y, q.z, q.w};
        int run_bin = -1, run = 0;
        for (int e = 0; e < 16; ++e) {
            const int b = ((words[e / 4] >> (8 * (e % 4))) & 0xffu) >> 3;
            if (b == run_bin) { ++run; continue; }
            if (run > 0) atomicAdd(&local[run_bin], run);
            run_bin = b; run = 1;
        }
        atomicAdd(&local[run_bin], run);
    }
    for (int i = 16 * n16 + tid; i < n; i += stride) atomicAdd(&local[x[i] >> 3], 1);   // the last n % 16 bytes
    __syncthreads();
    for (int b = threadIdx.x; b < 32; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);
}

''' + _HIST_HOST.replace(_HIST_LAUNCH, _HIST_LAUNCH.replace("min(cdiv(n, 256 * CHUNK), 64), 256", "min(cdiv(n / 16 + 1, 128), 64), 128")).replace(
            "    counts.zero_();\n",
            '    TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "hist32: x must start on 16 bytes");\n'
            "    counts.zero_();\n"),
    },
    "ex3-answer-09": {
        "out[t] = P[t] - P[start of t's segment]: a sum scan and a max scan of start indices, by shuffles": r'''seg_scan_src = utils.cuda_begin + r"""
// P, the exclusive prefix sum of x, scanned once over the whole block; each element's segment starts at the
// largest start index at or before it (a max scan), and the segment's sum so far is the difference of two P's
__device__ __forceinline__ float warp_sum_scan(float v) {   // inclusive
    const int lane = threadIdx.x % 32;
    for (int s = 1; s < 32; s *= 2) {
        const float u = __shfl_up_sync(0xffffffffu, v, s);
        if (lane >= s) v += u;
    }
    return v;
}

__device__ __forceinline__ int warp_max_scan(int v) {       // inclusive
    const int lane = threadIdx.x % 32;
    for (int s = 1; s < 32; s *= 2) {
        const int u = __shfl_up_sync(0xffffffffu, v, s);
        if (lane >= s) v = max(v, u);
    }
    return v;
}

__global__ void seg_scan_k(const float* __restrict__ x, const int* __restrict__ flags, float* __restrict__ out, int n) {
    __shared__ float p[1024];
    __shared__ float wsum[32];
    __shared__ int wstart[32];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32, warps = blockDim.x / 32;
    const float xv = t < n ? x[t] : 0.0f;
    float s = warp_sum_scan(xv);
    int st = warp_max_scan(t < n && (t == 0 || flags[t] != 0) ? t : 0);
    if (lane == 31) { wsum[warp] = s; wstart[warp] = st; }
    __syncthreads();
    if (warp == 0) {                          // the warps' totals scanned, then shifted by one: what each carries in
        const float a = warp_sum_scan(lane < warps ? wsum[lane] : 0.0f);
        const int b = warp_max_scan(lane < warps ? wstart[lane] : 0);
        const float pa = __shfl_up_sync(0xffffffffu, a, 1);
        const int pb = __shfl_up_sync(0xffffffffu, b, 1);
        wsum[lane] = lane == 0 ? 0.0f : pa;
        wstart[lane] = lane == 0 ? 0 : pb;
    }
    __syncthreads();
    s += wsum[warp];
    st = max(st, wstart[warp]);
    p[t] = s - xv;                            // exclusive
    __syncthreads();
    if (t < n) out[t] = p[t] - p[st];
}

''' + SEG_SCAN[SEG_SCAN.index("void seg_scan("):],
        "the carry added below the warp's first start, found by __ballot_sync and __ffs": SEG_SCAN.replace(
            _CARRY_LINE,
            "    const unsigned starts = __ballot_sync(0xffffffffu, f_own);   // the lanes where a segment starts\n"
            "    if (lane < (starts ? __ffs(starts) - 1 : 32)) v += wv[warp];  // before the first: carry in\n"),
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer
