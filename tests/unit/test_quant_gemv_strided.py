"""The strided int4 GEMV (gpu_course/kernels/quant_gemv_strided.py) in either mode: the repacking puts column
16 i + w of each group in nibble i of word w, and the kernel matches float64 on odd shapes, split or not."""
import pytest
import torch

import utils
from gpu_course.kernels import quant_gemv_strided as S
from gpu_course.lessons.low_precision import quantize as Q


def test_repack_strided_places_each_column():
    torch.manual_seed(0)
    packed = torch.randint(0, 256, (3, 128), dtype=torch.uint8)          # k = 256: two groups
    q = torch.stack([packed & 0xF, packed >> 4], -1).reshape(3, 256).long()
    words = S.repack_strided(packed).long() & 0xFFFFFFFF
    for col in (0, 1, 15, 16, 17, 127, 128, 200, 255):
        g, c = divmod(col, 128)
        i, w = divmod(c, 16)
        assert torch.equal((words[:, g * 16 + w] >> (4 * i)) & 0xF, q[:, col]), col


@pytest.mark.parametrize("n, k, dtype, split", [(40, 384, torch.float16, 1), (33, 256, torch.float32, 2),
                                                (17, 128, torch.float16, 2)])
def test_matches_float64(n, k, dtype, split):
    w = Q.weight_like(n, k, seed=n).to(utils.DEVICE)
    packed, scales = Q.quantize_int4_groups(w, 128, dtype)
    x = torch.randn(1, k, device=utils.DEVICE).to(dtype)
    ref = x.double() @ Q.dequantize_int4_groups(packed, scales).double().T.to(x.device)
    cfg = dict(BLOCK_N=16, BLOCK_KW=16 if k == 128 else 32, SPLIT_K=split, num_warps=4, num_stages=1)
    got = S.int4_gemv_strided(x, S.repack_strided(packed), scales, cfg, alloc=utils.poisoned)
    tol = dict(atol=2e-2, rtol=1e-2) if dtype == torch.float16 else dict(atol=1e-4, rtol=1e-4)
    assert got.dtype == dtype
    utils.check(got, ref, **tol, name="int4_gemv_strided")


def test_clear_errors():
    packed, scales = Q.quantize_int4_groups(Q.weight_like(16, 256, seed=1), 128, torch.float32)
    words = S.repack_strided(packed)
    with pytest.raises(AssertionError, match="one row of x"):
        S.int4_gemv_strided(torch.zeros(2, 256), words, scales)
    with pytest.raises(AssertionError, match="repack_strided's"):
        S.int4_gemv_strided(torch.zeros(1, 256), packed, scales)
    with pytest.raises(AssertionError, match="multiple of 128"):
        S.repack_strided(packed[:, :96])
