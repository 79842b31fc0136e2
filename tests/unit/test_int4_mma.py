"""The CUDA C int4 tensor-core GEMV's front end without a GPU: the nibble order of its words, its arithmetic lane
by lane (int4_mma.simulate) against float64, the source it builds from, and the errors and the reason it gives where
it cannot run (tests/gpu/test_int4_mma_gpu.py runs the kernel)."""
import pytest
import torch

import utils
from gpu_course.cuda import get_sig
from gpu_course.kernels import int4_mma as I
from gpu_course.lessons.low_precision import quantize as Q


def test_repack_puts_columns_2p_and_2p_plus_1_at_bits_4p_and_4p_plus_16():
    g = torch.Generator().manual_seed(0)
    packed = torch.randint(0, 256, (3, 128), dtype=torch.uint8, generator=g)
    words = I.repack(packed).to(torch.int64) & 0xFFFFFFFF
    q = torch.stack([packed & 0xF, packed >> 4], -1).reshape(3, -1, 8).to(torch.int64)   # [row, word, column]
    for p in range(4):
        assert torch.equal((words >> (4 * p)) & 0xF, q[..., 2 * p])
        assert torch.equal((words >> (4 * p + 16)) & 0xF, q[..., 2 * p + 1])


@pytest.mark.parametrize("m, n, k", [(1, 40, 384), (5, 24, 256), (16, 8, 128), (9, 3, 1024)])
def test_the_lanes_arithmetic_matches_float64(m, n, k):
    w = Q.weight_like(n, k, seed=m + n)
    packed, scales = Q.quantize_int4_groups(w, I.GROUP, torch.bfloat16)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(k)).to(torch.bfloat16)
    want = x.double() @ Q.dequantize_int4_groups(packed, scales).double().T
    torch.testing.assert_close(I.simulate(x, I.repack(packed), scales), want, rtol=1e-12, atol=1e-9)


def test_a_wrong_word_order_is_caught_by_the_simulation():
    w = Q.weight_like(8, 256, seed=1)
    packed, scales = Q.quantize_int4_groups(w, I.GROUP, torch.bfloat16)
    x = torch.randn(1, 256).to(torch.bfloat16)
    want = x.double() @ Q.dequantize_int4_groups(packed, scales).double().T
    plain = packed.contiguous().view(torch.int32)                 # the course's order, not repacked
    assert (I.simulate(x, plain, scales) - want).abs().max() > 1e-3


def test_clear_errors_and_the_reason_it_does_not_run_here():
    with pytest.raises(ValueError, match="multiple of 128"):
        I.repack(torch.zeros(2, 10, dtype=torch.uint8))
    with pytest.raises(ValueError, match="cfg must be one of"):
        I.int4_mma_gemv(None, torch.zeros(1, 128), torch.zeros(8, 16, dtype=torch.int32), torch.zeros(1, 8), cfg=9)
    ok, why = I.runs_here()
    assert ok == (utils.ON_GPU and torch.cuda.get_device_capability() >= (8, 0)), why
    assert ok or "8.0" in why


def test_the_source_exposes_one_host_function():
    src = I.source()
    assert get_sig("int4_mma_gemv", src).startswith("torch::Tensor int4_mma_gemv(")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in src and "lop3.b32" in src
