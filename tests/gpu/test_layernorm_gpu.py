"""Notebook 10's GPU-only paths on a real GPU, at a small size (fast): forward + backward captured in a
CUDA graph and replayed (gradients checked against torch by ``under_cuda_graph`` itself), and the
profiler's list of the backward's kernels. Skipped on the CPU."""
import pytest
import torch

import utils
from gpu_course.kernels import triton_layernorm as ln
from gpu_course.lessons import layernorm as lesson

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_under_cuda_graph_replays_correct_gradients(dtype):
    got = lesson.under_cuda_graph(64, 1000, dtype)  # raises CheckFailed if a replay's gradients are wrong
    ours = got[f"{lesson.OURS}, CUDA graph"]
    assert ours.cpu_ms < 0.05, ours           # a replay is one launch: well under 50 µs of CPU


def test_kernels_launched_lists_ours_backward():
    x, wt, b, dy = lesson.inputs(64, 1000, torch.float16)
    y = ln.layer_norm_op(x, wt, b)

    def backward():
        x.grad = wt.grad = b.grad = None
        y.backward(dy, retain_graph=True)
    names = lesson.kernels_launched(backward)
    assert any("layer_norm_bwd_dx_kernel" in n for n in names), names
    assert any("layer_norm_bwd_dwdb_kernel" in n for n in names), names


@pytest.fixture(scope="module")
def node():
    assert ln.build_node(), ln.node_status()


def grads_of(f, x, wt, b, dy):
    x, wt, b = (t.detach().clone().requires_grad_() for t in (x, wt, b))
    y = f(x, wt, b)
    y.backward(dy)
    return y.detach(), x.grad, wt.grad, b.grad


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(1000, 1000), (3, 7, 1536), (1, 4096)])
def test_the_node_gives_the_python_paths_results_bit_for_bit(node, dtype, shape):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(*shape, device="cuda", dtype=dtype, generator=g)
    wt, b = (torch.randn(shape[-1], device="cuda", dtype=dtype, generator=g) for _ in range(2))
    dy = torch.randn(*shape, device="cuda", dtype=dtype, generator=g)
    ln.layer_norm_node(x.clone().requires_grad_(), wt, b.clone().requires_grad_()).backward(dy)  # compiles
    ids = ln._node_ids(ln._rows(x), wt, b, ln._config(shape[-1], x.numel() // shape[-1], x.device))
    assert ids is not None                                         # the node takes the second step
    ref = grads_of(ln.layer_norm_op, x, wt, b, dy)
    got = grads_of(ln.layer_norm_node, x, wt, b, dy)
    for r, o in zip(ref, got):
        assert torch.equal(r, o)
    lesson.check_variants({"node": ln.layer_norm_node}, *(t.clone().requires_grad_() for t in (x, wt, b)), dy)  # float64


def test_the_nodes_graph_node_is_cpp_and_a_strided_dy_is_made_contiguous(node):
    x, wt, b, dy = lesson.inputs(256, 768, torch.float16)
    lesson.fwd_bwd(ln.layer_norm_node)(x, wt, b, dy)                   # first step: Python path
    y = ln.layer_norm_node(x, wt, b)
    assert "LayerNormNode" in y.grad_fn.name(), y.grad_fn.name()   # CppNode<...LayerNormNode>: C++ all the way
    x.grad = wt.grad = b.grad = None
    y.sum().backward()                                             # dy expanded from a scalar: strides (0, 0)
    xd = x.detach().double().requires_grad_()
    torch.nn.functional.layer_norm(xd, (768,), wt.double(), b.double()).sum().backward()
    assert torch.allclose(x.grad.double(), xd.grad, atol=2e-2, rtol=1e-2)   # fp16's tolerance (check_variants)


def test_the_node_steps_aside_for_torch_compile_and_recording(node):
    x, wt, b, dy = lesson.inputs(64, 512, torch.float16)
    lesson.fwd_bwd(ln.layer_norm_node)(x, wt, b, dy)
    with utils.launches() as rec:
        lesson.fwd_bwd(ln.layer_norm_node)(x, wt, b, dy)
    assert rec.of("triton", "layer_norm_fwd_kernel"), rec.summary()   # recorded: it went through kernel[grid]
    f = torch.compile(lambda x, wt, b: ln.layer_norm_node(x, wt, b), fullgraph=True)
    y = f(x, wt, b)
    assert torch.allclose(y, ln.layer_norm_op(x, wt, b))


def test_the_node_in_a_cuda_graph_and_its_cpu_cost(node):
    got = lesson.node_comparison(512, 2048, torch.float16)               # checks every variant's gradients
    assert got[lesson.NODE].cpu_ms < got[lesson.OURS].cpu_ms, got
