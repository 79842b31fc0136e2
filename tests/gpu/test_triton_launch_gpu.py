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
