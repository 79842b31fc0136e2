"""The CUDA C exercises of notebooks 03, 04, 09 and 12 are judged by the work the technique carries,
counted by the emulation in the check's own launch and in the learner's (cpu mode). Each check is the
notebook's check cell (its evidence; ``differs_from`` aside); per exercise: the reference solution of
``solutions/`` and two correct-but-unusual answers are accepted, and answers of three classes are refused
with a message that names what the lesson is about:

1. the technique executed once beside the work (a shuffle of 0 added to a serial sum; a global atomic per
   element; one ``mma_sync`` beside a scalar product; each thread parking its result in ``__shared__``);
2. the work done where the count did not look (a ``__device__`` pointer variable; a template helper);
3. the learner's own launch differs from the check's relaunch (a pointer compared with an int argument).

Notebook 05's Numba tiles likewise, by the simulator's count of global loads.
"""
import utils  # first: it sets the simulator switches that numba reads at import

import numba
import pytest
import torch
from numba import cuda

from gpu_course.exercises.evidence import barriers_passed
from gpu_course.kernels import tensor_cores as tc
from gpu_course.lessons.reductions import bytes_without_repeats
from solutions import nb03, nb04, nb09, nb12

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the emulation's counts"),
              pytest.mark.usefixtures("without_nvcc_check"), pytest.mark.slow]   # ~40 emulated builds


def src_of(code: str) -> str:
    """The CUDA C source a solution's answer cell assigns (``name_src = ...``)."""
    ns = {"utils": utils, "tc": tc}
    exec(code, ns)
    return next(v for k, v in ns.items() if k.endswith("_src"))


def verdict(capsys, check, src: str) -> str:
    check(src)
    return capsys.readouterr().out.strip().splitlines()[0]


def build(fn):
    return lambda s: utils.load_cuda(s, utils.get_sig(fn, s), [fn])


# ------------------------------------------------------------------------------------------------
# 03: a ReLU kernel (the work split between threads)

X03 = torch.randn(4099)


def check_relu(src):
    def run(mod):
        out = utils.poisoned(X03.numel())
        mod.relu(X03, out)
        return out
    utils.kernel_exercise("a ReLU kernel", src, kind="cuda", kernel="relu_k", build=build("relu"), run=run,
                          reference=lambda: torch.relu(X03), atol=0, rtol=0,
                          evidence=[utils.splits_work(items=X03.numel())])


RELU = src_of(nb03.RELU)
RELU_LOOP = "    if (i < n) out[i] = fmaxf(x[i], 0.0f);"


def test_03_relu_work_split(capsys):
    ok = "✅ a ReLU kernel: correct"
    assert verdict(capsys, check_relu, RELU).startswith(ok)
    # unusual: a grid-stride loop on a quarter of the threads; a helper template that takes the pointers
    stride = RELU.replace(RELU_LOOP, "    for (; i < n; i += gridDim.x * blockDim.x) out[i] = fmaxf(x[i], 0.0f);"
                          ).replace("cdiv(n, 256)", "cdiv(n, 1024)")
    assert verdict(capsys, check_relu, stride).startswith(ok)
    helper = RELU.replace("__global__ void relu_k", "template <typename T> __device__ void put(const T* x, T* out, int i) "
                          "{ out[i] = fmaxf(x[i], T(0)); }\n__global__ void relu_k").replace(
        RELU_LOOP, "    if (i < n) put(x, out, i);")
    assert verdict(capsys, check_relu, helper).startswith(ok)
    one = "made 8198 of the 8198 global memory accesses: split the work so that each thread handles its own part"
    # class 2: one thread does everything through a __device__ pointer variable, or inside a template helper
    devvar = RELU.replace("__global__ void relu_k", "__device__ const float* xs;\n__device__ float* os;\n"
                          "__global__ void relu_k").replace(
        RELU_LOOP, "    xs = x; os = out;\n    if (i == 0) for (int j = 0; j < n; ++j) os[j] = fmaxf(xs[j], 0.0f);")
    why = verdict(capsys, check_relu, devvar)
    assert why.startswith("❌") and one in why, why
    tpl = RELU.replace("__global__ void relu_k", "template <typename T> __device__ void all(const T* x, T* out, int n) "
                       "{ for (int j = 0; j < n; ++j) out[j] = fmaxf(x[j], T(0)); }\n__global__ void relu_k").replace(
        RELU_LOOP, "    if (i == 0) all(x, out, n);")
    why = verdict(capsys, check_relu, tpl)
    assert why.startswith("❌") and one in why, why
    # class 3: the kernel tells the learner's launch (x is the pointer the host passed as a number) from the check's
    tell = RELU.replace("int n)", "int n, long long tag)").replace(
        RELU_LOOP, "    if ((long long)(const void*)x == tag) { if (i == 0) for (int j = 0; j < n; ++j) "
                   "out[j] = fmaxf(x[j], 0.0f); }\n    else if (i < n) out[i] = fmaxf(x[i], 0.0f);").replace(
        "x.data_ptr<float>(), out.data_ptr<float>(), n)", "x.data_ptr<float>(), out.data_ptr<float>(), n, "
                                                          "(long long)x.data_ptr<float>())")
    why = verdict(capsys, check_relu, tell)
    assert why.startswith("❌ a ReLU kernel: not yet: in your host function's launch of relu_k") and one in why, why


# ------------------------------------------------------------------------------------------------
# 04: transposed-B tiled kernel (global loads per output element: about 2k/T)

H4, K4, W4 = 50, 37, 45
M4, NT4 = torch.randn(H4, K4), torch.randn(W4, K4)


def check_bt(src):
    utils.kernel_exercise("transposed-B tiled kernel", src, kind="cuda", kernel="matmul_bt_k", build=build("matmul_bt"),
                          run=lambda mod: mod.matmul_bt(M4, NT4, utils.poisoned(H4, W4)),
                          reference=lambda: M4 @ NT4.T, **utils.dot_tol(K4),
                          evidence=[utils.uses_shared_memory(), utils.calls("__syncthreads"), utils.splits_work()])


BT = src_of(nb04.MATMUL_BT)


def test_04_tiles_carry_the_loads(capsys):
    ok = "✅ transposed-B tiled kernel: correct"
    assert verdict(capsys, check_bt, BT).startswith(ok)
    # unusual: tiles of 8 x 8; the inner product through a pointer to the shared row
    assert verdict(capsys, check_bt, BT.replace("constexpr int TW = 16;", "constexpr int TW = 8;")).startswith(ok)
    rowptr = BT.replace("for (int i = 0; i < TW; ++i) p += ms[tr][i] * nts[tc][i];",
                        "const float* a = &ms[tr][0]; const float* b = &nts[tc][0];\n"
                        "        for (int i = 0; i < TW; ++i) p += a[i] * b[i];")
    assert verdict(capsys, check_bt, rowptr).startswith(ok)
    # class 1: each thread parks its naive product in shared memory and reads it back, beside a barrier
    parked = BT.replace("    for (int ph = 0; ph < k; ph += TW) {", """    for (int i = 0; r < h && c < w && i < k; ++i) p += m[r * k + i] * nt[c * k + i];
    ms[tr][tc] = p; __syncthreads(); p = ms[tr][tc];
    for (int ph = k; ph < k; ph += TW) {""")
    why = verdict(capsys, check_bt, parked)
    assert why.startswith("❌ transposed-B tiled kernel: not yet: when the check launched matmul_bt_k for a 50x37 by "
                          "37x45 product, it made 74.0 global loads per output element: a naive kernel makes 2k = 74; "
                          "tiles of T x T"), why


# ------------------------------------------------------------------------------------------------
# 09: shuffles, a privatized histogram with aggregation, a segmented scan

XA = (torch.randint(-40, 41, (30_011,)) / 8)


def check_absmax(src):
    def run(m):
        i = utils.poisoned(1, dtype=torch.int32)
        m.absmax(XA, i)
        return i
    utils.kernel_exercise("first index of the largest |x|", src, kind="cuda", kernel="absmax_k", build=build("absmax"),
                          run=run, reference=lambda: (XA.abs() == XA.abs().max()).nonzero()[:1, 0].int(), atol=0,
                          rtol=0, evidence=[utils.calls("__shfl_down_sync"), utils.launches_at_most(1),
                                            utils.splits_work()])


ABSMAX = src_of(nb09.ABSMAX)
WARP_STEP = "    warp_best(v, i);\n    int lane"


def test_09_absmax_shuffles_carry_the_combining(capsys):
    ok = "✅ first index of the largest |x|: correct"
    assert verdict(capsys, check_absmax, ABSMAX).startswith(ok)
    # unusual (accepted): a shared-memory tree down to 32 values, finished by one warp's __shfl_down_sync
    tree = ABSMAX.replace(WARP_STEP, """    __shared__ float sv[1024];
    __shared__ int si[1024];
    sv[threadIdx.x] = v; si[threadIdx.x] = i;
    __syncthreads();
    for (int s = blockDim.x / 2; s >= 32; s >>= 1) {
        if (threadIdx.x < s) { better(v, i, sv[threadIdx.x + s], si[threadIdx.x + s]); sv[threadIdx.x] = v; si[threadIdx.x] = i; }
        __syncthreads();
    }
    if (threadIdx.x < 32) { warp_best(v, i); if (threadIdx.x == 0) *idx = i; }
    return;
    int lane""")
    assert verdict(capsys, check_absmax, tree).startswith(ok)
    # unusual: 256 threads, each first reducing four strided elements
    assert verdict(capsys, check_absmax, ABSMAX.replace("absmax_k<<<1, 1024>>>", "absmax_k<<<1, 256>>>")).startswith(ok)
    # class 1: a shuffle of 0 beside thread 0 reading every thread's parked result from shared memory
    dummy = ABSMAX.replace(WARP_STEP, """    v += __shfl_down_sync(0xffffffffu, 0.0f, 1);
    __shared__ float pv[1024];
    __shared__ int pi[1024];
    pv[threadIdx.x] = v; pi[threadIdx.x] = i;
    __syncthreads();
    if (threadIdx.x == 0) { for (int t = 1; t < blockDim.x; ++t) better(v, i, pv[t], pi[t]); *idx = i; }
    return;
    int lane""")
    why = verdict(capsys, check_absmax, dummy)
    assert why.startswith("❌ first index of the largest |x|: not yet: in the check's launch, thread 0 of block 0 of "
                          "absmax_k read 2046 values from shared memory and executed 1 shuffle: the values combine "
                          "through __shfl_down_sync"), why
    # class 1: each thread's best through a global atomic on a packed (|x|, index), a shuffle of 0 beside it
    atomic = ABSMAX.replace("__global__ void absmax_k", "__device__ unsigned long long best;\n__global__ void absmax_k"
                            ).replace("    float v = -1.0f;", "    if (threadIdx.x == 0) best = 0ull;\n    __syncthreads();\n"
                                                            "    float v = -1.0f;").replace(WARP_STEP, """    v += __shfl_down_sync(0xffffffffu, 0.0f, 1);
    atomicMax(&best, ((unsigned long long)__float_as_uint(v) << 32) | (0xffffffffu - (unsigned)i));
    __syncthreads();
    if (threadIdx.x == 0) *idx = (int)(0xffffffffu - (unsigned)(best & 0xffffffffull));
    return;
    int lane""")
    why = verdict(capsys, check_absmax, atomic)
    assert why == ("❌ first index of the largest |x|: not yet: in the check's launch, absmax_k made 1,024 atomic updates "
                   "in global memory for 32 warps: a warp combines its values with __shfl_down_sync first, then at most "
                   "one atomic per warp"), why
    # class 2: thread 0 scans everything through a __device__ pointer variable (30011 loads, and its store of the
    # result: *idx = i under an if)
    devvar = ABSMAX.replace("__global__ void absmax_k", "__device__ const float* gx;\n__global__ void absmax_k").replace(
        "    for (int k = threadIdx.x; k < n; k += blockDim.x) better(v, i, fabsf(x[k]), k);",
        "    gx = x;\n    if (threadIdx.x == 0) for (int k = 0; k < n; ++k) better(v, i, fabsf(gx[k]), k);")
    why = verdict(capsys, check_absmax, devvar)
    assert why.startswith("❌") and "made 30012 of the 30012 global memory accesses" in why, why


XG = torch.nn.functional.avg_pool1d((torch.rand(1, 1, 40_000) * 255), 33, stride=1, padding=16).flatten() \
    .to(torch.uint8)   # neighbouring bytes alike, as a blurred image's


XR = bytes_without_repeats(XG.numel())   # no bin repeats within 32 neighbours: no runs


def check_hist(src):
    def run(m):
        c = utils.poisoned(32, dtype=torch.int32)
        m.hist32(XG, c)
        return c

    def run_no_repeats(m):
        m.hist32(XR, utils.poisoned(32, dtype=torch.int32))
    utils.kernel_exercise("32-bin histogram with aggregation", src, kind="cuda", kernel="hist32_k", build=build("hist32"),
                          run=run, reference=lambda: torch.bincount(XG.long() >> 3, minlength=32).int(), atol=0,
                          rtol=0, evidence=[utils.shared_atomics(), utils.splits_work(), utils.aggregated(
                              XG.numel(), at_most=0.5, no_repeats=(run_no_repeats, XR.numel()))])


HIST = src_of(nb09.HIST32)


def test_09_histogram_global_atomics_at_most_bins_times_blocks(capsys):
    ok = "✅ 32-bin histogram with aggregation: correct"
    assert verdict(capsys, check_hist, HIST).startswith(ok)
    # unusual: chunks of 64 bytes on 128 threads; a warp per bin flushing the block's counters
    assert verdict(capsys, check_hist, HIST.replace("CHUNK = 32", "CHUNK = 64").replace(", 256>>>", ", 128>>>")
                   .replace("256 * CHUNK", "128 * CHUNK")).startswith(ok)
    flush = HIST.replace("""    for (int b = threadIdx.x; b < 32; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);""", """    if (threadIdx.x < 32) { int v = local[threadIdx.x]; if (v) atomicAdd(counts + threadIdx.x, v); }""")
    assert verdict(capsys, check_hist, flush).startswith(ok)
    # class 1: one global atomic per run, with a shared atomic of 0 beside each to look privatized
    per_run = HIST.replace("atomicAdd(&local[run_bin], run)", "(atomicAdd(&counts[run_bin], run), atomicAdd(&local[run_bin], 0))"
                           ).replace("""    for (int b = threadIdx.x; b < 32; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);""", "")
    why = verdict(capsys, check_hist, per_run)
    assert why.startswith("❌ 32-bin histogram with aggregation: not yet: when the check launched hist32_k (5 blocks)"), why
    assert "atomic updates in global memory for 32 counters: privatized counters" in why, why
    # class 1: a private histogram per thread over its whole share (several chunks, 32 counters), flushed once
    private = src_of(nb09.CHEATS["ex2-answer-09"][
        "no runs: a private histogram per thread over its whole share (two blocks), flushed once"])
    assert private.count("mine[") == 4 and "<<<2, 128>>>" in private
    why = verdict(capsys, check_hist, private)
    assert why.startswith("❌ 32-bin histogram with aggregation: not yet: on 40,000 bytes where no bin repeats within "
                          "32 neighbours, hist32_k made"), why
    assert "a private histogram over its whole share" in why, why


XS3 = torch.randn(1000)
STARTS = torch.rand(1000) < 0.02
STARTS[[0, 31, 32, 500, 999]] = True
FLAGS = STARTS.int()


def seg_ref():
    out, acc = torch.zeros(1000), 0.0
    for i in range(1000):
        acc = 0.0 if STARTS[i] else acc
        out[i] = acc
        acc += float(XS3[i])
    return out


def check_scan(src):
    def run(m):
        o = utils.poisoned(1000)
        m.seg_scan(XS3, FLAGS, o)
        return o
    utils.kernel_exercise("segmented exclusive scan", src, kind="cuda", kernel="seg_scan_k", build=build("seg_scan"),
                          run=run, reference=seg_ref, atol=1e-4, rtol=1e-5,
                          evidence=[utils.calls("__shfl_up_sync"), utils.splits_work()])


SCAN = src_of(nb09.SEG_SCAN)


def test_09_scan_does_linear_work(capsys):
    ok = "✅ segmented exclusive scan: correct"
    assert verdict(capsys, check_scan, SCAN).startswith(ok)
    # unusual: blocks of 1024 threads whatever n (the idle ones scan zeros); the flag read through a local pointer
    assert verdict(capsys, check_scan, SCAN.replace("seg_scan_k<<<1, cdiv(n, 32) * 32>>>", "seg_scan_k<<<1, 1024>>>")
                   ).startswith(ok)
    local = SCAN.replace("int f = t < n ? (t == 0 || flags[t] != 0) : 0;",
                         "const int* fl = flags + t;\n    int f = t < n ? (t == 0 || *fl != 0) : 0;")
    assert verdict(capsys, check_scan, local).startswith(ok)
    # class 1: each thread sums its own prefix serially (O(n^2) loads), a shuffle of 0 beside it
    serial = SCAN.replace("    if (t < n) out[t] = f_own ? 0.0f : v - x_own;", """    float acc = __shfl_up_sync(0xffffffffu, 0.0f, 1);
    if (t < n) { int j = t; while (j > 0 && !flags[j]) { --j; acc += x[j]; } out[t] = acc; }""")
    why = verdict(capsys, check_scan, serial)
    assert why.startswith("❌ segmented exclusive scan: not yet: in the check's launch, seg_scan_k made") and \
        "a shuffle reduction or scan reads each input about once (O(n) work)" in why, why


# ------------------------------------------------------------------------------------------------
# 12: a WMMA kernel for any size (mma_sync calls = tiles x k-steps)

H12, W12, K12 = 37, 45, 29
M12, N12 = torch.randn(H12, K12).half(), torch.randn(K12, W12).half()


def check_wmma(src):
    utils.kernel_exercise("a WMMA kernel for any size", src, kind="cuda", kernel="wmma_any_k", build=build("wmma_any"),
                          run=lambda mod: mod.wmma_any(M12, N12, utils.poisoned(H12, W12, dtype=torch.float16)),
                          reference=lambda: M12.double() @ N12.double(), **tc.tol(K12),
                          evidence=[utils.calls("wmma::mma_sync"), utils.splits_work(), utils.threads_per_block(32),
                                    utils.grid_is((W12 + 15) // 16, (H12 + 15) // 16,
                                                  meaning="one warp per 16x16 tile of out")])


WMMA = src_of(nb12.WMMA_ANY)


def test_12_mma_sync_per_tile_and_k_step(capsys):
    ok = "✅ a WMMA kernel for any size: correct"
    assert verdict(capsys, check_wmma, WMMA).startswith(ok)
    # unusual: the k loop runs to k rounded up to 16 (the zero padding covers the rest)
    padded = WMMA.replace("for (int i = 0; i < k; i += 16) {", "for (int i = 0; i < (k + 15) / 16 * 16; i += 16) {")
    assert verdict(capsys, check_wmma, padded).startswith(ok)
    # unusual: the k loop counts steps, not offsets
    steps = WMMA.replace("for (int i = 0; i < k; i += 16) {", "for (int s = 0, i = 0; s < (k + 15) / 16; ++s, i = 16 * s) {")
    assert verdict(capsys, check_wmma, steps).startswith(ok)
    # class 1: one mma_sync on zero fragments beside a scalar product per element
    scalar = WMMA.replace("        wmma::mma_sync(acc, a, b, acc);\n", "").replace(
        "    wmma::store_matrix_sync(&os[0][0], acc, 16, wmma::mem_row_major);", """    wmma::fill_fragment(a, __float2half(0.0f)); wmma::fill_fragment(b, __float2half(0.0f));
    wmma::mma_sync(acc, a, b, acc);
    wmma::store_matrix_sync(&os[0][0], acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
        const int r = r0 + e / 16, c = c0 + e % 16;
        float p = 0.0f;
        for (int i = 0; r < h && c < w && i < k; ++i) p += __half2float(m[r * k + i]) * __half2float(n[i * w + c]);
        os[e / 16][e % 16] += p;
    }""")
    why = verdict(capsys, check_wmma, scalar)
    assert why.startswith("❌ a WMMA kernel for any size: not yet: when the check launched wmma_any_k on a 37x29 by "
                          "29x45 product, its warps executed 9 wmma::mma_sync for the 9 tiles of 16x16 times 2 k-steps "
                          "= 18"), why


# ------------------------------------------------------------------------------------------------
# 05 (Numba): rectangular 8 x 16 tiles (global loads per output element, counted by the simulator)

TH, TW = 8, 16
A5, B5 = torch.randn(12, 19), torch.randn(19, 21)


@cuda.jit
def matmul_rect_numba(m, n, out):   # the reference solution
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = m[r, ph + tc] if r < h and ph + tc < k else numba.float32(0.0)
        for i in range(tr, TW, TH):
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p


@cuda.jit
def rect_while(m, n, out):   # unusual: a while loop over the phases, the n tile loaded as two halves
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r, c = cuda.blockIdx.y * TH + tr, cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    ph = 0
    while ph < k:
        ms[tr, tc] = m[r, ph + tc] if r < h and ph + tc < k else numba.float32(0.0)
        ns[tr, tc] = n[ph + tr, c] if ph + tr < k and c < w else numba.float32(0.0)
        ns[tr + TH, tc] = n[ph + tr + TH, c] if ph + tr + TH < k and c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
        ph += TW
    if r < h and c < w:
        out[r, c] = p


@cuda.jit
def rect_parked(m, n, out):   # class 1: a naive product, parked in the tiles and read back between barriers
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r, c = cuda.blockIdx.y * TH + tr, cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    if r < h and c < w:
        for i in range(k):
            p += m[r, i] * n[i, c]
    for ph in range(0, k, TW):
        ms[tr, tc] = p
        ns[tr, tc] = p
        ns[tr + TH, tc] = p
        cuda.syncthreads()
        p = ms[tr, tc] + ns[tr, tc] - ns[tr + TH, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p


def check_rect(kernel, name):
    def run(kern):
        out = utils.poisoned(12, 21)
        kern[(utils.cdiv(21, 16), utils.cdiv(12, 8)), (16, 8)](utils.to_numba(A5), utils.to_numba(B5), utils.to_numba(out))
        utils.synchronize()
        return out
    utils.kernel_exercise("rectangular 8 x 16 tiled kernel", kernel, kind="numba", kernel=name, run=run,
                          reference=lambda: A5.double() @ B5.double(), **utils.dot_tol(19),
                          evidence=[utils.uses_shared_memory(), utils.shared_tiles((8, 16), (16, 16)),
                                    barriers_passed(4, compiled_at_least=2, meaning="two phases, two barriers each")])


def test_05_numba_tiles_carry_the_loads(capsys):
    ok = "✅ rectangular 8 x 16 tiled kernel: correct"
    assert verdict(capsys, lambda k: check_rect(k, "matmul_rect_numba"), matmul_rect_numba).startswith(ok)
    assert verdict(capsys, lambda k: check_rect(k, "rect_while"), rect_while).startswith(ok)
    why = verdict(capsys, lambda k: check_rect(k, "rect_parked"), rect_parked)
    assert why.startswith("❌ rectangular 8 x 16 tiled kernel: not yet: when the check launched rect_parked for a 12x19 "
                          "by 19x21 product, it made 38.0 global loads per output element: a naive kernel makes 2k = 38"), why
