"""Notebook 15's kernels on a real GPU: the FP8 GEMM (per tensor and block-scaled, compiled, against float64 and
against ``torch._scaled_mm``), the int4 and int8 GEMVs on the tuned path (the autotuner's choice kept and launched
directly) and the tensor-core path, on sizes that are no multiple of any block, into NaN-poisoned outputs where the
launcher takes one. Skipped on the CPU (tests/unit/test_low_precision.py runs the same kernels in the interpreter)."""
import pytest
import torch

import utils  # first: chooses the mode before triton is imported
from gpu_course.kernels import fp8_matmul as F
from gpu_course.kernels import quant_gemv as G
from gpu_course.lessons.low_precision import measure as M
from gpu_course.lessons.low_precision import quantize as Q

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")
FP8 = pytest.mark.skipif(not (utils.ON_GPU and M.fp8_ready()[0]), reason="no fp8 tensor cores on this GPU")


@FP8
@pytest.mark.parametrize("scaling", F.SCALINGS)
@pytest.mark.parametrize("shape", [(72, 384, 40), (300, 640, 200), (1000, 1024, 777)])
def test_fp8_matmul_matches_float64_and_scaled_mm(scaling, shape):
    h, k, w = shape
    qa, qw, sa, sw = M.fp8_operands(h, k, w, scaling, seed=h)
    out = F.fp8_matmul(qa, qw.t(), sa, sw, scaling, alloc=lambda *s, **kw: utils.poisoned(*s, **kw))
    assert utils.check(out, M.fp8_reference(qa, qw, sa, sw, scaling), atol=2e-2, rtol=1e-2)
    if scaling == "tensor" and k % 16 == 0 and w % 16 == 0:   # cuBLASLt's alignment
        torch.testing.assert_close(out.float(), M.scaled_mm(qa, qw, sa, sw).float(), atol=3e-2, rtol=2e-2)


@FP8
def test_fp8_matmul_takes_a_row_major_b_too():
    qa, qw, sa, sw = M.fp8_operands(128, 256, 96, "tensor", seed=5)
    out = F.fp8_matmul(qa, qw.t().contiguous(), sa, sw)
    assert utils.check(out, M.fp8_reference(qa, qw, sa, sw), atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("m", [1, 3, 8, 17, 64])
@pytest.mark.parametrize("nk", [(40, 384), (1000, 2048)])
def test_int4_and_int8_gemv_on_the_gpu(m, nk):
    n, k = nk
    w = Q.weight_like(n, k, seed=m).to(utils.DEVICE)
    x = torch.randn(m, k, device=utils.DEVICE).to(M.act_dtype())
    p, s = Q.quantize_int4_groups(w, 128, M.act_dtype())
    ref4 = x.double() @ Q.dequantize_int4_groups(p, s).T
    for _ in range(2):   # the first call of a shape tunes (below 16 rows), the second launches the kept choice
        assert utils.check(G.int4_gemv(x, p, s), ref4, atol=3e-2, rtol=2e-2)
    q8, s8 = Q.quantize_int8_rows(w, M.act_dtype())
    assert utils.check(G.int8_gemv(x, q8, s8), x.double() @ (q8.double() * s8.double()[:, None]).T,
                       atol=3e-2, rtol=2e-2)


def test_the_tuned_choice_is_kept_per_shape():
    w = Q.weight_like(256, 1024, seed=1).to(utils.DEVICE)
    p, s = Q.quantize_int4_groups(w, 128, M.act_dtype())
    x = torch.randn(2, 1024, device=utils.DEVICE).to(M.act_dtype())
    G.int4_gemv(x, p, s)
    key = (2, 256, 1024, x.dtype, x.device)
    assert key in G._TUNED and set(G._TUNED[key]) >= {"BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages"}
    assert G._TUNED[key]["BLOCK_K"] % G.GROUP == 0


@pytest.mark.parametrize("n, k", [(8192, 8192), (4096, 14336), (1000, 384)])
def test_the_strided_int4_gemv_matches_float64_at_decoding_shapes(n, k):
    from gpu_course.kernels import quant_gemv_strided as S
    w = Q.weight_like(n, k, seed=5).to("cuda")
    packed, scales = Q.quantize_int4_groups(w, 128, torch.float16)
    x = torch.randn(1, k, device="cuda", dtype=torch.float16)
    ref = x.double() @ Q.dequantize_int4_groups(packed, scales).double().T.to("cuda")
    for cfg in (None, dict(BLOCK_N=16, BLOCK_KW=64, SPLIT_K=1, num_warps=4, num_stages=2)):
        utils.check(S.int4_gemv_strided(x, S.repack_strided(packed), scales, cfg, alloc=utils.poisoned), ref,
                    atol=2e-2, rtol=1e-2, name=f"int4_gemv_strided {n}x{k}")
