"""gpu_course.lessons.reductions: notebook 09's flag checks and closing table."""
import torch

from gpu_course.lessons import reductions as red


def test_deterministic_restores_the_earlier_setting():
    assert not torch.are_deterministic_algorithms_enabled()
    with red.deterministic():
        assert torch.are_deterministic_algorithms_enabled()
    assert not torch.are_deterministic_algorithms_enabled()


def test_goals_take_the_best_of_their_kernels_and_rows_print_one_line_each():
    rows = [("torch.sum", 0.1, 4000.0, 95.0, None, ""), ("rung 7", 0.09, 4200.0, 99.0, 1.11, "torch.sum")]
    assert red.goal_lines(rows, [("best >= 0.95", ("rung 7", "rung 8"), 0.95)]) == [("best >= 0.95", 1.11, 0.95)]
    lines = red.table_lines(rows)
    assert len(lines) == 2 and lines[1].endswith("1.11× torch.sum") and "×" not in lines[0].split("copy")[1]
