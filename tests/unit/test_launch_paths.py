"""``gpu_course.launch_paths`` in cpu mode: the fake GPU that measures the direct path's Python, the normal
path's wrapper, the profile of one call, and the rounds' table and ratios."""
import threading
import time

import pytest
import torch

import utils
from gpu_course import launch_paths as lp, triton_launch
from gpu_course.kernels import triton_matmul as tm
from gpu_course.timing import Timing
from gpu_course.user_timing import UserTiming


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode only")
def test_fake_gpu_takes_the_direct_path_and_restores_everything():
    launcher = triton_launch.direct(tm.matmul_tuned)
    before = launcher.direct
    a = torch.randn(32, 32, dtype=torch.float16)
    with lp.fake_gpu(tm.matmul_tuned):
        for _ in range(3):
            tm.matmul(a, a)
        assert launcher.direct == before + 2 and triton_launch.direct(tm.matmul_tuned) is launcher
    assert launcher.kernel is tm.matmul_tuned and not triton_launch.ON_GPU
    assert launcher.direct == before + 2   # outside the block: kernel[grid] again (the interpreter)
    utils.check(tm.matmul(a, a), a.double() @ a.double(), atol=1e-2)
    assert launcher.direct == before + 2


def test_normal_path_goes_through_kernel_grid():
    seen = []
    lp.normal_path(lambda: seen.append(triton_launch._DIRECT[0]))()
    assert seen == [False] and triton_launch._DIRECT[0] is True


def test_profile_call_lists_the_functions_of_one_call():
    text = lp.profile_call(torch.add, torch.ones(3), torch.ones(3), top=3)
    assert "1 function ran in this call" in text and "own µs" in text and "torch.add" in text


def _other_thread_work():
    return sum(range(50))


def test_profile_call_leaves_another_threads_functions_out():
    stop = threading.Event()

    def spin():   # a thread running Python while the call runs (Jupyter's messaging, in a notebook)
        while not stop.is_set():
            _other_thread_work()
            time.sleep(0)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        prof = lp.call_profile(lambda x: (torch.nn.functional.gelu(x), time.sleep(0.02)), torch.ones(8))
    finally:
        stop.set()
        thread.join()
    names = [r[3] for r in prof.rows]
    assert "<lambda>" in names and any("gelu" in n for n in names) and any("sleep" in n for n in names)
    assert "_other_thread_work" not in names and "spin" not in names


def test_profile_call_keeps_what_the_call_runs_through_built_ins():
    class Meta(type):
        def __instancecheck__(cls, obj):   # Python that a built-in (isinstance) calls on the calling thread
            return True

    class Anything(metaclass=Meta):
        pass
    names = [r[3] for r in lp.call_profile(lambda: isinstance(1, Anything)).rows]
    assert "__instancecheck__" in names and "<built-in method builtins.isinstance>" in names


def test_the_filter_keeps_the_call_and_what_it_called_from_its_own_functions():
    """Stats as Python 3.12's cProfile records them in Jupyter (every thread on one stack): the IO thread's
    functions start with no caller, or under the built-in the call was waiting in when they started."""
    def f(file, line, name):
        return (file, line, name)
    root = f("/src/gpu_course/launch_paths.py", 1, "_one_call")
    run = f("/pkgs/triton/runtime/jit.py", 600, "run")
    binder = f("<string>", 2, "dynamic_func")
    spec = f("~", 0, "<built-in method specialize>")
    launch = f("~", 0, "<built-in method launch>")
    isinst = f("~", 0, "<built-in method builtins.isinstance>")
    zmq = f("/usr/lib/zmq/sugar/attrsettr.py", 43, "__getattr__")
    loop = f("/usr/lib/asyncio/base_events.py", 1910, "_run_once")
    off = f("~", 0, "<method 'disable' of '_lsprof.Profiler' objects>")

    def row(nc, tt, ct, callers):   # pstats: (cc, nc, tt, ct, callers), a caller's value (nc, cc, tt, ct)
        return (nc, nc, tt, ct, callers)
    stats = {root: row(1, 1e-6, 9e-5, {}), run: row(1, 2e-5, 8e-5, {root: (1, 1, 2e-5, 8e-5)}),
             binder: row(1, 5e-6, 9e-6, {run: (1, 1, 5e-6, 9e-6)}), spec: row(3, 4e-6, 4e-6, {binder: (3, 3, 4e-6, 4e-6)}),
             launch: row(1, 1.5e-4, 1.6e-4, {run: (1, 1, 1.5e-4, 1.6e-4)}),
             isinst: row(51, 2e-5, 2e-5, {run: (2, 2, 1e-6, 1e-6), zmq: (49, 49, 1.9e-5, 1.9e-5)}),
             zmq: row(3, 2e-5, 5e-5, {}), loop: row(1, 1e-5, 1.2e-4, {launch: (1, 1, 1e-5, 1.2e-4)}), off: row(1, 5e-5, 5e-5, {})}
    kept = {"run", "dynamic_func", "<built-in method specialize>", "<built-in method launch>",
            "<built-in method builtins.isinstance>"}
    for prof in (lp._call_rows(stats, {root, run, binder}),    # Python 3.12 on: the calling thread's functions
                 lp._call_rows(stats, None, ("/pkgs/triton/", "/src/gpu_course/"))):   # or the packages'
        got = {r[3]: r[:3] for r in prof.rows}
        assert set(got) == kept
        assert got["<built-in method builtins.isinstance>"] == (2, 1e-6, 1e-6)   # the call's 2 calls, not zmq's 49
        assert prof.left_out == 2 and prof.rows[0][3] == "<built-in method launch>"
        assert prof.table(top=2).startswith("5 functions ran in this call") and "2 others" in prof.table()


def test_the_table_gives_medians_and_the_rounds_range():
    def u(loop_ms):
        return UserTiming(Timing((0.01,), "m", "d", True), loop_ms, 0.005)
    taken = {"cuBLAS": [u(0.010), u(0.012)], "Triton, direct": [u(0.010), u(0.015)]}
    assert lp.loop_ratios(taken, "Triton, direct") == [1.0, 0.8]
    assert lp.cpu_us(taken, "cuBLAS") == [5.0, 5.0]
    assert "0.90× (0.80-1.00×)" in lp.paths_table(taken)
    # GPU 10 µs, CPU 5 µs a call: the slower is the GPU's 10 µs; a step of 15 µs is 1.5x it
    assert lp.paced_ratios(taken, "Triton, direct") == pytest.approx([1.0, 1.5])
    slow_cpu = {"x": [UserTiming(Timing((0.01,), "m", "d", True), 0.04, 0.04)]}   # CPU 40 µs sets the pace
    assert lp.paced_ratios(slow_cpu, "x") == pytest.approx([1.0])
