"""Extension code as public sources write it, in the CPU emulation: cooperative groups within a block,
`#if __CUDA_ARCH__ >= 800` (the emulation stands for sm_80), __activemask() inside a branch (warp-aggregated
atomics), PyTorch's CUDA guards and current stream with cudaMemsetAsync/cudaMemcpyAsync, and bf16
(__nv_bfloat16, __nv_bfloat162). The source is tests/fixtures/extension_idioms.cu, which
tests/gpu/test_emulation_extensions_gpu.py builds and checks the same way on a GPU; plus the learner's mistakes
these constructs make possible, each a clear error naming the line."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_course.cuda import cuda_begin
from gpu_course.cuda import emulation as cuda_emu
from gpu_course.cuda.emulation import CudaEmulationError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import extension_idioms as idioms  # noqa: E402

pytestmark = pytest.mark.usefixtures("without_nvcc_check")   # test_nvcc_accepts_the_source compiles with nvcc


@pytest.fixture(scope="module")
def m():
    return cuda_emu.load(cuda_begin + idioms.SRC, idioms.CPP, idioms.FUNCS, name="test_ext_idioms")


def test_cuda_arch_is_sm80(m):
    assert m.cuda_arch(torch.zeros(1)) == 800


@pytest.mark.parametrize("check", [idioms.check_reduce_int, idioms.check_reduce_float, idioms.check_tile_ops,
                                   idioms.check_filter, idioms.check_branch_ballot, idioms.check_bf16,
                                   idioms.check_stream])
def test_idiom_matches_torch(m, check):
    check(m, "cpu")


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is not on PATH")
def test_nvcc_accepts_the_source(tmp_path):
    """The same source's device unit (the GPU build's split) compiles for an H100/H200 (sm_90a)."""
    from gpu_course.cuda import gpu_build
    units = gpu_build.make_units(cuda_begin + idioms.SRC, idioms.CPP, idioms.FUNCS)
    assert "cooperative_groups.h" in units.device and "cooperative_groups.h" not in units.host
    (tmp_path / "device.cu").write_text(units.device)
    r = subprocess.run(gpu_build.nvcc_command(arch="-arch=sm_90a") + ["-c", str(tmp_path / "device.cu"), "-o",
                       str(tmp_path / "device.o")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


# ---- the learner's mistakes: a clear error naming the line, from a live kernel
MISTAKES = cuda_begin + r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void partial_shfl_k(float* x) {
    unsigned mask = __ballot_sync(0xffffffffu, threadIdx.x < 16);
    if (threadIdx.x < 16) {
        float v = x[threadIdx.x];
        for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(mask, v, o);   // lanes 0-15 read lanes 16-31
        x[threadIdx.x] = v;
    }
}
__global__ void grid_sync_k(float* x) {
    cg::grid_group grid = cg::this_grid();
    x[grid.thread_rank()] = 1.0f;
    grid.sync();
}
void run(torch::Tensor x, int which) {
    if (which == 0) partial_shfl_k<<<1, 32>>>(x.data_ptr<float>());
    if (which == 1) grid_sync_k<<<2, 32>>>(x.data_ptr<float>());
    if (which == 2) C10_CUDA_CHECK(cudaMemsetAsync(x.data_ptr<float>(), 0, x.numel() * 8,
                                                   at::cuda::getCurrentCUDAStream()));
}
'''


@pytest.fixture(scope="module")
def bad():
    return cuda_emu.load(MISTAKES, "void run(torch::Tensor x, int which);", ["run"], name="test_ext_mistakes")


def line_of(text: str) -> int:
    return next(k for k, line in enumerate(MISTAKES.splitlines(), 1) if text in line)


def test_shuffle_outside_its_mask_is_an_error_not_a_poison_value(bad):
    with pytest.raises(CudaEmulationError) as e:
        bad.run(torch.ones(64), 0)
    msg = str(e.value)
    assert f"__shfl_down_sync(0x0000ffff, ...) at cuda_src line {line_of('lanes 0-15 read')}" in msg
    assert "lane 0 (thread (0,0,0)) reads lane 16, which is not in the mask" in msg


def test_grid_sync_is_refused_with_a_sentence(bad):
    with pytest.raises(CudaEmulationError, match=rf"grid_group::sync\(\) \(this_grid\(\).sync\(\)\) at cuda_src line "
                                                 rf"{line_of('grid.sync();')} .*needs a cooperative launch"):
        bad.run(torch.zeros(64), 1)


def test_memset_past_a_tensor_is_an_error(bad):
    with pytest.raises(CudaEmulationError, match=r"cudaMemsetAsync: 80 bytes from the pointer run 40 bytes past "
                                                 r"the end of"):
        bad.run(torch.zeros(10), 2)
