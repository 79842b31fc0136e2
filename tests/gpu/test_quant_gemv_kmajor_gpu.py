"""The k-major int4 GEMV (gpu_course/kernels/quant_gemv_kmajor.py) on a GPU at the sizes notebook 15 times, with
its own configuration: against float64, into poisoned outputs, twice (the workspace it leaves zero is reused).
Skipped on the CPU."""
import pytest
import torch

import utils
from gpu_course.kernels import quant_gemv_kmajor as KM
from gpu_course.lessons.low_precision import quantize as Q

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.mark.parametrize("n, k", [(8192, 8192), (4096, 14336), (1030, 2304)])
def test_matches_float64_at_notebook_sizes(n, k):
    w = Q.weight_like(n, k, seed=n + k, device="cuda")
    packed, scales = Q.quantize_int4_groups(w, 128, torch.bfloat16)
    words = KM.repack_kmajor(packed)
    for call in range(2):
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        ref = x.double() @ Q.dequantize_int4_groups(packed, scales).double().T
        out = KM.int4_gemv_kmajor(x, words, scales, out=utils.poisoned(1, n, dtype=torch.bfloat16, device="cuda"))
        utils.check(out, ref, atol=1e-3, rtol=8e-3, name=f"int4_gemv_kmajor {n}x{k}, call {call}")
