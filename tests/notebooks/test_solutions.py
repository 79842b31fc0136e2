"""Every exercise accepts its reference solution and refuses the cheats a learner might try, run in
the notebook itself (in this machine's mode: cpu in CI).

``solutions/nbNN.py`` (out of the learner's view) holds, for notebook ``NN_*.ipynb``:

* ``SOLUTIONS = {"<answer cell id>": "<code>"}``: what replaces the learner's answer cell;
* ``CHEATS = {"<answer cell id>": {"<the cheat, in words>": "<code>"}}``: answers that must be refused;
* ``CHECKS = {"<answer cell id>": "<check cell id>"}`` (optional): the cell that checks the answer,
  by default the next code cell after the answer cell;
* ``CPU_CHEATS`` (optional, as ``CHEATS``): answers refused only in cpu mode, where the CUDA emulation
  counts what every thread ran (the split of the work, a branch no thread takes); on a GPU the evidence
  is the compiled code, where they cannot show. Tried with the others in cpu mode only.

First, in the notebook as stored: each check cell's output is the unmodified starter's (⬜, no
✅ or ❌), and every cell whose stored output has a ⬜ is the check of some solution (no exercise
without a reference solution). Then the notebook runs top to bottom with every solution in place:
each check cell must print ✅ and no ❌, and no cell may print ⬜. Then, in the same kernel, each
cheat runs in place of its answer and the check cell runs again: it must print ❌ (the solution
is run again afterwards, so the next cheat starts from a solved notebook).
"""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS_DIR = ROOT / "solutions"


def solution_modules():
    return sorted(SOLUTIONS_DIR.glob("nb[0-9][0-9].py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"solutions_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def notebook_for(path: Path) -> Path:
    found = sorted(NOTEBOOKS.glob(f"{path.stem[2:]}_*.ipynb"))
    assert len(found) == 1, f"{path.name}: no single notebook {path.stem[2:]}_*.ipynb (found {found})"
    return found[0]


def printed(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"] if isinstance(o["text"], str) else "".join(o["text"]))
        elif o.get("output_type") in ("execute_result", "display_data"):
            out.append(str(o.get("data", {}).get("text/plain", "")))
        elif o.get("output_type") == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
    return "".join(out)


def check_cell_ids(nb, answers) -> dict:
    """answer cell id -> check cell id (CHECKS, or the next code cell)."""
    ids = [c.get("id") for c in nb.cells]
    found = {}
    for answer in answers:
        assert answer in ids, f"no cell with id {answer!r} in the notebook"
        later = [c for c in nb.cells[ids.index(answer) + 1:] if c.cell_type == "code"]
        assert later, f"no code cell after {answer!r} to check it"
        found[answer] = later[0].get("id")
    return found


@pytest.mark.parametrize("path", solution_modules(), ids=lambda p: p.name)
def test_solutions_pass_and_cheats_are_refused(path):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from gpu_course import mode

    sol = load(path)
    solutions, cheats = sol.SOLUTIONS, dict(getattr(sol, "CHEATS", {}))
    if not mode.ON_GPU:
        for answer, more in getattr(sol, "CPU_CHEATS", {}).items():
            cheats[answer] = {**cheats.get(answer, {}), **more}
    nb_path = notebook_for(path)
    nb = nbformat.read(nb_path, as_version=4)
    checks = check_cell_ids(nb, solutions) | getattr(sol, "CHECKS", {})
    assert set(cheats) <= set(solutions), f"cheats for exercises without a solution: {set(cheats) - set(solutions)}"
    by_id = {c.get("id"): (i, c) for i, c in enumerate(nb.cells)}
    problems = []
    for answer, check in checks.items():
        stored = printed(by_id[check][1])
        if "⬜" not in stored or "✅" in stored or "❌" in stored:
            problems.append(f"the stored output of {check} (the check of {answer}) is not the starter's ⬜: "
                            f"{stored!r}")
    for cell in nb.cells:
        if cell.cell_type == "code" and "⬜" in printed(cell) and cell.get("id") not in checks.values():
            problems.append(f"cell {cell.get('id')} checks an exercise that has no solution in {path.name}")
    assert not problems, "\n".join(problems)
    for answer, code in solutions.items():
        by_id[answer][1].source = code

    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and "⬜" in printed(cell):
                problems.append(f"cell {cell.get('id')} has an exercise without a solution: {printed(cell)!r}")
        for answer, check in checks.items():
            text = printed(by_id[check][1])
            if "✅" not in text or "❌" in text:
                problems.append(f"the solution of {answer} is not accepted by {check}: {text!r}")
        for answer, tries in cheats.items():
            i_answer, answer_cell = by_id[answer]
            i_check, check_cell = by_id[checks[answer]]
            for what, code in tries.items():
                cheat = nbformat.v4.new_code_cell(code)
                try:
                    client.execute_cell(cheat, i_answer)
                except CellExecutionError as e:
                    problems.append(f"{answer}: the cheat '{what}' itself raised: {str(e).strip().splitlines()[-1]}")
                    client.execute_cell(nbformat.v4.new_code_cell(answer_cell.source), i_answer)
                    continue
                probe = nbformat.v4.new_code_cell(check_cell.source)
                client.execute_cell(probe, i_check)
                text = printed(probe)
                if "❌" not in text or "✅" in text:
                    problems.append(f"{answer}: the cheat '{what}' is not refused: {text!r}")
                client.execute_cell(nbformat.v4.new_code_cell(answer_cell.source), i_answer)
    assert not problems, "\n".join(problems)


def test_every_notebook_with_exercises_has_reference_solutions():
    """A notebook whose stored outputs hold an unanswered exercise (⬜) has a solutions module."""
    import nbformat
    have = {p.stem[2:] for p in solution_modules()}
    missing = []
    for nb_path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        if any(c.cell_type == "code" and "⬜" in printed(c) for c in nb.cells) and nb_path.stem[:2] not in have:
            missing.append(nb_path.name)
    assert not missing, f"exercises without solutions/nbNN.py: {missing}"
