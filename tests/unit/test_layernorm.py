"""gpu_course/kernels/triton_layernorm/ on the CPU (Triton interpreter): LayerNorm and GeLU, forward
and backward, against torch in float64 with poisoned outputs and rows that are not a power of two;
``gradcheck`` in fp64 (the interpreter runs these kernels in fp64: numpy underneath, and the kernels
accumulate in fp64 for fp64 input); ``torch.library.opcheck`` on the four custom ops; and
``torch.compile(fullgraph=True)`` over a small model that calls them.

torch.compile runs with ``backend="aot_eager"``: Dynamo and AOTAutograd trace the graph (the
custom ops stay in it as single calls, their fake implementations giving the shapes), and the graph
then runs eagerly, so the ops call the Triton interpreter. Inductor also works on the CPU (it leaves a
custom op as an opaque call; tried by hand: about 9 s to compile this file's model, forward and
backward, for C++ it generates around the ops), too slow for this file; what this file checks (no
graph break, the ops in the graph, the gradients) is decided before the backend.
"""
from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F

import utils  # first: chooses the mode before triton is imported
import triton
from torch._dynamo.backends.debugging import aot_eager
from gpu_course.kernels import triton_layernorm as ln
from gpu_course.lessons import layernorm as lesson

@pytest.fixture(autouse=True)
def _on_the_course_device():
    """Tensors made here live on utils.DEVICE: the interpreter's CPU in CI, the GPU on a GPU machine."""
    before = torch.get_default_device()
    torch.set_default_device(utils.DEVICE)
    yield
    # back to no default at all when there was none (set_default_device("cpu") would leave a
    # __torch_function__ mode behind, which adds frames to every later test's stacks)
    torch.set_default_device(None if before == torch.device("cpu") else before)


H, W = 7, 300  # 7 rows: not a multiple of the backward's GROUPS; 300 features: a block of 512


def _inputs(h=H, w=W, dtype=torch.float32, grad=False):
    x = torch.randn(h, w, dtype=dtype) * 3 + 1  # a mean and a spread that are not 0 and 1
    wt = torch.randn(w, dtype=dtype)
    b = torch.randn(w, dtype=dtype)
    return [t.requires_grad_(grad) for t in (x, wt, b)]


TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=2e-2, rtol=1e-2),
       torch.bfloat16: dict(atol=1e-1, rtol=2e-2)}


# ------------------------------------------------------------------------------------- forward
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("w", [1, 300])
def test_forward_matches_float64(dtype, w):
    x, wt, b = _inputs(w=w, dtype=dtype)
    y, mean, rstd = ln.layer_norm_forward(x, wt, b, 1e-5, alloc=utils.poisoned)
    xd = x.double()
    ref = F.layer_norm(xd, (w,), wt.double(), b.double(), 1e-5)
    assert y.dtype == dtype and mean.dtype == rstd.dtype == torch.float32
    utils.check(y, ref, **TOL[dtype], name=f"y {dtype} w={w}")
    utils.check(mean, xd.mean(1), atol=1e-5, rtol=1e-5, name="mean")
    utils.check(rstd, 1 / (xd.var(1, unbiased=False) + 1e-5).sqrt(), atol=1e-5, rtol=1e-4, name="rstd")


def test_forward_strided_rows_and_3d_input():
    big = torch.randn(5, 400)
    view = big[:, 50:350]  # rows 400 apart: a view, not copied
    _, wt, b = _inputs()
    ref = F.layer_norm(view.double(), (W,), wt.double(), b.double())
    utils.check(ln.layer_norm(view, wt, b), ref, atol=1e-5, rtol=1e-5, name="strided rows")
    x3 = torch.randn(2, 3, W)
    utils.check(ln.layer_norm(x3, wt, b), F.layer_norm(x3.double(), (W,), wt.double(), b.double()),
                atol=1e-5, rtol=1e-5, name="3-d x")
    xt = torch.randn(W, 4).t()  # columns not contiguous: copied first
    utils.check(ln.layer_norm(xt, wt, b), F.layer_norm(xt.double(), (W,), wt.double(), b.double()),
                atol=1e-5, rtol=1e-5, name="transposed x")


# ------------------------------------------------------------------------------------ backward
def _torch_grads(x, wt, b, dy):
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, wt, b))
    y = F.layer_norm(xd, (x.shape[-1],), wd, bd, 1e-5)
    return torch.autograd.grad(y, (xd, wd, bd), dy.double())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("h, groups", [(7, 3), (2, 4)])  # rows shared unevenly; fewer rows than groups
def test_backward_matches_torch_autograd(dtype, h, groups):
    x, wt, b = _inputs(h=h, dtype=dtype)
    dy = torch.randn(h, W, dtype=dtype)
    _, mean, rstd = ln.layer_norm_forward(x, wt, b, 1e-5)
    cfg = ln.layer_norm_config(W, groups=groups)
    dx, dw, db = ln.layer_norm_backward(dy, x, wt, mean, rstd, cfg=cfg, alloc=utils.poisoned)
    rdx, rdw, rdb = _torch_grads(x, wt, b, dy)
    tol = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float16: dict(atol=5e-2, rtol=2e-2),
           torch.bfloat16: dict(atol=2e-1, rtol=5e-2)}[dtype]
    for name, out, ref in (("dx", dx, rdx), ("dweight", dw, rdw), ("dbias", db, rdb)):
        assert out.dtype == dtype, name
        utils.check(out, ref, **tol, name=f"{name} {dtype}")


def test_backward_is_deterministic():
    x, wt, b = _inputs()
    dy = torch.randn(H, W)
    _, mean, rstd = ln.layer_norm_forward(x, wt, b)
    first = ln.layer_norm_backward(dy, x, wt, mean, rstd)
    again = ln.layer_norm_backward(dy, x, wt, mean, rstd)
    assert all(torch.equal(p, q) for p, q in zip(first, again))


def _ln_through_torch_ops(x, wt, b):
    """The custom op called directly, as torch.compile's graph calls it (layer_norm_op takes the
    autograd.Function in eager mode)."""
    return torch.ops.gpu_course.layer_norm(x, wt, b, 1e-5)[0]


def _gelu_through_torch_ops(x):
    return torch.ops.gpu_course.gelu(x)


@pytest.mark.parametrize("wrap", [ln.layer_norm, ln.layer_norm_op, _ln_through_torch_ops])
def test_autograd_wrappers_match_torch(wrap):
    x, wt, b = _inputs(grad=True)
    dy = torch.randn(H, W)
    grads = torch.autograd.grad(wrap(x, wt, b), (x, wt, b), dy)
    for name, out, ref in zip(("dx", "dweight", "dbias"), grads, _torch_grads(x, wt, b, dy)):
        utils.check(out, ref, atol=1e-4, rtol=1e-4, name=f"{wrap.__name__} {name}")


@pytest.mark.slow
def test_gradcheck_fp64():
    # fp64 runs in fp64 end to end (the kernels' ACC dtype follows the input), so gradcheck's finite
    # differences at eps=1e-6 are meaningful; small sizes: gradcheck runs the forward twice per input
    x, wt, b = _inputs(h=3, w=5, dtype=torch.float64, grad=True)
    assert torch.autograd.gradcheck(ln.layer_norm, (x, wt, b), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(ln.layer_norm_op, (x, wt, b), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(_ln_through_torch_ops, (x, wt, b), eps=1e-6, atol=1e-6)
    xg = torch.randn(11, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ln.gelu, (xg,), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(ln.gelu_op, (xg,), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(_gelu_through_torch_ops, (xg,), eps=1e-6, atol=1e-6)


def test_eager_wrappers_skip_the_custom_op_dispatch(monkeypatch):
    """In eager mode layer_norm_op / gelu_op go straight to the autograd.Functions (the custom op's
    Python dispatch costs more CPU than the kernel's GPU time); the launchers' config is computed once
    per shape."""
    def refuse(*a, **k):
        raise AssertionError("the custom op was called in eager mode")
    x, wt, b = _inputs(grad=True)
    with monkeypatch.context() as m:
        m.setattr(torch.ops.gpu_course, "layer_norm", refuse, raising=False)
        m.setattr(torch.ops.gpu_course, "gelu", refuse, raising=False)
        ln.layer_norm_op(x, wt, b).sum().backward()
        ln.gelu_op(x).sum().backward()
    ln._CONFIGS.clear()
    calls = []
    monkeypatch.setattr(ln.launch, "layer_norm_config", lambda *a, **k: calls.append(1) or dict(
        BLOCK_W=triton.next_power_of_2(W), num_warps=4, GROUPS=4))
    for _ in range(3):
        ln.layer_norm_forward(x.detach(), wt.detach(), b.detach())
    assert len(calls) == 1
    ln._CONFIGS.clear()


# ---------------------------------------------------------------------------------------- GeLU
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gelu_forward_and_backward(dtype):
    x = (torch.randn(3, 700) * 3).to(dtype)  # 2100 elements: the last block of 1024 is short
    dy = torch.randn(3, 700).to(dtype)
    xd = x.double().requires_grad_()
    ref = F.gelu(xd)
    (rdx,) = torch.autograd.grad(ref, xd, dy.double())
    tol = TOL[dtype]
    utils.check(ln.gelu_forward(x, alloc=utils.poisoned), ref, **tol, name=f"gelu {dtype}")
    utils.check(ln.gelu_backward(dy, x, alloc=utils.poisoned), rdx, **tol, name=f"gelu' {dtype}")
    for wrap in (ln.gelu, ln.gelu_op):
        xg = x.clone().requires_grad_()
        y = wrap(xg)
        (dx,) = torch.autograd.grad(y, xg, dy)
        utils.check(y, ref, **tol, name=wrap.__name__)
        utils.check(dx, rdx, **tol, name=f"{wrap.__name__} backward")


# ----------------------------------------------------------------------------------- custom ops
def test_opcheck_on_the_custom_ops():
    # all four of opcheck's default tests run under the interpreter (a few seconds in all): the
    # schema, that autograd is registered, the fake implementations against the real ones, and
    # AOTAutograd with dynamic shapes
    x, wt, b = _inputs(h=3, w=37, grad=True)
    torch.library.opcheck(torch.ops.gpu_course.layer_norm.default, (x, wt, b, 1e-5))
    _, mean, rstd = ln.layer_norm_forward(x.detach(), wt.detach(), b.detach())
    dy = torch.randn(3, 37)
    torch.library.opcheck(torch.ops.gpu_course.layer_norm_backward.default,
                          (dy, x.detach(), wt.detach(), mean, rstd))
    xg = torch.randn(5, 9, requires_grad=True)
    torch.library.opcheck(torch.ops.gpu_course.gelu.default, (xg,))
    torch.library.opcheck(torch.ops.gpu_course.gelu_backward.default, (torch.randn(5, 9), xg.detach()))
    # a transposed input: the outputs are contiguous, and the fake implementations must say so
    xt = torch.randn(37, 3).t().requires_grad_()
    torch.library.opcheck(torch.ops.gpu_course.layer_norm.default, (xt, wt, b, 1e-5))
    torch.library.opcheck(torch.ops.gpu_course.gelu.default, (xt,))


def test_the_custom_op_statistics_are_not_differentiable():
    # mean and rstd are outputs of the op, saved for its backward, whose registered backward has no
    # gradient for them: they must not claim one (a loss on them would get a silent 0, not 1/w)
    x, wt, b = _inputs(h=3, w=37, grad=True)
    y, mean, rstd = torch.ops.gpu_course.layer_norm(x, wt, b, 1e-5)
    assert y.requires_grad
    assert not mean.requires_grad and not rstd.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.autograd.grad(mean.sum(), x)
    (dx,) = torch.autograd.grad(y.sum(), x)             # y's gradient is unchanged by the above
    (rdx,) = torch.autograd.grad(F.layer_norm(x, (37,), wt, b, 1e-5).sum(), x)
    utils.check(dx, rdx, atol=1e-5, rtol=1e-5, name="dx of y.sum()")


class TinyBlock(torch.nn.Module):
    """Linear, LayerNorm and GeLU through the custom ops, the way notebook 10's model calls them."""

    def __init__(self, d=24):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        h = ln.layer_norm_op(self.lin(x), self.norm.weight, self.norm.bias, self.norm.eps)
        return ln.gelu_op(h) + x


def test_torch_compile_fullgraph_keeps_the_custom_ops():
    torch._dynamo.reset()
    model = TinyBlock()
    graphs = []

    def backend(gm, example_inputs):  # records Dynamo's graph, then hands it to aot_eager
        graphs.append(gm)
        return aot_eager(gm, example_inputs)

    compiled = torch.compile(model, backend=backend, fullgraph=True)  # fullgraph: a break raises
    x = torch.randn(5, 24, requires_grad=True)
    out = compiled(x)
    assert len(graphs) == 1
    code = graphs[0].code
    assert "gpu_course.layer_norm" in code and "gpu_course.gelu" in code, code
    ref = F.gelu(F.layer_norm(model.lin(x), (24,), model.norm.weight, model.norm.bias)) + x
    utils.check(out, ref, atol=1e-5, rtol=1e-5, name="compiled forward")
    got = torch.autograd.grad(out.sum(), (x, model.lin.weight, model.norm.weight))
    want = torch.autograd.grad(ref.sum(), (x, model.lin.weight, model.norm.weight))
    for name, g, r in zip(("dx", "dlin.weight", "dnorm.weight"), got, want):
        utils.check(g, r, atol=1e-4, rtol=1e-4, name=f"compiled {name}")


def test_explain_finds_no_graph_break_in_the_custom_op():
    # the autograd.Function is not tried here: under the Triton interpreter Dynamo traces into the
    # interpreter's own Python and fails (a uint64 pointer offset its fake tensors do not support);
    # on a GPU, Dynamo handles a Triton launch itself, and the notebook shows what explain() says there
    torch._dynamo.reset()
    x, wt, b = _inputs()
    explained = torch._dynamo.explain(ln.layer_norm_op)(x, wt, b)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_registration_is_idempotent():
    importlib.reload(ln.op)       # runs register_ops again, as a reloaded module would
    again = importlib.reload(ln)  # what a notebook re-running its imports does
    x, wt, b = _inputs()
    utils.check(again.layer_norm_op(x, wt, b), F.layer_norm(x.double(), (W,), wt.double(), b.double()),
                atol=1e-5, rtol=1e-5, name="after reload")


# ---------------------------------------------------------------------------------- bad input
def test_bad_input_is_refused_clearly():
    x, wt, b = _inputs()
    with pytest.raises(ValueError, match="weight must have shape"):
        ln.layer_norm_forward(x, wt[:-1], b)
    with pytest.raises(ValueError, match="bias must have shape"):
        ln.layer_norm_forward(x, wt, torch.zeros(2, W))
    with pytest.raises(ValueError, match="1 to 16384"):
        big = torch.empty(1, ln.MAX_W + 1)
        ln.layer_norm_forward(big, torch.empty(ln.MAX_W + 1), torch.empty(ln.MAX_W + 1))
    with pytest.raises(TypeError, match="torch.int32"):
        ln.layer_norm_forward(x.int(), wt, b)
    with pytest.raises(ValueError, match="is empty"):
        ln.layer_norm_forward(torch.empty(0, W), wt, b)
    with pytest.raises(ValueError, match="dy has shape"):
        ln.layer_norm_backward(torch.empty(H, W + 1), x, wt, torch.empty(H), torch.empty(H))
    with pytest.raises(ValueError, match="one value per row"):
        ln.layer_norm_backward(x, x, wt, torch.empty(H - 1), torch.empty(H))
    with pytest.raises(TypeError, match="torch.int64"):
        ln.gelu_forward(torch.arange(4))
    with pytest.raises(ValueError, match="weight must have shape"):  # the custom op refuses too
        ln.layer_norm_op(x, wt[:-1], b)


def test_config_block_warps_and_groups():
    assert ln.layer_norm_config(300, device="cpu") == dict(BLOCK_W=512, num_warps=4, GROUPS=4)
    assert ln.layer_norm_config(8192, h=2, device="cpu") == dict(BLOCK_W=8192, num_warps=16, GROUPS=2)
    assert ln.layer_norm_config(ln.MAX_W, groups=132)["GROUPS"] == 132
    with pytest.raises(ValueError, match="rows of 0 features"):
        ln.layer_norm_config(0)


# ------------------------------------------------ the comparison notebook 10 and bench/layernorm.py share
def test_compare_with_torch_checks_and_times_every_variant():
    torch._dynamo.reset()
    times = lesson.compare_with_torch(3, 40, torch.float32, backend="aot_eager")
    names = list(lesson.variants(40))
    assert names == [lesson.EAGER, "torch.compile(F.layer_norm)", lesson.OURS, lesson.OP_DIRECT, lesson.OURS_COMPILED]
    assert set(times) == {(what, name) for what in lesson.bytes_moved(3, 40, 4) for name in names}
    assert all(t.median > 0 and t.loop_ms > 0 and t.cpu_ms > 0 for t in times.values())


def test_variants_take_the_paths_they_name(monkeypatch):
    # the direct variant goes through the custom op's dispatch; "ours (eager)" does not
    calls = []
    real = ln.LayerNorm.apply
    monkeypatch.setattr(ln.LayerNorm, "apply", lambda *a: calls.append("fn") or real(*a))
    x, wt, b, _ = lesson.inputs(3, 40, torch.float32)
    fns = lesson.variants(40, backend="aot_eager")
    fns[lesson.OURS](x, wt, b)
    assert calls == ["fn"]
    fns[lesson.OP_DIRECT](x, wt, b)
    assert calls == ["fn"]


def test_under_cuda_graph_checks_and_times_eager_and_ours():
    got = lesson.under_cuda_graph(3, 40, torch.float32)
    assert sorted(got) == sorted(f"{n}, CUDA graph" for n in (lesson.EAGER, lesson.OURS))
    assert all(t.loop_ms > 0 for t in got.values())


def test_on_the_calling_thread_times_both_settings_and_restores_the_engine():
    got = lesson.on_the_calling_thread(3, 40, torch.float32)
    assert list(got) == [f"{n}, {t} thread" for n in (lesson.EAGER, lesson.OURS) for t in ("worker", "calling")]
    assert all(t.loop_ms > 0 for t in got.values())
    assert torch.autograd.is_multithreading_enabled()       # the setting is left as it was


def test_backward_of_a_3d_input_and_an_expanded_gradient():
    x, wt, b, _ = lesson.inputs(6, 40, torch.float32)
    x3 = x.detach().view(2, 3, 40).requires_grad_()
    ln.layer_norm(x3, wt, b).sum().backward()               # dy: an expanded scalar, stride 0
    xd = x3.detach().double().requires_grad_()
    torch.nn.functional.layer_norm(xd, (40,), wt.detach().double(), b.detach().double()).sum().backward()
    assert x3.grad.shape == (2, 3, 40) and torch.allclose(x3.grad.double(), xd.grad, atol=1e-4)


def test_check_variants_ran_checks_the_stored_gradients():
    x, wt, b, dy = lesson.inputs(4, 30, torch.float32)
    lesson.fwd_bwd(lesson.variants(30)[lesson.OURS])(x, wt, b, dy)
    lesson.check_variants({"replayed": None}, x, wt, b, dy, ran=True)
    x.grad = x.grad * 1.01                                   # a wrong stored dx fails
    with pytest.raises(utils.CheckFailed, match="replayed: dx"):
        lesson.check_variants({"replayed": None}, x, wt, b, dy, ran=True)


def test_dtypes_here_leaves_bf16_out_on_sm75(monkeypatch):
    assert lesson.dtypes_here() == ([torch.float16, torch.bfloat16], [])   # cpu mode: both
    monkeypatch.setenv("COURSE_FAKE_CC", "7.5")                        # Colab's T4
    dtypes, skipped = lesson.dtypes_here()
    assert dtypes == [torch.float16] and len(skipped) == 1
    assert skipped[0].startswith("bfloat16: skipped on this GPU (sm_75)") and "\n" not in skipped[0]
    monkeypatch.setenv("COURSE_FAKE_CC", "8.0")
    assert lesson.dtypes_here()[0] == [torch.float16, torch.bfloat16]


def test_ulps_per_element_sees_small_values_errors():
    ref = torch.tensor([100.0, 1.0, 0.0], dtype=torch.float64)
    assert lesson.ulps_per_element(ref.clone(), ref, torch.float16) == 0
    # 2**-9 off the element 1.0 (fp16 ulp 2**-10): 2 ulps of its own; in ulps of the largest (2**-4) 0.008
    bad = ref + torch.tensor([0.0, 2.0 ** -9, 0.0], dtype=torch.float64)
    assert lesson.ulps_per_element(bad, ref, torch.float16) == 2.0
    # near 0, the floor (100 / 256 -> ulp 2**-12): an error of 2**-14 there is a quarter of it
    near0 = ref + torch.tensor([0.0, 0.0, 2.0 ** -14], dtype=torch.float64)
    assert lesson.ulps_per_element(near0, ref, torch.float16) == 0.25
    assert lesson.ulps_per_element(near0, ref, torch.float16, floor=2.0 ** -14) == 1024   # a finer floor: stricter


def test_cpu_layers_and_table():
    got = lesson.cpu_layers(3, 40, torch.float32)
    assert list(got)[:2] == ["forward launcher, through kernel[grid]", "forward launcher alone"]
    assert len(got) == 8 and all(v > 0 for v in got.values())
    t = {"a": utils.bench_user(torch.ones, 8), "b": utils.bench_user(torch.zeros, 8)}
    assert lesson.table(t, None).splitlines()[1].startswith("a ")
    table = lesson.table({("forward", "b"): t["b"], ("other", "a"): t["a"]}, "forward")
    rows = [line.split()[0] for line in table.splitlines()[1:] if not line.startswith("(")]   # in cpu mode a note follows
    assert rows == ["b"]   # the "forward" rows only


@pytest.mark.skipif(utils.ON_GPU, reason="a GPU's case is tests/gpu/test_layernorm_gpu.py's")
def test_kernels_launched_is_empty_without_a_gpu():
    ran = []
    assert lesson.kernels_launched(lambda: ran.append(1)) == [] and ran == [1]


def test_check_variants_refuses_a_wrong_gradient():
    x, wt, b, dy = lesson.inputs(4, 30, torch.float32)
    right = {"ours": lambda x, wt, b: ln.layer_norm(x, wt, b)}
    lesson.check_variants(right, x, wt, b, dy)
    # the right forward, but x.detach() cuts the gradient of x: dx is wrong (zero)
    wrong = {"detached": lambda x, wt, b: F.layer_norm(x.detach(), (30,), wt, b) + 0 * x}
    with pytest.raises(utils.CheckFailed, match="detached: dx"):
        lesson.check_variants(wrong, x, wt, b, dy)


def test_bytes_moved_and_inputs():
    assert lesson.bytes_moved(10, 20, 2) == {"forward": 800, "forward + backward": 2000}
    x, wt, b, dy = lesson.inputs(5, 7, torch.float16, seed=3)
    again = lesson.inputs(5, 7, torch.float16, seed=3)
    assert x.dtype == dy.dtype == torch.float16 and x.requires_grad and not dy.requires_grad
    assert all(torch.equal(p, q) for p, q in zip((x, wt, b, dy), again))  # the seed decides them
    # exercise 3b's reference: the time at one program per SM, scaled by the bytes
    assert lesson.backward_time_from_bytes(100.0, 132) == 100.0
    assert lesson.backward_time_from_bytes(100.0, 528) == pytest.approx(
        100.0 * lesson.backward_dram_bytes(4096, 8192, 2, 528) / lesson.backward_dram_bytes(4096, 8192, 2, 132))



def test_python_backward_floor_times_both_nodes_on_both_threads():
    got = lesson.python_backward_floor(3, 40, torch.float32)
    assert sorted(got) == sorted(f"{n}, {t} thread" for n in (lesson.TIMES1_CPP, lesson.TIMES1_PY)
                                 for t in ("worker", "calling"))
    x = torch.randn(3, 4, requires_grad=True)
    lesson.Times1.apply(x, None, None).backward(torch.full((3, 4), 2.0))
    assert torch.equal(x.grad, torch.full((3, 4), 2.0))


def test_a_forward_without_gradients_saves_no_statistics():
    x, wt, b, _ = lesson.inputs(5, 300, torch.float32)
    with torch.no_grad():
        y = ln.layer_norm_op(x, wt, b)
    ref = torch.nn.functional.layer_norm(x.double(), (300,), wt.double(), b.double())
    utils.check(y, ref, atol=1e-4, rtol=1e-4)
    y2, mean, rstd = ln._forward(x.detach(), wt.detach(), b.detach(), 1e-5, None, utils.poisoned, save=False)
    assert mean is None and rstd is None
    utils.check(y2, ref, atol=1e-4, rtol=1e-4)


def test_layer_norm_op_takes_the_node_route_once_built(monkeypatch):
    """layer_norm_op goes through the C++ node's entry point once build_node() set it, and says so; the node's
    own fallback is the Python path (no recursion back into layer_norm_op)."""
    from gpu_course.kernels.triton_layernorm import op
    x, wt, b, dy = lesson.inputs(4, 48, torch.float32)
    assert "not built" in ln.layer_norm_route()
    calls = []
    monkeypatch.setitem(op._ROUTE, "node", lambda *a: calls.append(a) or ln.layer_norm_python(*a))
    y = ln.layer_norm_op(x, wt, b)
    y.backward(dy)
    assert len(calls) == 1 and "C++ autograd node" in ln.layer_norm_route()
    lesson.check_variants({"layer_norm_op": ln.layer_norm_op}, x, wt, b, dy)
    monkeypatch.setitem(op._ROUTE, "node", ln.layer_norm_node)   # not built here: the node falls back
    lesson.check_variants({"layer_norm_op via the node's entry": ln.layer_norm_op}, x, wt, b, dy)


def test_what_a_model_calls_gives_rounds_and_the_route():
    route, taken = lesson.what_a_model_calls(5, 40, torch.float32, rounds=2)
    assert "autograd.Function" in route and set(taken) == {lesson.EAGER, lesson.MODEL}
    assert len(taken[lesson.MODEL]) == 2 and len(lesson.loop_speedups(taken)) == 2


def test_a_stack_of_layers_is_timed_under_one_backward():
    calls = []
    f = lesson.stacked(lambda x, wt, b: calls.append(1) or x * wt + b, 3)
    x = torch.ones(2, requires_grad=True)
    f(x, torch.full((2,), 2.0), torch.ones(2)).sum().backward()
    assert len(calls) == 3 and x.grad.tolist() == [8.0, 8.0]       # d/dx of 2(2(2x+1)+1)+1
    route, taken = lesson.what_a_model_calls(5, 40, torch.float32, rounds=1, layers=3)
    assert set(taken) == {lesson.EAGER, lesson.MODEL} and len(taken[lesson.EAGER]) == 1


@pytest.mark.parametrize("layers", [0, -1, 2.0, True, None])
def test_what_a_model_calls_refuses_a_bad_layer_count(layers):
    with pytest.raises(ValueError, match="layers must be a positive int"):
        lesson.what_a_model_calls(5, 40, torch.float32, rounds=1, layers=layers)

