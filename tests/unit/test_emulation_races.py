"""The race check of the CPU emulation (``racecheck``, on by default in checked builds): two
threads touching one ``__shared__`` word between barriers, one of them writing, is an error naming
the array, the index, both threads and both lines; so is a non-atomic ``+=`` on one global word by
several threads.  No false alarm on correct kernels: barriers, ``__syncwarp``, atomics, float4
accesses through ``&s[i]``.

One source, built three times (racecheck on, off, "warn"): ~2 s each with a warm precompiled header.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from gpu_course.cuda import cuda_begin
from gpu_course.cuda import emulation as cuda_emu
from gpu_course.cuda.emulation import CudaEmulationError

# tests/fixtures/tiled_matmul.cu: matmul_k<TW, FIRST, SECOND>, also built by test_emulation.py
TILED_MATMUL = (Path(__file__).resolve().parents[1] / "fixtures" / "tiled_matmul.cu").read_text()

pytestmark = pytest.mark.usefixtures("without_nvcc_check")   # the builds here test other things

RACES = cuda_begin + TILED_MATMUL + r'''torch::Tensor matmul(torch::Tensor m, torch::Tensor n, int variant) {
    int h = m.size(0), k = m.size(1), w = n.size(1);
    auto out = torch::full({h, w}, NAN, m.options());
    dim3 tpb(16, 16), blocks(cdiv(w, 16), cdiv(h, 16));
    auto mp = m.data_ptr<float>(), np = n.data_ptr<float>(), op = out.data_ptr<float>();
    if (variant == 0) matmul_k<16, true, true><<<blocks, tpb>>>(mp, np, op, h, w, k);
    if (variant == 1) matmul_k<16, false, true><<<blocks, tpb>>>(mp, np, op, h, w, k);
    if (variant == 2) matmul_k<16, true, false><<<blocks, tpb>>>(mp, np, op, h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// ---- correct kernels that share memory in other ways
__global__ void reduce_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}
__global__ void histogram_k(const int* __restrict__ x, int* hist, int n, int bins) {
    __shared__ int local[32];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[x[i]], 1);                    // atomics on shared memory are not races
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&hist[b], local[b]);
}
// a warp's sum in shared memory; SYNC = false drops the __syncwarp() between the steps
template <bool SYNC>
__global__ void warp_smem_sum_k(const float* __restrict__ x, float* __restrict__ out) {
    __shared__ float s[64];
    int t = threadIdx.x, lane = t % 32;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncwarp();
    for (int off = 16; off > 0; off >>= 1) {
        if (lane < off) s[t] += s[t + off];
        if (SYNC) __syncwarp();
    }
    if (lane == 0) out[blockIdx.x * 2 + t / 32] = s[t];
}
// __syncwarp() orders the lanes of one warp only: warp 1 reading what warp 0 wrote is a race
__global__ void cross_warp_k(float* __restrict__ out) {
    __shared__ float s[64];
    s[threadIdx.x] = threadIdx.x;
    __syncwarp();
    out[threadIdx.x] = s[(threadIdx.x + 32) % 64];
}
// float4 through &s[i] (not followed) mixed with scalar accesses; a struct member; dynamic smem
struct Pair { float a, b; };
__global__ void vec_smem_k(const float* __restrict__ x, float* __restrict__ out) {
    __shared__ __align__(16) float s[256];
    __shared__ Pair pairs[64];
    int t = threadIdx.x;
    *reinterpret_cast<float4*>(&s[4 * t]) = reinterpret_cast<const float4*>(x)[t];
    pairs[t].a = x[t];
    pairs[t].b = -x[t];
    __syncthreads();
    float4 v = *reinterpret_cast<const float4*>(&s[4 * (63 - t)]);
    out[t] = v.x + v.y + v.z + v.w + s[t] + pairs[63 - t].a + pairs[63 - t].b;
}
template <bool SYNC>
__global__ void reverse_k(const float* __restrict__ x, float* __restrict__ out) {
    extern __shared__ float buf[];
    buf[threadIdx.x] = x[threadIdx.x];
    if (SYNC) __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}
// global memory: += by one thread per element is fine; by many threads on one word is a race
__global__ void axpy_k(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 2.0f * x[i];
}
__global__ void sum_plain_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[0] += x[i];
}
__global__ void sum_blocks_k(const float* __restrict__ partial, float* __restrict__ out) {
    if (threadIdx.x == 0) out[0] += partial[blockIdx.x];   // one thread per block, but many blocks
}
void run(torch::Tensor x, torch::Tensor out, int which) {
    int n = x.numel();
    auto xp = x.data_ptr<float>(), op = out.data_ptr<float>();
    switch (which) {
        case 0: reduce_k<<<cdiv(n, 128), 128>>>(xp, op, n); break;
        case 1: warp_smem_sum_k<true><<<n / 64, 64>>>(xp, op); break;
        case 2: warp_smem_sum_k<false><<<n / 64, 64>>>(xp, op); break;
        case 3: cross_warp_k<<<1, 64>>>(op); break;
        case 4: vec_smem_k<<<1, 64>>>(xp, op); break;
        case 5: reverse_k<true><<<1, n, n * sizeof(float)>>>(xp, op); break;
        case 6: reverse_k<false><<<1, n, n * sizeof(float)>>>(xp, op); break;
        case 7: axpy_k<<<cdiv(n, 64), 64>>>(xp, op, n); break;
        case 8: sum_plain_k<<<cdiv(n, 64), 64>>>(xp, op, n); break;
        case 9: sum_blocks_k<<<n, 32>>>(xp, op); break;
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
torch::Tensor histogram(torch::Tensor x, int bins) {
    auto hist = torch::zeros({bins}, x.options());
    histogram_k<<<3, 64>>>(x.data_ptr<int>(), hist.data_ptr<int>(), x.numel(), bins);
    return hist;
}
'''
CPP = """
torch::Tensor matmul(torch::Tensor m, torch::Tensor n, int variant);
void run(torch::Tensor x, torch::Tensor out, int which);
torch::Tensor histogram(torch::Tensor x, int bins);
"""
FUNCS = ["matmul", "run", "histogram"]


def line(text: str) -> int:
    """1-based line of RACES that contains ``text``."""
    return next(k for k, s in enumerate(RACES.splitlines(), 1) if text in s)


LOAD, USE = line("// tile load"), line("// tile use")


@pytest.fixture(scope="module")
def rc():
    return cuda_emu.load(RACES, CPP, FUNCS, name="test_races")  # racecheck on: the default


@pytest.fixture(scope="module")
def no_rc():
    return cuda_emu.load(RACES, CPP, FUNCS, name="test_races", racecheck=False)


def test_racecheck_is_on_by_default(rc, no_rc):
    assert rc.cuda_emu_info["racecheck"] is True and no_rc.cuda_emu_info["racecheck"] is False


@pytest.mark.parametrize("h, k, w", [(100, 70, 90), (128, 128, 128), (16, 16, 16)])
def test_correct_tiled_matmul_no_false_alarm(rc, h, k, w):
    a, b = torch.randn(h, k), torch.randn(k, w)
    torch.testing.assert_close(rc.matmul(a, b, 0), a @ b, rtol=1e-4, atol=1e-4)


def test_missing_barrier_after_the_load(rc):
    a, b = torch.randn(40, 48), torch.randn(48, 40)
    with pytest.raises(CudaEmulationError) as e:
        rc.matmul(a, b, 1)
    msg = str(e.value)
    assert msg.startswith("race on __shared__ ms[0][1] in kernel matmul_k<16, false, true> (launched at cuda_src line")
    assert (f"block (0,0,0): thread (0,0,0) read ms[0][1] at cuda_src line {USE} and thread (1,0,0) wrote it at "
            f"line {LOAD} with no __syncthreads() between") in msg
    assert "after the write and before the read if the reader needs the new value" in msg


def test_missing_barrier_after_the_reads(rc):
    a, b = torch.randn(40, 48), torch.randn(48, 40)
    with pytest.raises(CudaEmulationError, match=(
            rf"race on __shared__ ms\[0\]\[0\] .*: thread \(0,0,0\) wrote ms\[0\]\[0\] at cuda_src line {LOAD} "
            rf"and thread \(1,0,0\) read it at line {USE} with no __syncthreads\(\) between")):
        rc.matmul(a, b, 2)


def test_without_racecheck_a_missing_barrier_is_a_reproducible_wrong_answer(no_rc):
    a, b = torch.randn(64, 48), torch.randn(48, 40)
    for variant in (1, 2):
        out = no_rc.matmul(a, b, variant)
        assert not torch.allclose(out, a @ b, atol=1e-3)
        torch.testing.assert_close(no_rc.matmul(a, b, variant), out, rtol=0, atol=0, equal_nan=True)


def test_warn_mode_returns_the_result_and_warns():
    warn = cuda_emu.load(RACES, CPP, FUNCS, name="test_races", racecheck="warn")
    assert warn.cuda_emu_info["racecheck"] == "warn"
    a, b = torch.randn(40, 48), torch.randn(48, 40)
    with pytest.warns(RuntimeWarning) as record:
        out = warn.matmul(a, b, 2)
    msgs = [str(r.message) for r in record]
    # one warning per array and pair of lines (at most 3 per launch), not one per element
    assert [m.split(" in kernel")[0] for m in msgs] == ["race on __shared__ ms[0][0]", "race on __shared__ ms[0][1]",
                                                       "race on __shared__ ns[0][0]"], msgs
    assert not torch.allclose(out, a @ b, atol=1e-3)


def test_reduction_histogram_atomics_no_false_alarm(rc):
    x = torch.randn(1000)
    out = torch.zeros(1)
    rc.run(x, out, 0)
    torch.testing.assert_close(out.double(), x.double().sum().reshape(1), rtol=1e-4, atol=1e-3)
    xi = torch.randint(0, 20, (700,), dtype=torch.int32)
    assert torch.equal(rc.histogram(xi, 20), torch.bincount(xi, minlength=20).int())


def test_syncwarp_orders_one_warp(rc):
    x = torch.randn(256)
    out = torch.full((8,), float("nan"))
    rc.run(x, out, 1)
    torch.testing.assert_close(out.double(), x.view(8, 32).double().sum(1), rtol=1e-5, atol=1e-4)
    with pytest.raises(CudaEmulationError, match=(
            r"race on __shared__ s\[1\] .*: thread \(0,0,0\) read s\[1\] at cuda_src line (\d+) and thread \(1,0,0\) "
            r"updated it at line \1 with no __syncthreads\(\) between \(nor a __syncwarp\(\), though both are in warp 0\)")):
        rc.run(x, out, 2)


def test_syncwarp_does_not_order_two_warps(rc):
    with pytest.raises(CudaEmulationError) as e:
        rc.run(torch.zeros(64), torch.zeros(64), 3)
    msg = str(e.value)
    assert msg.startswith("race on __shared__ s[63] in kernel cross_warp_k")
    assert "thread (31,0,0) read s[63]" in msg and "thread (63,0,0) wrote it" in msg
    assert "though both are in warp" not in msg


def test_float4_through_address_struct_members_no_false_alarm(rc):
    x = torch.randn(256)
    out = torch.full((64,), float("nan"))
    rc.run(x, out, 4)
    ref = x.view(64, 4).sum(1).flip(0) + x[:64]
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_dynamic_shared_memory(rc):
    x = torch.randn(48)
    out = torch.full((48,), float("nan"))
    rc.run(x, out, 5)
    assert torch.equal(out, x.flip(0))
    with pytest.raises(CudaEmulationError,
                       match=r"race on __shared__ buf\[24\] .*thread \(23,0,0\) read buf\[24\] .* thread \(24,0,0\) wrote it"):
        rc.run(x, out, 6)


def test_global_read_modify_write(rc):
    x, y = torch.randn(300), torch.randn(300)
    ref = y + 2 * x
    rc.run(x, y, 7)                           # one thread per element: fine
    torch.testing.assert_close(y, ref)
    with pytest.raises(CudaEmulationError, match=(
            r"race on out\[0\] in kernel sum_plain_k .*: thread \(0,0,0\) of block \(0,0,0\) \(cuda_src line (\d+)\) and "
            r"thread \(1,0,0\) of block \(0,0,0\) \(line \1\) both update out\[0\] with a plain read-modify-write"
            r".*Use atomicAdd\(&out\[0\], v\)")):
        rc.run(x, torch.zeros(1), 8)
    with pytest.raises(CudaEmulationError, match=r"thread \(0,0,0\) of block \(0,0,0\) .* and thread \(0,0,0\) of "
                                                 r"block \(1,0,0\) .* both update out\[0\]"):
        rc.run(torch.randn(4), torch.zeros(1), 9)


def test_racecheck_cost_on_the_tiled_matmul(rc, no_rc):
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    times = {}
    for name, mod in (("off", no_rc), ("on", rc)):
        mod.matmul(a, b, 0)
        t0 = time.perf_counter()
        mod.matmul(a, b, 0)
        times[name] = time.perf_counter() - t0
    # measured ~0.05 s on, ~0.014 s off (2 shared cores): a bound 200 times that, for a runaway cost (a check per
    # access that allocates or locks), not a speed target a busy machine could miss
    assert times["on"] < 10.0, times


def test_transform_checked_accesses():
    src = r'''
__shared__ float g_tile[4][8];
__device__ void helper(float* s, int i) { s[i] += 1.0f; }
template <int TW> __global__ void k(float* out, const float* x, int n) {
    __shared__ float tile[TW][TW];
    extern __shared__ float dyn[];
    __shared__ float2 pairs[TW];
    int r = threadIdx.y, c = threadIdx.x;
    tile[r][c] = x[r];
    tile[r][c] += 1.0f;
    ++tile[r][c];
    float v = tile[c][r] + g_tile[r][c];
    float* row = tile[r];
    atomicAdd(&tile[r][c], 1.0f);
    pairs[c].x = dyn[c];
    out[r] += v;
    out[r] = v;
    out[r]++;
}
'''
    out = cuda_emu.transform(src).text
    assert out.count("\n") == src.count("\n")
    expected = [
        '::cuda_emu::sat<1>(tile, 9, (r), (c)) = ::cuda_emu::gat<0>(x, 9, "x", (r));',  # a write
        "::cuda_emu::sat<2>(tile, 10, (r), (c)) += 1.0f;",               # read-modify-write
        "++::cuda_emu::sat<2>(tile, 11, (r), (c));",
        "float v = ::cuda_emu::sat<0>(tile, 12, (c), (r)) + ::cuda_emu::sat<0>(g_tile, 12, (r), (c));",
        "::cuda_emu::gptr<float> row = ::cuda_emu::bound(tile[r]);",    # a row: bounds, not followed
        "atomicAdd(&tile[r][c], 1.0f);",                                 # an address: not followed
        "pairs[c].x = ::cuda_emu::sat<0>(dyn, 15, (c));",                # a member: not followed
        '::cuda_emu::gat<2>(out, 16, "out", (r)) += v;',                  # pointer parameter: checked, the
        '::cuda_emu::gat<1>(out, 17, "out", (r)) = v;',                   # line and name for messages,
        '::cuda_emu::gat<2>(out, 18, "out", (r))++;',                     # += raced-checked
        '::cuda_emu::gat<2>(s, 3, "s", (i)) += 1.0f; }',                  # a __device__ function's too
    ]
    for text in expected:
        assert text in out, (text, out)
    assert "sat<" not in cuda_emu.transform(src, checked=False).text
