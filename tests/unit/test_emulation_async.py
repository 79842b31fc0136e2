"""Asynchronous copies (cp.async through <cuda_pipeline.h>) in the CPU emulation of CUDA C, and
dynamic shared memory above 48 KiB (cudaFuncSetAttribute).

A copy is checked and its source read when it is issued; its shared-memory write happens when the
issuing thread waits for its batch (``__pipeline_wait_prior``), so reading the destination too
early gives the poison (NaN) or stale data, and another thread's copy read without a barrier is a
race.  The kernels: a STAGES-deep pipeline through dynamic shared memory (2 and 4 stages, 16-byte
copies, 4-byte copies with zfill at the tail), and the error cases. The matmul ladder's rung 10
(warptiling fed by cp.async, 120 KB of dynamic shared memory) is checked in every shape through the
emulation by tests/unit/test_kernels.py, and on a GPU by tests/gpu/test_matmul_ladder_gpu.py.

All kernels are in one source, built once for the module (~8 s with a warm precompiled header).
"""
from __future__ import annotations

import re

import pytest
import torch

from gpu_course.checking import check, dot_tol, poisoned
from gpu_course.cuda import cuda_begin
from gpu_course.cuda import emulation as cuda_emu
from gpu_course.cuda.emulation import CudaEmulationError
from gpu_course.cuda.emulation.source import check_supported

pytestmark = pytest.mark.usefixtures("without_nvcc_check")   # the builds here test other things

ASYNC = cuda_begin + "#include <cuda_pipeline.h>\n" + r'''
// ---- a STAGES-deep pipeline: out = 2 * x, each block streaming its tiles (blockIdx.x, + gridDim.x,
//      ...) through STAGES buffers of dynamic shared memory. Thread t copies quad t of a tile (16
//      bytes; at the ragged end four 4-byte copies, zero-filled past n) and reads elements t, t + 128,
//      t + 256, t + 384: other threads' quads, so the barrier after the wait is needed.
//      LAX waits for one batch too few (a bug: the tile being read may still be in flight).
template <int STAGES, bool LAX>
__global__ void stream_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    constexpr int T = 128, TILE = 4 * T;
    extern __shared__ __align__(16) float buf[];
    const int t = threadIdx.x, ntiles = (n + TILE - 1) / TILE;
    const int mine = (int)blockIdx.x < ntiles ? (ntiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
    auto issue = [&](int j) {
        if (j < mine) {
            const int base = (blockIdx.x + j * gridDim.x) * TILE + 4 * t;
            float* dst = &buf[(j % STAGES) * TILE + 4 * t];
            if (base + 4 <= n) {
                __pipeline_memcpy_async(dst, x + base, 16);
            } else {
                for (int q = 0; q < 4; ++q)
                    __pipeline_memcpy_async(dst + q, x + min(base + q, n - 1), 4, base + q < n ? 0 : 4);
            }
        }
        __pipeline_commit();
    };
    for (int j = 0; j < STAGES - 1; ++j) issue(j);
    for (int j = 0; j < mine; ++j) {
        __pipeline_wait_prior(LAX ? STAGES - 1 : STAGES - 2);
        __syncthreads();
        issue(j + STAGES - 1);             // into the buffer read in iteration j - 1, before the barrier
        const int s = j % STAGES, tile0 = (blockIdx.x + j * gridDim.x) * TILE;
        for (int q = 0; q < 4; ++q) {
            const int e = t + q * T;
            if (tile0 + e < n) out[tile0 + e] = 2.0f * buf[s * TILE + e];
        }
    }
}
void stream(torch::Tensor x, torch::Tensor out, int stages, bool lax, int blocks) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    const int n = x.numel();
    const size_t smem = (size_t)stages * 512 * sizeof(float);
    auto xp = x.data_ptr<float>(); auto op = out.data_ptr<float>();
    if (stages == 2 && !lax) stream_k<2, false><<<blocks, 128, smem>>>(xp, op, n);
    else if (stages == 4 && !lax) stream_k<4, false><<<blocks, 128, smem>>>(xp, op, n);
    else if (stages == 2 && lax) stream_k<2, true><<<blocks, 128, smem>>>(xp, op, n);
    else TORCH_CHECK(false, "stages 2 or 4 (lax only with 2)");
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- zfill: thread t copies x[4t .. 4t+3] with zfill = 4 * (t % 5) bytes (16: reads nothing, so
//      its source may be anything), then writes the 4 floats it got
__global__ void zfill_k(const float* __restrict__ x, float* __restrict__ out) {
    __shared__ __align__(16) float s[64 * 4];
    const int t = threadIdx.x, z = 4 * (t % 5);
    const float* src = z == 16 ? x + 256 : x + 4 * t;      // past the end of x (256 floats): never read
    __pipeline_memcpy_async(&s[4 * t], src, 16, z);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    for (int q = 0; q < 4; ++q) out[4 * t + q] = s[4 * t + q];
}

// ---- what a thread sees of its own copy before and after waiting (out[0] / out[1]); and with
//      CROSS, thread t reading thread t^1's copy after its own wait, without a barrier
template <bool CROSS>
__global__ void early_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float s[128];
    const int t = threadIdx.x, i = blockIdx.x * 128 + t;
    __pipeline_memcpy_async(&s[t], x + min(i, n - 1), 4);
    __pipeline_commit();
    if (i < n) out[i] = s[t];                      // before the wait: the copy has not landed
    __pipeline_wait_prior(0);
    if (i < n) out[n + i] = CROSS ? s[t ^ 1] : s[t];
}

// ---- a copy issued after the last commit is in the next batch: __pipeline_wait_prior(0) does not
//      complete it (out[1] is still the poison); the next commit + wait does (out[2])
__global__ void uncommitted_k(const float* __restrict__ x, float* __restrict__ out) {
    __shared__ float s[2];
    __pipeline_memcpy_async(&s[0], x, 4);
    __pipeline_commit();
    __pipeline_memcpy_async(&s[1], x + 1, 4);
    __pipeline_wait_prior(0);
    out[0] = s[0];
    out[1] = s[1];
    __pipeline_commit();
    __pipeline_wait_prior(0);
    out[2] = s[1];
}

// ---- bad copies, one per `mode`
__global__ void bad_copy_k(const float* __restrict__ x, float* __restrict__ out, int n, int mode) {
    __shared__ __align__(16) float s[64];
    __shared__ __align__(16) float s2[6];
    const float* raw = x;
    if (threadIdx.x != 0) return;
    switch (mode) {
        case 0: __pipeline_memcpy_async(&s[1], x, 16); break;             // dst not 16-byte aligned
        case 1: __pipeline_memcpy_async(&s[0], x + 1, 16); break;         // src not 16-byte aligned
        case 2: __pipeline_memcpy_async(&s[0], x + n, 16); break;         // src past the end of x
        case 3: __pipeline_memcpy_async(&s[0], raw + n, 8); break;        // a plain pointer past the end
        case 4: __pipeline_memcpy_async(out, x, 16); break;               // dst in global memory
        case 5: __pipeline_memcpy_async(&s[0], x, 12); break;             // not 4, 8 or 16
        case 6: __pipeline_memcpy_async(&s[4], &s[0], 16); break;         // src in shared memory
        case 7: __pipeline_memcpy_async(&s2[4], x, 16); break;            // dst runs past the end of s2
        case 8: __pipeline_memcpy_async(&s[0], x + n - 2, 16, 8); break;  // reads 8 bytes: in bounds (n = 98)
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    out[0] = s[0];
}
void copy_case(torch::Tensor x, torch::Tensor out, int which, int mode) {
    const int n = x.numel();
    auto xp = x.data_ptr<float>(); auto op = out.data_ptr<float>();
    if (which == 0) bad_copy_k<<<1, 32>>>(xp, op, n, mode);
    if (which == 1) zfill_k<<<1, 64>>>(xp, op);
    if (which == 2) early_k<false><<<cdiv(n, 128), 128>>>(xp, op, n);
    if (which == 3) early_k<true><<<cdiv(n, 128), 128>>>(xp, op, n);
    if (which == 4) uncommitted_k<<<1, 1>>>(xp, op);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- dynamic shared memory above 48 KiB: the last float of the buffer, written and read back
__global__ void big_smem_k(float* __restrict__ out, int nfloats) {
    extern __shared__ float big[];
    if (threadIdx.x == 0) big[nfloats - 1] = 7.0f;
    __syncthreads();
    if (threadIdx.x == 1) out[0] = big[nfloats - 1];
}
void big_smem(torch::Tensor out, int64_t bytes, int64_t attr) {
    if (attr >= 0) cudaFuncSetAttribute(big_smem_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)attr);
    cudaFuncSetAttribute(big_smem_k, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    big_smem_k<<<1, 32, bytes>>>(out.data_ptr<float>(), (int)(bytes / 4));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
'''
FUNCS = ["stream", "copy_case", "big_smem"]
CPP = """
void stream(torch::Tensor x, torch::Tensor out, int stages, bool lax, int blocks);
void copy_case(torch::Tensor x, torch::Tensor out, int which, int mode);
void big_smem(torch::Tensor out, int64_t bytes, int64_t attr);
"""


@pytest.fixture(scope="module")
def m():
    return cuda_emu.load(ASYNC, CPP, FUNCS, name="test_async")


def line_of(text: str) -> int:
    """The 1-based number of the (only) line of ASYNC that contains ``text``."""
    found = [k for k, line in enumerate(ASYNC.splitlines(), 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("n, blocks", [(5003, 3), (512 * 9, 2), (37, 1)])
def test_pipeline_streams_correctly(m, stages, n, blocks):
    x = torch.randn(n)
    out = poisoned(n)
    m.stream(x, out, stages, False, blocks)
    check(out, 2 * x.double(), atol=0, rtol=0)


def test_waiting_for_too_few_batches_is_a_race(m):
    # wait_prior(1) with 2 stages: the tile read may still be in flight. Here its copies land at the
    # next wait, while other threads read the tile: a race (with racecheck off, the poison is read)
    read = line_of("if (tile0 + e < n) out[tile0 + e] = 2.0f * buf[s * TILE + e];")
    copy = line_of("__pipeline_memcpy_async(dst, x + base, 16);")
    with pytest.raises(CudaEmulationError, match=rf"race on __shared__ buf\[1\] .*: thread \(0,0,0\) wrote buf\[1\] "
                                                 rf"at cuda_src line {copy} and thread \(1,0,0\) read it at line "
                                                 rf"{read} with no __syncthreads\(\) between"):
        m.stream(torch.randn(5003), poisoned(5003), 2, True, 3)


def test_zfill_zero_fills_the_tail_and_reads_nothing(m):
    x = torch.randn(256)
    out = poisoned(256)
    m.copy_case(x, out, 1, 0)
    got, want = out.view(64, 4), x.view(64, 4).clone()
    for t in range(64):
        want[t, 4 - t % 5:] = 0.0  # zfill = 4 * (t % 5) bytes: the last t % 5 floats
    assert torch.equal(got, want)


def test_reading_before_the_wait_gets_the_poison(m):
    n = 300
    x = torch.randn(n)
    out = poisoned(2 * n)
    m.copy_case(x, out, 2, 0)
    assert out[:n].isnan().all()          # before __pipeline_wait_prior: not copied yet
    assert torch.equal(out[n:], x)        # after it: the thread's own copy has landed


def test_wait_prior_completes_committed_batches_only(m):
    x = torch.randn(2)
    out = poisoned(3)
    m.copy_case(x, out, 4, 0)
    assert out[0].item() == x[0].item() and out[1].isnan() and out[2].item() == x[1].item()


def test_reading_another_threads_copy_without_a_barrier_is_a_race(m):
    x = torch.randn(256)
    read = line_of("if (i < n) out[n + i] = CROSS ? s[t ^ 1] : s[t];")
    copy = line_of("__pipeline_memcpy_async(&s[t], x + min(i, n - 1), 4);")
    with pytest.raises(CudaEmulationError,
                       match=rf"race on __shared__ s.*thread \(0,0,0\) read s .* at cuda_src line {read} and "
                             rf"thread \(1,0,0\) wrote it at line {copy} with no __syncthreads\(\) between"):
        m.copy_case(x, poisoned(512), 3, 0)


@pytest.mark.parametrize("mode, message", [
    (0, r"misaligned address: __pipeline_memcpy_async\(dst, src, 16\) at cuda_src line {line} in kernel "
        r"bad_copy_k .* dst is byte 4 of __shared__ s, not a multiple of 16"),
    (1, r"misaligned address: __pipeline_memcpy_async\(dst, src, 16\) .* src \(0x[0-9a-f]+\) is not "
        r"16-byte aligned"),
    (2, r"out-of-bounds read by __pipeline_memcpy_async\(dst, src, 16\) .*: the source is byte 400 of x, "
        r"which points to a Float tensor of 100 elements \(400 bytes\), and the copy reads bytes 400..415"),
    (3, r"out-of-bounds read .* the source is byte 400 of x, .* reads bytes 400..407"),
    (4, r"dst \(0x[0-9a-f]+\) is not shared memory"),
    (5, r"the size must be 4, 8 or 16 bytes"),
    (6, r"src points into __shared__ s; cp.async reads global memory"),
    (7, r"out-of-bounds write by .* dst is byte 16 of __shared__ s2, which has 24 bytes"),
])
def test_bad_copies_raise(m, mode, message):
    line = line_of(f"case {mode}: __pipeline_memcpy_async")
    with pytest.raises(CudaEmulationError, match=message.format(line=line)):
        m.copy_case(torch.randn(100), poisoned(4), 0, mode)


def test_zfill_part_past_the_end_is_not_read(m):
    x = torch.randn(98)
    out = poisoned(4)
    m.copy_case(x, out, 0, 8)  # 16 bytes from x[96], 8 of them zero-filled: reads x[96], x[97] only
    assert out[0].item() == x[96].item()


def test_dynamic_shared_memory_above_48k_needs_the_attribute(m):
    # the attributes persist in the module, as on a GPU: the order of these calls matters
    out = poisoned(1)
    m.big_smem(out, 48 * 1024, -1)  # the default limit: fine
    assert out.item() == 7.0
    with pytest.raises(CudaEmulationError, match=re.escape(
            "invalid argument for kernel big_smem_k launched at cuda_src line "
            f"{line_of('big_smem_k<<<1, 32, bytes>>>')}: 65536 bytes of dynamic shared memory requested; above "
            "49152 bytes (48 KiB) the kernel must allow it first, in host code: cudaFuncSetAttribute(big_smem_k, "
            "cudaFuncAttributeMaxDynamicSharedMemorySize, 65536) (it was not called for this kernel)")):
        m.big_smem(out, 64 * 1024, -1)
    out = poisoned(1)
    m.big_smem(out, 64 * 1024, 64 * 1024)
    assert out.item() == 7.0
    with pytest.raises(CudaEmulationError, match=r"100000 bytes of dynamic shared memory .* \(it allows 65536 bytes\)"):
        m.big_smem(out, 100_000, -1)
    out = poisoned(1)
    m.big_smem(out, 232448, 232448)  # an H100's most per block
    assert out.item() == 7.0
    with pytest.raises(CudaEmulationError, match=r"cudaFuncSetAttribute\(\.\.\., cudaFuncAttributeMaxDynamicSharedMemory"
                                                 r"Size, 232449\): a block can have at most 232448 bytes \(227 KiB\)"):
        m.big_smem(out, 232449, 232449)
    with pytest.raises(CudaEmulationError, match=r"232452 bytes of dynamic shared memory requested; a block can have at "
                                                 r"most 232448 bytes \(227 KiB\) on an H100"):
        m.big_smem(out, 232452, -1)


def test_source_check_allows_the_pipeline_primitives_only():
    ok = "#include <cuda_pipeline.h>\n#include <cuda_pipeline_primitives.h>\n" \
         "__pipeline_memcpy_async(d, s, 16); __pipeline_commit(); __pipeline_wait_prior(0);\n" \
         "cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);\n"
    check_supported(ok)
    for bad, what in [("#include <cuda/pipeline>\n", "CUDA C++ libraries"),
                      ("#include <cuda_awbarrier.h>\n", "asynchronous copies other than"),
                      ("cuda::memcpy_async(block, dst, src, n, pipe);\n", "asynchronous copies other than"),
                      ("__pipeline_arrive_on(&bar);\n", "asynchronous copies other than"),
                      ("cudaFuncGetAttributes(&attr, k);\n", "the CUDA runtime API")]:
        with pytest.raises(CudaEmulationError, match=re.escape(what)):
            check_supported(bad)
