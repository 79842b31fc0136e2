"""Unit tests of the helpers notebooks 05 and 06 call: gpu_course/rounds.py, gpu_course/triton_ptx.py,
gpu_course/lessons/numba_cuda.py and results.fmt_ratio (CPU; the GPU branches run in the notebooks)."""
import shutil

import pytest
import torch

from gpu_course.lessons.numba_cuda import cuda_c_ptx, ptx_counts, rebuild_after_edit
from gpu_course.results import _stored, fmt_ratio
from gpu_course.rounds import interleaved_rounds, pooled, round_ratios
from gpu_course.timing import Timing
from gpu_course.triton_ptx import compiled_ptx, vector_loads


def test_interleaved_rounds_alternate_the_order_and_keep_each_round():
    order = []
    fns = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    rounds = interleaved_rounds(fns, rounds=3, budget_ms=3, reps=1, warmup=0)
    assert [len(rounds[k]) for k in "ab"] == [3, 3]
    # one call each a round on the CPU (reps=1, warmup=0 makes no warm-up call there): a b, b a, a b
    assert order == ["a", "b", "b", "a", "a", "b"]
    with pytest.raises(ValueError):
        interleaved_rounds(fns, rounds=0)


def test_pooled_and_round_ratios():
    slow = [Timing((2.0, 2.2), "m", "d", False), Timing((3.0,), "m", "d", False)]
    fast = [Timing((1.0, 1.0), "m", "d", False), Timing((2.0,), "m", "d", False)]
    assert pooled(slow).times_ms == (2.0, 2.2, 3.0)
    assert round_ratios(slow, fast) == pytest.approx([2.1, 1.5])


def test_fmt_ratio_is_one_rule_for_lines_and_tables():
    assert fmt_ratio(1.064) == "1.06×" and fmt_ratio(0.0047) == "0.0047×" and fmt_ratio(0.1) == "0.10×"
    assert fmt_ratio(float(_stored(0.004708))) == fmt_ratio(0.004708)   # stored, then printed: the same
    assert fmt_ratio(float(_stored(0.9649))) == fmt_ratio(0.9649) == "0.96×"   # not 0.965, then 0.97


def test_ptx_counts_reads_barriers_shared_loads_fma_and_integer_ops():
    ptx = """
    bar.sync 0;
    ld.shared.f32 %f1, [%r1];
    fma.rn.f32 %f2, %f1, %f1, %f2;
    add.s32 %r2, %r2, 16;
    mul.wide.s32 %rd1, %r3, 4;
    add.f32 %f3, %f2, %f1;
    """
    assert ptx_counts(ptx) == {"barrier": 1, "shared_load": 1, "fma.rn.f32": 1, "integer": 2}


def test_rebuild_after_edit_needs_the_line_once():
    with pytest.raises(ValueError, match="occurs 2 times"):
        rebuild_after_edit("int a;\nint a;", "", ["f"], "int a;")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compile only)")
def test_cuda_c_ptx_of_the_tiled_kernel():
    from gpu_course.kernels import matmul_ladder
    src = matmul_ladder.source(rungs=[3])
    start = src.index("template <int TW>")
    kernel = src[start:src.index("torch::Tensor matmul_tiled(", start)]
    ptx = cuda_c_ptx(kernel, "template __global__ void matmul_tiled_k<16>(const float*, const float*, float*, "
                             "int, int, int);")
    counts = ptx_counts(ptx)
    assert counts["barrier"] == 2 and counts["fma.rn.f32"] == 16 and counts["shared_load"] == 32


def test_vector_loads_by_width():
    ptx = "ld.global.v4.b32 {%r1,%r2,%r3,%r4}, [%rd1];\nld.global.v2.f32 {%f1,%f2}, [%rd2];\nld.global.b32 %r5, [%rd3];"
    assert vector_loads(ptx) == {"16 B": 1, "8 B": 1, "4 B": 1}


def test_compiled_ptx_of_the_mean_uses_16_byte_loads():
    ptx = compiled_ptx("gpu_course.kernels.triton_mean", "partial_sums_kernel",
                       {"x_ptr": "*fp32", "partial_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr", "TILES": "constexpr"},
                       {"BLOCK": 1024, "TILES": 2}, num_warps=4, aligned=(0, 1, 2))
    assert vector_loads(ptx) == {"16 B": 1024 * 2 // 128 // 4, "8 B": 0, "4 B": 0}
    with pytest.raises(RuntimeError, match="no_such_kernel"):
        compiled_ptx("gpu_course.kernels.triton_mean", "no_such_kernel", {}, {})
