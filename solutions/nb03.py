"""Reference solutions of notebook 03's exercises, and answers its checks must refuse.

Every CUDA C source here is built by the check (in CI through the CPU emulation, a few seconds each, and
once more with the course's launcher: the check launches the kernel itself): the cheats that need a build
are kept to the few that show a lesson (the guard, the scalars, fusion, a kernel that does not do the work).
"""

_HOST = r"""
void {f}(torch::Tensor x, torch::Tensor out) {{
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.numel() == out.numel(), "out must have as many elements as x");
    int n = x.numel();
    {f}_k<<<cdiv(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}}
"""

RELU = r'''relu_src = utils.cuda_begin + r"""
__global__ void relu_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
""" + r"""''' + _HOST.format(f="relu") + '"""\n'

SILU = r'''silu_src = utils.cuda_begin + r"""
__global__ void silu_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] / (1.0f + expf(-x[i]));
}
""" + r"""''' + _HOST.format(f="silu") + '"""\n'

AXPB = r'''axpb_src = utils.cuda_begin + r"""
__global__ void axpb_k(const float* __restrict__ x, float* __restrict__ out, int n, float a, float b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + b;
}

void axpb(torch::Tensor x, torch::Tensor out, double a, double b) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.numel() == out.numel(), "out must have as many elements as x");
    int n = x.numel();
    axpb_k<<<cdiv(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), n, (float)a, (float)b);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

RELU4 = r'''relu4_src = utils.cuda_begin + r"""
__global__ void relu4_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n / 4;
    if (j < n4) {
        float4 v = reinterpret_cast<const float4*>(x)[j];
        reinterpret_cast<float4*>(out)[j] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f), fmaxf(v.w, 0.0f));
    }
    if (j < n % 4) out[4 * n4 + j] = fmaxf(x[4 * n4 + j], 0.0f);
}

void relu4(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    TORCH_CHECK(x.numel() == out.numel(), "out must have as many elements as x");
    int n = x.numel();
    relu4_k<<<cdiv(max(n / 4, n % 4), 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
'''

SOLUTIONS = {
    "ex03-1-answer": RELU,
    "ex03-2-answer": SILU,
    "ex03-3-answer": AXPB,
    "ex03-4-answer": "bytes_unfused = lambda n: 3 * (4 * n + 4 * n)   # three ops, each reads and writes n floats",
    "ex03-5-answer": "grid_for = lambda h, w: utils.dim3(utils.cdiv(w, 4 * 32), utils.cdiv(h, 8))",
    "ex03-6-answer": RELU4,
}

CHEATS = {
    "ex03-1-answer": {
        "a kernel that writes nothing, then torch in the host function": '''relu_src = utils.cuda_begin + r"""
__global__ void relu_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; (void)v; }
}

void relu(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    relu_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    out.copy_(x.clamp_min(0));
}
"""
''',
        "a torch function": "relu_src = torch.relu",
        "one thread of one block loops over everything (<<<1, 1>>>)": RELU.replace(
            "if (i < n) out[i] = fmaxf(x[i], 0.0f);", "if (i == 0) for (int j = 0; j < n; ++j) out[j] = fmaxf(x[j], 0.0f);"
        ).replace("relu_k<<<cdiv(n, 256), 256, 0,", "relu_k<<<1, 1, 0,"),
        "the course's square kernel under the exercise's name": (
            'relu_src = utils.cuda_begin + r"""\n'
            "__global__ void relu_k(const float* __restrict__ x, float* __restrict__ out, int n) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) out[i] = square_f(x[i]);\n"
            '}\n"""'),
        "a kernel under another name": "relu_src = " + RELU.split("=", 1)[1].replace("relu_k", "my_relu_k"),
        "no guard: the last block writes past the end": RELU.replace("if (i < n) out[i]", "out[i]"),
        "another kernel of the source does the work; relu_k, launched after it, writes nothing": r'''relu_src = utils.cuda_begin + r"""
__global__ void helper_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
__global__ void relu_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; (void)v; }
}

void relu(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    helper_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    relu_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""
''',
        "the host function computes ReLU in a C++ loop and keeps it in a __device__ array the kernel copies":
            r'''relu_src = utils.cuda_begin + r"""
__device__ float stash[1 << 20];
__global__ void relu_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = stash[i] + 0.0f * x[i];
}

void relu(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    std::vector<float> h(n);
    cudaMemcpy(h.data(), x.data_ptr<float>(), n * sizeof(float), cudaMemcpyDeviceToHost);
    for (auto& v : h) v = v > 0.0f ? v : 0.0f;
    cudaMemcpyToSymbol(stash, h.data(), n * sizeof(float));
    relu_k<<<cdiv(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""
''',
    },
    "ex03-2-answer": {
        "a torch one-liner": "silu_src = lambda x: torch.nn.functional.silu(x)",
    },
    "ex03-3-answer": {
        "a and b typed in (the old check's 2.5 and -1)": AXPB.replace("(float)a, (float)b", "2.5f, -1.0f"),
        "the kernel computes a * x, torch adds b in the host function": AXPB.replace(
            "out[i] = a * x[i] + b;", "out[i] = a * x[i];").replace(
            "    C10_CUDA_KERNEL_LAUNCH_CHECK();", "    C10_CUDA_KERNEL_LAUNCH_CHECK();\n    out.add_(b);"),
        "two kernels: scale, then shift": r'''axpb_src = utils.cuda_begin + r"""
__global__ void axpb_k(const float* __restrict__ x, float* __restrict__ out, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i];
}
__global__ void shift_k(float* __restrict__ out, int n, float b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += b;
}

void axpb(torch::Tensor x, torch::Tensor out, double a, double b) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    int n = x.numel();
    axpb_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, (float)a);
    shift_k<<<cdiv(n, 256), 256>>>(out.data_ptr<float>(), n, (float)b);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
''',
    },
    "ex03-4-answer": {
        "the number for n = 7, copied": "bytes_unfused = 168",
        "counted as one fused pass": "bytes_unfused = lambda n: 2 * 4 * n",
    },
    "ex03-5-answer": {
        "the grid for 1080 x 1920, copied": "grid_for = utils.dim3(15, 135)",
        "section 2's grid, 16 x 16 blocks of one column a thread": (
            "grid_for = lambda h, w: utils.dim3(utils.cdiv(w, 16), utils.cdiv(h, 16))"),
        "one column a thread": "grid_for = lambda h, w: utils.dim3(utils.cdiv(w, 32), utils.cdiv(h, 8))",
        "rows and columns swapped": "grid_for = lambda h, w: utils.dim3(utils.cdiv(h, 8), utils.cdiv(w, 128))",
        "rounded down": "grid_for = lambda h, w: utils.dim3(w // 128, h // 8)",
    },
    "ex03-6-answer": {
        "one thread per float (section 5's kernel)": RELU.replace("relu_src", "relu4_src").replace("relu_k", "relu4_k")
                                                         .replace("void relu(", "void relu4("),
        "no tail: the last n % 4 elements are never written": RELU4.replace(
            "    if (j < n % 4) out[4 * n4 + j] = fmaxf(x[4 * n4 + j], 0.0f);\n", ""),
        "one thread does it all, in a loop": RELU4.replace(
            "relu4_k<<<cdiv(max(n / 4, n % 4), 256), 256, 0,", "relu4_k<<<1, 1, 0,").replace(
            "    int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n / 4;\n    if (j < n4) {",
            "    int n4 = n / 4;\n    for (int j = 0; j < n4; ++j) {").replace(
            "    if (j < n % 4) out", "    for (int j = 0; j < n % 4; ++j) out"),
    },
}

# Refused only in cpu mode, where the emulation counts what every thread of the course's own launch did;
# on a GPU the evidence is the compiled kernel, which cannot show how the work was split.
CPU_CHEATS = {
    "ex03-1-answer": {
        "thread 0 of block 0 does all the work": RELU.replace(
            "if (i < n) out[i] = fmaxf(x[i], 0.0f);",
            "if (i == 0) for (int j = 0; j < n; ++j) out[j] = fmaxf(x[j], 0.0f);"),
    },
}

_SILU_LINE = "    if (i < n) out[i] = x[i] / (1.0f + expf(-x[i]));"
_AXPB_LINE = "    if (i < n) out[i] = a * x[i] + b;"
_RELU_LINE = "    if (i < n) out[i] = fmaxf(x[i], 0.0f);"
_RELU4_BODY = RELU4[RELU4.index("    int j = blockIdx.x"):RELU4.index("}\n\nvoid relu4(")]
assert _SILU_LINE in SILU and _AXPB_LINE in AXPB and _RELU_LINE in RELU

# right answers written otherwise than the solutions: each must be accepted (more, judged by their counts, are in
# tests/unit/test_exercises_work.py, test_exercises_counted.py and test_exercises_learners_launch.py)
UNUSUAL = {
    "ex03-1-answer": {
        "a grid-stride loop on a grid of at most 8 blocks": RELU.replace(
            _RELU_LINE, "    for (; i < n; i += gridDim.x * blockDim.x) out[i] = fmaxf(x[i], 0.0f);").replace(
            "relu_k<<<cdiv(n, 256), 256,", "relu_k<<<cdiv(n, 256) < 8 ? cdiv(n, 256) : 8, 256,"),
        "an early return, a ternary, blocks of 1024 threads": RELU.replace(
            _RELU_LINE, "    if (i >= n) return;\n    const float v = x[i];\n    out[i] = v > 0.0f ? v : 0.0f;").replace(
            "cdiv(n, 256), 256,", "cdiv(n, 1024), 1024,"),
    },
    "ex03-6-answer": {
        "the tail by the thread after the last float4, in a loop; blocks of 128": RELU4.replace(_RELU4_BODY, r"""
    int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n / 4;
    if (j < n4) {
        float4 v = reinterpret_cast<const float4*>(x)[j];
        v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f);
        reinterpret_cast<float4*>(out)[j] = v;
    } else if (j == n4) {
        for (int e = 4 * n4; e < n; ++e) out[e] = fmaxf(x[e], 0.0f);
    }
""".lstrip("\n")).replace("relu4_k<<<cdiv(max(n / 4, n % 4), 256), 256,", "relu4_k<<<cdiv(n / 4 + 1, 128), 128,"),
        "__ldg float4 loads, the tail counted from the end by the first threads": RELU4.replace(_RELU4_BODY, r"""
    const int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n >> 2;
    if (j < (n & 3)) out[n - 1 - j] = fmaxf(__ldg(x + n - 1 - j), 0.0f);
    if (j < n4) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(x) + j);
        reinterpret_cast<float4*>(out)[j] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f), fmaxf(v.w, 0.0f));
    }
""".lstrip("\n")).replace("cdiv(max(n / 4, n % 4), 256), 256,", "cdiv(max(n / 4, n % 4), 512), 512,"),
    },
    "ex03-2-answer": {
        "the sigmoid through tanh: x (1 + tanh(x / 2)) / 2": SILU.replace(
            _SILU_LINE, "    if (i < n) { float v = x[i]; out[i] = 0.5f * v * (1.0f + tanhf(0.5f * v)); }"),
        "blocks of 128 threads": SILU.replace("cdiv(n, 256), 256,", "cdiv(n, 128), 128,"),
    },
    "ex03-3-answer": {
        "one fused multiply-add, fmaf": AXPB.replace(_AXPB_LINE, "    if (i < n) out[i] = fmaf(a, x[i], b);"),
        "blocks of 512 threads": AXPB.replace("cdiv(n, 256), 256,", "cdiv(n, 512), 512,"),
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer
