"""Tests of the CPU emulation of CUDA C (gpu_course/cuda/emulation): results against torch with poisoned
outputs, races, barriers, bounds checks, refused features, build errors and the build cache.
(Warp-level code: test_emulation_warp.py; the race check: test_emulation_races.py.)

Most kernels live in one source built once per session (about 3 s with a warm precompiled
header; the first build on a machine also builds that header, about 20 s).
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from gpu_course.cuda import cuda_begin
from gpu_course.cuda import emulation as cuda_emu
from gpu_course.cuda.emulation import CudaEmulationError
from gpu_course.cuda.emulation import loading, tiers

# tests/fixtures/tiled_matmul.cu: matmul_k<TW, FIRST, SECOND>, also built by test_emulation_races.py
TILED_MATMUL = (Path(__file__).resolve().parents[1] / "fixtures" / "tiled_matmul.cu").read_text()

KERNELS = cuda_begin + r'''
// ---- 1D elementwise with a tail, a __device__ helper, math functions
__device__ __forceinline__ float gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}
__global__ void square_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * x[i];
}
__global__ void gelu_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gelu(x[i]);
}
__global__ void math_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = __expf(-v * v) + rsqrtf(1.0f + v * v) + fmaxf(v, 0.0f) + sqrtf(fabsf(v))
               + (float)(max(i % 7, 3) - min(i % 5, 2)) + expf(0.1f * v);
    }
}
torch::Tensor square(torch::Tensor x) {
    CHECK_INPUT(x);
    auto out = torch::empty_like(x);
    int n = x.numel(), threads = 256;
    square_k<<<cdiv(n, threads), threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
void gelu_into(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    int n = x.numel();
    gelu_k<<<cdiv(n, 128), 128>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
void math_into(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    math_k<<<cdiv(n, 64), 64, 0, 0>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);  // stream 0
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- 2D grid with guards
__global__ void add2d_k(const float* a, const float* b, float* out, int h, int w) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < h && c < w) out[r * w + c] = a[r * w + c] + 2.0f * b[r * w + c];
}
void add2d_into(torch::Tensor a, torch::Tensor b, torch::Tensor out) {
    int h = a.size(0), w = a.size(1);
    dim3 tpb(16, 16);
    dim3 blocks(cdiv(w, tpb.x), cdiv(h, tpb.y));
    add2d_k<<<blocks, tpb>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), h, w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- 3D grid: each element gets its own coordinates
__global__ void coords3d_k(float* out, int d0, int d1, int d2) {
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (z < d0 && y < d1 && x < d2) out[(z * d1 + y) * d2 + x] = 10000.0f * z + 100.0f * y + x;
}
void coords3d_into(torch::Tensor out) {
    int d0 = out.size(0), d1 = out.size(1), d2 = out.size(2);
    dim3 tpb(8, 4, 2);
    dim3 blocks(cdiv(d2, tpb.x), cdiv(d1, tpb.y), cdiv(d0, tpb.z));
    coords3d_k<<<blocks, tpb>>>(out.data_ptr<float>(), d0, d1, d2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- tiled matmul, static shared memory, templated on the tile width (tests/fixtures/tiled_matmul.cu)
''' + TILED_MATMUL + r'''torch::Tensor matmul(torch::Tensor m, torch::Tensor n, int variant) {
    CHECK_INPUT(m); CHECK_INPUT(n);
    int h = m.size(0), w = n.size(1), k = m.size(1);
    TORCH_CHECK(k == n.size(0), "size mismatch: m is ", h, "x", k, ", n is ", n.size(0), "x", w);
    auto out = torch::full({h, w}, NAN, m.options());
    constexpr int TW = 16;
    dim3 tpb(TW, TW), blocks(cdiv(w, TW), cdiv(h, TW));
    auto mp = m.data_ptr<float>(), np = n.data_ptr<float>(), op = out.data_ptr<float>();
    if (variant == 0) matmul_k<TW, true, true><<<blocks, tpb>>>(mp, np, op, h, w, k);
    else if (variant == 1) matmul_k<TW, false, true><<<blocks, tpb>>>(mp, np, op, h, w, k);
    else if (variant == 2) matmul_k<TW, true, false><<<blocks, tpb>>>(mp, np, op, h, w, k);
    else matmul_k<8, true, true><<<dim3(cdiv(w, 8), cdiv(h, 8)), dim3(8, 8)>>>(mp, np, op, h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// ---- dynamic shared memory: reverse each block's chunk
__global__ void reverse_chunks_k(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
    if (j < n) out[j] = buf[threadIdx.x];
}
torch::Tensor reverse_chunks(torch::Tensor x, int threads, int smem_floats) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    reverse_chunks_k<<<cdiv(n, threads), threads, smem_floats * sizeof(float)>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// ---- block reduction in shared memory, grid-stride input loop
template <int BLOCK>
__global__ void block_sum_k(const float* __restrict__ x, float* __restrict__ partial, int n) {
    __shared__ float s[BLOCK];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}
torch::Tensor block_sums(torch::Tensor x, int blocks) {
    auto partial = torch::full({blocks}, NAN, x.options());
    block_sum_k<128><<<blocks, 128>>>(x.data_ptr<float>(), partial.data_ptr<float>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return partial;
}

// ---- histogram with atomicAdd (int, unsigned, float) in shared and global memory
__global__ void histogram_k(const int* __restrict__ x, int* hist, unsigned int* uhist, float* fhist,
                            int n, int bins) {
    __shared__ int local[64];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int b = x[i];
        atomicAdd(&local[b], 1);
        atomicAdd(uhist + b, 1u);
        atomicAdd(&fhist[b], 0.5f);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&hist[b], local[b]);
}
std::vector<torch::Tensor> histogram(torch::Tensor x, int bins) {
    TORCH_CHECK(bins <= 64, "at most 64 bins");
    auto hist = torch::zeros({bins}, x.options());
    auto uhist = torch::zeros({bins}, x.options());
    auto fhist = torch::zeros({bins}, x.options().dtype(torch::kFloat32));
    histogram_k<<<5, 96>>>(x.data_ptr<int>(), hist.data_ptr<int>(),
                           reinterpret_cast<unsigned int*>(uhist.data_ptr<int>()),
                           fhist.data_ptr<float>(), x.numel(), bins);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {hist, uhist, fhist};
}

// ---- float4 loads with __ldg, make_float4, a templated kernel on the scalar type
__global__ void scale4_k(const float* __restrict__ x, float* __restrict__ out, int n4, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = __ldg(&reinterpret_cast<const float4*>(x)[i]);
        reinterpret_cast<float4*>(out)[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    }
}
template <typename scalar_t>
__global__ void axpy_k(const scalar_t* x, scalar_t* y, scalar_t a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}
torch::Tensor scale4(torch::Tensor x, double a) {
    TORCH_CHECK(x.numel() % 4 == 0, "numel must be a multiple of 4");
    auto out = torch::empty_like(x);
    int n4 = x.numel() / 4;
    scale4_k<<<cdiv(n4, 32), 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4, (float)a);
    return out;
}
void axpy_(torch::Tensor x, torch::Tensor y, double a) {
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "axpy", ([&] {
        axpy_k<scalar_t><<<3, 64>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), (scalar_t)a, x.numel());
    }));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- printf from a kernel
__global__ void hello_k(int n) {
    if (threadIdx.x < n) printf("hello from block %d, thread %d\n", blockIdx.x, threadIdx.x);
}
void hello(int blocks, int n) {
    hello_k<<<blocks, 4>>>(n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- errors found while emulating
__global__ void no_guard_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[i] + 1.0f;  // no `if (i < n)`
}
__global__ void divergent_k(float* out) {
    __shared__ float s[64];
    if (threadIdx.x < 16) {          // only part of the block reaches the barrier
        s[threadIdx.x] = threadIdx.x;
        __syncthreads();
        out[threadIdx.x] = s[15 - threadIdx.x];
    }
}
__global__ void early_return_k(float* out, int n) {
    __shared__ float s[64];
    int i = threadIdx.x;
    if (i >= n) return;              // the classic: return before a barrier
    s[i] = i;
    __syncthreads();
    out[i] = s[n - 1 - i];
}
__global__ void shared_oob_k(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = 1.0f;           // launched with 64 threads
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}
__global__ void wild_pointer_k(float* out) {
    float* p = reinterpret_cast<float*>(reinterpret_cast<unsigned long long>(out) - (1ULL << 42));  // far from anything
    p[threadIdx.x] = 1.0f;
}
__global__ void assert_k(const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(x[i] >= 0.0f);
}
__global__ void count_k(int* out) {
    int c = __syncthreads_count(threadIdx.x % 3 == 0);
    if (threadIdx.x == 0) out[0] = c;
}
__global__ void two_barriers_k(float* out) {
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
        out[threadIdx.x] = 1.0f;
    } else {
        __syncthreads();             // a different barrier: undefined on a GPU
        out[threadIdx.x] = 2.0f;
    }
}
__global__ void div_zero_k(int* out, int d) {
    out[threadIdx.x] = 100 / (d - (int)threadIdx.x);   // thread d divides by zero
}
__global__ void big_locals_k(float* out) {
    volatile float big[200000];      // 800 KB of locals: more than a thread's stack here
    big[threadIdx.x] = 1.0f;
    out[threadIdx.x] = big[threadIdx.x];
}
void run_bad(torch::Tensor x, torch::Tensor out, int which) {
    int n = x.numel();
    switch (which) {
        case 0: no_guard_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n); break;
        case 1: divergent_k<<<2, 64>>>(out.data_ptr<float>()); break;
        case 2: early_return_k<<<1, 64>>>(out.data_ptr<float>(), 40); break;
        case 3: shared_oob_k<<<1, 64>>>(out.data_ptr<float>()); break;
        case 4: wild_pointer_k<<<1, 32>>>(out.data_ptr<float>()); break;
        case 5: assert_k<<<cdiv(n, 32), 32>>>(x.data_ptr<float>(), n); break;
        case 6: square_k<<<1, 2048>>>(x.data_ptr<float>(), out.data_ptr<float>(), n); break;
        case 7: reverse_chunks_k<<<1, 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), n); break;  // no smem
        case 8: count_k<<<1, 100>>>(reinterpret_cast<int*>(out.data_ptr<float>())); break;
        case 9: early_return_k<<<1, 64>>>(out.data_ptr<float>(), 64); break;   // fine: n == blockDim
        case 10: two_barriers_k<<<1, 8>>>(out.data_ptr<float>()); break;
        case 11: div_zero_k<<<1, 8>>>(reinterpret_cast<int*>(out.data_ptr<float>()), 5); break;
        case 12: big_locals_k<<<1, 2>>>(out.data_ptr<float>()); break;
        case 13: exit(3);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
'''

CPP = """
torch::Tensor square(torch::Tensor x);
void gelu_into(torch::Tensor x, torch::Tensor out);
void math_into(torch::Tensor x, torch::Tensor out);
void add2d_into(torch::Tensor a, torch::Tensor b, torch::Tensor out);
void coords3d_into(torch::Tensor out);
torch::Tensor matmul(torch::Tensor m, torch::Tensor n, int variant);
torch::Tensor reverse_chunks(torch::Tensor x, int threads, int smem_floats);
torch::Tensor block_sums(torch::Tensor x, int blocks);
std::vector<torch::Tensor> histogram(torch::Tensor x, int bins);
torch::Tensor scale4(torch::Tensor x, double a);
void axpy_(torch::Tensor x, torch::Tensor y, double a);
void hello(int blocks, int n);
void run_bad(torch::Tensor x, torch::Tensor out, int which);
"""
FUNCS = ["square", "gelu_into", "math_into", "add2d_into", "coords3d_into", "matmul", "reverse_chunks",
         "block_sums", "histogram", "scale4", "axpy_", "hello", "run_bad"]


@pytest.fixture(scope="module")
def m():
    return cuda_emu.load(KERNELS, CPP, FUNCS, name="test_kernels")


def nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


def test_square_with_tail(m):
    x = torch.randn(1000)
    assert torch.equal(m.square(x), x * x)


def test_gelu_device_helper(m):
    x = torch.randn(777)
    out = nan(777)
    m.gelu_into(x, out)
    torch.testing.assert_close(out, torch.nn.functional.gelu(x, approximate="tanh"), rtol=1e-5, atol=1e-5)


def test_math_functions(m):
    x = torch.randn(300)
    out = nan(300)
    m.math_into(x, out)
    i = torch.arange(300)
    ref = (torch.exp(-x * x) + torch.rsqrt(1 + x * x) + x.clamp(min=0) + x.abs().sqrt()
           + (torch.clamp(i % 7, min=3) - torch.clamp(i % 5, max=2)).float() + torch.exp(0.1 * x))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_2d_grid_with_guards(m):
    a, b = torch.randn(37, 53), torch.randn(37, 53)
    out = nan(37, 53)
    m.add2d_into(a, b, out)
    torch.testing.assert_close(out, a + 2 * b)


def test_3d_grid(m):
    out = nan(5, 7, 9)
    m.coords3d_into(out)
    z, y, x = torch.meshgrid(torch.arange(5), torch.arange(7), torch.arange(9), indexing="ij")
    assert torch.equal(out, (10000 * z + 100 * y + x).float())


@pytest.mark.parametrize("variant", [0, 3])
def test_tiled_matmul_odd_sizes(m, variant):
    a, b = torch.randn(100, 70), torch.randn(70, 90)
    torch.testing.assert_close(m.matmul(a, b, variant), a @ b, rtol=1e-4, atol=1e-4)


def test_tiled_matmul_128_runs_in_notebook_time(m):
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    m.matmul(a, b, 0)  # warm up
    t0 = time.perf_counter()
    out = m.matmul(a, b, 0)
    dt = time.perf_counter() - t0
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    # ~0.05 s measured: a bound 200 times that catches a runaway cost (a slow context switch per barrier, a
    # scheduler that spins), not a speed target a busy machine could miss
    assert dt < 10.0, f"128x128 tiled matmul took {dt:.2f} s"


@pytest.mark.parametrize("variant", [1, 2])
def test_missing_barrier_is_a_race(m, variant):
    a, b = torch.randn(64, 48), torch.randn(48, 40)
    with pytest.raises(CudaEmulationError, match=r"race on __shared__ [mn]s\[0\]\[\d+\] in kernel matmul_k<16, "
                                                 r".* with no __syncthreads\(\) between"):
        m.matmul(a, b, variant)


def test_dynamic_shared_memory(m):
    x = torch.randn(100)
    out = m.reverse_chunks(x, 32, 32)
    # the last chunk is padded with zeros before reversing; only indices < n are written
    ref = torch.cat([torch.cat([x, torch.zeros(28)])[i:i + 32].flip(0) for i in range(0, 128, 32)])[:100]
    assert torch.equal(out, ref)


def test_dynamic_shared_memory_too_small(m):
    with pytest.raises(CudaEmulationError, match=r"buf\[16\] in kernel reverse_chunks_k .* 64 bytes of dynamic shared memory"):
        m.reverse_chunks(torch.randn(100), 32, 16)


def test_block_reduction(m):
    x = torch.randn(5000, dtype=torch.float32)
    partial = m.block_sums(x, 7)
    assert not partial.isnan().any()
    torch.testing.assert_close(partial.sum(), x.sum(), rtol=1e-4, atol=1e-3)


def test_histogram_atomics(m):
    x = torch.randint(0, 10, (1234,), dtype=torch.int32)
    hist, uhist, fhist = m.histogram(x, 10)
    ref = torch.bincount(x, minlength=10).int()
    assert torch.equal(hist, ref) and torch.equal(uhist, ref)
    torch.testing.assert_close(fhist, ref.float() * 0.5)


def test_float4_ldg(m):
    x = torch.randn(4 * 50)
    torch.testing.assert_close(m.scale4(x, 3.0), 3 * x)


def test_float4_misaligned(m):
    x = torch.randn(4 * 50 + 1)[1:]  # data pointer 4 bytes past a 16-byte boundary
    with pytest.raises(CudaEmulationError, match="misaligned address"):
        m.scale4(x, 3.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_templated_kernel_dispatch(m, dtype):
    x, y = torch.randn(500, dtype=dtype), torch.randn(500, dtype=dtype)
    ref = 2.5 * x + y
    m.axpy_(x, y, 2.5)
    torch.testing.assert_close(y, ref)


def test_printf_reaches_fd1(m):
    wurlitzer = pytest.importorskip("wurlitzer")
    with wurlitzer.pipes() as (out, err):
        m.hello(2, 2)
    text = out.read()
    assert text.splitlines() == ["hello from block 0, thread 0", "hello from block 0, thread 1",
                                 "hello from block 1, thread 0", "hello from block 1, thread 1"]


def test_torch_check_message(m):
    with pytest.raises(RuntimeError, match="must be contiguous"):
        m.square(torch.randn(10, 10).t())


def test_argument_type_errors(m):
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        m.square([1.0, 2.0])
    with pytest.raises(TypeError, match="takes 1 positional"):
        m.square(torch.randn(3), 1)


BAD = {
    0: r"out-of-bounds access to x\[1000\] in kernel no_guard_k .* block \(3,0,0\), thread \(232,0,0\)",
    1: r"__syncthreads\(\) at cuda_src line \d+ was reached by only 16 of the 64 threads",
    2: r"__syncthreads\(\) at cuda_src line \d+ was reached by only 40 of the 64 threads",
    3: r"out-of-bounds index 32 into __shared__ s \(that dimension has 32 elements",
    4: r"invalid memory access at address .* in kernel wild_pointer_k",
    5: r"assertion failed: x\[i\] >= 0.0f",
    6: r"^CUDA error: invalid argument for kernel square_k .* blockDim \(2048,1,1\) exceeds the limits "
       r"\(1024, 1024, 64\)\. \(On a GPU, C10_CUDA_KERNEL_LAUNCH_CHECK\(\) reports 'CUDA error: invalid argument'\.\)",
    7: r"out-of-bounds access to buf\[0\] .*: buf points to the launch's 0 bytes of dynamic shared memory",
    10: r"wait at different __syncthreads\(\): thread \(0,0,0\) at cuda_src line \d+, thread \(1,0,0\) at line",
    11: r"integer division by zero in kernel div_zero_k .* thread \(5,0,0\) at cuda_src line \d+: the divisor",
    12: r"stack overflow in kernel big_locals_k",
    13: r"exit\(3\) was called",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("which", sorted(BAD))
def test_errors_while_emulating(m, which):
    x = -torch.ones(1000) if which == 5 else torch.randn(1000)
    out = nan(1000)
    with pytest.raises(CudaEmulationError, match=BAD[which]):
        m.run_bad(x, out, which)
    # the process is fine afterwards
    y = torch.randn(300)
    assert torch.equal(m.square(y), y * y)


def test_syncthreads_count_and_full_block_barrier(m):
    out = nan(1000)
    m.run_bad(torch.randn(1000), out, 8)
    assert out[:1].view(torch.int32).item() == 34  # threads 0, 3, ..., 99
    out = nan(1000)
    m.run_bad(torch.randn(1000), out, 9)
    assert torch.equal(out[:64], torch.arange(63, -1, -1).float())


def test_cache_reload_is_fast(m, monkeypatch):
    """A second load of the same source is the loaded module itself: no compiler runs."""
    import subprocess

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"the second load ran {args[0] if args else kwargs}")
    monkeypatch.setattr(subprocess, "run", no_compiler)
    monkeypatch.setattr(subprocess, "Popen", no_compiler)
    again = cuda_emu.load(KERNELS, CPP, FUNCS, name="test_kernels")
    assert again is m


# ---- refused features: checked before compiling, so these are fast
REFUSED = {
    "warp lane masks": "unsigned m = __lanemask_lt();",
    "cooperative groups beyond a grid": "auto grids = cooperative_groups::this_multi_grid();",
    "CUDA memory management": "float* d; cudaMalloc(&d, 4);",
    "CUDA memory management (use": "cudaMemcpy2D(p, 4, q, 4, 4, 1, cudaMemcpyDeviceToHost);",
    "CUDA memory management (use torch": "cudaFree(p);",
    "CUDA streams": "cudaStream_t s; cudaStreamCreate(&s);",
    "CUDA events": "cudaEvent_t e; cudaEventCreate(&e);",
    "the compiler's tensor-core builtins": "__hmma_m16n16k16_mma_f32f32(0, 0, 0, 0, 0, 0);",
    "inline PTX (membar.gl)": 'asm volatile("membar.gl;");',
    "fp8 types": "__nv_fp8_e4m3 h;",
    "the CUDA runtime API": "cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);",
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_refused_feature(what):
    src = cuda_begin + "__global__ void k(float* v) {\n    " + REFUSED[what] + "\n}\n"
    line = src.count("\n", 0, src.index(REFUSED[what])) + 1
    with pytest.raises(CudaEmulationError) as e:
        cuda_emu.load(src, "", [], name="refused")
    msg = str(e.value)
    assert what.split(" (")[0] in msg
    assert f"cuda_src line {line}:" in msg and "not supported by the CPU emulation; run on a GPU" in msg


def test_warp_intrinsic_without_sync_refused():
    src = "__global__ void k(float* v) {\n    v[0] += __shfl_down(v[0], 16);\n}\n"
    with pytest.raises(CudaEmulationError, match=r"cuda_src line 2: __shfl_down\(\) is a warp intrinsic without _sync, "
                                                 r"removed in CUDA 9 for sm_70\+ GPUs: use __shfl_down_sync\(mask, \.\.\.\)"):
        cuda_emu.load(src, "", [], name="refused")


def test_refused_include_and_stream_argument():
    with pytest.raises(CudaEmulationError, match=r"cooperative groups .*#include <cooperative_groups/memcpy_async.h>"):
        cuda_emu.load("#include <cooperative_groups/memcpy_async.h>\n", "", [])
    src = cuda_begin + "__global__ void k() {}\nvoid f(int s) { k<<<1, 1, 0, at::cuda::getStreamFromPool()>>>(); }\n"
    with pytest.raises(CudaEmulationError, match="CUDA streams other than torch's current one"):
        cuda_emu.load(src, "void f(int s);", ["f"])


STREAM_SRC = cuda_begin + r'''
#include <ATen/cuda/CUDAContext.h>
__global__ void scale_k(const float* __restrict__ x, float* __restrict__ out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i];
}
// two launches on torch's current stream, spelled three ways; the second reads what the first wrote
void scale_twice(torch::Tensor x, torch::Tensor tmp, torch::Tensor out) {
    int n = x.numel();
    scale_k<<<cdiv(n, 128), 128, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), tmp.data_ptr<float>(), 2.0f, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    auto stream = c10::cuda::getCurrentCUDAStream();
    scale_k<<<cdiv(n, 64), 64, 0, stream.stream()>>>(tmp.data_ptr<float>(), out.data_ptr<float>(), 3.0f, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
'''


def test_a_launch_on_the_current_stream_under_torch_cuda_stream():
    """A kernel launched on at::cuda::getCurrentCUDAStream() (what every kernel of the course does, so that
    torch.cuda.stream(s), CUDA graphs and torch.compile can choose its stream) builds in the emulation and
    gives the right result inside ``with torch.cuda.stream(s)``: one stream, every launch done in order.
    (CPU torch cannot make a torch.cuda.Stream: there ``s`` is None, which torch.cuda.stream takes.)"""
    m = cuda_emu.load(STREAM_SRC, "void scale_twice(torch::Tensor x, torch::Tensor tmp, torch::Tensor out);",
                      ["scale_twice"], name="current_stream")
    s = torch.cuda.Stream() if torch.cuda.is_available() else None
    x = torch.randn(1003)
    tmp, out = nan(1003), nan(1003)
    with torch.cuda.stream(s):
        m.scale_twice(x, tmp, out)
    assert torch.equal(tmp, 2.0 * x) and torch.equal(out, 3.0 * (2.0 * x))


def test_shared_initializer_refused():
    src = "__global__ void k() {\n  __shared__ float s[4] = {0};\n}\n"
    with pytest.raises(CudaEmulationError, match="line 2: a __shared__ variable cannot have an initializer"):
        cuda_emu.load(src, "", [])


def test_unknown_function_in_funcs():
    with pytest.raises(CudaEmulationError, match="funcs lists 'cube'"):
        cuda_emu.load(cuda_begin, "torch::Tensor square(torch::Tensor x);", ["cube"])


# ---- build errors (each is a real compiler run)
def test_compile_error_shows_the_learners_line(monkeypatch):
    src = cuda_begin + r'''
__global__ void k(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = undefined_name * 2.0f;
}
void f(torch::Tensor out) { k<<<1, 32>>>(out.data_ptr<float>(), out.numel()); }
'''
    line = src.splitlines().index("    if (i < n) out[i] = undefined_name * 2.0f;") + 1
    builds, build = [], loading._build
    monkeypatch.setattr(loading, "_build", lambda *a, **k: builds.append(a[7]) or build(*a, **k))
    with pytest.raises(CudaEmulationError) as e:
        cuda_emu.load(src, "void f(torch::Tensor out);", ["f"], name="compile_error")
    msg = str(e.value)
    first = msg.splitlines()[1]
    assert first.startswith(f"cuda_src:{line}:") and ("'undefined_name' was not declared" in first   # g++
                                                      or "undeclared identifier 'undefined_name'" in first), msg  # clang
    assert "undefined_name * 2.0f" in msg.splitlines()[2]
    assert builds and set(builds) == {1}  # all at torch tier 1: the learner's error is not taken for a need of more torch


def test_declared_but_not_defined_is_a_link_error():
    src = cuda_begin + "torch::Tensor twice(torch::Tensor x) { return 2 * x; }\n"
    with pytest.raises(CudaEmulationError, match=r"link error: twice\(at::Tensor, int\) is declared"):
        cuda_emu.load(src, "torch::Tensor twice(torch::Tensor x, int n);", ["twice"], name="link_error")


def test_unchecked_build_and_constant_memory():
    src = cuda_begin + r'''
__constant__ float coef[3] = {1.0f, 2.0f, 3.0f};
__global__ void poly_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = coef[0] + coef[1] * x[i] + coef[2] * x[i] * x[i];
}
torch::Tensor poly(torch::Tensor x) {
    auto out = torch::empty_like(x);
    poly_k<<<cdiv(x.numel(), 64), 64>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
'''
    mod = cuda_emu.load(src, "torch::Tensor poly(torch::Tensor x);", ["poly"], name="unchecked", checked=False)
    x = torch.randn(99)
    torch.testing.assert_close(mod.poly(x), 1 + 2 * x + 3 * x * x)


# ---- more of the subset, in a second module
EXTRAS = cuda_begin + r'''
#include <tuple>
__constant__ float coef[3] = {1.0f, 2.0f, 3.0f};
__shared__ float tile[4][8];             // file-scope static shared memory
extern __shared__ int dyn[];             // file-scope dynamic shared memory

struct Pair { float a; int b; };

__device__ __noinline__ float poly(float v) { return coef[0] + coef[1] * v + coef[2] * v * v; }

__global__ void __launch_bounds__(32) tiles_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int r = threadIdx.y, c = threadIdx.x;               // a 4x8 block
    int i = blockIdx.x * 32 + r * 8 + c;
    tile[r][c] = i < n ? poly(x[i]) : 0.0f;
    dyn[r * 8 + c] = i;
    __syncthreads();
    int j = blockIdx.x * 32 + (3 - r) * 8 + (7 - c);    // read what another thread wrote
    if (j < n && i < n) out[j] = tile[r][c] + 0.0f * dyn[(3 - r) * 8 + (7 - c)];
}
__global__ void atomics_k(const int* __restrict__ x, int* stats, Pair* pairs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool any_neg = __syncthreads_or(i < n && x[i] < 0);
    bool all_small = __syncthreads_and(i >= n || x[i] < 1000);
    if (i < n) {
        atomicMax(&stats[0], x[i]);
        atomicMin(&stats[1], x[i]);
        atomicExch(&stats[2], 7);
        atomicCAS(&stats[3], 0, 1);        // only the first thread to arrive swaps 0 -> 1
        atomicSub(&stats[4], 1);
        pairs[i].a = 0.5f * x[i];
        pairs[i].b = x[i] & 1;
    }
    if (threadIdx.x == 0) { atomicOr(&stats[5], any_neg ? 1 : 0); atomicAnd(&stats[6], all_small ? 1 : 0); }
}
__global__ void vec_k(float2* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dim3 b = blockDim;
    uint3 t = threadIdx;
    int2 q = make_int2(i, (int)(b.x - t.x));
    if (i < n) out[i] = make_float2((float)q.x, (float)q.y);
}
__global__ void transpose_k(const torch::PackedTensorAccessor32<float, 2, torch::RestrictPtrTraits> x,
                            torch::PackedTensorAccessor32<float, 2, torch::RestrictPtrTraits> out) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < x.size(0) && c < x.size(1)) out[c][r] = x[r][c];
}
torch::Tensor transpose(torch::Tensor x) {
    auto out = torch::empty({x.size(1), x.size(0)}, x.options());
    dim3 tpb(8, 8), blocks(cdiv(x.size(1), 8), cdiv(x.size(0), 8));
    transpose_k<<<blocks, tpb>>>(x.packed_accessor32<float, 2, torch::RestrictPtrTraits>(),
                                 out.packed_accessor32<float, 2, torch::RestrictPtrTraits>());
    return out;
}
torch::Tensor tiles(torch::Tensor x) {
    auto out = torch::full_like(x, NAN);
    int n = x.numel();
    tiles_k<<<cdiv(n, 32), dim3(8, 4), 32 * sizeof(int)>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
std::tuple<torch::Tensor, torch::Tensor, double, bool> atomics(torch::Tensor x) {
    int n = x.numel();
    auto stats = torch::tensor({INT_MIN, INT_MAX, 0, 0, 0, 0, 1}, x.options());
    auto pairs = torch::empty({n, 2}, x.options());
    atomics_k<<<cdiv(n, 64), 64>>>(x.data_ptr<int>(), stats.data_ptr<int>(),
                                  reinterpret_cast<Pair*>(pairs.data_ptr<int>()), n);
    CUDA_CHECK(cudaGetLastError());
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    return {stats, pairs, 1.5 * n, n > 10};
}
torch::Tensor vec(int n, int threads) {
    auto out = torch::empty({n, 2}, torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA));
    vec_k<<<cdiv(n, threads), threads>>>(reinterpret_cast<float2*>(out.data_ptr<float>()), n);
    return out.cuda();
}
'''
EXTRAS_CPP = """
torch::Tensor tiles(torch::Tensor x);
std::tuple<torch::Tensor, torch::Tensor, double, bool> atomics(torch::Tensor x);
torch::Tensor vec(int n, int threads);
torch::Tensor transpose(torch::Tensor x);
"""


@pytest.fixture(scope="module")
def extras():
    return cuda_emu.load(EXTRAS, EXTRAS_CPP, ["tiles", "atomics", "vec", "transpose"],
                         name="test_extras")


def test_file_scope_shared_constant_noinline(extras):
    x = torch.randn(70)
    out = extras.tiles(x)
    ref = 1 + 2 * x + 3 * x * x
    # each block of 32 reverses its chunk; the tail block only where both ends are < n
    exp = torch.full_like(x, float("nan"))
    for b in range(0, 70, 32):
        for k in range(32):
            i, j = b + k, b + 31 - k
            if i < 70 and j < 70:
                exp[j] = ref[i]
    torch.testing.assert_close(out, exp, equal_nan=True)
    assert extras.cuda_emu_info["tier"] == 2  # torch::tensor is not in the lite tier


def test_atomics_votes_structs_tuple_return(extras):
    x = torch.randint(-50, 50, (150,), dtype=torch.int32)
    stats, pairs, scaled, big = extras.atomics(x)
    assert stats.tolist() == [x.max().item(), x.min().item(), 7, 1, -150, int((x < 0).any()), 1]
    assert torch.equal(pairs.view(torch.float32)[:, 0], 0.5 * x.float())
    assert torch.equal(pairs[:, 1], x & 1)
    assert scaled == 225.0 and big is True


def test_vector_types_and_device_mapping(extras):
    out = extras.vec(100, 32)
    i = torch.arange(100)
    assert torch.equal(out, torch.stack([i, 32 - i % 32], 1).float())


def test_packed_accessors(extras):
    x = torch.randn(13, 21)
    assert torch.equal(extras.transpose(x), x.t())


def test_template_deducing_from_pointer_stays_checked():
    """The call of a template helper hands it plain pointers (so ``const T* p`` deduces T); its accesses
    are still checked and counted (gat finds the bounds again)."""
    src = cuda_begin + r'''
template <typename T>
__device__ T twice_at(const T* p, int i) { return p[i] + p[i]; }  // deduces T from a T*
__global__ void twice_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = twice_at(x, i);
}
torch::Tensor twice(torch::Tensor x) {
    auto out = torch::empty_like(x);
    twice_k<<<cdiv(x.numel(), 64), 64>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
'''
    mod = cuda_emu.load(src, "torch::Tensor twice(torch::Tensor x);", ["twice"], name="deduce")
    x = torch.randn(100)
    assert torch.equal(mod.twice(x), 2 * x)
    assert mod.cuda_emu_info["checked"] is True


# ---- the source transformation itself (no compiler)
def test_transform_rewrites():
    src = r'''
template <int TW> __global__ void k(const float* __restrict__ a, float* const out, int n) {
    __shared__ float s[TW][TW + 1], t;
    extern __shared__ __align__(16) unsigned char raw[];
    float4 v = reinterpret_cast<const float4*>(a)[0];
}
void f(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.device().is_cuda() && x.device().type() == c10::DeviceType::CUDA, "gpu");
    k<16><<<dim3(2, 2), 256,
            64>>>(x.data_ptr<float>(), y.contiguous().data_ptr<float>(), 3);
}
'''
    t = cuda_emu.transform(src)
    out = t.text
    assert out.count("\n") == src.count("\n")  # line numbers are preserved
    assert "k(::cuda_emu::gptr<const float> a, const ::cuda_emu::gptr<float> out, int n)" in out
    assert "static ::cuda_emu::shared_array<float, (TW), (TW + 1)> s" in out
    assert "static float t __attribute__((aligned(16)))" in out
    assert 'static ::cuda_emu::dshared<unsigned char> raw{"raw"};' in out
    assert "::cuda_emu::rcast<const float4*>(a)" in out
    assert "x.device().is_cpu() && x.device().type() == c10::DeviceType::CPU" in out
    assert '::cuda_emu::kernel("k<16>", "a,out,n", __LINE__, [&](auto&&... cuda_emu_a) { k<16>(cuda_emu_a...); }, ' \
           '::cuda_emu::kname<&k<16> >(), ::cuda_emu::kaddr(&k<16>)).config(dim3(2, 2), 256,\n            64)(' in out
    assert "::cuda_emu::track(x).data_ptr<float>(), ::cuda_emu::track(y.contiguous()).data_ptr<float>()" in out
    assert t.kernels == {"k": ["a", "out", "n"]}


def test_torch_tiers():
    assert tiers.first_tier("#include <torch/extension.h>\n") == 1
    assert tiers.first_tier("#include <ATen/ATen.h>\n") == 2
    assert tiers.first_tier("#include <torch/torch.h>\n") == 3
    for line in ["main.cpp:3:5: error: 'matmul' is not a member of 'torch'",
                 "cuda_src:9:49: error: no match for 'operator<<' (operand types are 'std::ostream' and 'at::Tensor')",
                 "cuda_src:4:1: error: 'py' has not been declared"]:
        assert tiers.needs_more_torch(line), line
    assert not tiers.needs_more_torch("cuda_src:4:1: error: 'y' was not declared in this scope")


@pytest.mark.skipif(not __import__("shutil").which("nvcc"), reason="nvcc is not on PATH")
def test_nvcc_check_catches_host_function_in_kernel():
    src = cuda_begin + r'''
__global__ void blocks_k(int* out, int n) {
    out[threadIdx.x] = cdiv(n, 32);      // cdiv is a host function: fine for g++, not for nvcc
}
void blocks(torch::Tensor out, int n) { blocks_k<<<1, 4>>>(out.data_ptr<int>(), n); }
'''
    line = src.splitlines().index("    out[threadIdx.x] = cdiv(n, 32);      // cdiv is a host function: fine for g++, not for nvcc") + 1
    with pytest.raises(CudaEmulationError, match=rf"nvcc rejects it for a real GPU:\ncuda_src:{line}:0: error: "
                                                 r"calling a __host__ function\(\"cdiv"):
        cuda_emu.load(src, "void blocks(torch::Tensor out, int n);", ["blocks"], name="nvcc_host_call")
    mod = cuda_emu.load(src, "void blocks(torch::Tensor out, int n);", ["blocks"], name="nvcc_host_call",
                        nvcc_check=False)  # the emulation itself runs it
    out = torch.zeros(4, dtype=torch.int32)
    mod.blocks(out, 100)
    assert out.tolist() == [4, 4, 4, 4]


LITE_OPS = cuda_begin + r'''
__global__ void twice_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
std::vector<torch::Tensor> lite_ops(torch::Tensor x, torch::Tensor a, torch::Tensor b, torch::Tensor bytes) {
    auto twice = torch::full_like(x, NAN);   // poisoned: an element the kernel misses fails
    twice_k<<<cdiv(x.numel(), 64), 64>>>(x.data_ptr<float>(), twice.data_ptr<float>(), x.numel());
    auto [best, where] = torch::max(a, 1, true);
    return {torch::cumsum(twice, 0) - twice, torch::bincount(bytes.to(torch::kLong), {}, 256), torch::sum(a, {0}),
            torch::mean(a, torch::kDouble), best, where, torch::argmax(a), torch::matmul(a, b), torch::mm(a, b),
            torch::softmax(a, 1), torch::relu(a), torch::sqrt(torch::abs(a)), torch::max(a, b.t()),
            torch::amax(a, {1}, true), torch::cumprod(x, 0, torch::kDouble), torch::sum(a, 1),
            torch::log_softmax(a, -1), at::cumsum(x, 0), cumsum(x, 0), at::zeros({3}, x.options())};
}
'''


def test_the_lite_tier_has_the_operators_host_code_reaches_for_as_functions():
    """torch::cumsum(x, 0), torch::bincount(x, {}, 256)... build without all of ATen (tier 1), with ATen's meaning;
    at::cumsum and an unqualified cumsum (argument-dependent lookup) too, as in ATen."""
    cpp = "std::vector<torch::Tensor> lite_ops(torch::Tensor x, torch::Tensor a, torch::Tensor b, torch::Tensor bytes);"
    m = cuda_emu.load(LITE_OPS, cpp, ["lite_ops"], name="lite_ops")
    assert m.cuda_emu_info["tier"] == 1
    x, a, b = torch.randn(37), torch.randn(5, 7), torch.randn(7, 5)
    bytes_ = torch.randint(0, 256, (300,), dtype=torch.uint8)
    got = m.lite_ops(x, a, b, bytes_)
    best, where = a.max(1, keepdim=True)
    want = [torch.cumsum(2 * x, 0) - 2 * x, torch.bincount(bytes_.long(), minlength=256), a.sum(0),
            a.mean(dtype=torch.float64), best, where, a.argmax(), a @ b, a @ b, a.softmax(1), a.relu(),
            a.abs().sqrt(), torch.maximum(a, b.t()), a.amax(1, keepdim=True), torch.cumprod(x, 0, dtype=torch.float64),
            a.sum(1), a.log_softmax(-1), x.cumsum(0), x.cumsum(0), torch.zeros(3)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_member_through_arrow_right_after_a_for_if_or_while_header_is_a_counted_access():
    # (o + j)->v just after for (...) once read as a call of the header's parentheses and was left uncounted
    src = ("struct F { float v; };\n__global__ void k(F* o, const F* a, int n) {\n"
           "    for (int j = 0; j < n; ++j) (o + j)->v = (a + j)->v;\n    if (n) (o)->v = 1;\n"
           "    while (n--) (o + n)->v = 0;\n}\n")
    out = cuda_emu.transform(src).text
    for access in ("(o + j)", "(a + j)", "(o)", "(o + n)"):
        assert f"::cuda_emu::arrow({access})->v" in out, (access, out)


def test_a_subscript_of_a_pointer_cast_is_a_counted_access():
    # reinterpret_cast<const float4*>(x)[i] and ((float4*)out)[i], the vector kernels' idiom, were once indexed
    # without gat: their float4 accesses went uncounted, and a float4 kernel's counts held only its tail
    src = ("__global__ void k(const float* x, float* out, int n) {\n    int i = threadIdx.x;\n"
           "    float4 v = reinterpret_cast<const float4*>(x)[i];\n    ((float4*)out)[i] = v;\n"
           "    float a = reinterpret_cast<const float4*>(x)[i].x;\n"
           "    const float4* p = &reinterpret_cast<const float4*>(x)[i];\n}\n")
    out = cuda_emu.transform(src).text
    assert '::cuda_emu::gat<0>(::cuda_emu::rcast<const float4*>(x), 3, "reinterpret_cast<const float4*>(x)", (i))' \
        in out, out
    assert '::cuda_emu::gat<1>(((float4*)out), 4, "((float4*)out)", (i)) = v' in out, out
    assert "::cuda_emu::rcast<const float4*>(x)[i].x" in out and "&::cuda_emu::rcast<const float4*>(x)[i]" in out
