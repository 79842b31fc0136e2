"""The attention forward's C++ route without a GPU: cpu mode says why it is not built; with a stand-in extension in
a faked GPU (launch_paths.fake_gpu), attention_forward takes the route exactly where a call's kind was seen before,
with the kernel and tile its first call launched, and steps aside where it must not; the descriptor kernel's entry
carries CUDA's numbering of the tensor maps and the persistent grid's size (tests/gpu/test_attention_route_gpu.py
runs the real route)."""
from types import SimpleNamespace

import pytest
import torch

import utils
from gpu_course import launch_paths as lp
from gpu_course import triton_launch, triton_route
from gpu_course.kernels import triton_attention as ta
from gpu_course.kernels.triton_attention import route as ar

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the GPU test runs the real route")


class _Route(triton_route.StandIn):
    """Stands in for the built extension: records each call, returns marked outputs."""

    def forward(self, q, k, v, scale, kid, block_m, programs, maps):
        self.calls.append((kid, block_m, programs, tuple(maps), scale))
        return torch.full(q.shape, 7.0), torch.zeros(q.shape[:3])


@pytest.fixture
def route(monkeypatch):
    mod = _Route()
    monkeypatch.setattr(ar.ROUTE, "mod", mod)
    monkeypatch.setattr(ar.ROUTE, "entries", {})
    monkeypatch.setattr(triton_route, "register", lambda m, ck, nargs: m.add_kernel(ck, nargs))
    with lp.fake_gpu(ta.attention_fwd_tuned):
        yield mod


def qkv(n=37, d=16, dtype=torch.float32):
    return tuple(torch.randn(1, 2, n, d, dtype=dtype) for _ in range(3))


def test_cpu_mode_says_why_there_is_no_route():
    assert ta.build_route() is False and "cpu mode" in ta.ROUTE.why


def test_a_forwards_second_call_goes_through_the_route(route):
    q, k, v = qkv()
    ta.attention_forward(q, k, v)                        # first: the Python path, which registers its kernel
    assert route.calls == [] and route.kernels == [7]
    out, _ = ta.attention_forward(q, k, v)               # second: the route, with the autotuner's tile
    block_m = ta.forward_configs()[0].kwargs["BLOCK_M"]
    assert out.eq(7).all() and route.calls == [(0, block_m, 0, (), 16 ** -0.5)]
    assert ta.route_taken(q, k, v) and not ta.route_taken(q, k, v, causal=True)
    ta.attention_forward(q, k, v, causal=True)           # another kind: the Python path first
    ta.attention_forward(q, k, v, scale=0.5)             # a scale is an argument, not a kind
    assert len(route.calls) == 2 and route.calls[-1][-1] == 0.5 and len(route.kernels) == 2


def test_flash_attentions_forward_takes_it(route):
    q, k, v = qkv()
    ta.attention_forward(q, k, v)
    assert ta.flash_attention(q, k, v).eq(7).all() and len(route.calls) == 1


def test_the_route_steps_aside(route):
    q, k, v = qkv()
    ta.attention_forward(q, k, v)
    with ta.ROUTE.off():
        ta.attention_forward(q, k, v)
    with triton_launch.through_jit():
        ta.attention_forward(q, k, v)
    ta.attention_forward(q, k, v, alloc=utils.poisoned)
    ta.attention_forward(q, k, v, descriptors=False)
    assert route.calls == []
    with pytest.raises(ValueError, match="head dimension"):   # a learner's mistake, as before
        ta.attention_forward(*qkv(d=24))


def test_a_kernel_the_route_cannot_launch_keeps_the_python_path(route, monkeypatch):
    monkeypatch.setattr(triton_route, "register", lambda m, ck, nargs: None)
    q, k, v = qkv()
    ta.attention_forward(q, k, v), ta.attention_forward(q, k, v)
    assert route.calls == [] and ar.ROUTE.entries == {ar.route_key(q, k, v, False): None}


def test_the_descriptor_kernels_entry(monkeypatch):
    mod = _Route()
    monkeypatch.setattr(ar.ROUTE, "mod", mod)
    monkeypatch.setattr(triton_route, "register", lambda m, ck, nargs: m.add_kernel(ck, nargs))
    monkeypatch.setattr(ar, "sm_count", lambda device: 132)
    metas = [dict(elem_type=t, swizzle=3, block_size=bs) for t, bs in ((8, [128, 64]), (9, [64, 64]), (1, [64, 64]))]
    ck = SimpleNamespace(metadata=SimpleNamespace(tensordesc_meta=metas))
    entry = ar.entry_for(ck, dict(BLOCK_M=128, BLOCK_N=64, PERSIST=2), descriptors=True)
    assert mod.kernels == [8]                            # q, k, v, out, lse, scale, N, B*H
    assert entry == (0, 128, 264, [10, 3, 128, 64, 8, 3, 64, 64, 1, 3, 64, 64])   # CUDA's element types
    assert ar.entry_for(ck, dict(BLOCK_M=64, PERSIST=0), descriptors=True)[2] == 0
    assert ar.entry_for(None, dict(BLOCK_M=64), descriptors=True) is None


def test_the_layout_of_a_descriptor_kernel():
    sig = ["tensordesc<fp16[128, 64]>"] * 3 + ["*fp16", "*fp32", "fp32", "i32", "i32"]
    ck = triton_route._Ck(sig + ["constexpr"] * 7, {}, [dict(swizzle=3)] * 3)
    assert triton_route.kernel_layout(ck, 8) == ("Tiill" * 3 + "ppfii", 0)
    assert triton_route.kernel_layout(triton_route._Ck(sig, {}, [dict(swizzle=3)] * 2), 8) is None   # metadata short
    assert triton_route.kernel_layout(triton_route._Ck(sig, {}, [dict(swizzle=3, is_im2col=True)] * 3), 8) is None
    assert triton_route.kernel_layout(triton_route._Ck(sig, {"launch_pdl": True}, [dict(swizzle=3)] * 3), 8) is None


def test_the_layout_under_a_triton_whose_nvidia_driver_expands_descriptors(monkeypatch):
    """Triton 3.5-3.6: ``expand_signature(signature, tensordesc_meta)`` lives in the NVIDIA driver, and it asserts
    that it saw every descriptor's metadata, so the whole signature must be expanded at once."""
    import re

    import triton.backends.driver as common
    import triton.backends.nvidia.driver as nvidia

    def expand_signature(signature, tensordesc_meta):
        out, seen = [], 0
        for t in signature:
            if isinstance(t, str) and t.startswith("tensordesc"):
                seen += 1
                rank = re.match(r"tensordesc<[^[>]*\[([^]]*)\]", t).group(1).count(",") + 1
                out += ["nvTmaDesc"] + ["i32"] * rank + ["i64"] * rank
            else:
                out.append(t)
        assert seen == len(tensordesc_meta)
        return out

    monkeypatch.delattr(common, "expand_signature", raising=False)
    monkeypatch.setattr(nvidia, "expand_signature", expand_signature, raising=False)
    sig = ["tensordesc<fp16[128, 64]>"] * 3 + ["*fp16", "*fp32", "fp32", "i32", "i32"]
    meta = {"global_scratch_size": 0, "profile_scratch_size": 0}
    ck = triton_route._Ck(sig, meta, [dict(swizzle=3)] * 3)
    assert triton_route.kernel_layout(ck, 8) == ("Tiill" * 3 + "ppfii", 2)


def test_forward_paths_times_each_path_beside_the_libraries(route):
    """cpu mode with the stand-in route: SDPA's CPU kernel (for "SDPA flash"), ours through Python, ours through the
    route (which the warm-up calls taught it); the baseline is the library with the shortest loop."""
    from gpu_course.lessons import attention as lesson
    q, k, v = qkv()
    taken, best = lesson.forward_paths(q, k, v, rounds=2)
    assert list(taken) == ["SDPA flash", "ours, Python path", "ours, C++ route"] and best == "SDPA flash"
    assert all(len(t) == 2 for t in taken.values()) and route.calls      # the route's row went through the route
    assert lesson.fastest_library(taken) == [t.loop_ms for t in taken["SDPA flash"]]   # the only library here
    with ar.ROUTE.off():
        taken, _ = lesson.forward_paths(q, k, v, rounds=1)
    assert "ours, C++ route" not in taken
