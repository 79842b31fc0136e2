"""``gpu_course.triton_launch`` without a GPU: the specialisation kinds, and a Launcher that, in cpu mode,
is ``kernel[grid]`` (the interpreter has no compiled kernel to call)."""
import pytest
import torch

import utils
from gpu_course import triton_launch
from gpu_course.interpose.triton import hook_active
from gpu_course.kernels import triton_layernorm as ln
from gpu_course.lessons import layernorm as lesson


@pytest.mark.parametrize("v, kind", [(1, "one"), (0, "x16"), (16, "x16"), (-32, "x16"), (17, "int"),
                                     (2 ** 31 - 1, "int"), (2 ** 31, "i64"), (2 ** 40 + 16, "i64")])
def test_int_kind(v, kind):
    assert triton_launch.int_kind(v) == kind


def test_aligned():
    t = torch.zeros(64, dtype=torch.float16)
    assert triton_launch.aligned(t) and not triton_launch.aligned(t[1:])


def test_through_jit_restores_the_direct_path_after_an_error():
    with pytest.raises(ZeroDivisionError):
        with triton_launch.through_jit():
            1 / 0
    assert triton_launch._DIRECT[0] is True


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the interpreter")
def test_cpu_mode_launches_through_the_interpreter():
    x, wt, b, _ = lesson.inputs(3, 40, torch.float32)
    before = ln._fwd_launch.direct
    y, _, _ = ln.layer_norm_forward(x.detach(), wt.detach(), b.detach(), alloc=utils.poisoned)
    utils.check(y, torch.nn.functional.layer_norm(x.double(), (40,), wt.double(), b.double()), atol=1e-4)
    assert ln._fwd_launch.direct == before == 0


def test_an_empty_hook_chain_is_no_hook():
    class Chain:
        def __init__(self, calls):
            self.calls = calls
    assert not hook_active(None) and not hook_active(Chain([]))
    assert hook_active(Chain([print])) and hook_active(print)


def test_while_torch_compile_traces_every_launch_is_kernel_grid(monkeypatch):
    """Dynamo knows kernel[grid](...) as a Triton launch; the direct path is not traced."""
    launched = []

    class Kernel:
        arg_names = ["x", "BLOCK"]

        def __getitem__(self, grid):
            return lambda *a, **k: launched.append((grid, a, k)) or "compiled"

    launch = triton_launch.Launcher(Kernel())
    monkeypatch.setattr(triton_launch, "ON_GPU", True)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    for _ in range(3):
        assert launch((4,), "key", "x", BLOCK=16) == "compiled"
    assert launched == [((4,), ("x",), {"BLOCK": 16})] * 3 and launch.direct == 0 and not launch._compiled


def test_a_launch_key_traces_under_torch_compile_fullgraph():
    """The key is made before the launch, so Dynamo traces it too: data_ptr() broke the LayerNorm
    autograd.Function's graph on a GPU ("Failed to trace builtin operator `mod`")."""
    def f(t):
        key = (t.dtype, triton_launch.aligned(t), triton_launch.int_kind(t.stride(0)))
        return t * 2 if key[1] else t * 3

    t = torch.randn(4, 5)
    assert torch.equal(torch.compile(f, fullgraph=True, backend="eager")(t), t * 2)
    assert triton_launch.aligned(t) and not triton_launch.aligned(torch.randn(9)[1:])


def test_in_cpu_mode_nothing_is_compiled_for_the_direct_path_and_the_node_says_why():
    from gpu_course.triton_launch import direct_allowed
    assert not direct_allowed()
    assert ln._fwd_launch.compiled(("any key",), BLOCK_W=64) is None
    assert ln.build_node() is False and "cpu mode" in ln.node_status()
    x, wt, b, dy = lesson.inputs(5, 48, torch.float32)
    lesson.check_variants({"layer_norm_node": ln.layer_norm_node}, x, wt, b, dy)   # it is layer_norm_op here
    assert lesson.NODE not in lesson.variants(48, backend="aot_eager")
