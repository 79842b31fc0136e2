"""Notebook 11's FlashAttention on a real GPU: every configuration the autotuners may choose (the CPU
tests run one small block) gives the right output, LSE and gradients, fp16 at d 64 and 128, causal
and not, N not a multiple of any block; a configuration too big for shared memory is skipped.
Skipped on the CPU."""
import pytest
import torch
import torch.nn.functional as F

import utils  # first: chooses the mode before triton is imported
from triton.runtime.errors import OutOfResources  # noqa: E402
from gpu_course.kernels import triton_attention as ta

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")
SHAPE = (2, 3, 1000, None)  # (batch, heads, N, d)


def as_cfg(c):
    return dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)


def inputs(d):
    g = torch.Generator(device="cuda").manual_seed(d)
    return [torch.randn(*SHAPE[:3], d, device="cuda", dtype=torch.float16, generator=g) for _ in range(4)]


def reference(q, k, v, do, causal):
    ins = [t.float().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*ins, is_causal=causal)
    s = ins[0] @ ins[1].transpose(-2, -1) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    return out.detach(), torch.logsumexp(s, -1).detach(), torch.autograd.grad(out, ins, do.float())


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("i", range(len(ta.forward_configs())))
def test_every_forward_config(i, causal, d):
    q, k, v, do = inputs(d)
    try:
        out, lse = ta.attention_forward(q, k, v, causal, cfg=as_cfg(ta.forward_configs()[i]), alloc=utils.poisoned)
    except OutOfResources as e:
        pytest.skip(f"does not fit: {e}")
    ref_out, ref_lse, _ = reference(q, k, v, do, causal)
    utils.check(out, ref_out, atol=5e-3, rtol=1e-2, name="out")
    utils.check(lse, ref_lse, atol=1e-3, rtol=1e-3, name="lse")


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("i", range(len(ta.backward_configs()[0])))
def test_every_backward_config(i, causal, d):
    q, k, v, do = inputs(d)
    out, lse = ta.attention_forward(q, k, v, causal)
    dkdv, dq = ta.backward_configs()
    try:
        grads = ta.attention_backward(q, k, v, out, lse, do, causal, cfg=(as_cfg(dkdv[i]), as_cfg(dq[i])),
                                      alloc=utils.poisoned)
    except OutOfResources as e:
        pytest.skip(f"does not fit: {e}")
    _, _, ref_grads = reference(q, k, v, do, causal)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=2e-2, rtol=2e-2, name=name)
