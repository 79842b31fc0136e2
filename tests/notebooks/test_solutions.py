"""Every exercise accepts its reference solution and refuses the cheats a learner might try, run in
the notebook itself (in this machine's mode: cpu in CI). ``exercise_runs.py`` says what
``solutions/nbNN.py`` holds and how an exercise is judged.

First, in the notebook as stored: each check cell's output is the unmodified starter's (⬜, no
✅ or ❌), and every cell whose stored output has a ⬜ is the check of some solution (no exercise
without a reference solution). Then the notebook runs top to bottom, and right after each check
cell, in the same kernel, the exercise's solution must be accepted (✅, no ❌) and each cheat
refused (❌, no ✅).

Under ``pytest --nbval`` with the notebook collected too (``course.py test``), the exercises are
judged in nbval's own run of the notebook (the root conftest.py adds them after the check cells),
and :func:`test_solutions_pass_and_cheats_are_refused` is deselected for that notebook: each notebook
runs once. Run alone (``pytest tests/notebooks/test_solutions.py``, e.g. on a GPU), it runs each
notebook itself, with nbclient.
"""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tests.notebooks.exercise_runs import (NOTEBOOKS, UNANSWERED, exercises, judge, load,  # noqa: E402
                                           notebook_for, printed, solution_modules, stored_output_problems)


@pytest.mark.parametrize("path", solution_modules(), ids=lambda p: p.name)
def test_stored_check_outputs_are_the_starters(path):
    """Each check cell is stored with the starter's ⬜, and each ⬜ cell checks an exercise that has a
    solution."""
    import nbformat
    nb = nbformat.read(notebook_for(path), as_version=4)
    problems = stored_output_problems(nb, exercises(nb, load(path)), path.name)
    assert not problems, "\n".join(problems)


def nbclient_runner(client, index: int):
    """``run(code) -> (printed text, error or None)`` in the kernel of an nbclient ``client``, as
    :func:`exercise_runs.judge` wants it (a cell run at position ``index`` of the notebook, which
    keeps its own cell there: nbclient stores the cell it ran in the notebook)."""
    import nbformat
    from nbclient.exceptions import CellExecutionError

    def run(code):
        cell, kept = nbformat.v4.new_code_cell(code), client.nb.cells[index]
        try:
            client.execute_cell(cell, index)
        except CellExecutionError as e:
            return printed(cell), str(e).strip().splitlines()[-1]
        finally:
            client.nb.cells[index] = kept
        return printed(cell), None
    return run


def run_and_judge(nb, exs: list, on_gpu: bool, cwd: Path = NOTEBOOKS) -> list:
    """Run notebook ``nb`` top to bottom in a kernel of its own (nbclient) and judge each exercise of
    ``exs`` right after its check cell; return the problems found."""
    from nbclient import NotebookClient
    after = {}
    for ex in exs:
        after.setdefault(ex.check, []).append(ex)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    problems = []
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
            for ex in after.get(cell.get("id"), []):
                problems += judge(ex, nbclient_runner(client, i), on_gpu)
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("path", solution_modules(), ids=lambda p: p.name)
def test_solutions_pass_and_cheats_are_refused(path):
    import nbformat

    from gpu_course import mode
    nb = nbformat.read(notebook_for(path), as_version=4)
    problems = run_and_judge(nb, exercises(nb, load(path)), mode.ON_GPU)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_the_own_run_judges_in_order_and_reports_what_is_misjudged():
    """The run above, on fixtures/90_exercise.ipynb (whose later cell rebinds a name its check reads)."""
    import nbformat
    from types import SimpleNamespace
    nb = nbformat.read(Path(__file__).parent / "fixtures" / "90_exercise.ipynb", as_version=4)
    right = SimpleNamespace(SOLUTIONS={"ex90-1-answer": "answer = 6 * 7"},
                            CHEATS={"ex90-1-answer": {"a float": "answer = 42.0"}})
    assert run_and_judge(nb, exercises(nb, right), on_gpu=False, cwd=Path(__file__).parent) == []
    wrong = SimpleNamespace(SOLUTIONS={"ex90-1-answer": "answer = 41"},
                            CPU_CHEATS={"ex90-1-answer": {"the number, copied": "answer = 42"}})
    assert run_and_judge(nb, exercises(nb, wrong), on_gpu=False, cwd=Path(__file__).parent) == [
        "the solution of ex90-1-answer is not accepted by ex90-1-check: '❌ 41 is not it\\n'",
        "ex90-1-answer: the cheat 'the number, copied' is not refused: '✅ right\\n'"]


def test_every_notebook_with_exercises_has_reference_solutions():
    """A notebook whose stored outputs hold an unanswered exercise (⬜) has a solutions module."""
    import nbformat
    have = {p.stem[2:] for p in solution_modules()}
    missing = []
    for nb_path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        if any(c.cell_type == "code" and UNANSWERED in printed(c) for c in nb.cells) and nb_path.stem[:2] not in have:
            missing.append(nb_path.name)
    assert not missing, f"exercises without solutions/nbNN.py: {missing}"
