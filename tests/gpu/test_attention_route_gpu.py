"""The attention forward's C++ route on a real GPU: once built, a call of a kind seen before goes through it and
returns what the Python path returns, bit for bit (the same kernel on the same inputs), on sequence lengths that are
not multiples of the tile, causal or not, through the descriptor kernel (Hopper: tensor maps filled in C++) and the
pointer kernel (fp32 here), and on the descriptor kernel's persistent grid. Skipped on the CPU
(tests/unit/test_attention_route.py fakes it)."""
import pytest
import torch

import utils
from gpu_course.kernels import triton_attention as ta
from gpu_course.kernels.triton_attention import route as ar

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.fixture(scope="module", autouse=True)
def built():
    assert ta.build_route(), ta.ROUTE.why


def qkv(shape, dtype):
    return tuple(torch.randn(shape, dtype=dtype, device="cuda") for _ in range(3))


@pytest.mark.parametrize("shape, dtype, causal", [((2, 3, 1000, 64), torch.float16, False),
                                                  ((2, 3, 1000, 64), torch.float16, True),
                                                  ((1, 2, 777, 128), torch.bfloat16, True),
                                                  ((1, 4, 333, 32), torch.float16, False),
                                                  ((1, 2, 200, 64), torch.float32, True)])
def test_the_forward_through_the_route_is_the_python_paths_result(shape, dtype, causal):
    q, k, v = qkv(shape, dtype)
    with ta.ROUTE.off():
        want, want_lse = ta.attention_forward(q, k, v, causal)
    ta.attention_forward(q, k, v, causal)                       # the Python path, registering the kernel
    assert ta.route_taken(q, k, v, causal), "the route did not take this kernel"
    out, lse = ta.attention_forward(q, k, v, causal)
    assert torch.equal(out, want) and torch.equal(lse, want_lse) and out.dtype == dtype
    ref = ta.naive_attention(q.double(), k.double(), v.double(), causal)
    utils.check(out, ref, atol=2e-2 if dtype == torch.bfloat16 else 1e-2, rtol=0)


@pytest.mark.parametrize("persist", [False, True])
def test_the_descriptor_kernel_on_either_grid(persist):
    if not ta.uses_descriptors(torch.empty(1, dtype=torch.float16, device="cuda")):
        pytest.skip("tensor descriptors need TMA (compute capability 9.0)")
    q, k, v = qkv((2, 5, 1500, 64), torch.float16)
    cfg = ta.persist_config(64) if persist else ta.desc_config(64)
    want, want_lse = ta.attention_forward_desc(q, k, v, True, cfg=cfg)
    entry = ar.entry_for(ta.last_forward_kernel(), dict(cfg, PERSIST=cfg.get("PERSIST", 0)), descriptors=True)
    assert entry is not None and (entry[2] > 0) == persist
    out, lse = ta.ROUTE.mod.forward(q, k, v, ta.default_scale(64), *entry)
    torch.cuda.synchronize()
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
