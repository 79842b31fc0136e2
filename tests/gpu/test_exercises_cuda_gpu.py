"""CUDA C kernel exercises on a real GPU: the split build logs each launch (grid, block, arguments),
the course launches the learner's kernel itself through a generated launcher, and the evidence of
the technique is read from what each thread did, counted by running the answer in the CPU emulation
too, and from the compiled kernel's SASS (``cuobjdump -sass``), where dead code is gone (alone where
the emulation cannot build). Skipped on the CPU.

    pytest -p no:cacheprovider -q tests/gpu/test_exercises_cuda_gpu.py
"""
import pytest
import torch

import utils

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


def build(fn):
    return lambda s: utils.load_cuda(s, utils.get_sig(fn, s), [fn])


def elementwise(body: str, extra: str = "", before: str = "") -> str:
    return utils.cuda_begin + extra + r"""
__global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
""" + body + r"""
}
void f(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
""" + before + r"""    k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


RELU = elementwise("    if (i < n) out[i] = fmaxf(x[i], 0.0f);")
TILED = r"""
    __shared__ float t[256];
    t[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = fmaxf(t[threadIdx.x], 0.0f);"""
PLAIN = "    if (i < n) out[i] = fmaxf(x[i], 0.0f);"


def verdict(capsys, src, x, reference, out_n=None, out_dtype=torch.float32, **kw):
    def run(mod):
        out = utils.poisoned(out_n or x.numel(), dtype=out_dtype)
        mod.f(x, out)
        return out
    utils.kernel_exercise("t", src, kind="cuda", kernel="k", build=build("f"), run=run, reference=reference,
                          atol=kw.pop("atol", 0), rtol=kw.pop("rtol", 0), **kw)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("✅", "❌"))]
    return lines[0] if lines else ""


def test_the_split_build_logs_each_launch():
    from gpu_course.launches import module_launch_log
    mod = build("f")(RELU)
    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    total, _ = module_launch_log(mod, 1 << 62)
    mod.f(x, out)
    after, calls = module_launch_log(mod, total)
    assert after == total + 1 and len(calls) == 1
    c = calls[0]
    assert (c.name, c.grid, c.block, c.smem) == ("k", (4, 1, 1), (256, 1, 1), 0)
    assert c.args == (("p", x.data_ptr()), ("p", out.data_ptr()), ("i", 1000))


def test_the_course_launches_the_kernel_itself(capsys):
    x = torch.randn(100_003, device="cuda")
    ok = verdict(capsys, RELU, x, lambda: torch.relu(x))
    helper = r"""
__global__ void helper_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
"""
    first = "    helper_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);\n"
    silent = verdict(capsys, elementwise("    if (i < n) { float v = x[i]; (void)v; }", extra=helper, before=first),
                     x, lambda: torch.relu(x))
    assert ok == "✅ t: correct (your CUDA C kernel k wrote the result)", ok
    assert "the check launched k itself" in silent and "did not compute the result" in silent, silent


def test_sass_of_the_built_module_is_read():
    from gpu_course.exercises.cuda_launch import _sass_of, launcher
    mod, _ = launcher(elementwise(TILED), "k")
    ops = _sass_of(mod, "k")
    assert ops["shared_store"] and ops["shared_load"] and ops["barrier"], dict(ops)


STAGED = [utils.uses_shared_memory(), utils.calls("__syncthreads")]


@pytest.fixture(params=["counted", "sass"])
def evidence_from(request, monkeypatch):
    """Each evidence test twice: as the check runs on a GPU (the answer also run in the CPU emulation, which counts
    what each thread did, gpu_course/exercises/cuda_emulated.py), and as on a GPU machine whose host compiler cannot
    build the emulation (the compiled kernel's SASS alone)."""
    if request.param == "sass":
        from gpu_course.exercises import cuda_emulated
        monkeypatch.setitem(cuda_emulated._PROBE, "why", "no C++ compiler found (a test)")
    return request.param


def test_shared_memory_and_barriers_are_read_from_sass(capsys, evidence_from):
    x = torch.randn(10_000, device="cuda")
    ref = lambda: torch.relu(x)  # noqa: E731
    ok = verdict(capsys, elementwise(TILED), x, ref, evidence=STAGED)
    dead = verdict(capsys, elementwise("#if 0" + TILED + "\n#endif\n" + PLAIN), x, ref, evidence=STAGED)
    unused = verdict(capsys, elementwise("    __shared__ float t[256];\n" + PLAIN), x, ref, evidence=STAGED)
    no_sync = verdict(capsys, elementwise(TILED.replace("__syncthreads();", "")), x, ref,
                      evidence=[utils.calls("__syncthreads")])
    assert ok.startswith("✅"), ok
    if evidence_from == "counted":
        assert "k never stored into shared memory when the check launched it" in dead, dead
        assert "k never stored into shared memory when the check launched it" in unused, unused
        assert "k passed no __syncthreads() when the check launched it" in no_sync, no_sync
    else:
        assert "the compiled k never stores into shared memory" in dead, dead
        assert "the compiled k never stores into shared memory" in unused, unused
        assert "the compiled k holds no __syncthreads() (BAR.SYNC)" in no_sync, no_sync


SUM = utils.cuda_begin + r"""
__global__ void k(const float* __restrict__ x, float* __restrict__ out, int n) {
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    SHUFFLE
    if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}
void f(torch::Tensor x, torch::Tensor out) {
    out.zero_();
    k<<<64, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
"""


def test_shuffles_are_read_from_sass(capsys, evidence_from):
    x = torch.randn(100_000, device="cuda")
    ref = lambda: x.double().sum().reshape(1)  # noqa: E731
    warp = SUM.replace("SHUFFLE", "for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);")
    staged = SUM.replace("SHUFFLE", "#if 0\n    s += __shfl_down_sync(0xffffffffu, s, 1);\n#endif\n"
                                    "    __shared__ float v[256]; v[threadIdx.x] = s; __syncthreads();\n"
                                    "    if (threadIdx.x % 32 == 0) for (int l = 1; l < 32; ++l) s += v[threadIdx.x + l];")
    ok = verdict(capsys, warp, x, ref, out_n=1, atol=1e-2, rtol=1e-4, evidence=[utils.calls("__shfl_down_sync")])
    dead = verdict(capsys, staged, x, ref, out_n=1, atol=1e-2, rtol=1e-4, evidence=[utils.calls("__shfl_down_sync")])
    assert ok.startswith("✅"), ok
    assert ("k executed no __shfl_down_sync when the check launched it" if evidence_from == "counted"
            else "the compiled k holds no __shfl_down_sync (SHFL.DOWN)") in dead, dead


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
    k<<<32, 256>>>(x.data_ptr<unsigned char>(), counts.data_ptr<int>(), x.numel());
}
"""


def test_shared_atomics_are_read_from_sass(capsys, evidence_from):
    x = (torch.rand(100_000, device="cuda") * 256).to(torch.uint8)
    ref = lambda: torch.bincount(x.long(), minlength=256).int()  # noqa: E731
    ev = [utils.uses_shared_memory(), utils.calls("atomicAdd"), utils.shared_atomics()]
    ok = verdict(capsys, HIST, x, ref, out_n=256, out_dtype=torch.int32, evidence=ev)
    glob = verdict(capsys, HIST.replace("atomicAdd(&local[x[i]], 1);", "atomicAdd(&counts[x[i]], 1);")
                   .replace("if (local[b] > 0) atomicAdd(&counts[b], local[b]);", "if (local[b] != 0) counts[b] = -1;"),
                   x, ref, out_n=256, out_dtype=torch.int32, evidence=[utils.shared_atomics()])
    assert ok.startswith("✅"), ok
    assert ("atomic updates in global memory and 0 in shared memory" if evidence_from == "counted"
            else "holds no atomic on shared memory (ATOMS)") in glob, glob
