"""The GPU side of the rules cpu mode copies (tests/unit/test_emulation_gpu_rules.py): the GPU
build refuses more than 48 KB of static __shared__ memory with a message (except for Hopper's
sm_90a target, which accepts it), compiles C++17 (so a
C++20 library call fails there too), and takes a learner's cudaCheck and __device__ lerp.
Run on a GPU machine: `python -m pytest tests/gpu/test_gpu_rules_gpu.py -q`."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

import utils
from gpu_course.cuda import CudaBuildError
from gpu_course.cuda.gpu_build.compilers import arch_name

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")

_spec = importlib.util.spec_from_file_location(   # the same sources as the cpu-mode test
    "cpu_side", Path(__file__).resolve().parents[1] / "unit" / "test_emulation_gpu_rules.py")
cpu_side = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_side)


def test_the_common_idioms_build_and_run_on_the_gpu():
    m = utils.load_cuda(cpu_side.OK_SRC, cpu_side.OK_CPP, ["blend", "cplusplus"])
    x = torch.arange(300.0, device="cuda")
    assert torch.equal(m.blend(x), (x + 1) / 2)     # 48 KB of static shared memory is allowed
    assert m.cplusplus() == 201703                  # the host code is C++17, as in cpu mode


def test_the_one_unit_build_compiles_the_same_cxx_standard():
    """torch's load_inline would pick C++20; the one-unit build (fast=False, and the split's fallback)
    passes the course's standard, so a source means the same on every path."""
    m = utils.load_cuda(cpu_side.OK_SRC, cpu_side.OK_CPP, ["blend", "cplusplus"], fast=False)
    assert "load_inline" in m.build_log
    assert m.cplusplus() == 201703
    x = torch.arange(300.0, device="cuda")
    assert torch.equal(m.blend(x), (x + 1) / 2)


def test_more_than_48_kb_of_static_shared_memory_follows_the_target():
    """ptxas caps static __shared__ memory at 48 KB (0xc000) for every portable target, which is the
    rule cpu mode enforces; Hopper's arch-specific target sm_90a (what the GPU build uses on sm_90, for
    wgmma) accepts 64 KB and the kernel runs (measured on an H200 with nvcc 13)."""
    src = utils.cuda_begin + r"""
__global__ void big_k(float* out) {
    __shared__ float tile[64 * 64];
    __shared__ float stash[64 * 64 * 3];
    tile[threadIdx.x] = stash[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x] + stash[threadIdx.x];
}
torch::Tensor big(torch::Tensor out) { big_k<<<1, 32>>>(out.data_ptr<float>()); return out; }
"""
    if arch_name(*torch.cuda.get_device_capability()).endswith("a"):
        m = utils.load_cuda(src, "torch::Tensor big(torch::Tensor out);", ["big"])
        assert torch.equal(m.big(torch.zeros(32, device="cuda")), torch.full((32,), 2.0, device="cuda"))
        return
    with pytest.raises(CudaBuildError) as e:
        utils.load_cuda(src, "torch::Tensor big(torch::Tensor out);", ["big"])
    text = str(e.value) + (e.value.log or "")
    assert "too much shared data" in text and "0xc000 max" in text, text[-2000:]


def test_cxx20_library_is_refused_by_the_gpu_build():
    src = utils.cuda_begin + r"""
#include <bit>
int64_t round_up(int64_t n) { return (int64_t)std::bit_ceil((uint64_t)n); }
"""
    with pytest.raises(CudaBuildError, match="bit_ceil"):
        utils.load_cuda(src, "int64_t round_up(int64_t n);", ["round_up"])


@pytest.mark.parametrize("grid, block", [(1, 1025), (0, 32)])
def test_numba_launches_the_gpu_refuses(grid, block):
    """What simulator_fix.check_launch copies: the GPU refuses these launches (numba-cuda refuses a 0-block
    grid itself, before the driver would)."""
    from numba import cuda

    @cuda.jit
    def fill_one(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 1

    out = cuda.to_device(np.zeros(4, np.float32))
    with pytest.raises(Exception, match="CUDA_ERROR_INVALID_VALUE|invalid argument|grid values must be >= 1"):
        fill_one[grid, block](out)
        cuda.synchronize()
