"""Unit tests of gpu_course/launches.py in cpu mode: the Triton interpreter, the Numba simulator and
a fake CUDA C module with launch counters. (On a GPU, tests/gpu would run the same on the real
launch paths: JITFunction.run and numba's _LaunchConfiguration.__call__.)"""
import subprocess
import sys
import types

import utils  # first: it sets the simulator switches that numba and triton read at import

import numba
import pytest
import torch
import triton
import triton.language as tl
from numba import cuda

from gpu_course.cuda import counters
from gpu_course.interpose.numba import gpu_launch_hook
from gpu_course.interpose.triton import run_hook
from gpu_course.cuda import launch_counts
from gpu_course.launches import dims3, launches

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu-mode launch paths (interpreter, simulator)"),
              pytest.mark.usefixtures("without_nvcc_check")]   # builds that test other things


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=mask) * 2, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def double_tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=mask) * 2, mask=mask)


@cuda.jit(device=True)
def twice(v):
    return v * 2


@cuda.jit
def double_numba(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = twice(x[i])


def _hooked_attrs():
    """The class attributes the hooks replace, to compare before and after."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    return {(c.__name__, a): c.__dict__.get(a) for c in (JITFunction, InterpretedFunction, FakeCUDAKernel)
            for a in ("run", "__getitem__", "__call__")}


def test_triton_launch_is_recorded_with_grid_and_memory():
    x, out = torch.arange(100.0), utils.poisoned(100)
    with launches() as seen:
        double_kernel[(utils.cdiv(100, 32),)](x, out, 100, BLOCK=32)
        double_kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100, BLOCK=64)
    assert torch.equal(out, x * 2)
    first, second = seen.of("triton")
    assert first.name == "double_kernel" and first.module == __name__ and first.finished
    assert first.kernel is double_kernel and first.fn is double_kernel.fn
    assert first.grid == (4, 1, 1) and second.grid == (2, 1, 1)  # a callable grid, resolved
    ptrs = {b.name: b.ptr for b in first.buffers}
    assert ptrs == {"x_ptr": x.data_ptr(), "out_ptr": out.data_ptr()}
    assert seen.writers_of(out[10:20]) == [first, second]  # a view lies inside the storage
    assert "grid=(4,)" in repr(first)


def test_autotuned_kernel_is_recorded_as_the_kernel_it_wraps():
    x, out = torch.arange(100.0), utils.poisoned(100)
    with launches() as seen:
        double_tuned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
    (launch,) = seen.of("triton")
    assert launch.fn is double_tuned.fn.fn and launch.grid == (2, 1, 1)
    assert launch.kwargs["BLOCK"] == 64


def test_hooks_are_put_back_on_exit_and_when_the_block_raises():
    before = _hooked_attrs()
    with launches():
        assert _hooked_attrs() != before
    assert _hooked_attrs() == before
    with pytest.raises(ZeroDivisionError):
        with launches():
            1 / 0
    assert _hooked_attrs() == before
    x, out = torch.ones(10), utils.poisoned(10)
    with launches() as seen:
        pass
    double_kernel[(1,)](x, out, 10, BLOCK=16)  # after the block: not recorded
    assert len(seen) == 0


def test_a_failing_launch_is_recorded_as_unfinished():
    x = torch.ones(10)
    with launches() as seen:
        with pytest.raises(Exception):
            double_kernel[(1,)](x, "not a tensor", 10, BLOCK=16)
    (launch,) = seen
    assert not launch.finished and launch.error


def test_nested_logs_both_record_and_restore_once():
    before = _hooked_attrs()
    x, out = torch.ones(10), utils.poisoned(10)
    with launches() as outer:
        double_kernel[(1,)](x, out, 10, BLOCK=16)
        with launches() as inner:
            double_kernel[(1,)](x, out, 10, BLOCK=16)
        assert _hooked_attrs() != before  # the outer block still records
        double_kernel[(1,)](x, out, 10, BLOCK=16)
    assert (len(outer), len(inner)) == (3, 1)
    assert _hooked_attrs() == before


def test_gpu_launch_paths_on_stand_ins():
    """The GPU hooks (JITFunction.run, _LaunchConfiguration.__call__) around stand-ins that behave
    like the real methods: a callable grid resolved by the launch, warm-up calls not recorded."""
    calls = []

    def jit_run(self, *args, grid, warmup, **kwargs):  # as triton's JITFunction.run
        calls.append(grid({"BLOCK": 32}) if callable(grid) else grid)
    jit = types.SimpleNamespace(fn=double_kernel.fn, arg_names=["x_ptr", "out_ptr", "n", "BLOCK"])
    run = run_hook(jit_run)
    x = torch.ones(100)
    with launches() as seen:
        run(jit, x, x, 100, grid=lambda meta: (triton.cdiv(100, meta["BLOCK"]),), warmup=False, BLOCK=32)
        run(jit, x, x, 100, grid=(1,), warmup=True, BLOCK=32)  # compiles only: not a launch

    def config_call(self, *args):  # as numba's _LaunchConfiguration.__call__
        calls.append(args)
    config = types.SimpleNamespace(dispatcher=double_numba, griddim=(2, 1, 1), blockdim=(32, 1, 1))
    with launches(snapshot=True) as numba_seen:
        gpu_launch_hook(config_call)(config, x.numpy(), x.numpy())
    (t,) = seen
    assert (t.name, t.grid, t.kwargs, [b.name for b in t.buffers]) == (
        "double_kernel", (4, 1, 1), {"BLOCK": 32}, ["x_ptr", "out_ptr"])
    (n,) = numba_seen
    assert (n.name, n.grid, n.block, n.finished) == ("double_numba", (2, 1, 1), (32, 1, 1), True)
    assert numba_seen.changed_since_launch(x, n) is False and len(calls) == 3


def test_numba_simulator_launch_is_recorded_but_not_device_calls():
    x, out = torch.arange(50.0), utils.poisoned(50)
    with launches() as seen:
        double_numba[2, 32](utils.to_numba(x), utils.to_numba(out))
    assert torch.equal(out, x * 2)
    (launch,) = seen.of("numba")
    assert launch.kernel is double_numba and launch.fn is double_numba.py_func
    assert (launch.grid, launch.block) == ((2, 1, 1), (32, 1, 1))
    assert [b.name for b in launch.buffers] == ["x", "out"]
    assert seen.writers_of(out) == [launch] and seen.writers_of(torch.ones(3)) == []


def test_snapshot_tells_whether_the_output_changed_after_the_launch():
    x, out = torch.arange(50.0), utils.poisoned(50)
    with launches(snapshot=True) as seen:
        double_kernel[(1,)](x, out, 50, BLOCK=64)
    (launch,) = seen
    assert seen.changed_since_launch(out, launch) is False
    out[3] = -1.0
    assert seen.changed_since_launch(out, launch) is True
    assert seen.changed_since_launch(out[10:], launch) is False  # the view's bytes only
    with launches() as no_snap:
        double_kernel[(1,)](x, out, 50, BLOCK=64)
    assert no_snap.changed_since_launch(out, no_snap.launches[0]) is None  # cannot tell


def test_only_the_latest_snapshot_of_a_buffer_is_kept():
    x, out = torch.arange(50.0), utils.poisoned(50)
    with launches(snapshot=True) as seen:
        for _ in range(3):  # as an autotuner's benchmark launches would
            double_kernel[(1,)](x, out, 50, BLOCK=64)
    kept = [[b.snapshot is not None for b in launch.buffers] for launch in seen]
    assert kept == [[False, False], [False, False], [True, True]]
    assert seen.changed_since_launch(out, seen.launches[-1]) is False
    with launches(snapshot=True, snapshot_limit=250) as small:  # room for x (200 bytes) only
        double_kernel[(1,)](x, out, 50, BLOCK=64)
    assert small.changed_since_launch(out, small.launches[0]) is None


class FakeCudaModule(types.ModuleType):
    """A CUDA C module as load_cuda builds it (functions in the module's namespace), with the
    emulation's launch counters: each call of relu / relu_new launches relu_k once."""

    def __init__(self, counted=True):
        super().__init__("fake_relu_module")
        n = {"relu_k": 0}

        def relu(x, out):
            n["relu_k"] += 1
            out.copy_(x.clamp_min(0))

        def relu_new(x):
            n["relu_k"] += 1
            return x.clamp_min(0)

        self.relu, self.relu_new = relu, relu_new
        if counted:
            setattr(self, counters.COUNTS, lambda: dict(n))


def test_cuda_module_counters_tie_launches_to_host_calls():
    mod = FakeCudaModule()
    relu_before, early = mod.relu, mod.relu
    x, out = torch.randn(20), utils.poisoned(20)
    with launches(modules=[mod], snapshot=True) as seen:
        mod.relu(x, out)
        res = mod.relu_new(x)
        early(x, out)  # a reference taken before the block: counted, not tied to a call
    assert mod.relu is relu_before  # the module's functions are put back
    assert seen.counts == {"fake_relu_module": {"relu_k": 3}}
    via_call, via_new, outside = seen.of("cuda")
    assert (via_call.host_function, via_call.count, via_call.name) == ("relu", 1, "relu_k")
    assert seen.writers_of(res) == [via_new] and outside.host_function is None
    assert seen.changed_since_launch(out, via_call) is False


def test_templated_kernels_are_counted_once():
    mod = types.ModuleType("templated")
    n = {"matmul_k": 0, "matmul_k<16>": 0}

    def matmul(a):
        n["matmul_k"] += 1
        n["matmul_k<16>"] += 1
        return a
    mod.matmul = matmul
    setattr(mod, counters.COUNTS, lambda: dict(n))
    with launches(modules=[mod]) as seen:
        mod.matmul(torch.ones(2))
    assert [(L.name, L.count) for L in seen] == [("matmul_k", 1)]
    assert seen.counts == {"templated": {"matmul_k": 1}}


def test_cuda_module_without_counters_says_so():
    mod = FakeCudaModule(counted=False)
    with launches(modules=[mod]) as seen:
        mod.relu(torch.ones(3), torch.empty(3))
    assert "no launch counters" in seen.uncounted["fake_relu_module"]
    (call,) = seen  # the host call is known, its kernels are not
    assert call.name is None and call.count is None
    assert "not counted" in seen.summary()


def test_dims3_and_module_counters():
    assert dims3(utils.dim3(4, 2)) == (4, 2, 1)
    with pytest.raises(ValueError, match="1 to 3"):
        dims3((1, 2, 3, 4))
    assert launch_counts(types.SimpleNamespace(**{counters.COUNTS: lambda: {"k": 1}})) == {"k": 1}
    assert launch_counts(types.SimpleNamespace()) is None          # a module that counts nothing


def test_no_import_side_effects():
    code = ("import sys, gpu_course\n"
            "from gpu_course.launches import launches\n"
            "with launches() as seen: pass\n"
            "print(sorted(m for m in ('triton', 'numba') if m in sys.modules), len(seen))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(utils.ROOT))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["[]", "0"]


def test_numba_is_the_simulator_here():
    assert numba.config.ENABLE_CUDASIM
