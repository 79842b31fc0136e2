"""CUDA C kernel exercises judge what the learner's kernel executed, launched by the course itself
(cpu mode: the emulation builds the learner's source with a launcher and counts per thread what
ran). One test per class of cheat:

1. the kernel writes nothing (or part) and something else fills the output: torch in the host
   function, or another kernel of the source launched before the asked one;
2. the technique is text, not execution: ``__shared__`` / ``__syncthreads()`` under ``#if 0``, in a
   branch no thread takes, an unused array, tiles stored and never read back; shuffles in a dead
   branch; global atomics where privatized (shared) ones are asked;
3. one thread does all the work;

and the pieces: the launch log, the launcher, the counts, the GPU build's log (compiled with nvcc
when it is on PATH)."""
import shutil
import subprocess

import pytest
import torch

import utils
from gpu_course.cuda import counters, gpu_build
from gpu_course.cuda.language import STD_FLAG
from gpu_course.exercises import cuda_launch
from gpu_course.exercises.compiled import sass_ops
from gpu_course.launches import KernelCall, launches, module_launch_log

# its emulated builds test the judging (nvcc's own tests are below, with nvcc called directly)
pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the emulation's counts"),
              pytest.mark.usefixtures("without_nvcc_check")]

X = torch.randn(1000)


def build(fn):
    return lambda s: utils.load_cuda(s, utils.get_sig(fn, s), [fn])


def verdict(capsys, src, kernel, fn="f", reference=lambda: torch.relu(X), out_dtype=torch.float32,
            out_n=1000, x=X, **kw):
    def run(mod):
        out = utils.poisoned(out_n, dtype=out_dtype)
        getattr(mod, fn)(x, out)
        return out
    utils.kernel_exercise("t", src, kind="cuda", kernel=kernel, build=build(fn), run=run, reference=reference,
                          atol=kw.pop("atol", 0), rtol=kw.pop("rtol", 0), **kw)
    out = capsys.readouterr().out.strip().splitlines()
    return out[0] if out else ""


def elementwise(body: str, extra: str = "", host_after: str = "", before: str = "") -> str:
    """A source with kernel k(x, out, n) of ``body`` (i = the thread's global index), launched on
    blocks of 256 by ``void f(x, out)``."""
    return utils.cuda_begin + extra + r"""
__global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
""" + body + r"""
}
void f(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
""" + before + r"""    k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
""" + host_after + "}\n"


RELU = elementwise("    if (i < n) out[i] = fmaxf(x[i], 0.0f);")
OK = "✅ t: correct (your CUDA C kernel k wrote the result)"


@pytest.mark.slow   # four emulated builds (the learner's with the launcher, then a clashing source's three): ~18 s cold
def test_the_learners_build_holds_the_checks_launcher_one_build_not_two(capsys, monkeypatch):
    import gpu_course.cuda as cuda
    built, real = [], cuda._build
    monkeypatch.setattr(cuda, "_build", lambda sources, *a: built.append(list(sources.funcs)) or real(sources, *a))
    src = RELU.replace("int n) {", "int n) {  // one build", 1)
    assert verdict(capsys, src, "k") == OK
    assert built == [["f", "course_launch_k"]]
    # a source the launcher cannot join (it defines the launcher's helper): the learner's build alone,
    # then the check's own build of it, which fails, and says so
    built.clear()
    clash = src.replace("__global__", "static inline void* course_exercise_ptr(torch::Tensor& t, int64_t off) "
                                      "{ return nullptr; }\n__global__", 1)
    why = verdict(capsys, clash, "k")
    assert built == [["f", "course_launch_k"], ["f"], ["course_launch_k"]], built
    assert why.startswith("❌ t: not yet: the check launched k itself"), why


# ----------------------------------------------------------------------------------------------
# 1. the kernel writes nothing, or part, and something else fills the output

def test_1_a_kernel_that_writes_nothing_is_refused_whatever_fills_the_output(capsys):
    assert verdict(capsys, RELU, "k", evidence=[utils.splits_work()]) == OK
    silent = "    if (i < n) { float v = x[i]; (void)v; }"
    torch_fills = verdict(capsys, elementwise(silent, host_after="    out.copy_(x.clamp_min(0));\n"), "k")
    assert "computes with torch (aten.clamp_min)" in torch_fills
    helper = r"""
__global__ void helper_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
"""
    first = "    helper_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);\n"
    other = verdict(capsys, elementwise(silent, extra=helper, before=first), "k")
    assert other.startswith("❌ t: not yet: the check launched k itself (your launch configuration and arguments, "
                            "on fresh memory, without the rest of your host function) and it did not compute the "
                            "result: k: 1000 of 1000 elements differ"), other


def test_1_a_partial_kernel_completed_by_torch_is_refused_and_the_own_launch_alone_sees_it(capsys):
    half = elementwise("    if (i < n / 2) out[i] = fmaxf(x[i], 0.0f);",
                       host_after="    out.narrow(0, n / 2, n - n / 2).copy_(x.narrow(0, n / 2, n - n / 2).relu());\n")
    assert "computes with torch (aten.relu)" in verdict(capsys, half, "k")
    # the course's own launch, on its own: only the kernel's half is there
    mod = build("f")(half)
    out = utils.poisoned(1000)
    with launches(modules=[mod]) as seen:
        mod.f(X, out)
    got, ex, _ = cuda_launch.own_launch(half, "k", seen.of("cuda")[0], out)
    assert got[:500].equal(torch.relu(X[:500])) and got[500:].isnan().all()
    assert ex.counted and int(ex.launches[0].field("gstore").sum()) == 500


def test_1_memory_made_inside_the_host_function_cannot_be_replaced(capsys):
    src = elementwise("    if (i < n) out[i] = fmaxf(x[i], 0.0f);").replace(
        "x.data_ptr<float>()", "y.data_ptr<float>()").replace("    int n = x.numel();", "    auto y = x.clone();\n"
                                                                  "    int n = x.numel();")
    why = verdict(capsys, src, "k")
    assert why.startswith("❌ t: not yet: the check launches k itself and cannot: your host function gave k memory "
                          "that is none of its tensors (x, argument 1"), why


def test_1_a_host_function_that_zeroes_the_output_gets_a_zeroed_output(capsys):
    adds = utils.cuda_begin + r"""
__global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&out[0], 2.0f * x[i]);
}
void f(torch::Tensor x, torch::Tensor out) {
    out.zero_();
    k<<<cdiv(x.numel(), 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
"""
    assert verdict(capsys, adds, "k", reference=lambda: 2 * X.double().sum().reshape(1), out_n=1, atol=1e-3,
                   evidence=[utils.calls("atomicAdd")]) == OK


# ----------------------------------------------------------------------------------------------
# 2. the technique as text, not execution

TILED = r"""
    __shared__ float t[256];
    t[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = fmaxf(t[threadIdx.x], 0.0f);"""
STAGED = [utils.uses_shared_memory(), utils.calls("__syncthreads")]


@pytest.mark.slow   # several emulated builds of the staged kernels: ~15 s cold
def test_2_shared_memory_and_barriers_count_only_when_they_run(capsys):
    assert verdict(capsys, elementwise(TILED), "k", evidence=STAGED) == OK
    plain = "    if (i < n) out[i] = fmaxf(x[i], 0.0f);"
    dead = verdict(capsys, elementwise("#if 0" + TILED + "\n#endif\n" + plain), "k", evidence=STAGED)
    untaken = verdict(capsys, elementwise("    if (n < 0) {" + TILED + "\n    }\n" + plain), "k", evidence=STAGED)
    unused = verdict(capsys, elementwise("    __shared__ float t[256];\n    __syncthreads();\n" + plain), "k",
                     evidence=STAGED)
    never_run = ("❌ t: not yet: k never stored into shared memory when the check launched it (code that does not "
                 "run, e.g. under #if 0 or in an if that is never true, does not count)")
    assert dead == untaken == unused == never_run, (dead, untaken, unused)
    stored_only = verdict(capsys, elementwise("    __shared__ float t[256];\n    t[threadIdx.x] = 1.0f;\n"
                                              "    __syncthreads();\n" + plain), "k", evidence=STAGED)
    assert stored_only == ("❌ t: not yet: k never read back from shared memory when the check launched it: "
                           "thread 0 of block 0 stored 1 value and loaded 0")
    no_barrier = verdict(capsys, elementwise("    __shared__ float t[256];\n    t[threadIdx.x] = i < n ? x[i] : 0;\n"
                                             "    if (n < 0) __syncthreads();\n"
                                             "    if (i < n) out[i] = fmaxf(t[threadIdx.x], 0.0f);"), "k",
                         evidence=STAGED)
    assert no_barrier.startswith("❌ t: not yet: k passed no __syncthreads() when the check launched it"), no_barrier


def test_2_a_thread_that_reads_global_memory_without_staging_is_named(capsys):
    # threads of the upper half of each block read x directly
    half = r"""
    __shared__ float t[256];
    if (threadIdx.x < 128) t[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    float v = threadIdx.x < 128 ? t[threadIdx.x] : (i < n ? x[i] : 0.0f);
    if (i < n) out[i] = fmaxf(v, 0.0f);"""
    why = verdict(capsys, elementwise(half), "k", evidence=STAGED)
    assert why == ("❌ t: not yet: in the check's launch, thread 128 of block 0 of k accessed global memory 2 times, "
                   "stored 0 values into shared memory and loaded 0: every thread stages its part in shared memory "
                   "and reads it back from there"), why


SUM = utils.cuda_begin + r"""
__global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    SHUFFLE
    if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}
void f(torch::Tensor x, torch::Tensor out) {
    out.zero_();
    k<<<4, 64>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
"""
WARP = "for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);"


def test_2_shuffles_count_only_when_they_run(capsys):
    def judge(src):
        return verdict(capsys, src, "k", reference=lambda: X.double().sum().reshape(1), out_n=1, atol=1e-3,
                       evidence=[utils.calls("__shfl_down_sync")])
    assert judge(SUM.replace("SHUFFLE", WARP)) == OK
    # lane 0 of each warp sums its lanes' values from shared memory; the shuffle is in a dead branch
    staged = SUM.replace("SHUFFLE", "if (n < 0) s += __shfl_down_sync(0xffffffffu, s, 1);\n"
                                    "    __shared__ float v[64]; v[threadIdx.x] = s; __syncthreads();\n"
                                    "    if (threadIdx.x % 32 == 0) for (int l = 1; l < 32; ++l) s += v[threadIdx.x + l];")
    assert judge(staged) == ("❌ t: not yet: k executed no __shfl_down_sync when the check launched it (code that "
                             "does not run, e.g. under #if 0 or in an if that is never true, does not count)")


HIST = utils.cuda_begin + r"""
__global__ void k(const unsigned char* __restrict__ x, int* __restrict__ counts, int n) {
    __shared__ int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[x[i]], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);
}
void f(torch::Tensor x, torch::Tensor counts) {
    counts.zero_();
    k<<<2, 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), x.numel());
}
"""
XB = (torch.rand(5000) * 256).to(torch.uint8)


def test_2_privatized_counters_are_atomics_in_shared_memory(capsys):
    def judge(src):
        return verdict(capsys, src, "k", reference=lambda: torch.bincount(XB.long(), minlength=256).int(),
                       out_n=256, out_dtype=torch.int32, x=XB,
                       evidence=[utils.uses_shared_memory(), utils.calls("atomicAdd"), utils.shared_atomics()])
    assert judge(HIST) == OK
    glob = judge(HIST.replace("atomicAdd(&local[x[i]], 1);", "atomicAdd(&counts[x[i]], 1);"))
    assert glob.startswith("❌ t: not yet: when the check launched k, it made 5000 atomic updates in global memory "
                           "and 0 in shared memory: privatized counters"), glob


def test_2_dynamic_shared_memory_above_48_kib_is_allowed_in_the_check_launch_too(capsys):
    big = utils.cuda_begin + r"""
__global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {
    extern __shared__ float t[];   // 64 KiB: 256 threads x 64 floats, one row each
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    t[threadIdx.x * 64] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = fmaxf(t[threadIdx.x * 64], 0.0f);
}
void f(torch::Tensor x, torch::Tensor out) {
    int bytes = 256 * 64 * sizeof(float);
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    k<<<cdiv(x.numel(), 256), 256, bytes>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
"""
    assert verdict(capsys, big, "k", evidence=STAGED) == OK


# ----------------------------------------------------------------------------------------------
# 3. one thread does all the work

def test_3_one_thread_doing_all_the_work_is_refused(capsys):
    one = elementwise("    if (i == 0) for (int j = 0; j < n; ++j) out[j] = fmaxf(x[j], 0.0f);")
    why = verdict(capsys, one, "k", evidence=[utils.splits_work()])
    assert why == ("❌ t: not yet: in the check's launch of k (4 blocks of 256 threads), thread 0 of block 0 made "
                   "2000 of the 2000 global memory accesses: split the work so that each thread handles its own "
                   "part"), why
    strided = elementwise("    for (int j = i; j < n; j += gridDim.x * blockDim.x) out[j] = fmaxf(x[j], 0.0f);")
    assert verdict(capsys, strided, "k", evidence=[utils.splits_work()]) == OK


def test_3_threads_started_and_wide_loads_from_the_launch_log(capsys):
    """splits_work(items=...): where each thread's accesses are counted, they decide (the number of threads
    started stands for them only where nothing counted them: tests/unit/test_exercises_gpu_counts.py);
    per_thread=4 also asks for one float4 load per thread (the launch log's threads, the counted loads)."""
    loop = elementwise("    if (i == 0) for (int j = 0; j < n; ++j) out[j] = fmaxf(x[j], 0.0f);").replace(
        "k<<<cdiv(n, 256), 256>>>", "k<<<1, 1>>>")
    why = verdict(capsys, loop, "k", evidence=[utils.splits_work(items=1000)])
    assert why == ("❌ t: not yet: in the check's launch of k (1 block of 1 thread), thread 0 of block 0 made 2000 "
                   "of the 2000 global memory accesses: split the work so that each thread handles its own part"), why
    assert verdict(capsys, RELU, "k", evidence=[utils.splits_work(items=1000)]) == OK
    why = verdict(capsys, RELU, "k", evidence=[utils.splits_work(items=1000, per_thread=4)])
    assert "launched with 1,024 threads for 1,000 elements: with 4 elements per thread" in why, why
    scalar4 = elementwise("    for (int k = 0; k < 4; ++k) if (4 * i + k < n) out[4 * i + k] = fmaxf(x[4 * i + k], 0.0f);"
                          ).replace("cdiv(n, 256)", "cdiv(n, 4 * 256)")
    why = verdict(capsys, scalar4, "k", evidence=[utils.splits_work(items=1000, per_thread=4)])
    assert "made 1,000 global loads for 1,000 elements: with one 4-wide load per thread" in why, why
    vec = elementwise("""    if (i < n / 4) { float4 v = reinterpret_cast<const float4*>(x)[i];
        reinterpret_cast<float4*>(out)[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f)); }"""
                      ).replace("cdiv(n, 256)", "cdiv(n / 4, 256)")
    assert verdict(capsys, vec, "k", evidence=[utils.splits_work(items=1000, per_thread=4)]) == OK
    # float4 accesses through a cast are counted too: one thread looping over the vectors is refused by them
    vec_loop = elementwise("""    if (i == 0) for (int j = 0; j < n / 4; ++j) { float4 v = reinterpret_cast<const float4*>(x)[j];
        reinterpret_cast<float4*>(out)[j] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f)); }"""
                           ).replace("k<<<cdiv(n, 256), 256>>>", "k<<<1, 1>>>")
    why = verdict(capsys, vec_loop, "k", evidence=[utils.splits_work(items=1000, per_thread=4)])
    assert "thread 0 of block 0 made 500 of the 500 global memory accesses" in why, why
    c_cast = vec_loop.replace("reinterpret_cast<const float4*>(x)", "((const float4*)x)").replace(
        "reinterpret_cast<float4*>(out)", "((float4*)out)")   # C-style casts: the same accesses
    why = verdict(capsys, c_cast, "k", evidence=[utils.splits_work(items=1000, per_thread=4)])
    assert "thread 0 of block 0 made 500 of the 500 global memory accesses" in why, why


# ----------------------------------------------------------------------------------------------
# the pieces

def test_grid_and_block_of_a_cuda_launch(capsys):
    assert verdict(capsys, RELU, "k", evidence=[utils.threads_per_block(256), utils.grid_is(4)]) == OK
    why = verdict(capsys, RELU, "k", evidence=[utils.threads_per_block(128)])
    assert why == "❌ t: not yet: k was launched with blocks of (256,) threads; the exercise asks for (128,)", why


def test_launch_log_and_counts_of_the_emulation():
    mod = build("f")(elementwise(TILED))
    out = torch.empty(1000)
    total, _ = module_launch_log(mod, 1 << 62)
    mod.f(X, out)
    after, calls = module_launch_log(mod, total)
    assert after == total + 1
    assert calls == [KernelCall("k", (4, 1, 1), (256, 1, 1), 0,
                                (("p", X.data_ptr()), ("p", out.data_ptr()), ("i", 1000)))]
    got, ex, _ = cuda_launch.own_launch(elementwise(TILED), "k",
                                        type("L", (), {"calls": calls, "args": (X, out), "kwargs": {},
                                                       "result": None})(), out)
    assert got.equal(torch.relu(X))
    (L,) = ex.launches
    assert (L.grid, L.block, tuple(L.counts.shape[:2])) == ((4, 1, 1), (256, 1, 1), (4, 256))
    assert (L.field("barrier") == 1).all() and (L.field("sstore") == 1).all()
    assert int((L.field("sload") == 1).sum()) == 1000
    assert int(L.field("gload").sum()) == 1000 and int(L.field("gstore").sum()) == 1000
    assert L.where(1, 3) == "thread 3 of block 1"


def test_kernel_params_and_launcher():
    src = "namespace ops { __global__ void k(const float* __restrict__ x, float4* o, unsigned int n, double a, " \
          "bool flag, std::size_t m, float tile[]) { } }"
    assert [(p.ctype, p.kind) for p in cuda_launch.kernel_params(src, "k")] == [
        ("const float*", "pointer"), ("float4*", "pointer"), ("unsigned int", "int"), ("double", "real"),
        ("bool", "int"), ("std::size_t", "int"), ("float*", "pointer")]
    code, decl, fn = cuda_launch.launcher_source(src, "k")
    assert "    ops::k<<<" in code and "(double)course_real[3]" in code and fn == "course_launch_k"
    for bad, why in [("template <int T> __global__ void k(float* x) { }", "is a template"),
                     ("struct P { int a; }; __global__ void k(P p) { }", "is not a pointer or a number"),
                     ("__global__ void k(const float& x) { }", "is not a pointer or a number")]:
        with pytest.raises(cuda_launch.CudaLaunchError, match=why):
            cuda_launch.kernel_params(bad, "k")


def test_sass_kinds_of_the_cuda_evidence():
    ops = sass_ops("""
        /*0100*/   ATOMS.ADD R5, [R2], R7 ;
        /*0110*/   SHFL.UP PT, R3, R4, 0x1, RZ ;
        /*0120*/   SHFL.BFLY PT, R3, R4, 0x1, 0x1f ;
        /*0130*/   RED.E.ADD.F32.FTZ.RN.STRONG.GPU [R2.64], R9 ;
    """)
    assert ops["shared_atomic"] == 1 and ops["atomic"] == 2 and ops["shfl_up"] == 1 and ops["shfl_xor"] == 1
    assert ops["shfl_down"] == 0 and ops["shuffle"] == 2


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit), not a GPU")
def test_gpu_build_launch_log_records_arguments(tmp_path):
    """The split build's device unit (what the launch stubs record) compiled by nvcc for the host:
    the recorder reads a launch's arguments as the kernel's parameter types."""
    src = tmp_path / "log.cu"
    src.write_text("#include <cuda_runtime.h>\n#include <cstdio>\n"
                   'static const char* const __course_launch_names[] = {"k"};\n'
                   + gpu_build.LAUNCH_LOG + gpu_build.LAUNCH_LOG_TABLE + r"""
__global__ void k(const float* x, int n, float a, unsigned u, bool b) {}
int main() {
    const float* x = (const float*)0x1000; int n = -3; float a = 2.5f; unsigned u = 7; bool b = true;
    void* args[] = {&x, &n, &a, &u, &b};
    course_launch_log::record<decltype(&k)>(0, dim3(2, 1, 1), dim3(32, 4, 1), 64, args);
    const char* name; unsigned d[6]; unsigned long long smem, bits[24]; char kinds[24]; unsigned char sizes[24];
    int m = __course_launch_log_get(0, &name, d, &smem, kinds, sizes, bits);
    std::printf("%lld %d %s %u %u %u %llu", __course_launch_log_total(), m, name, d[0], d[4], (unsigned)0, smem);
    for (int i = 0; i < m; ++i) std::printf(" %c%d:%llx", kinds[i], sizes[i], bits[i]);
    std::printf(" %d\n", __course_launch_log_get(1, &name, d, &smem, kinds, sizes, bits));
}
""")
    exe = tmp_path / "log"
    r = subprocess.run([NVCC, STD_FLAG, "-o", str(exe), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout.split()
    assert out[:7] == ["1", "5", "k", "2", "4", "0", "64"]
    assert out[7:12] == ["p8:1000", "i4:fffffffffffffffd", "f4:4004000000000000", "u4:7", "b1:1"]
    assert out[12] == "-1"
    entry = (0, "k", (2, 1, 1), (32, 4, 1), 64, tuple((a[0], int(a[1:a.index(":")]), int(a.split(":")[1], 16))
                                                     for a in out[7:12]))
    assert KernelCall.from_log(entry).args == (("p", 4096), ("i", -3), ("f", 2.5), ("u", 7), ("b", True))


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit), not a GPU")
def test_gpu_build_device_unit_with_the_launch_log_compiles(tmp_path):
    src = utils.cuda_begin + r"""
__global__ void k(const float* __restrict__ x, float* out, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i];
}
__global__ void none_k() {}
namespace ops {
__global__ void big_k(float* out) { extern __shared__ float t[]; t[threadIdx.x] = 1.0f; out[0] = t[0]; }
}
void f(torch::Tensor x, torch::Tensor out) {
    k<<<cdiv(x.numel(), 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), 2.0);
    none_k<<<1, 1>>>();
}
"""
    code, decl, fn = cuda_launch.launcher_source(src, "k")
    code2, decl2, fn2 = cuda_launch.launcher_source(src, "big_k")
    units = gpu_build.make_units(src + code + code2, utils.get_sig("f", src) + decl + decl2, ["f", fn, fn2])
    cu = tmp_path / "device.cu"
    cu.write_text(units.device)
    r = subprocess.run(gpu_build.nvcc_command(arch="-arch=sm_90") + ["-c", str(cu), "-o", str(tmp_path / "device.o")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f'm.def("{counters.LOG}"' in units.binding and "course_launch_k" in units.host
    assert "__course_func_attr_1((cudaFuncAttribute)(cudaFuncAttributeMaxDynamicSharedMemorySize)" in units.host
