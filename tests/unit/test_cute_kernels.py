"""Notebook 17's CuTe DSL kernels (gpu_course.kernels.cute_kernels), compiled for Hopper (sm_90a) on any machine:
the softmax and the matmul on shapes no tile divides, and what their PTX must hold (128-bit loads and shuffles;
TMA copies, wgmma and mbarrier waits). Nothing runs here: the GPU checks are tests/gpu/test_cute_kernels_gpu.py.
Skipped where CuTe DSL is not installed, except the two tests of how the course behaves without it."""
import os
import re
import subprocess
import sys

import utils  # noqa: F401  (the mode first)

import pytest
import torch

CUTE_MODULES = ("gpu_course.kernels.cute_kernels", "gpu_course.kernels.cute_softmax", "gpu_course.kernels.cute_matmul")


def test_without_cutlass_the_import_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "cutlass", None)   # as if it were not installed
    for name in CUTE_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ImportError, match="nvidia-cutlass-dsl") as caught:
        import gpu_course.kernels.cute_kernels  # noqa: F401
    assert caught.value.name == "cutlass"   # what gpu_course.no_triton.missing_package reads


def test_nothing_else_imports_cute_dsl():
    code = ("import sys, utils, gpu_course, gpu_course.kernels, gpu_course.lessons.languages; "
            "print(sorted(m for m in sys.modules if m.startswith(('cutlass', 'gpu_course.kernels.cute'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COURSE_MODE": "cpu"}, cwd=os.path.dirname(utils.__file__))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.fixture(scope="module")
def ck():
    pytest.importorskip("cutlass.cute")
    from gpu_course.kernels import cute_kernels
    return cute_kernels


@pytest.mark.parametrize("shape,dtype,vectorised", [((37, 300), torch.float32, True),
                                                    ((1001, 4096), torch.bfloat16, True),
                                                    ((5, 3000), torch.float16, True),
                                                    ((7, 4097), torch.float16, False)])
def test_softmax_compiles_with_wide_loads_and_shuffles(ck, shape, dtype, vectorised):
    ops = ck.opcodes(ck.softmax_ptx(shape, dtype), "ld.global", "st.global", "shfl.sync.bfly", "ex2")
    wide = sum(n for op, n in ops.items() if op.startswith(("ld.global.v4", "ld.global.nc.v4")))
    assert (wide > 0) == vectorised, ops   # rows of 4097 halves are not 16-byte aligned: single elements
    assert ops.get("shfl.sync.bfly.b32", 0) >= 5, ops   # a butterfly over 32 lanes: 5 steps a reduction
    assert any(op.startswith("ex2") for op in ops), ops


def test_softmax_config_and_limits(ck):
    assert ck.softmax_config(4096, 2) == dict(VEC=8, THREADS_PER_ROW=128, VECS=4, ROWS=1, BLOCK_W=4096)
    assert ck.softmax_config(4097, 2)["VEC"] == 1
    with pytest.raises(ValueError, match="online softmax"):
        x = torch.empty(2, ck.MAX_W + 8)
        ck.softmax(x, torch.empty_like(x))


@pytest.mark.parametrize("warp_specialized", [True, False])
@pytest.mark.parametrize("has_bias,activation", [(False, ""), (True, "gelu")])
def test_matmul_compiles_to_tma_wgmma_and_a_pipeline(ck, has_bias, activation, warp_specialized):
    ptx = ck.matmul_ptx(1000, 1096, 904, has_bias, activation, cfg=dict(warp_specialized=warp_specialized))
    ops = ck.opcodes(ptx, "wgmma", "cp.async.bulk.tensor", "mbarrier", "setmaxnreg", "ex2")
    names = " ".join(ops)
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ops, names   # fp16 in, fp32 accumulator
    assert "cp.async.bulk.tensor.2d.shared::cta.global" in names, names            # TMA loads
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in names, names            # TMA stores of the epilogue
    assert "mbarrier.try_wait.parity.shared.b64" in ops and "mbarrier.arrive.expect_tx.shared.b64" in ops, names
    assert ops.get("mbarrier.init.shared.b64") == 2 * ck.CONFIG["num_stages"], names   # full[s] and empty[s]
    assert ".target sm_90a" in ptx
    assert ("setmaxnreg.dec.sync.aligned.u32" in ops) == warp_specialized, names   # the producer gives registers
    assert f".reqntid {384 if warp_specialized else 256}, 1, 1" in ptx              # 1 + 2 warpgroups, or 2
    assert any(op.startswith("ex2") for op in ops) == (activation == "gelu"), names   # erf only where switched on
    # the descriptors notebook 12's wg_desc builds: a K-major (16, 1024), b MN-major in 64-column boxes (8192, 1024)
    assert ck.wgmma_descriptors(ptx) == [(16, 1024, 1), (8192, 1024, 1)]
    assert re.search(r"p, 1,\s*1, 0, 1;", ptx)   # scale-a, scale-b, a not transposed, b transposed


def test_matmul_configs_fit_shared_memory(ck):
    assert ck.shared_bytes(ck.CONFIG) == 4 * 384 * 64 * 2 + 2 * 128 * 32 * 2 + 1024   # 209 KB of 227
    with pytest.raises(ValueError, match="fewer stages"):
        ck.check_config({**ck.CONFIG, "num_stages": 5})
    with pytest.raises(ValueError, match="BLOCK_K 64"):
        ck.check_config({**ck.CONFIG, "BLOCK_K": 32})


def test_matmul_refuses_what_tma_cannot_copy(ck):
    with pytest.raises(ValueError, match="multiples of 8"):
        ck.check_sizes(100, 100, 90)
    with pytest.raises(ValueError, match="multiples of 8"):
        ck.compile_matmul(64, 1001, 64)


def test_a_static_size_one_mode_turns_tma_copies_one_dimensional(ck):
    """Why ``matmul`` computes a single row as two: compiled for one row, the copies of ``a`` and ``out`` are 1-D
    TMA copies (the size-1 mode dropped), whose box no longer fits the tile; for two rows every copy is 2-D."""
    def dims(h):
        return {op.split(".")[4] for op in ck.opcodes(ck.matmul_ptx(h, 264, 72), "cp.async.bulk.tensor")}
    assert dims(1) == {"1d", "2d"}
    assert dims(2) == {"2d"}


def test_the_wrappers_compile_for_tvm_ffi_calls(ck):
    """The kernels the wrappers call take torch tensors through TVM-FFI (no Python conversion a call); compiling
    for that needs no GPU either: with the option the compiled function is a TVM-FFI one, without it not."""
    from gpu_course.kernels import cute_matmul, cute_softmax
    soft = cute_softmax.compile_softmax((64, 256), torch.float16, options="--gpu-arch sm_90a", ffi=True)
    mm = cute_matmul.compile_matmul(256, 256, 64, options="--gpu-arch sm_90a", ffi=True)
    assert "TVMFFI" in type(soft).__name__ and "TVMFFI" in type(mm).__name__
    assert "TVMFFI" not in type(cute_softmax.compile_softmax((64, 256), torch.float16,
                                                              options="--gpu-arch sm_90a")).__name__
