"""Notebook 17's CuTe DSL kernels (gpu_course.kernels.cute_kernels) on a real GPU, against float64, on fresh random
inputs whose sizes no tile divides, into NaN-poisoned outputs (a value a kernel forgot stays NaN). Times nothing.
Skipped on the CPU and where CuTe DSL is not installed; the matmul also where the GPU is not a Hopper (sm_90).

Tolerances: the softmax computes in fp32 with ex2.approx (a few fp32 ulps on each exponential), so fp32 outputs
agree to 1e-5 relative and fp16/bf16 ones to their rounding at the store (half an ulp: 2^-11 and 2^-8 relative, plus
that margin). The matmul rounds an fp32 sum of fp16 products once to fp16: about 5e-4 relative of values of order
30 (sums of ~1000 products of size 1), hence 1e-2 absolute and relative, notebook 07's tolerance; the same for the
bias + GeLU epilogue, computed on the fp32 accumulator."""
import pytest
import torch
import torch.nn.functional as F

import utils

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")
ck = pytest.importorskip("gpu_course.kernels.cute_kernels", reason="needs CuTe DSL (pip install nvidia-cutlass-dsl)")
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)

SOFTMAX_TOL = {torch.float32: (1e-6, 1e-5), torch.float16: (1e-6, 1e-3), torch.bfloat16: (1e-6, 5e-3)}   # atol, rtol


@pytest.mark.parametrize("shape,dtype", [((37, 300), torch.float32), ((1000, 3000), torch.float32),
                                         ((4097, 3001), torch.float16), ((1001, 4096), torch.bfloat16),
                                         ((3, 16384), torch.bfloat16), ((1, 8), torch.float16)])
def test_softmax_matches_float64(shape, dtype):
    x = torch.randn(shape, device="cuda", dtype=dtype) * 4
    out = ck.softmax(x, utils.poisoned(shape, dtype=dtype, device="cuda"))
    torch.cuda.synchronize()
    assert not out.isnan().any(), f"{int(out.isnan().sum())} values never written"
    atol, rtol = SOFTMAX_TOL[dtype]
    torch.testing.assert_close(out.double(), torch.softmax(x.double(), dim=1), atol=atol, rtol=rtol)


def test_softmax_writes_only_its_output():
    x = torch.randn(37, 304, device="cuda")
    big = utils.poisoned(39, 304, device="cuda")   # out is rows 1..37 of it: rows 0 and 38 must stay NaN
    ck.softmax(x, big[1:38])
    torch.cuda.synchronize()
    assert big[0].isnan().all() and big[38].isnan().all() and not big[1:38].isnan().any()


@pytest.mark.skipif(not HOPPER, reason="wgmma and TMA need a Hopper GPU (sm_90)")
@pytest.mark.parametrize("warp_specialized", [True, False])
@pytest.mark.parametrize("h,w,k", [(1000, 1096, 904), (2000, 2056, 1024), (37, 8, 16), (1, 264, 72),
                                   (4096, 4096, 4096)])
def test_matmul_and_its_epilogue_match_float64(h, w, k, warp_specialized):
    a = torch.randn(h, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, w, device="cuda", dtype=torch.float16)
    bias = torch.randn(w, device="cuda", dtype=torch.float16)
    cfg = dict(warp_specialized=warp_specialized)
    prod = a.double() @ b.double()
    out = ck.matmul(a, b, utils.poisoned(h, w, dtype=torch.float16, device="cuda"), cfg=cfg)
    fused = ck.matmul(a, b, utils.poisoned(h, w, dtype=torch.float16, device="cuda"), bias, "gelu", cfg=cfg)
    torch.cuda.synchronize()
    for got in (out, fused):
        assert not got.isnan().any(), f"{int(got.isnan().sum())} values never written"
    torch.testing.assert_close(out.double(), prod, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(fused.double(), F.gelu(prod + bias.double()), atol=1e-2, rtol=1e-2)


@pytest.mark.skipif(not HOPPER, reason="wgmma and TMA need a Hopper GPU (sm_90)")
def test_matmul_refuses_rows_tma_cannot_copy():
    a = torch.randn(64, 90, device="cuda", dtype=torch.float16)
    b = torch.randn(90, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="multiples of 8"):
        ck.matmul(a, b, torch.empty(64, 64, device="cuda", dtype=torch.float16))


def test_the_kernels_run_on_torchs_current_stream():
    """The wrappers launch through TVM-FFI, which takes torch's current stream: on a side stream whose input is
    written only after a long sleep, a kernel launched on another stream would read the zeros written before."""
    side = torch.cuda.Stream()
    x, x_real = torch.zeros(300, 1000, device="cuda"), torch.randn(300, 1000, device="cuda")
    shapes = (((128, 64), (64, 136)) if HOPPER else ())
    mats = [torch.zeros(s, device="cuda", dtype=torch.float16) for s in shapes]
    mats_real = [torch.randn(s, device="cuda", dtype=torch.float16) for s in shapes]
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)   # ~50 ms of GPU time, so that another stream would run first
        x.copy_(x_real)
        sm = ck.softmax(x, utils.poisoned(300, 1000, device="cuda"))
        if HOPPER:
            for m, r in zip(mats, mats_real):
                m.copy_(r)
            mm = ck.matmul(*mats, utils.poisoned(128, 136, dtype=torch.float16, device="cuda"))
    side.synchronize()
    torch.testing.assert_close(sm, torch.softmax(x_real, dim=1), atol=1e-6, rtol=1e-5)
    if HOPPER:
        torch.testing.assert_close(mm.double(), mats_real[0].double() @ mats_real[1].double(), atol=1e-2, rtol=1e-2)


def test_the_dlpack_call_gives_the_same_result():
    """The DSL's default host path (DLPack tensors and a stream object made in Python each call), which notebook 17
    times beside the TVM-FFI one, runs the same kernel: the same output, bit for bit."""
    x = torch.randn(1001, 4096, device="cuda", dtype=torch.bfloat16) * 4
    ffi = ck.softmax(x, utils.poisoned(1001, 4096, dtype=torch.bfloat16, device="cuda"))
    dl = ck.softmax_dlpack(x, utils.poisoned(1001, 4096, dtype=torch.bfloat16, device="cuda"))
    torch.cuda.synchronize()
    assert torch.equal(ffi, dl)
