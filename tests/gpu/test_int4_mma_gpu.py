"""The CUDA C int4 tensor-core GEMV (gpu_course/kernels/int4_mma.py) on a GPU: every launch shape against float64 at
batches 1 to 16 and sizes no tile divides, poisoned outputs; the preconditions as clear errors. Skipped on the CPU
and on GPUs older than compute capability 8.0."""
import pytest
import torch

import utils
from gpu_course.kernels import int4_mma as I
from gpu_course.lessons.low_precision import quantize as Q

OK, WHY = I.runs_here() if utils.ON_GPU else (False, "needs a GPU (gpu mode)")
pytestmark = pytest.mark.skipif(not OK, reason=WHY)


@pytest.fixture(scope="module")
def mod():
    return I.build()


def _layer(m, n, k):
    w = Q.weight_like(n, k, seed=n + k, device="cuda")
    packed, scales = Q.quantize_int4_groups(w, I.GROUP, torch.bfloat16)
    x = torch.randn(m, k, device="cuda", generator=torch.Generator(device="cuda").manual_seed(m)).to(torch.bfloat16)
    return x, I.repack(packed), scales, x.double() @ Q.dequantize_int4_groups(packed, scales).double().T


@pytest.mark.parametrize("cfg", sorted(I.CONFIGS))
@pytest.mark.parametrize("m, n, k", [(1, 40, 384), (3, 202, 1024), (8, 26, 256), (9, 136, 512), (16, 8, 128),
                                     (16, 1000, 2304), (1, 4096, 8192), (5, 96, 14336)])   # 18 and 112 groups
def test_matches_float64(mod, cfg, m, n, k):
    x, words, scales, want = _layer(m, n, k)
    out = I.int4_mma_gemv(mod, x, words, scales, cfg, out=utils.poisoned(m, n, dtype=torch.bfloat16))
    utils.check(out, want, atol=1e-3, rtol=8e-3, name=f"int4_mma_gemv {m}x{n}x{k} cfg {cfg}")   # bf16 out: 2^-8


def test_preconditions_give_clear_errors(mod):
    x, words, scales, _ = _layer(2, 16, 256)
    out = torch.empty(2, 16, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="1 <= M <= 16"):
        mod.int4_mma_gemv(torch.zeros(17, 256, device="cuda", dtype=torch.bfloat16), words, scales, out, 0)
    with pytest.raises(RuntimeError, match="bfloat16"):
        mod.int4_mma_gemv(x.float(), words, scales, out, 0)
    with pytest.raises(RuntimeError, match="multiple of 128"):
        mod.int4_mma_gemv(x[:, :200].contiguous(), words, scales, out, 0)
    with pytest.raises(RuntimeError, match="words must be"):
        mod.int4_mma_gemv(x, words[:, :16].contiguous(), scales, out, 0)
    with pytest.raises(RuntimeError, match="cfg must be"):
        mod.int4_mma_gemv(x, words, scales, out, 7)
    torch.cuda.synchronize()   # no launch failed
