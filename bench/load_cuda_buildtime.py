"""Build-time benchmark for CUDA C from a notebook (issue: load_cuda).

Times (wall clock, fresh build directories) the build of the same four small kernels:
  seeds     : torch.utils.cpp_extension.load_inline as the lectures call it (torch/extension.h in
              the .cu, default flags: no -O), then a rebuild after a one-line kernel edit;
  load_cuda : utils.load_cuda (first build, rebuild after the same edit, reload from cache).
Run on a GPU machine:  python3 bench/load_cuda_buildtime.py [seeds] [load_cuda]
In cpu mode load_inline cannot build CUDA (CPU torch), so only load_cuda runs, through the emulation:
that checks the script; its times are the emulation's, not nvcc's.
It records nothing in results/: it measures how long the compiler and the loader take, not a kernel's run
time against a library, which is what the results file holds.
"""
import os
import shutil
import sys
import tempfile
import time

import torch

import utils

KERNELS = r"""
__global__ void square_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * x[i];
}
__global__ void add_k(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
__global__ void scale_k(const float* __restrict__ x, float* __restrict__ out, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = s * x[i];
}
__global__ void gray_k(const unsigned char* __restrict__ x, unsigned char* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.2989f * x[i] + 0.5870f * x[i + n] + 0.1140f * x[i + 2 * n];
}
"""
WRAPPERS = r"""
torch::Tensor square(torch::Tensor x) {
    CHECK_INPUT(x);
    auto out = torch::empty_like(x);
    int n = x.numel();
    square_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    CHECK_INPUT(a); CHECK_INPUT(b);
    auto out = torch::empty_like(a);
    int n = a.numel();
    add_k<<<cdiv(n, 256), 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
torch::Tensor scale(torch::Tensor x, double s) {
    CHECK_INPUT(x);
    auto out = torch::empty_like(x);
    int n = x.numel();
    scale_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), (float)s, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
torch::Tensor gray(torch::Tensor x) {
    CHECK_INPUT(x);
    int h = x.size(1), w = x.size(2), n = h * w;
    auto out = torch::empty({h, w}, x.options());
    gray_k<<<cdiv(n, 256), 256>>>(x.data_ptr<unsigned char>(), out.data_ptr<unsigned char>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
SEEDS_BEGIN = r"""
#include <torch/extension.h>
#include <stdio.h>
#include <c10/cuda/CUDAException.h>
#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)
inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b;}
"""
CPP = """torch::Tensor square(torch::Tensor x);
torch::Tensor add(torch::Tensor a, torch::Tensor b);
torch::Tensor scale(torch::Tensor x, double s);
torch::Tensor gray(torch::Tensor x);"""
FUNCS = ["square", "add", "scale", "gray"]
EDIT = ("out[i] = x[i] * x[i];", "out[i] = x[i] * x[i] + 0.0f;")


def check(mod):
    x = torch.randn(1000, device=utils.DEVICE)
    assert torch.allclose(mod.square(x), x * x)
    assert torch.allclose(mod.add(x, x), 2 * x)
    assert torch.allclose(mod.scale(x, 3.0), 3 * x)
    img = torch.randint(0, 255, (3, 17, 23), dtype=torch.uint8, device=utils.DEVICE)
    assert mod.gray(img).shape == (17, 23)


def timed(label, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<44} {dt:7.2f} s", flush=True)
    return out, dt


def bench_seeds():
    if not utils.ON_GPU:
        print("seeds load_inline: skipped in cpu mode (it needs nvcc and a CUDA build of torch)")
        return
    from torch.utils.cpp_extension import load_inline
    d = tempfile.mkdtemp(prefix="seeds-")
    src = SEEDS_BEGIN + KERNELS + WRAPPERS
    mod, _ = timed("seeds load_inline, first build", lambda: load_inline(
        "seeds_bt", cpp_sources=[CPP], cuda_sources=[src], functions=FUNCS, build_directory=d))
    check(mod)
    mod, _ = timed("seeds load_inline, rebuild after kernel edit", lambda: load_inline(
        "seeds_bt", cpp_sources=[CPP], cuda_sources=[src.replace(*EDIT)], functions=FUNCS,
        build_directory=d))
    check(mod)
    shutil.rmtree(d, ignore_errors=True)


def bench_load_cuda():
    src = utils.cuda_begin + KERNELS + WRAPPERS
    mod, _ = timed("load_cuda, first build (cold cache)", lambda: utils.load_cuda(src, CPP, FUNCS))
    check(mod)
    mod, _ = timed("load_cuda, rebuild after kernel edit", lambda: utils.load_cuda(
        src.replace(*EDIT), CPP, FUNCS))
    check(mod)
    wrap_edit = src.replace("int n = x.numel();", "int n = (int)x.numel();", 1)
    mod, _ = timed("load_cuda, rebuild after host-code edit", lambda: utils.load_cuda(
        wrap_edit, CPP, FUNCS))
    check(mod)
    mod, _ = timed("load_cuda, unchanged source (cache)", lambda: utils.load_cuda(src, CPP, FUNCS))
    check(mod)


if __name__ == "__main__":
    which = sys.argv[1:] or ["seeds", "load_cuda"]
    print(f"torch {torch.__version__}, {utils.device_name()}, {os.cpu_count()} CPUs")
    if "seeds" in which:
        bench_seeds()
    if "load_cuda" in which:
        bench_load_cuda()
