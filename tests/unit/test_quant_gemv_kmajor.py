"""The k-major int4 GEMV (gpu_course/kernels/quant_gemv_kmajor.py) in either mode: the repacking puts column 8 w + i
of row r in nibble i of words[w, r]; the kernel matches float64 on shapes no block divides, into poisoned outputs,
call after call (its workspace is left zero); wrong inputs are clear errors."""
import pytest
import torch

import utils
from gpu_course.kernels import quant_gemv_kmajor as KM
from gpu_course.lessons.low_precision import quantize as Q


def test_repack_kmajor_places_each_column():
    torch.manual_seed(0)
    packed = torch.randint(0, 256, (3, 128), dtype=torch.uint8)          # k = 256: two groups
    q = torch.stack([packed & 0xF, packed >> 4], -1).reshape(3, 256).long()
    words = KM.repack_kmajor(packed).long() & 0xFFFFFFFF
    assert words.shape == (32, 3)
    for col in (0, 1, 7, 8, 15, 127, 128, 200, 255):
        w, i = divmod(col, 8)
        assert torch.equal((words[w] >> (4 * i)) & 0xF, q[:, col]), col


@pytest.mark.parametrize("n, k, dtype, cfg", [
    (40, 384, torch.bfloat16, None),                                   # the mode's configuration
    (130, 256, torch.float16, dict(BLOCK_N=32, STEPS=3, num_warps=4, num_stages=1)),   # STEPS divides no group
    (3, 128, torch.float32, dict(BLOCK_N=16, STEPS=16, num_warps=4, num_stages=1))])
def test_matches_float64_call_after_call(n, k, dtype, cfg):
    w = Q.weight_like(n, k, seed=n).to(utils.DEVICE)
    packed, scales = Q.quantize_int4_groups(w, 128, dtype)
    words = KM.repack_kmajor(packed)
    tol = dict(atol=2e-3, rtol=8e-3) if dtype != torch.float32 else dict(atol=1e-4, rtol=1e-4)
    for call in range(3):                     # the sums left by one call must not reach the next
        x = torch.randn(1, k, device=utils.DEVICE).to(dtype)
        ref = x.double() @ Q.dequantize_int4_groups(packed, scales).double().T.to(x.device)
        got = KM.int4_gemv_kmajor(x, words, scales, out=utils.poisoned(1, n, dtype=dtype, device=x.device), cfg=cfg)
        assert got.dtype == dtype
        utils.check(got, ref, **tol, name=f"int4_gemv_kmajor {n}x{k}, call {call}")
    for sums, tickets in KM._WORKSPACE.values():
        assert not sums.any() and not tickets.any()


def test_clear_errors():
    packed, scales = Q.quantize_int4_groups(Q.weight_like(16, 256, seed=1), 128, torch.float32)
    words = KM.repack_kmajor(packed)
    with pytest.raises(ValueError, match="one row"):
        KM.int4_gemv_kmajor(torch.zeros(2, 256), words, scales)
    with pytest.raises(ValueError, match="repack_kmajor's contiguous"):
        KM.int4_gemv_kmajor(torch.zeros(1, 256), words.t().contiguous(), scales)
    with pytest.raises(ValueError, match="scales must be"):
        KM.int4_gemv_kmajor(torch.zeros(1, 256), words, scales[:1])
    with pytest.raises(ValueError, match="out must be"):
        KM.int4_gemv_kmajor(torch.zeros(1, 256), words, scales, out=torch.zeros(16))
    with pytest.raises(ValueError, match="multiple of 128"):
        KM.repack_kmajor(packed[:, :60])
