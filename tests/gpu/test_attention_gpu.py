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
from gpu_course.lessons import attention as lesson

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
    check_forward(lambda q, k, v: ta.attention_forward(q, k, v, causal, cfg=as_cfg(ta.forward_configs()[i]),
                                                       alloc=utils.poisoned), causal, d)


def check_forward(forward, causal, d):
    """``forward(q, k, v) -> (out, lse)`` on :func:`inputs` against the fp32 reference; skipped where the
    configuration does not fit in shared memory."""
    q, k, v, do = inputs(d)
    try:
        out, lse = forward(q, k, v)
    except OutOfResources as e:
        pytest.skip(f"does not fit: {e}")
    ref_out, ref_lse, _ = reference(q, k, v, do, causal)
    utils.check(out, ref_out, atol=5e-3, rtol=1e-2, name="out")
    utils.check(lse, ref_lse, atol=1e-3, rtol=1e-3, name="lse")


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("i", range(len(ta.backward_configs()[0])))
def test_every_backward_config(i, causal, d):
    dkdv, dq = ta.backward_configs()
    check_backward(lambda *a: ta.attention_backward(*a, causal, cfg=(as_cfg(dkdv[i]), as_cfg(dq[i])),
                                                    alloc=utils.poisoned), causal, d)


def check_backward(backward, causal, d):
    """``backward(q, k, v, out, lse, do) -> (dq, dk, dv)`` on :func:`inputs` (out and lse from our forward) against
    the fp32 reference; skipped where the configuration does not fit in shared memory."""
    q, k, v, do = inputs(d)
    out, lse = ta.attention_forward(q, k, v, causal)
    try:
        grads = backward(q, k, v, out, lse, do)
    except OutOfResources as e:
        pytest.skip(f"does not fit: {e}")
    _, _, ref_grads = reference(q, k, v, do, causal)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=2e-2, rtol=2e-2, name=name)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("i", range(len(ta.desc_forward_configs())))
def test_every_descriptor_forward_config(i, causal, d):
    """Each configuration of the descriptor forward's autotuner (the forward flash_attention runs on Hopper),
    pipelined (PIPE) or not, persistent (PERSIST) or not, with its descriptors' block shapes set as the autotuner's pre-hook sets them."""
    if not ta.uses_descriptors(torch.zeros(1, device="cuda", dtype=torch.float16)):
        pytest.skip("this GPU has no TMA (compute capability below 9.0)")
    c = ta.desc_forward_configs()[i]
    cfg = dict(BLOCK_M=c.kwargs["BLOCK_M"], BLOCK_N=c.kwargs["BLOCK_N"], num_warps=c.num_warps,
               num_stages=c.num_stages, PERSIST=c.kwargs["PERSIST"])
    check_forward(lambda q, k, v: ta.attention_forward_desc(q, k, v, causal, cfg=cfg, pipeline=c.kwargs["PIPE"],
                                                            alloc=utils.poisoned), causal, d)


@pytest.mark.parametrize("d", [64, 128])
def test_the_persistent_grid_has_as_many_programs_per_sm_as_an_sm_holds(d):
    """Ladder step 6's PERSIST (programs per SM) is the compiled kernel's resident blocks per SM: fewer would
    leave part of each SM empty, more would queue programs behind others."""
    if not ta.uses_descriptors(torch.zeros(1, device="cuda", dtype=torch.float16)):
        pytest.skip("this GPU has no TMA (compute capability below 9.0)")
    q, k, v = (torch.randn(2, 8, 1024, d, device="cuda", dtype=torch.float16) for _ in range(3))
    ta.attention_forward_desc(q, k, v, cfg=ta.persist_config(d))
    assert ta.resident_blocks() == ta.persist_config(d)["PERSIST"]


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("i", range(len(ta.atomic_configs())))
def test_every_atomic_backward_config(i, causal, d):
    check_backward(lambda *a: ta.attention_backward_atomic(*a, causal, cfg=as_cfg(ta.atomic_configs()[i]),
                                                           alloc=utils.poisoned), causal, d)


def test_the_autotuned_atomic_backward_is_right_after_tuning():
    """The autotuner runs the kernel once per configuration on the same dQ accumulator (zeroed before each by
    reset_to_zero) and then once for real: the result must hold one sum, not several."""
    q, k, v, do = inputs(64)
    out, lse = ta.attention_forward(q, k, v)
    grads = ta.attention_backward(q, k, v, out, lse, do, deterministic=False)
    _, _, ref_grads = reference(q, k, v, do, False)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=2e-2, rtol=2e-2, name=name)


# ------------------------------------------------ notebook 11's comparison with SDPA, and what it shows
def grad_inputs(d=64, shape=(2, 3, 1000)):
    q, k, v, do = (torch.randn(*shape, d, device="cuda", dtype=torch.float16) for _ in range(4))
    return (*(t.requires_grad_() for t in (q, k, v)), do)


def test_sdpa_baselines_run_or_say_why():
    q, k, v, do = grad_inputs()
    fns, skipped = lesson.sdpa_baselines(q, k, v, do)
    assert set(fns) | set(skipped) == set(lesson.SDPA_BACKENDS) and not set(fns) & set(skipped)
    assert all("\n" not in why for why in skipped.values()), skipped
    for feature, name in (("flash_sdpa", "SDPA flash"), ("cudnn_sdpa", "SDPA cuDNN")):
        if not utils.gpu_supports(feature)[0]:
            assert name in skipped
    if utils.gpu_supports("flash_sdpa")[0]:
        assert "SDPA flash" in fns, skipped
    for name, fn in fns.items():  # each backend that runs computes attention
        utils.check(fn(q, k, v, True).float(), F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                    is_causal=True), atol=5e-3, rtol=1e-2, name=name)


def test_time_attention_gives_user_timings_for_every_backend():
    q, k, v, do = grad_inputs(shape=(1, 2, 512))
    fns, _ = lesson.sdpa_baselines(q, k, v, do)
    times = lesson.time_attention(q, k, v, do, baselines=fns)
    assert set(times) == {(n, p) for n in ("ours", *fns) for p in ("forward", "backward")}
    assert all(t.on_gpu and t.median > 0 and t.loop_ms > 0 and t.cpu_ms > 0 for t in times.values())


def test_our_kernels_use_the_tensor_cores_of_this_gpu():
    q, k, v, do = grad_inputs()
    ops = lesson.tensor_core_instructions(q, k, v, do)
    assert set(ops) == {"forward", "dK/dV", "dQ"}
    want = "wgmma.mma_async" if utils.gpu_supports("wgmma")[0] else "mma.sync"
    assert all(any(op.startswith(want) for op in found) for found in ops.values()), ops


def test_profiler_names_our_three_backward_kernels():
    q, k, v, do = grad_inputs()
    names = lesson.profiled_kernels(lambda: torch.autograd.grad(ta.flash_attention(q, k, v), (q, k, v), do))
    forward = "attention_fwd_desc_kernel" if ta.uses_descriptors(q) else "attention_fwd_kernel"
    for kernel in (forward, "attention_bwd_delta_kernel", "attention_bwd_dkdv_kernel", "attention_bwd_dq_kernel"):
        assert any(kernel in n for n in names), names


def test_our_backward_is_deterministic_on_the_gpu():
    q, k, v, do = grad_inputs()
    assert lesson.distinct_grads(ta.flash_attention, q, k, v, do, causal=True, runs=5) == 1
