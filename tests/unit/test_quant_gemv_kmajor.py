"""The k-major int4 GEMV (gpu_course/kernels/quant_gemv_kmajor.py) in either mode: the repacking puts column 8 w + i
of row r in nibble i of words[w, r]; the kernel matches float64 on shapes no block divides, into poisoned outputs,
call after call (its workspace is left zero); wrong inputs are clear errors."""
import pytest
import torch

import utils
from gpu_course import launch_paths as lp
from gpu_course import triton_route
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
    (3, 128, torch.float32, dict(BLOCK_N=16, STEPS=16, num_warps=4, num_stages=1)),
    (130, 384, torch.float16, dict(BLOCK_N=32, STEPS=8, num_warps=4, num_stages=1, TILE=True)),   # the tile kernel
    (5, 128, torch.float32, dict(BLOCK_N=16, STEPS=2, num_warps=4, num_stages=1, TILE=True)),
    (40, 384, torch.bfloat16, dict(BLOCK_N=64, STEPS=16, num_warps=4, num_stages=1, TILE=True))])  # 3 groups
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
    with pytest.raises(ValueError, match="divide 16"):
        KM.int4_gemv_kmajor(torch.zeros(1, 256), words, scales, cfg=dict(BLOCK_N=16, STEPS=32, num_warps=4,
                                                                           num_stages=1, TILE=True))
    with pytest.raises(ValueError, match="multiple of 128"):
        KM.repack_kmajor(packed[:, :60])


class _Route(triton_route.StandIn):
    """Stands in for the built C++ route: records each call, returns a marked output."""

    def int4_gemv_kmajor(self, x, words, scales, kid, block_n, steps, one):
        self.calls.append((kid, block_n, steps, one))
        return torch.full((1, words.shape[1]), 7.0)


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode")
def test_cpu_mode_says_why_there_is_no_route():
    assert KM.build_route() is False and "cpu mode" in KM.route_status()


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode")
def test_a_calls_second_time_goes_through_the_route(monkeypatch):
    mod = _Route()
    monkeypatch.setattr(KM.ROUTE, "mod", mod)
    monkeypatch.setattr(KM.ROUTE, "entries", {})
    monkeypatch.setattr(triton_route, "register", lambda m, ck, nargs: m.add_kernel(ck, nargs))
    packed, scales = Q.quantize_int4_groups(Q.weight_like(40, 256, seed=1), 128, torch.float32)
    words, x = KM.repack_kmajor(packed), torch.randn(1, 256)
    with lp.fake_gpu(KM.int4_gemv_kmajor_kernel):
        KM.int4_gemv_kmajor(x, words, scales)                   # first: Python path, registers the kernel
        assert mod.calls == [] and mod.kernels == [10]
        assert KM.int4_gemv_kmajor(x, words, scales).eq(7).all()  # second: the route, with the mode's block
        assert mod.calls == [(0, KM.CONFIG["BLOCK_N"], KM.CONFIG["STEPS"], KM.ONE_BITS)]
        with KM.without_route():
            KM.int4_gemv_kmajor(x, words, scales)
        KM.int4_gemv_kmajor(x, words, scales, out=torch.empty(1, 40))          # the caller's output: Python
        KM.int4_gemv_kmajor(x, words, scales, cfg=dict(KM.CONFIG, STEPS=3))    # another configuration: Python
        KM.int4_gemv_kmajor(x[:, :128], words[:16], scales[:1])                # another shape: Python first
        assert len(mod.calls) == 1 and len(mod.kernels) == 2
        with pytest.raises(ValueError, match="one row"):        # a learner's mistake: the same message as before
            KM.int4_gemv_kmajor(torch.randn(2, 256), words, scales)
