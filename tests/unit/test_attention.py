"""gpu_course/kernels/triton_attention.py (notebook 11): the plain-torch attentions and the Triton
FlashAttention forward and backward, on the CPU through Triton's interpreter, against float64 torch
(scaled_dot_product_attention, logsumexp, autograd) with poisoned outputs, at tiny sizes whose N is
not a multiple of the blocks. The interpreter costs milliseconds per program: few cases, small grids.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import utils
from gpu_course.kernels import triton_attention as ta

# (batch, heads, N, d): N = 1 (one row), 17 and 100 (ragged last blocks), 64 (a multiple of every block)
SHAPES = [(1, 2, 1, 16), (1, 2, 17, 16), (2, 2, 64, 16), (1, 2, 100, 64)]


def qkv(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(utils.DEVICE, dtype) for _ in range(3)]


def reference(q, k, v, do, causal, scale=None):
    """float64 output, LSE and gradients from torch."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal, scale=scale)
    s = q64 @ k64.transpose(-2, -1) * ta.default_scale(q.shape[-1], scale)
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    grads = torch.autograd.grad(out, (q64, k64, v64), do.double())
    return out.detach(), torch.logsumexp(s, dim=-1).detach(), grads


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_forward_lse_and_backward_match_float64(shape, causal):
    q, k, v = qkv(shape, seed=shape[2])
    do = qkv(shape, seed=99)[0]
    out, lse = ta.attention_forward(q, k, v, causal, alloc=utils.poisoned)
    ref_out, ref_lse, ref_grads = reference(q, k, v, do, causal)
    utils.check(out, ref_out, atol=1e-5, rtol=1e-4, name="out")
    utils.check(lse, ref_lse, atol=1e-5, rtol=1e-5, name="lse")
    grads = ta.attention_backward(q, k, v, out, lse, do, causal, alloc=utils.poisoned)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-4, rtol=1e-4, name=name)


@pytest.mark.parametrize("causal", [False, True])
def test_blocks_of_different_sizes(causal):
    """The GPU's configurations have BLOCK_M != BLOCK_N: the causal split into unmasked and masked
    stages must then still visit each block once (here with 32 x 16 and 16 x 32 blocks)."""
    shape = (1, 2, 83, 16)
    q, k, v = qkv(shape, seed=3)
    do = qkv(shape, seed=4)[0]
    ref_out, ref_lse, ref_grads = reference(q, k, v, do, causal, scale=0.3)
    out, lse = ta.attention_forward(q, k, v, causal, scale=0.3, alloc=utils.poisoned,
                                    cfg=dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1))
    utils.check(out, ref_out, atol=1e-5, rtol=1e-4, name="out")
    utils.check(lse, ref_lse, atol=1e-5, rtol=1e-5, name="lse")
    cfg = (dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1),   # dK/dV: a wide key block
           dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1))   # dQ: a tall query block
    grads = ta.attention_backward(q, k, v, out, lse, do, causal, scale=0.3, cfg=cfg, alloc=utils.poisoned)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-4, rtol=1e-4, name=name)


def test_flash_attention_autograd_fp16_and_non_contiguous_inputs():
    # q, k, v as a model makes them: (B, N, H, d) transposed to (B, H, N, d), not contiguous
    q, k, v = (t.transpose(1, 2) for t in qkv((2, 40, 2, 32), dtype=torch.float16, seed=5))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    do = qkv((2, 2, 40, 32), seed=6)[0].half()
    out = ta.flash_attention(q, k, v, causal=True)
    out.backward(do)
    ref_out, _, ref_grads = reference(q, k, v, do, True)
    utils.check(out, ref_out, atol=2e-3, rtol=1e-2, name="fp16 out")
    for g, r, name in zip((q.grad, k.grad, v.grad), ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-2, rtol=1e-2, name=f"fp16 {name}")


def test_bf16_on_the_gpu():
    if not utils.ON_GPU:
        pytest.skip("tl.dot on bf16 is wrong in Triton's interpreter (3.9: a 16x16 dot is off by ~1e10)")
    q, k, v = (t.requires_grad_() for t in qkv((2, 2, 300, 64), dtype=torch.bfloat16, seed=7))
    out = ta.flash_attention(q, k, v)
    out.backward(torch.ones_like(out))
    ref_out, _, ref_grads = reference(q, k, v, torch.ones_like(out), False)
    utils.check(out, ref_out, atol=2e-2, rtol=2e-2, name="bf16 out")
    utils.check(q.grad, ref_grads[0], atol=5e-2, rtol=5e-2, name="bf16 dq")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block", [1, 16, 33, 1000])
def test_online_softmax_matches_naive_and_sdpa(causal, block):
    q, k, v = (t.double() for t in qkv((2, 3, 50, 8), seed=8))
    naive = ta.naive_attention(q, k, v, causal)
    utils.check(naive, F.scaled_dot_product_attention(q, k, v, is_causal=causal), atol=1e-12, rtol=1e-10,
                name="naive vs sdpa")
    utils.check(ta.online_softmax_attention(q, k, v, causal, block), naive, atol=1e-12, rtol=1e-10,
                name=f"online, block {block}")
    q32, k32, v32 = (t.float() for t in (q, k, v))  # fp32 inputs: fp32 statistics
    utils.check(ta.online_softmax_attention(q32, k32, v32, causal, block, scale=0.5),
                ta.naive_attention(q, k, v, causal, scale=0.5), atol=1e-5, rtol=1e-4, name="online fp32")


def test_flop_counts():
    assert ta.attention_flops(1, 1, 10, 4) == 1600
    assert ta.attention_flops(1, 1, 10, 4, causal=True) == 800
    assert ta.attention_flops(1, 1, 10, 4, causal=True, backward=True) == 2000


@pytest.mark.parametrize("args, error, match", [
    ((torch.zeros(2, 8, 16),) * 3, ValueError, "shape \\(batch, heads, N, d\\)"),
    ((torch.zeros(1, 1, 8, 16), torch.zeros(1, 1, 9, 16), torch.zeros(1, 1, 8, 16)), ValueError, "one shape"),
    ((torch.zeros(1, 1, 8, 48),) * 3, ValueError, "head dimension d must be one of"),
    ((torch.zeros(1, 1, 0, 16),) * 3, ValueError, "at least 1"),
    ((torch.zeros(1, 1, 8, 16, dtype=torch.float64),) * 3, TypeError, "dtype must be one of"),
    ((torch.zeros(1, 1, 8, 16), torch.zeros(1, 1, 8, 16).half(), torch.zeros(1, 1, 8, 16)), TypeError,
     "one dtype"),
    ((torch.zeros(1, 1, 8, 16).numpy(),) * 3, TypeError, "must be a torch.Tensor"),
])
def test_bad_inputs_get_clear_errors(args, error, match):
    with pytest.raises(error, match=match):  # refused before any launch
        ta.flash_attention(*args)


def test_bad_configurations_and_blocks_are_refused():
    q = torch.zeros(1, 1, 8, 16)
    with pytest.raises(ValueError, match="BLOCK_M must be a multiple of BLOCK_N"):
        ta.attention_forward(q, q, q, cfg=dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1))
    with pytest.raises(ValueError, match="block must be at least 1"):
        ta.online_softmax_attention(q, q, q, block=0)
    with pytest.raises(ValueError, match="out and dout must have q's shape"):
        ta.attention_backward(q, q, q, q, torch.zeros(1, 1, 7), q)


# ----------------------------------------------- the comparison with SDPA that notebook 11 and the bench share
def test_errors_like_sdpa_reports_both_and_refuses_a_wrong_attention(monkeypatch):
    # fp16: SDPA's flash backend (used on a GPU) takes no fp32
    q, k, v = (t.requires_grad_() for t in qkv((1, 2, 20, 16), dtype=torch.float16, seed=10))
    do = qkv((1, 2, 20, 16), dtype=torch.float16, seed=11)[0]
    errors = ta.errors_like_sdpa(q, k, v, do, causal=True)
    assert list(errors) == ["out", "dq", "dk", "dv"]
    assert all(0 <= ours < 1e-2 and 0 <= theirs < 1e-2 for ours, theirs in errors.values())
    # an attention that forgets the causal mask must be caught
    monkeypatch.setattr(ta, "flash_attention", lambda q, k, v, causal: ta.naive_attention(q, k, v, not causal))
    with pytest.raises(utils.CheckFailed, match="causal=True: out errs by"):
        ta.errors_like_sdpa(q, k, v, do, causal=True)


def test_time_attention_times_forward_and_backward_of_both():
    q, k, v = (t.requires_grad_() for t in qkv((1, 1, 17, 16), dtype=torch.float16, seed=12))
    times = ta.time_attention(q, k, v, torch.ones_like(q), causal=False, reps=1)
    assert set(times) == {(n, p) for n in ("ours", "sdpa") for p in ("forward", "backward")}
    assert all(t.n == 1 and t.median > 0 for t in times.values())


def test_forward_memory_and_configs_in_cpu_mode():
    if utils.ON_GPU:
        pytest.skip("cpu mode: the GPU's numbers are tests/gpu's")
    rows = ta.forward_memory(1, 2, 16, [5, 33])
    assert [(r["n"], r["scores"], r["naive"], r["ours"]) for r in rows] == [(5, 100, None, None),
                                                                             (33, 4356, None, None)]
    with pytest.raises(RuntimeError, match="GPU only"):
        ta.forward_peak_memory(lambda: None)
    assert ta.config_str(None) == "-"
    assert ta.config_str(ta.fwd_config(128, 64, 4, 8)) == "128x64 w8 s4"
    assert set(ta.tuned_configs()) == {"forward", "dkdv", "dq"}
