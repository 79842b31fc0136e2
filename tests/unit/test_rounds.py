"""gpu_course.rounds: timings kept round by round."""
import torch

from gpu_course.rounds import bench_rounds, fmt_range, round_ratios


def test_bench_rounds_alternates_and_keeps_every_round():
    order = []
    fns = {"a": lambda: order.append("a") or torch.ones(4), "b": lambda: order.append("b") or torch.zeros(4)}
    t = bench_rounds(fns, rounds=3, budget_ms=3)
    assert [len(t["a"]), len(t["b"])] == [3, 3]
    firsts = [order[0]] + [order[i] for i in range(1, len(order)) if order[i] != order[i - 1]]
    assert firsts[:4] == ["a", "b", "a", "b"] or firsts[:3] == ["a", "b", "a"]   # A B, B A, A B
    ratios = round_ratios(t["a"], t["b"])
    assert len(ratios) == 3 and all(r > 0 for r in ratios)
    assert fmt_range([2.0]) == "2.00× (rounds 2.00-2.00×)"
