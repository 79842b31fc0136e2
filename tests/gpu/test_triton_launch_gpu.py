"""``gpu_course.triton_launch.Launcher`` on a real GPU: after a key's first launch it calls the compiled
kernel directly, with the same results as ``kernel[grid]``; a new key (another dtype, a misaligned view)
compiles its own; a ``utils.launches`` block, ``through_jit`` and a launch hook take ``kernel[grid]``."""
import pytest
import torch
import torch.nn.functional as F

import utils
from gpu_course import triton_launch
from gpu_course.kernels import triton_layernorm as ln
from gpu_course.lessons import layernorm as lesson

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.fixture(autouse=True)
def _python_launch_path():
    """These tests are about the Launcher's direct path: the matmul's C++ route, where an earlier test built
    it, would take its calls (tests/gpu/test_triton_matmul_gpu.py checks the route)."""
    from gpu_course.kernels import triton_matmul as tm
    with tm.without_route():
        yield


def _check_forward(x, wt, b):
    y, _, _ = ln.layer_norm_forward(x, wt, b, alloc=utils.poisoned)
    ref = F.layer_norm(x.double(), (x.shape[-1],), wt.double(), b.double(), 1e-5)
    utils.check(y, ref, atol=2e-2, rtol=1e-2, name="layer_norm_forward")


def test_direct_path_after_the_first_launch_gives_the_same_results():
    x, wt, b, _ = lesson.inputs(37, 777, torch.float16)
    x, wt, b = x.detach(), wt.detach(), b.detach()
    before = ln._fwd_launch.direct
    for _ in range(3):
        _check_forward(x, wt, b)
    assert ln._fwd_launch.direct >= before + 2


def test_a_misaligned_view_gets_its_own_compiled_kernel():
    x, wt, b, _ = lesson.inputs(38, 777, torch.float16)
    flat = x.detach().flatten()
    view = flat[1:1 + 37 * 777].view(37, 777)            # starts 2 bytes into the storage
    assert not triton_launch.aligned(view)
    for _ in range(3):
        _check_forward(view, wt.detach(), b.detach())
    keys = {k[1] for k in ln._fwd_launch._compiled}
    assert any(k[3] is False for k in keys) and any(k[3] is True for k in keys), keys


def test_backward_through_the_launchers_matches_torch():
    x, wt, b, dy = lesson.inputs(300, 1000, torch.float16)
    for _ in range(3):
        lesson.check_variants({"ours": lambda x, wt, b: ln.layer_norm_op(x, wt, b)}, x, wt, b, dy)
    assert ln._dx_launch.direct >= 1 and ln._dwdb_launch.direct >= 1


@pytest.mark.parametrize("how", ["recording", "through_jit", "hook"])
def test_recorded_or_hooked_launches_go_through_kernel_grid(how):
    from triton import knobs
    x, wt, b, _ = lesson.inputs(16, 512, torch.float16)
    x, wt, b = x.detach(), wt.detach(), b.detach()
    ln.layer_norm_forward(x, wt, b)                        # compiled, key known
    before = ln._fwd_launch.direct
    if how == "recording":
        with utils.launches() as seen:
            ln.layer_norm_forward(x, wt, b)
        assert [L.name for L in seen.of("triton")] == ["layer_norm_fwd_kernel"]
    elif how == "through_jit":
        with triton_launch.through_jit():
            ln.layer_norm_forward(x, wt, b)
    else:
        calls = []
        hook = lambda meta: calls.append(meta)  # noqa: E731
        chain = knobs.runtime.launch_enter_hook
        if hasattr(chain, "add"):              # a HookChain (recent Tritons)
            chain.add(hook)
        else:
            knobs.runtime.launch_enter_hook = hook
        try:
            ln.layer_norm_forward(x, wt, b)
        finally:
            if hasattr(chain, "remove"):
                chain.remove(hook)
            else:
                knobs.runtime.launch_enter_hook = chain
        assert calls
    torch.cuda.synchronize()
    assert ln._fwd_launch.direct == before
    ln.layer_norm_forward(x, wt, b)
    assert ln._fwd_launch.direct == before + 1              # and back to the direct path after


# ------------------------------------------------------------- the shipped kernels' direct path (direct(kernel))
def _shipped_calls():
    from gpu_course.kernels import triton_attention as ta, triton_matmul as tm, triton_mean as mn
    from gpu_course.kernels.triton_softmax import softmax
    g = torch.Generator(device="cuda").manual_seed(0)
    a, b = (torch.randn(320, 320, device="cuda", dtype=torch.float16, generator=g) for _ in range(2))
    x = torch.randn(64, 700, device="cuda", generator=g)
    v = torch.randn(1 << 20, device="cuda", generator=g)
    q = torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.float16, generator=g)
    return {"matmul": (lambda: tm.matmul(a, b), tm.matmul_tuned), "softmax": (lambda: softmax(x), None),
            "mean_two_pass": (lambda: mn.mean_two_pass(v), None),
            "attention forward (pointers)": (lambda: ta.attention_forward(q, q, q, descriptors=False)[0],
                                             ta.attention_fwd_tuned)}


@pytest.mark.parametrize("name", ["matmul", "softmax", "mean_two_pass", "attention forward (pointers)"])
def test_each_shipped_kernel_goes_direct_with_kernel_grids_result(name):
    call, tuner = _shipped_calls()[name]
    with triton_launch.through_jit():
        want = call()
    first = call()
    direct_before = sum(l.direct for _, l in triton_launch._LAUNCHERS.values())
    again = call()
    assert sum(l.direct for _, l in triton_launch._LAUNCHERS.values()) > direct_before
    assert torch.equal(first, want) and torch.equal(again, want)
    if tuner is not None:   # the direct path names the configuration it launched, as the autotuner would
        assert tuner.best_config is not None


def test_a_new_shape_is_tuned_then_launched_directly():
    from gpu_course.kernels import triton_matmul as tm
    a = torch.randn(192, 160, device="cuda", dtype=torch.float16)
    b = torch.randn(160, 224, device="cuda", dtype=torch.float16)
    launcher = triton_launch.direct(tm.matmul_tuned)
    n_keys, direct_before = len(tm.matmul_tuned.cache), launcher.direct
    out = [tm.matmul(a, b) for _ in range(3)]
    assert len(tm.matmul_tuned.cache) == n_keys + 1          # the autotuner saw the new shape once
    assert launcher.direct == direct_before + 2              # and the two calls after it went direct
    utils.check(out[-1], a.double() @ b.double(), atol=1e-2, rtol=1e-2)
    assert torch.equal(out[0], out[2])
