"""A kind of kernel is one module: a subclass of ``kinds.Kind`` (here of ``PythonKind``) and its
registration. The whole of a "python" kind is below, between the two rules: its kernel is a plain
Python function ``kernel(pid, *args)`` launched as ``launch(kernel, grid, *args)``, once per program.
The judge, the course's own launch (``replay``) and the evidence take it as they take Triton's."""
from contextlib import contextmanager

import pytest
import torch

import utils  # noqa: F401  first: the mode
from gpu_course.exercises import judge_kernel, kinds
from gpu_course.exercises.kinds.python_code import PythonKind
from gpu_course.launch_records import buffers_of
from gpu_course.launches import Launch, dims3, launches

# ------------------------------------------------------------------------------------------------
_RECORDING = []   # the launch logs open for the "python" kind


def launch(kernel, grid, *args):
    """The "python" kind's launch: ``kernel(pid, *args)`` for each program ``pid`` of ``grid``."""
    L = Launch("python", kernel, kernel, kernel.__name__, kernel.__module__, grid=dims3(grid), args=args)
    for i, a in enumerate(args):
        buffers_of(a, f"argument {i}", L.buffers)
    for log in _RECORDING:
        log.record(L)
    for pid in range(L.grid[0]):
        kernel(pid, *args)
    L.finished = True
    for log in _RECORDING:
        log.take_snapshot(L.buffers)


class PythonFunctionKind(PythonKind):
    key, label, syntax = "python", "plain Python", "launch({k}, grid, ...)"
    unit, unit_one, threads = "programs", "program", False

    def owns(self, obj) -> bool:
        return False  # any function may be one: told apart by how it is launched

    @contextmanager
    def recording(self, trial):
        with launches(snapshot=True) as seen:
            _RECORDING.append(seen)
            try:
                yield seen
            finally:
                _RECORDING.remove(seen)

    def launch_again(self, launch, args, kwargs, grid, execution) -> None:
        for pid in range(grid[0]):
            launch.kernel(pid, *args)
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def python_kind():
    kinds.register(PythonFunctionKind())
    yield
    kinds.unregister("python")


def double_k(pid, x, out):
    """Each program doubles its 4 elements."""
    for i in range(4 * pid, min(4 * pid + 4, x.numel())):
        out[i] = 2 * x[i]


def double_all_k(pid, x, out):
    """Every program doubles all of them: the whole work in each program."""
    for i in range(x.numel()):
        out[i] = 2 * x[i]


X = torch.arange(16.0)


def run_double(kernel):
    out = utils.poisoned(16)
    launch(kernel, 4, X, out)
    return out


def judged(kernel, **kw):
    return judge_kernel("double", kernel, kind="python", run=run_double, reference=lambda: 2 * X, atol=0, rtol=0,
                        **kw)


def test_a_kind_registered_in_one_place_is_judged_like_the_course_kinds(python_kind):
    assert "python" in kinds.names()
    ok = judged(double_k, evidence=[utils.grid_is(4), utils.launches_at_most(1), utils.only_reads(X)])
    assert ok.ok is True and str(ok) == "✅ double: correct (your plain Python kernel double_k wrote the result)"
    alone = judged(double_all_k)
    assert alone.ok is False and "launched alone, program 0 of double_all_k wrote all 16 outputs" in str(alone)
    grid = judged(double_k, evidence=[utils.grid_is(8)])
    assert "expected a grid of (8,) programs, but double_k was launched on (4,)" in str(grid)
    setup = judged(double_k, evidence=[utils.uses_shared_memory()])
    assert "set up wrongly (uses_shared_memory applies to Numba and CUDA C kernels, not plain Python ones)" in str(setup)


def test_an_unregistered_kind_is_a_setup_error():
    v = judged(double_k)
    assert v.ok is False and "kind='python', not one of triton, numba, cuda" in str(v)


def test_the_result_must_be_what_the_kernel_wrote(python_kind):
    def run_then_torch(kernel):
        run_double(kernel)
        return 2 * X   # computed by torch afterwards
    v = judge_kernel("double", double_k, kind="python", run=run_then_torch, reference=lambda: 2 * X)
    assert "the returned tensor is not memory double_k was given" in str(v)


A_PLAIN, B_PLAIN = torch.randn(5, 4), torch.randn(4, 3)
torch_not_a_kernel = lambda m, n, out: torch.from_numpy(m) @ torch.from_numpy(n)   # noqa: E731  a learner's cell


def run_plain(kernel):   # the check launches the kernel it is handed
    out = utils.poisoned(5, 3)
    kernel[(1, 1), (16, 8)](utils.to_numba(A_PLAIN), utils.to_numba(B_PLAIN), utils.to_numba(out))
    return out


def test_a_plain_function_handed_in_for_a_numba_kernel_is_told_what_to_hand_in(capsys):
    utils.kernel_exercise("a Numba product", torch_not_a_kernel, kind="numba", kernel="mm_numba", run=run_plain,
                          reference=lambda: A_PLAIN.double() @ B_PLAIN.double())
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line == ("❌ a Numba product: not yet: running it raised TypeError: mm_numba is a plain function, and the "
                    "check launches it as mm_numba[blocks, threads](...): hand in the Numba kernel itself (a @cuda.jit "
                    "function)"), line
