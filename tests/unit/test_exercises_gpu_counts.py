"""CUDA C exercises judged on a GPU count what each thread does as cpu mode does: the answer also runs in the CPU
emulation (gpu_course/exercises/cuda_emulated.py), the learner's launch and the course's own launch, and the
evidence reads those counts (the GPU run keeps the result and the SASS). Tested here on the CPU: gpu mode's judging
path (``mode.ON_GPU``), with the GPU build stood in for by an emulated build whose per-thread counting is hidden,
as a GPU build has none; the emulated run is the real one.

Without the emulated run, gpu mode accepted one thread doing all the work through ``memcpy`` (the SASS holds the
same instructions) and a ``__device__`` flag that makes only the learner's own launch one-threaded, and refused a
grid-stride loop on a small grid (the number of threads started stood for the count)."""
import pytest
import torch

import utils
from gpu_course import mode
from gpu_course.exercises import cuda_emulated

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="gpu mode's path on the CPU (a real GPU: tests/gpu)"),
              pytest.mark.usefixtures("without_nvcc_check")]

N = 20_000   # 1,250 threads at least by the launch log's count (items / 16): a grid of 8 x 128 has 1,024
X = torch.randn(N)


class GpuLike:
    """An emulated module as a GPU build looks to the check: launch counters and log, no per-thread counts."""

    def __init__(self, mod):
        self.__dict__["_m"] = mod

    def __getattr__(self, k):
        if k.startswith("_cuda_emu"):
            raise AttributeError(k)
        return getattr(self.__dict__["_m"], k)

    def __dir__(self):
        return [k for k in dir(self.__dict__["_m"]) if not k.startswith("_cuda_emu")]


def build(s):
    mod = utils.load_cuda(s, utils.get_sig("relu", s), ["relu"])
    return mod if cuda_emulated.emulating() else GpuLike(mod)


@pytest.fixture
def gpu_mode(monkeypatch):
    monkeypatch.setattr(mode, "ON_GPU", True)
    monkeypatch.setattr(mode, "synchronize", lambda: None)
    yield


def relu_source(body: str, grid: str = "cdiv(n, 256), 256", extra: str = "") -> str:
    return utils.cuda_begin + extra + r"""
__global__ void relu_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
""" + body + r"""
}
void relu(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    relu_k<<<""" + grid + r""">>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""


def verdict(capsys, src, build=build):
    def run(mod):
        out = utils.poisoned(N)
        mod.relu(X, out)
        return out
    utils.kernel_exercise("t", src, kind="cuda", kernel="relu_k", build=build, run=run,
                          reference=lambda: torch.relu(X), atol=0, rtol=0, evidence=[utils.splits_work(items=N)])
    return [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]


OK = "✅ t: correct (your CUDA C kernel relu_k wrote the result)"
MEMCPY = relu_source("    if (i == 0) for (int j = 0; j < n; ++j) { float v; memcpy(&v, x + j, 4); v = fmaxf(v, 0.0f); "
                     "memcpy(out + j, &v, 4); }")
FIRST_CALL = relu_source(r"""    if (seen == 0) {
        if (i == 0) for (int j = 0; j < n; ++j) out[j] = fmaxf(x[j], 0.0f);
        if (blockIdx.x == gridDim.x - 1 && threadIdx.x == blockDim.x - 1) seen = 1;
    } else if (i < n) out[i] = fmaxf(x[i], 0.0f);""", extra="__device__ int seen = 0;\n")
STRIDED = relu_source("    for (int j = i; j < n; j += gridDim.x * blockDim.x) out[j] = fmaxf(x[j], 0.0f);", "8, 128")
NO_COMPILER = ("CudaEmulationError: no C++ compiler found (install g++ or set CXX): the CPU emulation of CUDA C "
               "compiles with it.")


def test_on_a_gpu_one_thread_doing_everything_is_counted_in_the_emulation_and_refused(capsys, gpu_mode):
    """~10 s: the learner's GPU-like build, the GPU launcher's, the emulated build with the launcher."""
    assert verdict(capsys, MEMCPY) == [
        "❌ t: not yet: in the check's launch of relu_k (79 blocks of 256 threads), thread 0 of block 0 made 40000 of "
        "the 40000 global memory accesses: split the work so that each thread handles its own part"]
    # the learner's own launch is counted too: a __device__ flag that splits the work only from the second launch on
    assert verdict(capsys, FIRST_CALL) == [
        "❌ t: not yet: in your host function's launch of relu_k (79 blocks of 256 threads), thread 0 of block 0 made "
        "40000 of the 40000 global memory accesses: split the work so that each thread handles its own part"]


def test_on_a_gpu_a_grid_stride_loop_on_a_small_grid_is_a_split(capsys, gpu_mode, monkeypatch):
    assert verdict(capsys, STRIDED) == [OK]
    # a GPU machine whose host compiler cannot build the emulation: the launch log's thread count stands for the
    # count, and the verdict says what was not counted and why (no crash)
    monkeypatch.setitem(cuda_emulated._PROBE, "why", NO_COMPILER)
    note = ("    (what each thread does was not counted: the check runs your kernel in the CPU emulation for that, and "
            f"it cannot build on this machine: {NO_COMPILER}; only the compiled kernel's instructions were read)")
    assert verdict(capsys, STRIDED) == [
        "❌ t: not yet: relu_k was launched with 1,024 threads in all for 20,000 elements (at least 1,250 expected): "
        "split the work so that each thread handles its own part", note]
    assert verdict(capsys, MEMCPY) == [OK, note]


def test_on_a_gpu_a_source_the_emulation_cannot_build_is_refused_with_why(capsys, gpu_mode):
    def gpu_only(s):
        if cuda_emulated.emulating():
            raise RuntimeError("inline asm (PTX) is not supported by the CPU emulation; run on a GPU")
        return build(s)
    assert verdict(capsys, STRIDED, build=gpu_only) == [
        "❌ t: not yet: your source builds for the GPU, but not for the CPU emulation, where the check counts what "
        "each thread does: inline asm (PTX) is not supported by the CPU emulation; run on a GPU"]


def test_the_toolchain_probe_says_why_instead_of_raising(monkeypatch):
    import gpu_course.cuda as cuda

    def no_compiler(*a, **k):
        from gpu_course.cuda import CudaEmulationError
        raise CudaEmulationError(NO_COMPILER.split(": ", 1)[1])
    monkeypatch.setattr(cuda, "load_cuda", no_compiler)
    assert cuda_emulated._probe() == NO_COMPILER
    assert not cuda_emulated.emulating() and cuda.ON_GPU == mode.ON_GPU


def test_cpu_copies_keep_views_of_one_storage_views_of_one_copy():
    """The CUDA tensors given to the emulated host functions become CPU copies, one per storage (copy() is what
    cpu() does to a CUDA tensor; a CPU tensor stands for one here)."""
    copies = cuda_emulated.CpuCopies()
    base = torch.arange(12.0).reshape(3, 4)
    assert copies.cpu(base) is base   # already on the CPU: kept
    a, b = copies.copy(base), copies.copy(base[1:, 1:])
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert a.equal(base) and b.equal(base[1:, 1:]) and b.stride() == (4, 1) and b.storage_offset() == 5
    a[1, 1] = -1.0
    assert b[0, 0] == -1.0 and base[1, 1] == 5.0   # views of one copy; the original untouched
    nested = copies.cpu([base, 3, {"k": (base,)}])
    assert nested[1] == 3 and nested[2]["k"][0] is base


NUMBA_ON_A_GPU = r'''
import os, sys, types, warnings
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"   # numba's CUDA target, as on a GPU (its simulator runs beside it)
import numba
from numba import cuda
warnings.simplefilter("ignore")
import torch
import utils  # noqa: F401  (after numba: cpu mode's switch comes too late for it, as intended here)
from gpu_course.exercises.kinds.numba import tiled_loads
from gpu_course.exercises.numba_simulated import simulated_run
from gpu_course.exercises.replay import Execution


class Dev:
    """CPU memory that hands itself to the check as a device array does (__cuda_array_interface__, copy_to_host)."""
    def __init__(self, a):
        self.a = a

    @property
    def __cuda_array_interface__(self):
        return dict(self.a.__array_interface__, version=3)

    def copy_to_host(self):
        return self.a.copy()


@cuda.jit
def naive_beside_tiles(m, n, out):   # every thread writes and reads a tile of zeros; the product is naive
    ts = cuda.shared.array((16, 16), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r, c = cuda.blockIdx.y * 16 + tr, cuda.blockIdx.x * 16 + tc
    ts[tr, tc] = 0.0
    cuda.syncthreads()
    p = ts[tr, tc]
    if r < out.shape[0] and c < out.shape[1]:
        for i in range(m.shape[1]):
            p += m[r, i] * n[i, c]
        out[r, c] = p


assert type(naive_beside_tiles).__name__ == "CUDADispatcher"
a, b = torch.randn(21, 19), torch.randn(19, 17)
out = torch.full((21, 17), float("nan"))
launch = types.SimpleNamespace(kernel=naive_beside_tiles, args=(Dev(a.numpy()), Dev(b.numpy()), Dev(out.numpy())),
                               grid=(2, 2, 1), block=(16, 16, 1))
trial = types.SimpleNamespace(mine=[launch], out=out, ref=a.double() @ b.double(), label="k", value_name="k",
                              problem=types.SimpleNamespace(atol=1e-4, rtol=1e-4))
ex = Execution()
simulated_run(trial, ex)
assert out.isnan().all()   # the simulated launch wrote its own memory
assert ex.counted and ex.gloads == 21 * 17 * 2 * 19 and ex.elements == 21 * 19 + 19 * 17 + 21 * 17, ex
print(tiled_loads(types.SimpleNamespace(execution=ex, output=out, name="k")))
'''


def test_on_a_gpu_a_numba_kernel_is_counted_in_the_simulator(tmp_path):
    """~6 s (a process with numba's CUDA target): the course's launch of a Numba kernel made again in the simulator
    beside it, counted as in cpu mode: a naive product beside a tile of zeros makes 2k global loads an element."""
    import subprocess
    import sys
    from pathlib import Path
    script = tmp_path / "numba_on_a_gpu.py"
    script.write_text(NUMBA_ON_A_GPU)
    root = Path(__file__).resolve().parents[2]
    env = dict(__import__("os").environ, PYTHONPATH=str(root))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=root, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().startswith("when the check launched k for a 21x19 by 19x17 product, it made 38.0 global "
                                       "loads per output element: a naive kernel makes 2k = 38"), r.stdout
