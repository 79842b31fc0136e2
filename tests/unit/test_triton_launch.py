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
    monkeypatch.setattr(triton_launch, "_LAUNCHERS", {})   # the fakes' launchers stay out of the real registry
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


# ------------------------------------------------ the direct path's key logic, with a fake compiled kernel
class FakeCompiled:
    """What a Launcher needs of a CompiledKernel: ``run`` with Triton 3.x's launcher signature."""
    packed_metadata, function = "meta", "fn"

    def __init__(self):
        self.runs = []

    def run(self, gridX, gridY, gridZ, stream, function, *args):
        self.runs.append(((gridX, gridY, gridZ), args[4:]))   # after packed metadata and the three hooks


class FakeJIT:
    """``kernel[grid](*args, **constexprs)`` that records each normal-path launch and returns a FakeCompiled."""
    arg_names = ["x", "n", "scale", "BLOCK"]

    def __init__(self):
        self.normal, self.ck = [], FakeCompiled()

    def __getitem__(self, grid):
        def launch(*args, **consts):
            self.normal.append((grid, args, consts))
            return self.ck
        return launch


class FakeTuner(FakeJIT):
    """An autotuner of FakeJIT keyed on ``n``: it 'tunes' on a new n (BLOCK = 16 for n < 100, else 32)."""
    keys, configs, fn = ["n"], [1, 2], "fn"
    user_defined_pre_hook = user_defined_post_hook = False
    reset_to_zero = restore_value = []

    def __getitem__(self, grid):
        def launch(*args, **consts):
            block = 16 if args[1] < 100 else 32
            self.best_config = type("Cfg", (), {"pre_hook": None, "all_kwargs": lambda s: {"BLOCK": block,
                                                                                          "num_warps": 4}})()
            meta = dict(zip(self.arg_names, args), BLOCK=block)
            self.normal.append((grid(meta) if callable(grid) else grid, args, consts))
            return self.ck
        return launch


@pytest.fixture
def on_fake_gpu(monkeypatch):
    """cpu mode acting as a GPU for the Launcher: device 0 current, stream 7, no hooks."""
    device = [0]
    monkeypatch.setattr(triton_launch, "ON_GPU", True)
    monkeypatch.setattr(triton_launch, "_LAUNCHERS", {})   # the fakes' launchers stay out of the real registry
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: device[0], raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 7, raising=False)
    return device


def test_the_second_call_of_a_key_goes_to_the_compiled_kernel(on_fake_gpu):
    k = FakeJIT()
    x = torch.zeros(64)
    launch = triton_launch.direct(k)
    assert triton_launch.direct(k) is launch
    for _ in range(3):
        assert launch[(4,)](x, 48, 0.5, BLOCK=16) is k.ck
    assert len(k.normal) == 1 and launch.direct == 2
    assert k.ck.runs == [((4, 1, 1), (x, 48, 0.5, 16))] * 2   # runtime args, then the constexprs


@pytest.mark.parametrize("change", ["dtype", "alignment", "int kind", "constexpr", "device", "unkeyable"])
def test_a_new_key_falls_back_to_the_normal_path(on_fake_gpu, change):
    k = FakeJIT()
    launch = triton_launch.Launcher(k)
    x = torch.zeros(64)
    launch[(4,)](x, 48, 0.5, BLOCK=16)
    args, consts = [x, 48, 0.5], dict(BLOCK=16)
    if change == "dtype":
        args[0] = x.half()
    elif change == "alignment":
        args[0] = x[1:]
    elif change == "int kind":
        args[1] = 1
    elif change == "constexpr":
        consts["BLOCK"] = 32
    elif change == "device":
        on_fake_gpu[0] = 1
    else:
        args[2] = object()   # no key for it: always kernel[grid]
    launch[(4,)](*args, **consts)
    assert len(k.normal) == 2 and launch.direct == 0
    if change != "unkeyable":   # the new key's second call is direct
        launch[(4,)](*args, **consts)
        assert len(k.normal) == 2 and launch.direct == 1


def test_an_autotuned_kernel_tunes_each_new_key_then_launches_its_choice(on_fake_gpu):
    k = FakeTuner()
    launch = triton_launch.Launcher(k)
    x = torch.zeros(64)
    grid = lambda meta: (meta["n"] // meta["BLOCK"],)   # noqa: E731
    for n in (48, 48, 480, 480, 48):
        launch(grid, None, x, n, 0.5)
    assert [g for g, _, _ in k.normal] == [(3,), (15,)]      # two keys: n is the tuner's key, kept exactly
    assert k.ck.runs == [((3, 1, 1), (x, 48, 0.5, 16)), ((15, 1, 1), (x, 480, 0.5, 32)),
                         ((3, 1, 1), (x, 48, 0.5, 16))]
    assert k.best_config.all_kwargs()["BLOCK"] == 16          # the last call's choice, as the tuner would say


def test_an_autotuner_with_hooks_never_goes_direct(on_fake_gpu):
    k = FakeTuner()
    k.reset_to_zero = ["x"]
    launch = triton_launch.Launcher(k)
    for _ in range(3):
        launch(lambda meta: (1,), None, torch.zeros(64), 48, 0.5)
    assert len(k.normal) == 3 and launch.direct == 0


def test_hooks_or_a_recording_block_send_a_known_key_back_to_the_normal_path(on_fake_gpu, monkeypatch):
    k = FakeJIT()
    launch = triton_launch.Launcher(k)
    x = torch.zeros(64)
    launch[(4,)](x, 48, 0.5, BLOCK=16)
    monkeypatch.setattr(triton_launch._triton, "launch_hooks_set", lambda: True)
    launch[(4,)](x, 48, 0.5, BLOCK=16)
    with triton_launch.through_jit():
        monkeypatch.setattr(triton_launch._triton, "launch_hooks_set", lambda: False)
        launch[(4,)](x, 48, 0.5, BLOCK=16)
    assert len(k.normal) == 3 and launch.direct == 0


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the interpreter")
def test_the_shipped_kernels_give_the_same_results_through_their_launchers():
    """cpu mode: every launch defers to kernel[grid] (the interpreter compiles nothing), results unchanged."""
    from gpu_course.kernels import triton_attention as ta, triton_matmul as tm, triton_mean as mn
    from gpu_course.kernels.triton_softmax import softmax, softmax_rows_kernel
    shipped = (tm.matmul_tuned, softmax_rows_kernel, mn.partial_sums_kernel, ta.attention_fwd_tuned)
    before = [triton_launch.direct(k).direct for k in shipped]
    torch.manual_seed(0)
    a, b = torch.randn(40, 24), torch.randn(24, 36)
    utils.check(tm.matmul(a, b), a.double() @ b.double(), atol=1e-4)
    x = torch.randn(5, 70)
    utils.check(softmax(x), torch.softmax(x.double(), 1), atol=1e-6)
    v = torch.randn(5000)
    for f in (mn.mean_serial, mn.mean_two_pass, mn.mean_atomic):
        assert abs(float(f(v)) - float(v.double().mean())) < 1e-5
    q, kk, vv = (torch.randn(1, 2, 20, 16) for _ in range(3))
    out, _ = ta.attention_forward(q, kk, vv)
    utils.check(out, ta.naive_attention(q.double(), kk.double(), vv.double()), atol=1e-4)
    assert [triton_launch.direct(k).direct for k in shipped] == before
