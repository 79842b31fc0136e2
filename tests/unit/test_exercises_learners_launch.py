"""Kernel exercises (cpu mode): the evidence holds on the learner's own launch as on the course's relaunch,
the inputs keep their values whatever kernel the answer launched, and the technique carries the work:

* the learner's launch is counted too (CUDA C: aggregation in a histogram, one wide load per thread; Numba:
  shared tiles, barriers, global loads per output element), so state kept between launches (a ``__device__``
  flag, a module-level counter) that makes only the relaunch do the lesson is refused;
* a host function's tensors other than the output keep their values (a helper kernel that changes ``x`` in
  place is refused, with the same message whatever its name);
* shuffles carry the last five steps of a reduction or scan (a shared-memory tree over the whole block with
  one shuffle of 0 beside it is refused; a tree down to 32 values finished by one warp's shuffles passes);
* the threads of a block share its work (thread 0 of each block counting its slice alone is refused);
* a WMMA kernel loads what 16x16 fragments imply, and its ``mma_sync`` products reach the output (launched again
  with every product doubled, the output changes): zero-fragment ``mma_sync`` beside a scalar product, from global
  memory or from shared tiles, is refused.

Each cheat is refused with a message naming the lesson; an unusual right answer per exercise passes."""
import numpy as np
import pytest
import torch

import utils

from gpu_course.kernels import tensor_cores as tc

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the emulation's and the simulator's counts"),
              pytest.mark.usefixtures("without_nvcc_check")]


def lines(capsys):
    return capsys.readouterr().out.strip().splitlines()


def build(fn):
    return lambda s: utils.load_cuda(s, utils.get_sig(fn, s), [fn])


# ----------------------------------------------------------------------------------------------
# a histogram with aggregation (notebook 09, exercise 2)

XG = torch.repeat_interleave(torch.randint(0, 256, (1024,), generator=torch.Generator().manual_seed(0)), 16) \
    .to(torch.uint8)   # runs of 16 equal bytes: neighbours alike, as in the blurred image


def hist_host(blocks="min(cdiv(n, 256 * 32), 64)", threads=256):
    return r"""
void hist32(torch::Tensor x, torch::Tensor counts) {
    counts.zero_();
    int n = x.numel();
    hist32_k<<<BLOCKS, THREADS>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), n);
}
""".replace("BLOCKS", str(blocks)).replace("THREADS", str(threads))


def check_hist(src, capsys):
    def run(m):
        c = utils.poisoned(32, dtype=torch.int32)
        m.hist32(XG, c)
        return c
    utils.kernel_exercise("histogram", src, kind="cuda", kernel="hist32_k", build=build("hist32"), run=run,
                          reference=lambda: torch.bincount(XG.long() >> 3, minlength=32).int(), atol=0, rtol=0,
                          evidence=[utils.shared_atomics(), utils.aggregated(XG.numel(), at_most=0.5),
                                    utils.splits_work()])
    return lines(capsys)[0]


HIST_AGGREGATED_ON_RELAUNCH = utils.cuda_begin + r"""
__device__ int relaunched = 0;
__global__ void hist32_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[32];
    for (int b = threadIdx.x; b < 32; b += blockDim.x) local[b] = 0;
    __syncthreads();
    int s = (blockIdx.x * blockDim.x + threadIdx.x) * 32;
    for (; s < n; s += gridDim.x * blockDim.x * 32) {
        int run_bin = -1, run = 0;
        for (int i = s; i < min(s + 32, n); i++) {
            int b = x[i] >> 3;
            if (!relaunched) { atomicAdd(&local[b], 1); continue; }
            if (b == run_bin) { run++; continue; }
            if (run > 0) atomicAdd(&local[run_bin], run);
            run_bin = b; run = 1;
        }
        if (run > 0) atomicAdd(&local[run_bin], run);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < 32; b += blockDim.x) if (local[b] > 0) atomicAdd(&counts[b], local[b]);
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == blockDim.x - 1) relaunched = 1;
}
""" + hist_host()

HIST_THREAD0_PER_BLOCK = utils.cuda_begin + r"""
__global__ void hist32_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[32];
    if (threadIdx.x < 32) local[threadIdx.x] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        int c[32] = {0};
        int per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(lo + per, n);
        for (int i = lo; i < hi; ++i) c[x[i] >> 3]++;
        for (int b = 0; b < 32; ++b) if (c[b]) atomicAdd(&local[b], c[b]);
    }
    __syncthreads();
    if (threadIdx.x < 32 && local[threadIdx.x]) atomicAdd(&counts[threadIdx.x], local[threadIdx.x]);
}
""" + hist_host(64, 256)   # each thread 0 makes 1/64 of all the accesses: the split within a block sees it

HIST_MATCH_ANY = utils.cuda_begin + r"""
__global__ void hist32_k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[32];
    if (threadIdx.x < 32) local[threadIdx.x] = 0;
    __syncthreads();
    int lane = threadIdx.x % 32;
    int stride = gridDim.x * blockDim.x;
    int rounds = (n + stride - 1) / stride;
    for (int r = 0; r < rounds; ++r) {
        int i = r * stride + blockIdx.x * blockDim.x + threadIdx.x;
        int b = i < n ? (x[i] >> 3) : -1;
        unsigned same = __match_any_sync(0xffffffffu, b);
        if (b >= 0 && lane == __ffs(same) - 1) atomicAdd(&local[b], __popc(same));
    }
    __syncthreads();
    if (threadIdx.x < 32 && local[threadIdx.x]) atomicAdd(&counts[threadIdx.x], local[threadIdx.x]);
}
""" + hist_host(8, 256)


def test_hist_aggregating_only_when_relaunched_is_refused_on_the_learners_launch(capsys):
    line = check_hist(HIST_AGGREGATED_ON_RELAUNCH, capsys)
    assert line.startswith("❌") and "when your host function launched hist32_k" in line, line
    assert "aggregation" in line, line


def test_hist_thread_0_of_each_block_counting_alone_is_refused(capsys):
    line = check_hist(HIST_THREAD0_PER_BLOCK, capsys)
    assert line.startswith("❌") and "the threads of a block share its part of the work" in line, line


def test_hist_warp_aggregation_by_match_any_passes(capsys):
    assert check_hist(HIST_MATCH_ANY, capsys).startswith("✅")


# ----------------------------------------------------------------------------------------------
# float4 loads (notebook 03, exercise 6)

X4 = torch.randn(4099)


def check_relu4(src, capsys):
    def run(mod):
        out = utils.poisoned(X4.numel())
        mod.relu4(X4, out)
        return out
    utils.kernel_exercise("relu4", src, kind="cuda", kernel="relu4_k", build=build("relu4"), run=run,
                          reference=lambda: torch.relu(X4), atol=0, rtol=0,
                          evidence=[utils.splits_work(items=X4.numel(), per_thread=4)])
    return lines(capsys)[0]


RELU4_SCALAR_IN_LEARNERS_LAUNCH = utils.cuda_begin + r"""
__device__ int relaunched = 0;
__global__ void relu4_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n / 4;
    if (relaunched) {
        if (j < n4) {
            float4 v = reinterpret_cast<const float4*>(x)[j];
            reinterpret_cast<float4*>(out)[j] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f), fmaxf(v.w, 0.0f));
        }
    } else if (j < n4) {
        for (int q = 0; q < 4; ++q) out[4 * j + q] = fmaxf(x[4 * j + q], 0.0f);
    }
    if (j < n % 4) out[4 * n4 + j] = fmaxf(x[4 * n4 + j], 0.0f);
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == blockDim.x - 1) relaunched = 1;
}
void relu4(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    relu4_k<<<cdiv(max(n / 4, n % 4), 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""

RELU4_CSTYLE_TAIL_THREADS = utils.cuda_begin + r"""
__global__ void relu4_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, n4 = n >> 2;
    if (j < n4) {
        float4 v = __ldg((const float4*)x + j);
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        ((float4*)out)[j] = v;
    } else if (j - n4 < (n & 3)) {
        int e = 4 * n4 + (j - n4);
        out[e] = fmaxf(x[e], 0.f);
    }
}
void relu4(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    relu4_k<<<cdiv(n / 4 + n % 4, 64), 64>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""


def test_relu4_scalar_loads_in_the_learners_launch_are_refused(capsys):
    line = check_relu4(RELU4_SCALAR_IN_LEARNERS_LAUNCH, capsys)
    assert line.startswith("❌") and "in your host function's launch" in line and "4-wide load" in line, line


def test_relu4_cstyle_cast_and_tail_threads_pass(capsys):
    assert check_relu4(RELU4_CSTYLE_TAIL_THREADS, capsys).startswith("✅")


# ----------------------------------------------------------------------------------------------
# a helper kernel that changes an input in place (notebook 03, exercises 1 and 3)

XA = torch.randn(4099)
A, B = 1.75, -0.5


def axpb_source(helper: str) -> str:
    return utils.cuda_begin + r"""
__global__ void HELPER(float* x, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
__global__ void axpb_k(const float* __restrict__ x, float* __restrict__ out, int n, float b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + b;
}
void axpb(torch::Tensor x, torch::Tensor out, double a, double b) {
    int n = x.numel();
    HELPER<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), n, (float)a);
    axpb_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, (float)b);
}
""".replace("HELPER", helper)


AXPB_GRIDSTRIDE_FMA = utils.cuda_begin + r"""
__global__ void axpb_k(const float* __restrict__ x, float* __restrict__ out, int n, double a, double b) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = fmaf((float)a, x[i], (float)b);
}
void axpb(torch::Tensor x, torch::Tensor out, double a, double b) {
    int n = x.numel();
    axpb_k<<<cdiv(n, 512), 128>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, a, b);
}
"""


def check_axpb(src, capsys):
    x = XA.clone()   # the helper may change it: each check its own

    def run(mod):
        out = utils.poisoned(x.numel())
        mod.axpb(x, out, A, B)
        return out
    utils.kernel_exercise("axpb", src, kind="cuda", kernel="axpb_k", build=build("axpb"), run=run,
                          reference=lambda: A * XA.double() + B, atol=1e-5, rtol=1e-5,
                          evidence=[utils.launches_at_most(1, "fused means one kernel, one pass over memory"),
                                    utils.splits_work(items=x.numel())])
    return lines(capsys)[0]


def test_a_helper_kernel_changing_x_in_place_is_refused_whatever_its_name(capsys):
    got = [check_axpb(axpb_source(name), capsys) for name in ("scale_k", "aa_scale_k")]
    for line in got:
        assert line.startswith("❌") and "argument 1 of your host function axpb" in line, line
        assert "reads the inputs and writes only the output" in line, line
    assert got[0] == got[1]


def test_axpb_grid_stride_with_double_parameters_passes(capsys):
    assert check_axpb(AXPB_GRIDSTRIDE_FMA, capsys).startswith("✅")


# ----------------------------------------------------------------------------------------------
# shuffles carry the reduction and the scan (notebook 09, exercises 1 and 3)

XA9 = (torch.randint(-40, 41, (3001,), generator=torch.Generator().manual_seed(1)) / 8)

BETTER = r"""
__device__ __forceinline__ void better(float& v, int& i, float w, int j) {
    if (w > v || (w == v && j < i)) { v = w; i = j; }
}
"""
ABSMAX_HOST = r"""
void absmax(torch::Tensor x, torch::Tensor idx) {
    absmax_k<<<1, 1024>>>(x.data_ptr<float>(), idx.data_ptr<int>(), x.numel());
}
"""


def absmax_source(last_level: int, finish: str) -> str:
    return utils.cuda_begin + BETTER + r"""
__global__ void absmax_k(const float* __restrict__ x, int* __restrict__ idx, int n) {
    __shared__ float sv[1024];
    __shared__ int si[1024];
    float v = -1.0f; int i = 0x7fffffff;
    for (int k = threadIdx.x; k < n; k += blockDim.x) better(v, i, fabsf(x[k]), k);
    sv[threadIdx.x] = v; si[threadIdx.x] = i;
    __syncthreads();
    for (int k = blockDim.x / 2; k >= LAST; k >>= 1) {
        if (threadIdx.x < k) {
            better(v, i, sv[threadIdx.x + k], si[threadIdx.x + k]);
            sv[threadIdx.x] = v; si[threadIdx.x] = i;
        }
        __syncthreads();
    }
""".replace("LAST", str(last_level)) + finish + "}\n" + ABSMAX_HOST


ABSMAX_SHARED_TREE_DUMMY_SHUFFLE = absmax_source(1, r"""
    v += __shfl_down_sync(0xffffffffu, 0.0f, 1);      // the shuffle: of a zero
    if (threadIdx.x == 0) *idx = i;
""")
ABSMAX_TREE_TO_32_THEN_SHUFFLES = absmax_source(32, r"""
    if (threadIdx.x < 32) {
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_down_sync(0xffffffffu, v, o);
            int j = __shfl_down_sync(0xffffffffu, i, o);
            better(v, i, w, j);
        }
        if (threadIdx.x == 0) *idx = i;
    }
""")


def check_absmax(src, capsys):
    def run(m):
        i = utils.poisoned(1, dtype=torch.int32)
        m.absmax(XA9, i)
        return i
    utils.kernel_exercise("absmax", src, kind="cuda", kernel="absmax_k", build=build("absmax"), run=run,
                          reference=lambda: (XA9.abs() == XA9.abs().max()).nonzero()[:1, 0].int(), atol=0, rtol=0,
                          evidence=[utils.calls("__shfl_down_sync"), utils.launches_at_most(1),
                                    utils.grid_is(1, meaning="one block"), utils.splits_work()])
    return lines(capsys)[0]


def test_a_shared_tree_with_a_shuffle_of_zero_beside_it_is_refused(capsys):
    line = check_absmax(ABSMAX_SHARED_TREE_DUMMY_SHUFFLE, capsys)
    assert line.startswith("❌") and "read 20 values from shared memory and executed 1 shuffle" in line, line
    assert "at least the last 5 steps" in line, line


def test_a_shared_tree_to_32_finished_by_one_warps_shuffles_passes(capsys):
    assert check_absmax(ABSMAX_TREE_TO_32_THEN_SHUFFLES, capsys).startswith("✅")


XS = torch.randn(1000, generator=torch.Generator().manual_seed(2))
STARTS = torch.rand(1000, generator=torch.Generator().manual_seed(3)) < 0.02
STARTS[[0, 31, 32, 500, 999]] = True


def seg_scan_reference():
    out, run = torch.zeros(1000, dtype=torch.float64), 0.0
    for j in range(1000):
        if STARTS[j]:
            run = 0.0
        out[j] = run
        run += float(XS[j])
    return out


SCAN_KOGGE_STONE_DUMMY_SHUFFLE = utils.cuda_begin + r"""
__global__ void seg_scan_k(const float* __restrict__ x, const int* __restrict__ flags, float* __restrict__ out, int n) {
    __shared__ float sv[1024];
    __shared__ int sf[1024];
    int t = threadIdx.x;
    float own = t < n ? x[t] : 0.0f;
    int own_f = t < n ? (t == 0 || flags[t] != 0) : 0;
    float v = own; int f = own_f;
    v += __shfl_up_sync(0xffffffffu, 0.0f, 1);     // the shuffle: of a zero
    sv[t] = v; sf[t] = f;
    __syncthreads();
    for (int s = 1; s < blockDim.x; s *= 2) {
        float lv = t >= s ? sv[t - s] : 0.0f;
        int lf = t >= s ? sf[t - s] : 0;
        __syncthreads();
        if (t >= s) { if (!f) v += lv; f |= lf; sv[t] = v; sf[t] = f; }
        __syncthreads();
    }
    if (t < n) out[t] = own_f ? 0.0f : v - own;
}
void seg_scan(torch::Tensor x, torch::Tensor flags, torch::Tensor out) {
    int n = x.numel();
    seg_scan_k<<<1, cdiv(n, 32) * 32>>>(x.data_ptr<float>(), flags.data_ptr<int>(), out.data_ptr<float>(), n);
}
"""

SCAN_4_PER_THREAD = utils.cuda_begin + r"""
__device__ __forceinline__ void seg_scan_warp(float& v, int& f) {
    int lane = threadIdx.x % 32;
    for (int s = 1; s < 32; s *= 2) {
        float lv = __shfl_up_sync(0xffffffffu, v, s);
        int lf = __shfl_up_sync(0xffffffffu, f, s);
        if (lane >= s) { if (!f) v += lv; f |= lf; }
    }
}
__global__ void seg_scan_k(const float* __restrict__ x, const int* __restrict__ flags, float* __restrict__ out, int n) {
    __shared__ float wv[32]; __shared__ int wf[32];
    int t = threadIdx.x, lane = t % 32, warp = t / 32, base = 4 * t;
    float e[4]; int st[4];
    float tot = 0.0f; int tf = 0;
    for (int q = 0; q < 4; ++q) {
        int i = base + q;
        float xi = i < n ? x[i] : 0.0f;
        st[q] = i < n ? (i == 0 || flags[i] != 0) : 0;
        if (st[q]) { tot = 0.0f; tf = 1; }
        e[q] = tot; tot += xi;
    }
    float v = tot; int f = tf;
    seg_scan_warp(v, f);
    float carry = __shfl_up_sync(0xffffffffu, v, 1);
    if (lane == 0) carry = 0.0f;
    if (lane == 31) { wv[warp] = v; wf[warp] = f; }
    __syncthreads();
    if (warp == 0) {
        float a = lane < blockDim.x / 32 ? wv[lane] : 0.0f;
        int af = lane < blockDim.x / 32 ? wf[lane] : 0;
        seg_scan_warp(a, af);
        float pa = __shfl_up_sync(0xffffffffu, a, 1);
        wv[lane] = lane == 0 ? 0.0f : pa;
    }
    __syncthreads();
    int fl = __shfl_up_sync(0xffffffffu, f, 1);
    if (lane == 0) fl = 0;
    float in = fl ? carry : carry + wv[warp];
    for (int q = 0; q < 4; ++q) {
        int i = base + q;
        if (i >= n) break;
        bool started = false;
        for (int p = 0; p <= q; ++p) started |= st[p];
        out[i] = started ? e[q] : e[q] + in;
    }
}
void seg_scan(torch::Tensor x, torch::Tensor flags, torch::Tensor out) {
    int n = x.numel();
    seg_scan_k<<<1, 256>>>(x.data_ptr<float>(), flags.data_ptr<int>(), out.data_ptr<float>(), n);
}
"""


def check_scan(src, capsys):
    flags = STARTS.int()

    def run(m):
        o = utils.poisoned(1000)
        m.seg_scan(XS, flags, o)
        return o
    utils.kernel_exercise("scan", src, kind="cuda", kernel="seg_scan_k", build=build("seg_scan"), run=run,
                          reference=seg_scan_reference, atol=1e-4, rtol=1e-5,
                          evidence=[utils.calls("__shfl_up_sync"), utils.splits_work()])
    return lines(capsys)[0]


def test_a_shared_kogge_stone_with_a_shuffle_of_zero_beside_it_is_refused(capsys):
    line = check_scan(SCAN_KOGGE_STONE_DUMMY_SHUFFLE, capsys)
    assert line.startswith("❌") and "executed 1 shuffle" in line and "__shfl_up_sync" in line, line


def test_a_scan_of_4_per_thread_then_warp_shuffles_passes(capsys):
    assert check_scan(SCAN_4_PER_THREAD, capsys).startswith("✅")


# ----------------------------------------------------------------------------------------------
# WMMA for any size (notebook 12, exercise 1)

WMMA_HOST = r"""
torch::Tensor wmma_any(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    wmma_any_k<<<dim3(cdiv(w, 16), cdiv(h, 16)), 32>>>(reinterpret_cast<const __half*>(m.data_ptr<at::Half>()),
        reinterpret_cast<const __half*>(n.data_ptr<at::Half>()), reinterpret_cast<__half*>(out.data_ptr<at::Half>()),
        h, w, k);
    return out;
}
"""

WMMA_ZERO_FRAGMENTS_BESIDE_SCALAR = utils.cuda_begin + r"""
#include <cuda_fp16.h>
#include <mma.h>
__global__ void wmma_any_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out,
                           int h, int w, int k) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> z;
    wmma::fill_fragment(a, __float2half(0.0f)); wmma::fill_fragment(b, __float2half(0.0f)); wmma::fill_fragment(z, 0.0f);
    for (int i = 0; i < k; i += 16) wmma::mma_sync(z, a, b, z);
    const int r0 = blockIdx.y * 16, c0 = blockIdx.x * 16;
    for (int e = threadIdx.x; e < 256; e += 32) {
        const int r = r0 + e / 16, c = c0 + e % 16;
        if (r < h && c < w) {
            float s = 0.0f;
            for (int i = 0; i < k; ++i) s += __half2float(m[r * k + i]) * __half2float(n[i * w + c]);
            out[r * w + c] = __float2half(s + z.x[0]);
        }
    }
}
""" + WMMA_HOST

WMMA_DIRECT_LOADS_EDGE_MASKED = utils.cuda_begin + r"""
#include <cuda_fp16.h>
#include <mma.h>
__global__ void wmma_any_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out,
                           int h, int w, int k) {
    using namespace nvcuda;
    __shared__ __align__(32) __half ms[256], ns[256];
    __shared__ __align__(32) float os[256];
    const int lane = threadIdx.x, r0 = blockIdx.y * 16, c0 = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int i = 0; i < k; i += 16) {
        bool inside_a = r0 + 16 <= h && i + 16 <= k && k % 8 == 0;
        bool inside_b = c0 + 16 <= w && i + 16 <= k && w % 8 == 0;
        if (inside_a) wmma::load_matrix_sync(a, m + r0 * k + i, k);
        else {
            for (int e = lane; e < 256; e += 32) { int r = e / 16, c = e % 16;
                ms[e] = r0 + r < h && i + c < k ? m[(r0 + r) * k + i + c] : __float2half(0.0f); }
            __syncwarp(); wmma::load_matrix_sync(a, ms, 16); __syncwarp();
        }
        if (inside_b) wmma::load_matrix_sync(b, n + i * w + c0, w);
        else {
            for (int e = lane; e < 256; e += 32) { int r = e / 16, c = e % 16;
                ns[e] = i + r < k && c0 + c < w ? n[(i + r) * w + c0 + c] : __float2half(0.0f); }
            __syncwarp(); wmma::load_matrix_sync(b, ns, 16); __syncwarp();
        }
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(os, acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
        int r = r0 + e / 16, c = c0 + e % 16;
        if (r < h && c < w) out[r * w + c] = __float2half(os[e]);
    }
}
""" + WMMA_HOST


def _solution_source(text: str) -> str:
    """The CUDA C source an answer cell of solutions/nb12.py defines (``wmma_any_src = ...``)."""
    ns = {"utils": utils}
    exec(text, ns)
    return ns["wmma_any_src"]


def check_wmma(src, capsys, h=37, w=45, k=29):
    g = torch.Generator().manual_seed(4)
    m, n = torch.randn(h, k, generator=g).half(), torch.randn(k, w, generator=g).half()
    utils.kernel_exercise("wmma", src, kind="cuda", kernel="wmma_any_k", build=build("wmma_any"),
                          run=lambda mod: mod.wmma_any(m, n, utils.poisoned(h, w, dtype=torch.float16)),
                          reference=lambda: m.double() @ n.double(), **tc.tol(k),
                          evidence=[utils.calls("wmma::mma_sync"), utils.splits_work(), utils.threads_per_block(32)])
    return lines(capsys)[0]


def test_zero_fragment_mma_syncs_beside_a_scalar_product_are_refused(capsys):
    line = check_wmma(WMMA_ZERO_FRAGMENTS_BESIDE_SCALAR, capsys)
    assert line.startswith("❌") and "global loads per output element" in line and "tensor cores" in line, line


def test_zero_fragment_mma_syncs_beside_a_product_from_shared_tiles_are_refused(capsys):
    from solutions import nb12
    line = check_wmma(_solution_source(nb12.SHARED_SCALAR_BESIDE_ZERO_MMA), capsys)
    assert line.startswith("❌") and "mma_sync products do not reach its output" in line, line


@pytest.mark.parametrize("shape", [(37, 45, 29), (40, 48, 32)])   # the second has interior tiles, loaded directly
def test_wmma_with_direct_loads_of_interior_tiles_and_masked_edges_passes(shape, capsys):
    assert check_wmma(WMMA_DIRECT_LOADS_EDGE_MASKED, capsys, *shape).startswith("✅")


# ----------------------------------------------------------------------------------------------
# Numba: the learner's launch is counted too (notebook 05, exercise 3)

from numba import cuda  # noqa: E402
import numba  # noqa: E402

TW, TH = 16, 8
threads_seen = np.zeros(1, np.int64)


@cuda.jit
def rect_naive_until_relaunched(m, n, out):
    seen = cuda.atomic.add(threads_seen, 0, 1)
    h, k = m.shape
    w = n.shape[1]
    tc_, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc_
    nthreads = cuda.gridDim.x * cuda.gridDim.y * TH * TW
    if seen < nthreads:            # the learner's launch: naive
        if r < h and c < w:
            p = numba.float32(0.0)
            for i in range(k):
                p += m[r, i] * n[i, c]
            out[r, c] = p
        return
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc_] = m[r, ph + tc_] if r < h and ph + tc_ < k else numba.float32(0.0)
        for i in range(tr, TW, TH):
            ns[i, tc_] = n[ph + i, c] if ph + i < k and c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc_]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p


@cuda.jit
def rect_flat_n_tile(m, n, out):   # unusual: the n tile loaded with a flat index, sums in float64
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc_, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c0 = cuda.blockIdx.x * TW
    h, k = m.shape
    w = n.shape[1]
    p = 0.0
    for ph in range(0, k, TW):
        ms[tr, tc_] = m[r, ph + tc_] if r < h and ph + tc_ < k else 0.0
        for e in (tr * TW + tc_, tr * TW + tc_ + TH * TW):
            i, j = e // TW, e % TW
            ns[i, j] = n[ph + i, c0 + j] if ph + i < k and c0 + j < w else 0.0
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc_]
        cuda.syncthreads()
    if r < h and c0 + tc_ < w:
        out[r, c0 + tc_] = p


def check_rect(kernel, capsys):
    from gpu_course.exercises.evidence import barriers_passed
    a3, b3 = torch.randn(12, 19), torch.randn(19, 21)

    def run(k):
        out = utils.poisoned(12, 21)
        k[(utils.cdiv(21, 16), utils.cdiv(12, 8)), (16, 8)](utils.to_numba(a3), utils.to_numba(b3), utils.to_numba(out))
        return out
    utils.kernel_exercise("rect", kernel, kind="numba", run=run, reference=lambda: a3.double() @ b3.double(),
                          **utils.dot_tol(19),
                          evidence=[utils.uses_shared_memory(), utils.shared_tiles((8, 16), (16, 16)),
                                    barriers_passed(4, compiled_at_least=2, meaning="two phases, two barriers each")])
    return lines(capsys)[0]


def test_numba_naive_in_the_learners_launch_tiled_when_relaunched_is_refused(capsys):
    threads_seen[0] = 0
    line = check_rect(rect_naive_until_relaunched, capsys)
    assert line.startswith("❌") and "when your function launched it" in line, line


def test_numba_tiles_loaded_by_flat_index_pass(capsys):
    assert check_rect(rect_flat_n_tile, capsys).startswith("✅")
