"""Unit tests of gpu_course/exercises.py in cpu mode: reference solutions of three kernel exercises
(Triton add + ReLU of notebook 06, Numba 8x16 tiled matmul of 05, CUDA C ReLU of 03) pass their
checks, and every way around them is refused. The kernels the tests use as "the learner's" are
defined at module level (a learner's cell); those defined inside a test function play a function
defined inside the check cell."""
import importlib.util
import sys
import textwrap
import time

import gpu_course.exercises as ex
from gpu_course.exercises import runner
from gpu_course.exercises.kinds import cuda as cuda_kind
from gpu_course.exercises.kinds.cuda import course_kernel_bodies

import utils  # first: it sets the simulator switches that numba and triton read at import

import numba
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from numba import cuda

from gpu_course.cuda import counters

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu-mode launch paths (interpreter, simulator)"),
              pytest.mark.usefixtures("without_nvcc_check")]   # builds that test other things


def lines(capsys):
    return capsys.readouterr().out.splitlines()


# ----------------------------------------------------------------------------------------------
# exercise, hint, formula_exercise

def test_exercise(capsys):
    utils.exercise("e1", None, lambda a: True, hint="use cdiv")
    utils.exercise("e2", 4, lambda a: a == 4)
    utils.exercise("e3", 5, lambda a: a == 4, hint="round up")

    def strict(a):
        assert a > 10, "must be above 10"
    utils.exercise("e4", 3, strict)
    utils.exercise("e5", 30, strict)
    assert lines(capsys) == ["⬜ e1: not answered yet (utils.hint('e1') prints a hint)", "✅ e2: correct",
                             "❌ e3: not yet (utils.hint('e3') prints a hint)",
                             "❌ e4: not yet: must be above 10", "✅ e5: correct"]


def test_hints_are_opt_in(capsys):
    utils.kernel_exercise("hinted", None, kind="triton", run=None, reference=None,
                          hint="the masked lanes must not win")
    utils.kernel_exercise("hinted", torch.relu, kind="triton", run=None, reference=None,
                          hint="the masked lanes must not win")
    printed = lines(capsys)
    assert printed[0] == "⬜ hinted: not answered yet (utils.hint('hinted') prints a hint)"
    assert not any("masked lanes" in ln for ln in printed)  # a check never prints its hint
    utils.hint("hinted")
    utils.hint("no such exercise")
    assert lines(capsys) == ["💡 hinted: the masked lanes must not win",
                             "no hint for 'no such exercise': run its check cell first (hints so "
                             "far: " + ", ".join(repr(t) for t in runner._HINTS) + ")"]


def blocks_expected(n, threads):
    return -(-n // threads)


def blocks_mine(n, threads):
    return utils.cdiv(n, threads)


def blocks_copied(n, threads):  # the number from a stored output, wrapped in a function
    return 3907


def blocks_rounded_down(n, threads):
    return n // threads


def test_formula_exercise(capsys):
    cases = [(1000, 256), (1_000_000, 256), (256, 256), (257, 32)]
    utils.formula_exercise("blocks", blocks_mine, blocks_expected, cases)
    utils.formula_exercise("blocks", 3907, blocks_expected, cases)  # a number copied from an output
    utils.formula_exercise("blocks", blocks_copied, blocks_expected, cases)
    utils.formula_exercise("blocks", blocks_expected, blocks_expected, cases)
    utils.formula_exercise("blocks", blocks_rounded_down, blocks_expected, cases)

    def inside(n, t):
        return utils.cdiv(n, t)
    utils.formula_exercise("blocks", inside, blocks_expected, cases)
    utils.formula_exercise("blocks", blocks_mine, blocks_expected, [(1000, 256)])
    utils.formula_exercise("blocks", None, blocks_expected, cases, hint="round up")
    out = lines(capsys)
    assert out[0] == "✅ blocks: correct"
    assert "not a number" in out[1]
    assert out[2] == "❌ blocks: not yet: for 1000, 256 it gives 3907, expected 4"
    assert "the function the check compares with" in out[3]
    assert out[4] == "❌ blocks: not yet: for 1000, 256 it gives 3, expected 4"
    assert "defined inside the check cell" in out[5]
    assert "set up wrongly" in out[6]
    assert out[7] == "⬜ blocks: not answered yet (utils.hint('blocks') prints a hint)"


def occupancy_of_the_notebook(regs, threads):  # a function the notebook defines and shows
    return 65536 // (utils.cdiv(regs * 32, 256) * 256 * utils.cdiv(threads, 32))


def blocks_by_search(regs, threads):  # the learner's answer leans on the notebook's function
    return occupancy_of_the_notebook(regs, threads)


def blocks_worked_out(regs, threads):
    return 65536 // (-(-regs * 32 // 256) * 256 * -(-threads // 32))


def blocks_via_expected(n, threads):  # calls the check's own reference
    return blocks_expected(n, threads)


def test_formula_exercise_refuses_calls_of_the_reference_and_of_refused_functions(capsys):
    cases = [(130, 256), (64, 256), (32, 1024)]
    utils.formula_exercise("blocks", blocks_worked_out, occupancy_of_the_notebook, cases,
                           refuse=[occupancy_of_the_notebook])
    utils.formula_exercise("blocks", blocks_by_search, occupancy_of_the_notebook, cases)
    utils.formula_exercise("blocks", blocks_by_search, lambda r, t: occupancy_of_the_notebook(r, t), cases,
                           refuse=[occupancy_of_the_notebook])
    utils.formula_exercise("blocks", occupancy_of_the_notebook, lambda r, t: 0 if r > 100 else 1, cases,
                           refuse=[occupancy_of_the_notebook])
    utils.formula_exercise("blocks", blocks_via_expected, blocks_expected, [(1000, 256), (256, 256)])
    ok, via_expected, via_refused, is_refused, via_expected2 = lines(capsys)
    assert ok == "✅ blocks: correct"
    assert via_expected == via_refused == ("❌ blocks: not yet: for 130, 256 it calls occupancy_of_the_notebook, "
                                           "which computes the answer: work it out yourself")
    assert is_refused.endswith("that is occupancy_of_the_notebook, which computes the answer: work it out yourself")
    assert via_expected2.endswith("for 1000, 256 it calls blocks_expected, which computes the answer: work it "
                                  "out yourself")


def fp32_bytes(t):  # the learner assumed fp32
    return t.numel() * 4


def the_tensor(t):  # returns a tensor, which has no single truth value
    return t


def test_formula_exercise_labels_and_answers_that_are_not_numbers(capsys):
    cases = [(torch.ones(3),), (torch.ones(2, 2, dtype=torch.float64),)]
    nbytes = lambda t: t.numel() * t.element_size()  # noqa: E731
    utils.formula_exercise("bytes", fp32_bytes, nbytes, cases, labels=["3 fp32", "2x2 fp64"])
    utils.formula_exercise("bytes", {12, 32}, nbytes, cases)
    utils.formula_exercise("bytes", the_tensor, nbytes, cases)
    utils.formula_exercise("bytes", fp32_bytes, nbytes, cases, labels=["one label"])
    labelled, a_set, tensor, setup = lines(capsys)
    assert labelled == "❌ bytes: not yet: for 2x2 fp64 it gives 16, expected 32"
    assert "not a set: the check tries it on other cases" in a_set
    assert tensor.startswith("❌ bytes: not yet: for tensor([1., 1., 1.]) it gives tensor(")
    assert "set up wrongly (ValueError: 1 labels for 2 cases)" in setup


def test_exercise_refuses_an_answer_defined_in_the_check_cell(capsys):
    ns = {"__name__": "__main__", "utils": utils}

    def cell(n, code):
        exec(compile(textwrap.dedent(code), f"/tmp/ipykernel_4243/{n}.py", "exec"), ns)
    learner = """
        def my_timer(fn):
            return 1.0
        """
    check = """
        utils.exercise("timer", my_timer, lambda t: t(None) == 1.0)
        """
    cell(1, learner)
    cell(2, check)
    cell(3, learner + check)
    ok, refused = lines(capsys)
    assert ok == "✅ timer: correct"
    assert refused == ("❌ timer: not yet: my_timer is defined inside the check cell: define it in your own "
                       "cell above the check and hand that in")


# ----------------------------------------------------------------------------------------------
# watch_calls and slow_work: checks of code that times (notebooks 01 and 04)

def test_watch_calls_sees_a_function_under_any_name_and_puts_it_back():
    import types
    learner = types.ModuleType("learner_cell")  # a notebook that did `from utils import bench`
    learner.bench = utils.bench
    sys.modules["learner_cell"] = learner
    try:
        with utils.watch_calls(utils.bench) as seen:
            t1 = learner.bench(torch.ones, 10, reps=3)
            t2 = utils.bench(torch.zeros, 5, reps=3)
        assert [(c.args, c.kwargs, c.result) for c in seen] == [((torch.ones, 10), {"reps": 3}, t1),
                                                                 ((torch.zeros, 5), {"reps": 3}, t2)]
        assert learner.bench is utils.bench is ex.__dict__.get("bench", utils.bench)
        with pytest.raises(TypeError):
            with utils.watch_calls(utils.bench) as seen:
                utils.bench(None)
        assert isinstance(seen[0].error, TypeError) and utils.bench.__name__ == "bench"
    finally:
        del sys.modules["learner_cell"]


def timer_with_utils(fn):
    utils.synchronize()
    t0 = time.perf_counter()
    fn()
    utils.synchronize()
    return (time.perf_counter() - t0) * 1e3


def timer_without_sync(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def test_slow_work_is_waited_for_by_synchronize_however_it_was_imported():
    from gpu_course.mode import synchronize as imported_sync  # `from utils import synchronize`
    ns = {"synchronize": imported_sync, "time": time}
    exec(textwrap.dedent("""
        def timer_with_imported_name(fn):
            synchronize()
            t0 = time.perf_counter()
            fn()
            synchronize()
            return (time.perf_counter() - t0) * 1e3
        """), ns)
    timer_with_imported_name = ns["timer_with_imported_name"]
    for timer in (timer_with_utils, timer_with_imported_name):   # a sleep lasts at least its time: >= 36 ms
        with utils.slow_work(40, within=[timer]) as launch:
            assert timer(launch) >= 36, timer.__name__
    with utils.slow_work(5000, within=[timer_without_sync]) as launch:   # no wait: returns long before 5 s
        assert timer_without_sync(launch) < 2500
    with utils.slow_work(30) as launch:
        t0 = time.perf_counter()
        launch()
        torch.cuda.synchronize()  # in cpu mode too, while the block is open
        assert time.perf_counter() - t0 >= 0.027
    assert utils.synchronize is imported_sync and ns["synchronize"] is imported_sync
    assert torch.cuda.synchronize.__module__ == "torch.cuda"


def test_slow_work_queues_behind_earlier_work_and_says_when_it_is_busy():
    with utils.slow_work(20) as launch:
        t0 = time.perf_counter()
        launch()
        launch()                      # starts when the first ends: 40 ms in all
        assert launch.busy()
        utils.synchronize()
        assert time.perf_counter() - t0 >= 0.038 and not launch.busy()


def test_cpu_ms_per_call_check_takes_the_solution_and_refuses_the_cheats(capsys):
    """Notebook 01's exercise 2, judged by what the learner's loop did: solutions/nb01.py's answer passes,
    each of its cheats is refused (wall_ms per call, a wait before the clock stops, one call, the total,
    seconds, the course's own loop, a constant)."""
    from gpu_course import timing_exercises
    sys.path.insert(0, str(utils.ROOT))
    from solutions import nb01

    def answer(code):
        ns = {"utils": utils, "time": time}
        exec(textwrap.dedent("""
            def wall_ms(fn, *args):
                utils.synchronize()
                t0 = time.perf_counter()
                fn(*args)
                utils.synchronize()
                return (time.perf_counter() - t0) * 1e3
            """), ns)
        exec(textwrap.dedent(code), ns)
        return ns["cpu_ms_per_call"]
    title = "the CPU's time per call of a loop"
    utils.exercise(title, answer(nb01.SOLUTIONS["ex01-2-answer"]), timing_exercises.check_cpu_ms_per_call)
    assert lines(capsys) == [f"✅ {title}: correct"]
    for what, code in nb01.CHEATS["ex01-2-answer"].items():
        utils.exercise(title, answer(code), timing_exercises.check_cpu_ms_per_call)
        (line,) = lines(capsys)
        assert line.startswith(f"❌ {title}: not yet"), (what, line)


# ----------------------------------------------------------------------------------------------
# Triton: fused add + ReLU (notebook 06, exercise 1)

@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=mask)


def add_relu(x, y):  # the reference solution
    out = utils.poisoned(x.shape, device=x.device)
    add_relu_kernel[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


XE, YE = torch.randn(2, 10_001)


def add_relu_reference():
    return torch.relu(XE + YE)


def check_add_relu(answer, **kw):
    kw.setdefault("kernel", "add_relu_kernel")
    utils.kernel_exercise("fused add + ReLU", answer, kind="triton", run=lambda f: f(XE, YE),
                          reference=add_relu_reference, atol=0, rtol=0, **kw)


torch_one_liner = lambda x, y: torch.relu(x + y)


@triton.jit
def add_relu_starter(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass  # your code: offsets, mask, two loads, tl.maximum(..., 0.0), one store


def add_relu_with_starter(x, y):
    out = utils.poisoned(x.shape, device=x.device)
    add_relu_starter[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


@triton.jit
def add_only_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def add_only(x, y):
    out = utils.poisoned(x.shape, device=x.device)
    add_only_kernel[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def launch_then_return_torch(x, y):
    add_relu(x, y)
    return torch.relu(x + y)


def launch_then_overwrite(x, y):
    out = utils.poisoned(x.shape)
    add_relu_starter[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    out.copy_(torch.relu(x + y))  # the kernel wrote nothing; torch filled the buffer
    return out


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_relu_copier(x_ptr, y_ptr, tmp_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(tmp_ptr + offs, mask=mask), mask=mask)


def torch_then_copy(x, y):
    """A kernel that launches and writes the output, copying what torch computed beforehand."""
    out = utils.poisoned(x.shape)
    add_relu_copier[(utils.cdiv(x.numel(), 1024),)](x, y, torch.relu(x + y), out, x.numel(), BLOCK=1024)
    return out


@cuda.jit
def add_relu_numba(x, y, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = max(x[i] + y[i], 0.0)


def add_relu_by_numba(x, y):
    out = utils.poisoned(x.shape)
    add_relu_numba[utils.cdiv(x.numel(), 256), 256](utils.to_numba(x), utils.to_numba(y),
                                                    utils.to_numba(out))
    return out


COURSE_KERNELS = '''
import triton
import triton.language as tl
import utils


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=mask)


def add_relu(x, y):
    out = utils.poisoned(x.shape, device=x.device)
    add_relu_kernel[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out

'''


@pytest.fixture(scope="module")
def course_kernels(tmp_path_factory):
    """A module of the course package (gpu_course.kernels...) with a ready add + ReLU."""
    path = tmp_path_factory.mktemp("course") / "course_add_relu.py"
    path.write_text(COURSE_KERNELS)
    spec = importlib.util.spec_from_file_location("gpu_course.kernels._test_add_relu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_triton_reference_solution_passes(capsys):
    check_add_relu(add_relu, evidence=[utils.calls("tl.maximum", "tl.load"),
                                       utils.launches_at_most(1), utils.only_reads(XE, YE),
                                       utils.grid_is(utils.cdiv(XE.numel(), 1024))])
    check_add_relu(add_relu, kernel=add_relu_kernel)  # the kernel object also names it
    check_add_relu(add_relu, kernel=None)  # any kernel the learner wrote
    assert lines(capsys) == ["✅ fused add + ReLU: correct (your Triton kernel add_relu_kernel wrote the "
                             "result)"] * 3


def add_then_relu(x, y):  # two kernels of the learner's: the second one writes the result
    s = add_only(x, y)
    out = utils.poisoned(x.shape, device=x.device)
    add_relu_kernel[(utils.cdiv(x.numel(), 1024),)](s, torch.zeros_like(s), out, x.numel(), BLOCK=1024)
    return out


def test_triton_verdict_names_the_kernel_that_wrote_the_result(capsys):
    check_add_relu(add_then_relu, kernel=None)
    assert lines(capsys) == ["✅ fused add + ReLU: correct (your Triton kernel add_relu_kernel wrote the result)"]


@pytest.mark.parametrize("answer, why", [
    (torch_one_liner, "no launch of add_relu_kernel was recorded: the result came from somewhere "
                      "else — launch the kernel with add_relu_kernel[grid](...)"),
    (add_relu_reference, "that is the reference the check compares with"),
    (torch.relu, "relu is torch's, not yours"),
    (add_relu_by_numba, "only a Numba kernel (add_relu_numba) was launched: this exercise asks for a "
                        "Triton kernel, launched as add_relu_kernel[grid](...)"),
    (add_relu_numba, "add_relu_numba is a Numba kernel; this exercise asks for a Triton kernel"),
    (launch_then_return_torch, "the returned tensor is not memory add_relu_kernel was given"),
    (XE + YE, "hand in the function or kernel itself, not a Tensor"),
])
def test_triton_cheats_are_refused(capsys, answer, why):
    check_add_relu(answer)
    (line,) = lines(capsys)
    assert line.startswith("❌ fused add + ReLU: not yet: ") and why in line, line


def test_output_overwritten_after_the_kernel_is_refused(capsys):
    check_add_relu(launch_then_overwrite, kernel="add_relu_starter")
    (line,) = lines(capsys)
    assert "the output changed after add_relu_starter wrote it" in line, line


def test_kernel_copying_a_torch_result_is_refused_once_the_inputs_are_named(capsys):
    check_add_relu(torch_then_copy, kernel="add_relu_copier")  # passes (a)-(c): no inputs named ...
    check_add_relu(torch_then_copy, kernel="add_relu_copier", evidence=[utils.only_reads(XE, YE)])
    check_add_relu(torch_then_copy, kernel="add_relu_copier", inputs=(XE, YE))
    ok, refused, refused_too = lines(capsys)
    assert ok.startswith("✅")
    # ... the course's own launch poisons every buffer that is not a named input
    for line in (refused, refused_too):
        assert "the check launched add_relu_copier itself" in line and "did not compute the result" in line


def test_unmodified_starter_is_not_an_answer(capsys):
    check_add_relu(add_relu_with_starter, kernel="add_relu_starter", hint="model it on square")
    assert lines(capsys) == ["⬜ fused add + ReLU: not answered yet: add_relu_starter's body is still the "
                             "starter's `pass` (utils.hint('fused add + ReLU') prints a hint)"]


def test_wrong_kernel_and_wrong_values(capsys):
    check_add_relu(add_only)  # add_only_kernel ran, not add_relu_kernel
    check_add_relu(add_only, kernel="add_only_kernel")  # ran, but computes x + y
    check_add_relu(add_relu, evidence=[utils.grid_is(XE.numel(), meaning="one program per element")])
    check_add_relu(add_relu, evidence=[utils.calls("tl.dot")])
    check_add_relu(add_relu, evidence=[utils.uses_shared_memory()])
    wrong_name, *values, grid, dot, setup = lines(capsys)
    assert wrong_name == ("❌ fused add + ReLU: not yet: no launch of add_relu_kernel was recorded "
                          "(add_only_kernel ran instead): launch it with add_relu_kernel[grid](...)")
    assert values[0].startswith("❌ fused add + ReLU: not yet: add_only_kernel: ")
    assert "differ from the reference" in values[0] and values[1].startswith("    first bad index")
    assert grid == ("❌ fused add + ReLU: not yet: one program per element: expected a grid of "
                    "(10001,) programs, but add_relu_kernel was launched on (10,)")
    assert dot.endswith("add_relu_kernel did not execute tl.dot when the check launched it (in 10 of the 10 "
                        "programs that stored a result): the exercise asks for the product as tl.dot on tiles")
    assert "the check is set up wrongly (uses_shared_memory applies to Numba and CUDA C" in setup


def _launch_course_kernel(course_kernels):
    def course_wrapper(x, y):  # the learner's wrapper, launching the course's kernel
        out = utils.poisoned(x.shape)
        course_kernels.add_relu_kernel[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
    return course_wrapper


def test_course_package_kernels_are_refused(capsys, course_kernels):
    check_add_relu(course_kernels.add_relu)
    check_add_relu(_launch_course_kernel(course_kernels))
    wrapper, kernel = lines(capsys)
    assert wrapper.endswith("add_relu comes from the course package (gpu_course.kernels._test_add_relu): "
                            "write your own function or kernel")
    assert kernel.endswith("add_relu_kernel comes from the course package "
                           "(gpu_course.kernels._test_add_relu): write your own kernel")


def test_functions_defined_inside_the_check_are_refused(capsys):
    def my_add_relu(x, y):
        out = utils.poisoned(x.shape)
        add_relu_kernel[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out

    @triton.jit
    def inner_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask)
                                            + tl.load(y_ptr + offs, mask=mask), 0.0), mask=mask)
    check_add_relu(my_add_relu)
    check_add_relu(add_relu, kernel=inner_kernel)
    for line in lines(capsys):
        assert "is defined inside the check cell: define it in your own cell above" in line, line


def test_notebook_cells_learner_cell_passes_check_cell_definitions_do_not(capsys):
    """Cells as ipykernel compiles them: each its own file; the check cell is a <module> frame."""
    ns = {"__name__": "__main__", "utils": utils, "torch": torch, "XE": XE, "YE": YE,
          "add_relu_kernel": add_relu_kernel}

    def cell(n, code):
        exec(compile(textwrap.dedent(code), f"/tmp/ipykernel_4242/{n}.py", "exec"), ns)
    learner = """
        def add_relu(x, y):
            out = utils.poisoned(x.shape, device=x.device)
            add_relu_kernel[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
            return out
        """
    check = """
        utils.kernel_exercise("fused add + ReLU", add_relu, kind="triton", kernel="add_relu_kernel",
                              run=lambda f: f(XE, YE), reference=lambda: torch.relu(XE + YE),
                              atol=0, rtol=0)
        """
    cell(1, learner)
    cell(2, check)
    cell(3, learner + check)  # the same function, defined inside the check cell
    ok, refused = lines(capsys)
    assert ok.startswith("✅ fused add + ReLU: correct")
    assert "add_relu is defined inside the check cell" in refused


def test_a_check_never_raises(capsys):
    def boom(f):
        raise RuntimeError("the learner's code failed\nsecond line")
    utils.kernel_exercise("t", add_relu, kind="triton", run=boom, reference=add_relu_reference)
    utils.kernel_exercise("t", add_relu, kind="cuda?", run=boom, reference=add_relu_reference)
    utils.kernel_exercise("t", add_relu, kind="triton", run=lambda f: f(XE, YE), reference=lambda: [][1])
    raised, kind, ref = lines(capsys)
    assert raised == "❌ t: not yet: running it raised RuntimeError: the learner's code failed"
    assert "kind='cuda?'" in kind and "set up wrongly" in ref


# ----------------------------------------------------------------------------------------------
# Numba: rectangular 8 x 16 tiles in shared memory (notebook 05, exercise 3)

TH, TW = 8, 16  # a block is TW x TH threads (x: columns); tiles of m are TH x TW, of n TW x TW


@cuda.jit
def matmul_rect_numba(m, n, out):  # the reference solution
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = m[r, ph + tc] if r < h and ph + tc < k else 0.0
        for i in (tr, tr + TH):  # rows tr and tr + 8 of the n tile
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else 0.0
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p


@cuda.jit
def matmul_k_numba(m, n, out):  # a plain kernel: right numbers, no shared memory
    r, c = cuda.grid(2)[1], cuda.grid(2)[0]
    if r < out.shape[0] and c < out.shape[1]:
        # not cuda.shared.array: the comment and the string below are not code
        p = numba.float32(0.0)
        for i in range(m.shape[1]):
            p += m[r, i] * n[i, c]
        out[r, c] = p
        "cuda.shared.array((16, 16), numba.float32)"


@cuda.jit
def matmul_rect_starter(m, n, out):
    pass


HH, KK, WW = 11, 19, 13
MA, MB = torch.randn(HH, KK), torch.randn(KK, WW)


my_torch_matmul = lambda a, b: a @ b


def run_rect(kernel):
    """The harness launches the learner's kernel, as notebook 05's check does."""
    o = utils.poisoned(HH, WW)
    kernel[(utils.cdiv(WW, TW), utils.cdiv(HH, TH)), (TW, TH)](utils.to_numba(MA), utils.to_numba(MB),
                                                               utils.to_numba(o))
    utils.synchronize()
    return o


def check_rect(answer, run=run_rect, **kw):
    utils.kernel_exercise("rectangular 8x16 tiled kernel", answer, kind="numba", run=run,
                          reference=lambda: MA.double() @ MB.double(), atol=1e-4, rtol=1e-4,
                          evidence=[utils.uses_shared_memory(), utils.threads_per_block(16, 8)], **kw)


def launcher_32x32(a, b):  # the learner chose the launch: blocks of 32 x 32 threads
    o = utils.poisoned(a.shape[0], b.shape[1])
    matmul_k_numba[(1, 1), (32, 32)](utils.to_numba(a), utils.to_numba(b), utils.to_numba(o))
    return o


def test_numba_reference_solution_passes(capsys):
    check_rect(matmul_rect_numba)
    assert lines(capsys) == ["✅ rectangular 8x16 tiled kernel: correct (your Numba kernel "
                             "matmul_rect_numba wrote the result)"]


def test_numba_cheats_are_refused(capsys, course_kernels):
    check_rect(matmul_k_numba)  # plain kernel: no shared memory, even in its comment and string
    check_rect(add_relu_kernel)  # a Triton kernel for a Numba exercise
    check_rect(torch.matmul, run=lambda f: f(MA, MB))  # torch's matmul
    check_rect(my_torch_matmul, run=lambda f: f(MA, MB))  # a torch computation of the learner's
    check_rect(matmul_rect_starter)
    utils.kernel_exercise("blocks of 16 x 8", launcher_32x32, kind="numba", run=lambda f: f(MA, MB),
                          reference=lambda: MA.double() @ MB.double(), atol=1e-4, rtol=1e-4,
                          evidence=[utils.threads_per_block(16, 8)])
    plain, triton_k, torch_mm, torch_r, starter, blocks = lines(capsys)
    assert plain.endswith("no cuda.shared.array was created when the check launched it")
    assert "add_relu_kernel is a Triton kernel; this exercise asks for a Numba kernel" in triton_k
    assert "matmul is torch's, not yours" in torch_mm
    assert "no launch of your Numba kernel was recorded" in torch_r
    assert starter.startswith("⬜ rectangular 8x16 tiled kernel: not answered yet: matmul_rect_starter")
    assert blocks.endswith("matmul_k_numba was launched with blocks of (32, 32) threads; the "
                           "exercise asks for (16, 8)")


@cuda.jit
def my_matmul_numba(m, n, out):  # the notebook's matmul_k_numba, renamed: the same body
    r, c = cuda.grid(2)[1], cuda.grid(2)[0]
    if r < out.shape[0] and c < out.shape[1]:
        # not cuda.shared.array: the comment and the string below are not code
        p = numba.float32(0.0)
        for i in range(m.shape[1]):
            p += m[r, i] * n[i, c]
        out[r, c] = p
        "cuda.shared.array((16, 16), numba.float32)"


def test_differs_from_refuses_the_notebooks_own_kernel_under_any_name(capsys):
    def check(answer, *refs):
        utils.kernel_exercise("matmul", answer, kind="numba", run=run_rect,
                              reference=lambda: MA.double() @ MB.double(), atol=1e-4, rtol=1e-4,
                              evidence=[utils.differs_from(*refs)])
    check(matmul_k_numba, matmul_k_numba)
    check(my_matmul_numba, matmul_k_numba)
    check(matmul_rect_numba, matmul_k_numba)
    check(matmul_rect_numba, "__global__ void k() {}")
    same, renamed, own, setup = lines(capsys)
    assert same.endswith("matmul_k_numba is the notebook's matmul_k_numba: the exercise asks you to change it")
    assert renamed.endswith("my_matmul_numba is the notebook's matmul_k_numba under another name: the exercise "
                            "asks you to change it")
    assert own.startswith("✅ matmul: correct")
    assert "set up wrongly (differs_from takes kernel objects for a Triton or Numba exercise)" in setup


@cuda.jit(device=True)
def row_times_column(m, n, r, c):  # a helper "the notebook" ships, which already does the work
    p = numba.float32(0.0)
    for i in range(m.shape[1]):
        p += m[r, i] * n[i, c]
    return p


@cuda.jit(device=True)
def my_entry(m, n, r, c):  # the learner's own helper, which calls the shipped one
    return row_times_column(m, n, r, c)


@cuda.jit
def matmul_by_helper(m, n, out):
    r, c = cuda.grid(2)[1], cuda.grid(2)[0]
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = my_entry(m, n, r, c)


def test_differs_from_refuses_a_kernel_that_calls_the_notebooks_helper(capsys):
    for refs in ((row_times_column,), (matmul_k_numba,)):
        utils.kernel_exercise("matmul", matmul_by_helper, kind="numba", run=run_rect,
                              reference=lambda: MA.double() @ MB.double(), atol=1e-4, rtol=1e-4,
                              evidence=[utils.differs_from(*refs)])
    calls, other = lines(capsys)
    assert calls.endswith("matmul_by_helper calls the course's row_times_column, which already does the work: "
                          "write that part yourself"), calls
    assert other.startswith("✅ matmul: correct"), other


# ----------------------------------------------------------------------------------------------
# CUDA C: a ReLU kernel through load_cuda (notebook 03, exercise 1)

RELU_SRC = utils.cuda_begin + r"""
__global__ void relu_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}

void relu(torch::Tensor x, torch::Tensor out) {
    CHECK_INPUT(x); CHECK_INPUT(out);
    int n = x.numel();
    relu_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

SHARED_SRC = RELU_SRC.replace("int i = blockIdx", "__shared__ float staged[256];\n    int i = blockIdx")
XC = torch.randn(1001)


class FakeReluModule:
    """What load_cuda returns for RELU_SRC, with the emulation's launch counters and launch log:
    relu(x, out) launches relu_k (unless ``launches`` is False) and writes ``out``; the check's own
    launch of relu_k builds the source for real (the CPU emulation)."""

    def __init__(self, counted=True, launches=True):
        self.__name__ = "fake_relu_module"
        n = {"relu_k": 0}
        log = []

        def relu(x, out):
            if launches:
                n["relu_k"] += 1
                log.append((len(log), "relu_k", (utils.cdiv(x.numel(), 256), 1, 1), (256, 1, 1), 0,
                            (("p", 8, x.data_ptr()), ("p", 8, out.data_ptr()), ("i", 4, x.numel()))))
            out.numpy()[:] = np.maximum(x.numpy(), 0)  # as a kernel would: no torch operator
        self.relu = relu
        if counted:
            setattr(self, counters.COUNTS, lambda: dict(n))
            setattr(self, counters.LOG, lambda since: (len(log), [e for e in log if e[0] >= since]))


def run_relu(mod):
    out = utils.poisoned(XC.shape)
    mod.relu(XC, out)
    return out


def check_relu(src, build=lambda s: FakeReluModule(), run=run_relu, **kw):
    utils.kernel_exercise("a ReLU kernel", src, kind="cuda", kernel="relu_k", build=build, run=run,
                          reference=lambda: torch.relu(XC), atol=0, rtol=0, **kw)


def test_cuda_relu_with_counters_passes_and_cheats_are_refused(capsys):
    check_relu(RELU_SRC)
    check_relu(SHARED_SRC, evidence=[utils.calls("fmaxf"), utils.differs_from(RELU_SRC)])
    check_relu(RELU_SRC, evidence=[utils.uses_shared_memory()])  # no __shared__ in relu_k
    check_relu(SHARED_SRC, evidence=[utils.uses_shared_memory()])  # declared, never used
    check_relu(RELU_SRC.replace("relu_k", "relu_kernel"))  # no kernel of that name
    check_relu(RELU_SRC, build=lambda s: FakeReluModule(launches=False))  # launches nothing
    check_relu(RELU_SRC, run=lambda mod: (run_relu(mod), torch.relu(XC))[1])  # a torch result
    check_relu(RELU_SRC, build=lambda s: FakeReluModule(counted=False))
    check_relu(run_relu)  # not a source
    check_relu(RELU_SRC, build=lambda s: 1 / 0)
    ok, shared, no_shared, unused, name, none, torch_r, uncounted, not_src, build = lines(capsys)[:10]
    assert ok == shared == "✅ a ReLU kernel: correct (your CUDA C kernel relu_k wrote the result)"
    assert no_shared.endswith("relu_k never stored into shared memory when the check launched it (code that "
                              "does not run, e.g. under #if 0 or in an if that is never true, does not count)")
    assert unused == no_shared
    assert name.endswith("your source has no __global__ kernel named relu_k: write one (the check "
                         "looks for its launches)")
    assert none.endswith("no launch of relu_k was recorded: the result came from somewhere else — "
                         "launch the kernel with relu_k<<<blocks, threads>>>(...) in your host function")
    assert "the returned tensor is not memory relu_k was given" in torch_r
    assert "cannot tell whether relu_k ran: the module has no launch counters" in uncounted
    assert "hand in your CUDA C source as a string" in not_src
    assert build.startswith("❌ a ReLU kernel: not yet: your source does not build:")


def test_cuda_differs_from_the_notebooks_kernel(capsys):
    notebook_src = RELU_SRC.replace("relu_k", "notebook_relu_k")  # the notebook's kernel, another name
    check_relu(RELU_SRC, evidence=[utils.differs_from(notebook_src)])
    check_relu(RELU_SRC, evidence=[utils.differs_from(SHARED_SRC)])
    check_relu(RELU_SRC, evidence=[utils.differs_from(add_relu_kernel)])
    copied, own, setup = lines(capsys)
    assert copied.endswith("relu_k is the notebook's notebook_relu_k under another name: the exercise asks you "
                           "to change it")
    assert own.startswith("✅")
    assert "set up wrongly (differs_from takes CUDA C sources (strings) for a CUDA C exercise)" in setup


def test_cuda_kernel_of_the_course_package_is_refused(capsys, tmp_path, monkeypatch):
    course = tmp_path / "gpu_course"
    (course / "kernels").mkdir(parents=True)
    (course / "kernels" / "relu.cu").write_text(RELU_SRC.replace("relu_k", "relu_course_k"))
    monkeypatch.setattr(cuda_kind, "_COURSE_DIR", course)
    check_relu(RELU_SRC)  # the course kernel's body, under the exercise's name
    check_relu(SHARED_SRC)  # a body of its own
    copied, own = lines(capsys)
    assert copied.endswith("relu_k is the course's own kernel from gpu_course/kernels/relu.cu: "
                           "write your own")
    assert own.startswith("✅")


def test_course_kernel_bodies_are_read_again_when_the_file_changes(tmp_path):
    f = tmp_path / "k.cu"
    f.write_text("__global__ void a_k(int* p) { p[0] = 1; }")
    assert course_kernel_bodies(f) == [("p", "[", "0", "]", "=", "1", ";")]
    f.write_text("__global__ void a_k(int* p) { p[0] = 22; }")  # another size: read again
    assert course_kernel_bodies(f) == [("p", "[", "0", "]", "=", "22", ";")]
    assert course_kernel_bodies(tmp_path / "gone.cu") == []


def test_cuda_relu_in_the_emulation(capsys):
    def build(src):
        return utils.load_cuda(src, utils.get_sig("relu", src), ["relu"])
    check_relu(RELU_SRC, build=build)
    check_relu(RELU_SRC.replace("out[i] = fmaxf(x[i], 0.0f);", "{}"), build=build)  # writes nothing
    ok, nothing, *detail = lines(capsys)
    assert ok == "✅ a ReLU kernel: correct (your CUDA C kernel relu_k wrote the result)"
    assert nothing.startswith("❌ a ReLU kernel: not yet: relu_k: ") and "NaN" in " ".join(detail)


@cuda.jit
def matmul_by_numpy_in_the_kernel(m, n, out):   # simulator only: the product by NumPy on host copies
    r, c = cuda.grid(2)[1], cuda.grid(2)[0]
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = (m.copy_to_host() @ n.copy_to_host())[r, c]


def test_a_kernel_that_copies_its_arrays_to_the_host_is_refused(capsys):
    """In the simulator a kernel is Python and could hand its arrays to NumPy (on a GPU it would not compile):
    the check's own launch refuses a copy_to_host inside a kernel."""
    utils.kernel_exercise("matmul", matmul_by_numpy_in_the_kernel, kind="numba", run=run_rect,
                          reference=lambda: MA.double() @ MB.double(), atol=1e-4, rtol=1e-4)
    (line,) = lines(capsys)
    assert line.startswith("❌ matmul: not yet: the check launched matmul_by_numpy_in_the_kernel itself") \
        and "the kernel copied a device array to the host (copy_to_host)" in line, line
