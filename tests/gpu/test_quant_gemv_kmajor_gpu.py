"""The k-major int4 GEMV (gpu_course/kernels/quant_gemv_kmajor.py) on a GPU at the sizes notebook 15 times, with
its own configuration: against float64, into poisoned outputs, twice (the workspace it leaves zero is reused); and
through its C++ route, on two streams. Skipped on the CPU."""
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


@pytest.mark.parametrize("n, k", [(8192, 8192), (1030, 2304)])
def test_the_route_gives_what_the_python_path_gives(n, k):
    assert KM.build_route(), KM.route_status()
    w = Q.weight_like(n, k, seed=n, device="cuda")
    packed, scales = Q.quantize_int4_groups(w, 128, torch.bfloat16)
    words = KM.repack_kmajor(packed)
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    ref = x.double() @ Q.dequantize_int4_groups(packed, scales).double().T
    with KM.without_route():
        want = KM.int4_gemv_kmajor(x, words, scales)
    KM.int4_gemv_kmajor(x, words, scales)                      # the Python path, registering the kernel
    assert KM.ROUTE.entries.get(KM._route_key(x, words, scales)) is not None, "the route did not take the kernel"
    for call in range(3):                                      # the route's own workspace, left zero each time
        got = KM.int4_gemv_kmajor(x, words, scales)
        assert got.shape == want.shape and got.dtype == want.dtype
        utils.check(got, ref, atol=1e-3, rtol=8e-3, name=f"through the route {n}x{k}, call {call}")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):                              # another stream: another workspace
        got = KM.int4_gemv_kmajor(x, words, scales)
    torch.cuda.current_stream().wait_stream(side)
    utils.check(got, ref, atol=1e-3, rtol=8e-3, name=f"through the route on a side stream {n}x{k}")
