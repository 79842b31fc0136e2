"""Notebook 10's worker-thread / calling-thread comparison in alternating rounds: each round times both settings,
the order of the two reversed every other round, and each row is the median of its rounds."""
import torch

from gpu_course.lessons.layernorm import overheads
from gpu_course.timing import Timing
from gpu_course.user_timing import UserTiming


def test_the_two_thread_settings_alternate_and_each_row_is_the_median_of_its_rounds(monkeypatch):
    order, loops = [], iter([1.0, 4.0, 5.0, 2.0, 3.0, 6.0])

    def fake_time_users(steps, *args):
        order.append("worker" if torch.autograd.is_multithreading_enabled() else "calling")
        loop = next(loops)
        return {name: UserTiming(Timing((loop,), "m", "cpu", False), loop, loop / 2) for name in steps}
    monkeypatch.setattr(overheads, "time_users", fake_time_users)
    out = overheads.on_each_thread({"f": lambda x, wt, b: x}, None, None, None, None, rounds=3)
    assert order == ["worker", "calling", "calling", "worker", "worker", "calling"]
    assert out["f, worker thread"].loop_ms == 2.0 and out["f, calling thread"].loop_ms == 5.0
    assert out["f, worker thread"].cpu_ms == 1.0 and sorted(out["f, calling thread"].gpu.times_ms) == [4.0, 5.0, 6.0]
