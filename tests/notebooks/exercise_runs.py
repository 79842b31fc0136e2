"""Judging a notebook's exercises against ``solutions/nbNN.py``, in the kernel that runs the notebook.

``solutions/nbNN.py`` (out of the learner's view) holds, for notebook ``NN_*.ipynb``:

* ``SOLUTIONS = {"<answer cell id>": "<code>"}``: what replaces the learner's answer cell;
* ``CHEATS = {"<answer cell id>": {"<the cheat, in words>": "<code>"}}``: answers that must be refused;
* ``CHECKS = {"<answer cell id>": "<check cell id>"}`` (optional): the cell that checks the answer,
  by default the next code cell after the answer cell;
* ``UNUSUAL`` (optional, as ``CHEATS``): right answers written otherwise than the solution (another split of
  the work, another order of the loops, a helper function, a copy of an input), which must be accepted;
* ``CPU_CHEATS`` (optional, as ``CHEATS``): answers refused only in cpu mode, where the CUDA emulation
  counts what every thread ran (the split of the work, a branch no thread takes); on a GPU the evidence
  is the compiled code, where they cannot show. Tried with the others in cpu mode only.

The notebook runs once, top to bottom, as stored (each answer cell holds the learner's starter). Right
after an exercise's check cell has run, in the same kernel, :func:`judge` runs the solution and then the
check cell (it must print ✅, and neither ❌ nor ⬜), then each unusual answer and the check cell (as the solution),
then each cheat and the check cell (it must print ❌ and no ✅),
the solution again after each cheat; the solution stays in place for the cells that follow. So every
exercise is judged in the state the notebook has at its check cell, as a learner who solves the
exercises in order has it: a later cell that rebinds a name the check reads cannot change the verdict.

Two runners use it: ``pytest --nbval`` (``course.py test``), where the root conftest.py adds an
:class:`ExerciseItem` after each check cell of nbval's own run, and ``tests/notebooks/test_solutions.py``
run without nbval on the notebook (for example alone on a GPU), which runs the notebook with nbclient.
"""
from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS_DIR = ROOT / "solutions"
ACCEPTED, REFUSED, UNANSWERED = "✅", "❌", "⬜"


def solution_modules(solutions_dir: Path = SOLUTIONS_DIR) -> list:
    """The ``nbNN.py`` files of ``solutions_dir``, sorted."""
    return sorted(solutions_dir.glob("nb[0-9][0-9].py"))


def load(path: Path):
    """Import a solutions module from its file."""
    spec = importlib.util.spec_from_file_location(f"solutions_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def notebook_for(path: Path, notebooks: Path = NOTEBOOKS) -> Path:
    """The notebook ``NN_*.ipynb`` of ``solutions/nbNN.py``."""
    found = sorted(notebooks.glob(f"{path.stem[2:]}_*.ipynb"))
    assert len(found) == 1, f"{path.name}: no single notebook {path.stem[2:]}_*.ipynb (found {found})"
    return found[0]


def solutions_for(notebook: Path) -> Path | None:
    """``nbNN.py`` of the notebook ``NN_*.ipynb`` in the ``solutions`` folder beside the notebook's
    folder, or ``None`` if there is none.

    >>> solutions_for(NOTEBOOKS / "04_matmul_shared_memory.ipynb") == SOLUTIONS_DIR / "nb04.py"
    True
    >>> solutions_for(ROOT / "tests/notebooks/fixtures/good.ipynb") is None
    True
    """
    notebook = Path(notebook)
    path = notebook.parent.parent / "solutions" / f"nb{notebook.name[:2]}.py"
    return path if notebook.name[:2].isdigit() and path.exists() else None


def printed(cell) -> str:
    """What a code cell printed: its streams, the text of its results and displays, its error."""
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"] if isinstance(o["text"], str) else "".join(o["text"]))
        elif o.get("output_type") in ("execute_result", "display_data"):
            out.append(str(o.get("data", {}).get("text/plain", "")))
        elif o.get("output_type") == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
    return "".join(out)


@dataclass
class Exercise:
    """One exercise: its answer and check cells, the reference solution and the cheats to refuse
    (``cpu_cheats``: refused in cpu mode only)."""
    answer: str          # the answer cell's id
    check: str           # the check cell's id
    check_source: str
    solution: str
    cheats: dict = field(default_factory=dict)       # {what the cheat is: code}
    cpu_cheats: dict = field(default_factory=dict)
    unusual: dict = field(default_factory=dict)      # {what the right answer does otherwise: code}

    def cheats_to_try(self, on_gpu: bool) -> dict:
        """The cheats to try in this mode: ``cheats``, and ``cpu_cheats`` in cpu mode.

        >>> ex = Exercise("a", "c", "", "x = 1", {"copied": "x = 2"}, {"idle threads": "x = 3"})
        >>> list(ex.cheats_to_try(on_gpu=True)), list(ex.cheats_to_try(on_gpu=False))
        (['copied'], ['copied', 'idle threads'])
        """
        return self.cheats if on_gpu else {**self.cheats, **self.cpu_cheats}


def exercises(nb, sol) -> list:
    """The exercises of notebook ``nb`` (an nbformat notebook) from its solutions module ``sol``, in
    the order of their check cells."""
    cheats, cpu_cheats = getattr(sol, "CHEATS", {}), getattr(sol, "CPU_CHEATS", {})
    unusual = getattr(sol, "UNUSUAL", {})
    stray = (set(cheats) | set(cpu_cheats) | set(unusual)) - set(sol.SOLUTIONS)
    assert not stray, f"cheats or unusual answers for exercises without a solution: {sorted(stray)}"
    checks = check_cell_ids(nb, sol.SOLUTIONS) | getattr(sol, "CHECKS", {})
    by_id = {c.get("id"): c for c in nb.cells}
    missing = sorted(set(checks.values()) - set(by_id))
    assert not missing, f"no check cell with id {missing} in the notebook"
    found = [Exercise(answer, checks[answer], by_id[checks[answer]].source, code, dict(cheats.get(answer, {})),
                      dict(cpu_cheats.get(answer, {})), dict(unusual.get(answer, {})))
             for answer, code in sol.SOLUTIONS.items()]
    order = [c.get("id") for c in nb.cells]
    return sorted(found, key=lambda ex: order.index(ex.check))


def check_cell_ids(nb, answers) -> dict:
    """answer cell id -> check cell id: the next code cell after the answer cell."""
    ids = [c.get("id") for c in nb.cells]
    found = {}
    for answer in answers:
        assert answer in ids, f"no cell with id {answer!r} in the notebook"
        later = [c for c in nb.cells[ids.index(answer) + 1:] if c.cell_type == "code"]
        assert later, f"no code cell after {answer!r} to check it"
        found[answer] = later[0].get("id")
    return found


def stored_output_problems(nb, exs: list, solutions_name: str) -> list:
    """What is wrong with the notebook as stored: a check cell whose output is not the unmodified
    starter's (⬜, no ✅ or ❌), or a cell printing ⬜ that checks no exercise of ``solutions_name``."""
    by_id = {c.get("id"): c for c in nb.cells}
    problems = []
    for ex in exs:
        stored = printed(by_id[ex.check])
        if UNANSWERED not in stored or ACCEPTED in stored or REFUSED in stored:
            problems.append(f"the stored output of {ex.check} (the check of {ex.answer}) is not the "
                            f"starter's {UNANSWERED}: {stored!r}")
    checks = {ex.check for ex in exs}
    for cell in nb.cells:
        if cell.cell_type == "code" and UNANSWERED in printed(cell) and cell.get("id") not in checks:
            problems.append(f"cell {cell.get('id')} checks an exercise that has no solution in {solutions_name}")
    return problems


def nvcc_check_code(on: bool) -> str:
    """Code that turns the CPU emulation's nvcc check of CUDA C device code off (``CUDA_EMU_NVCC=0``) in the
    kernel, or back to what it was. The cheats are built without it in cpu mode: what is judged is their refusal,
    the check costs ~0.6 s of CPU a build, and on a GPU nvcc compiles them anyway. The solution keeps it (its
    build is cached with the check, so it must be back on before the solution runs again)."""
    if on:
        return "import os as _os_\n_os_.environ['CUDA_EMU_NVCC'] = _os_.environ.pop('_COURSE_NVCC_WAS', '1')\ndel _os_"
    return ("import os as _os_\n_os_.environ['_COURSE_NVCC_WAS'] = _os_.environ.get('CUDA_EMU_NVCC', '1')\n"
            "_os_.environ['CUDA_EMU_NVCC'] = '0'\ndel _os_")


def record_refusal(answer: str, cheat: str, text: str) -> None:
    """Where ``COURSE_REFUSALS`` names a file, append to it (one JSON line) the refused ``cheat`` of exercise
    ``answer`` and the first line of the check's refusal: the report of what each cheat was told."""
    path = os.environ.get("COURSE_REFUSALS")
    if path:
        why = next((line for line in text.splitlines() if REFUSED in line), text.strip())
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"answer": answer, "cheat": cheat, "refusal": why}, ensure_ascii=False) + "\n")


def judge(ex: Exercise, run, on_gpu: bool) -> list:
    """Run ``ex``'s solution and check, then each unusual answer and the check, then each cheat of this mode
    and the check, through ``run(code)`` (which executes code in the notebook's kernel and returns ``(printed
    text, error or None)``); return the problems found (empty: the solution and every unusual answer are
    accepted, every cheat refused). The solution is in place again at the end."""
    problems = []
    _, error = run(ex.solution)
    if error:
        return [f"the solution of {ex.answer} raised: {error}"]
    text, error = run(ex.check_source)
    if error or ACCEPTED not in text or REFUSED in text or UNANSWERED in text:
        problems.append(f"the solution of {ex.answer} is not accepted by {ex.check}: {error or repr(text)}")
    for what, code in ex.unusual.items():
        _, error = run(code)
        text, error = (run(ex.check_source) if not error else ("", error))
        if error or ACCEPTED not in text or REFUSED in text or UNANSWERED in text:
            problems.append(f"{ex.answer}: the right answer '{what}' is not accepted: {error or repr(text)}")
    if ex.unusual:
        _, error = run(ex.solution)
        if error:
            return problems + [f"the solution of {ex.answer} raised when put back after the unusual answers: {error}"]
    for what, code in ex.cheats_to_try(on_gpu).items():
        if not on_gpu:
            run(nvcc_check_code(False))
        _, error = run(code)
        if error:
            problems.append(f"{ex.answer}: the cheat '{what}' itself raised: {error}")
        else:
            text, error = run(ex.check_source)
            if error or REFUSED not in text or ACCEPTED in text:
                problems.append(f"{ex.answer}: the cheat '{what}' is not refused: {error or repr(text)}")
            else:
                record_refusal(ex.answer, what, text)
        if not on_gpu:
            run(nvcc_check_code(True))
        _, error = run(ex.solution)
        if error:
            problems.append(f"the solution of {ex.answer} raised when put back after a cheat: {error}")
            break
    return problems


# ------------------------------------------------------------------------ in nbval's kernel
class ExerciseFailed(Exception):
    """An exercise's solution was not accepted, or a cheat was not refused."""


class KernelTimeout(Exception):
    """Code sent to nbval's kernel did not finish in time."""


def run_in_kernel(kernel, code: str, timeout: float) -> tuple:
    """Execute ``code`` in nbval's ``RunningKernel`` as a cell would run; return ``(printed text,
    error or None)``, the error as ``"Name: message"``. Raises :class:`KernelTimeout` (after
    interrupting the kernel) when it runs longer than ``timeout`` seconds."""
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    try:
        kernel.await_reply(msg_id, timeout=timeout)
    except Empty:
        kernel.interrupt()
        raise KernelTimeout(f"no reply within {timeout:g} s") from None
    text, error = [], None
    while True:
        try:
            msg = kernel.get_message("iopub", timeout=30)
        except Empty:
            raise KernelTimeout("the kernel replied but sent no output (no idle status in 30 s)") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return "".join(text), error
        if kind == "stream":
            text.append(content["text"])
        elif kind in ("display_data", "execute_result"):
            text.append(str(content["data"].get("text/plain", "")))
        elif kind == "error":
            error = f"{content['ename']}: {content['evalue']}"


class ExerciseItem(pytest.Item):
    """An exercise of a notebook, judged (:func:`judge`) in nbval's kernel right after nbval has run
    its check cell. Its parent is nbval's ``IPyNbFile``, which holds the kernel."""

    def __init__(self, *, exercise: Exercise, **kwargs):
        super().__init__(**kwargs)
        self.exercise = exercise

    def runtest(self):
        nbfile = self.parent
        if nbfile.timed_out:
            pytest.xfail("a cell of this notebook timed out before")
        kernel = nbfile.kernel
        if kernel is None or not kernel.is_alive():
            raise ExerciseFailed("the notebook's kernel is not running")
        timeout = self.config.option.nbval_cell_timeout

        def run(code):
            try:
                return run_in_kernel(kernel, code, timeout)
            except KernelTimeout as e:
                nbfile.timed_out = True
                raise ExerciseFailed(f"{self.exercise.answer}: {e}") from None

        from gpu_course.mode import ON_GPU   # the kernel's mode: same machine, same environment
        problems = judge(self.exercise, run, ON_GPU)
        if problems:
            raise ExerciseFailed("\n".join(problems))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ExerciseFailed):
            return f"{self.name}:\n{excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{self.name}"


SOLUTIONS_TEST = "test_solutions_pass_and_cheats_are_refused"   # test_solutions.py's own run


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Each notebook runs once: where nbval runs a notebook that has a solutions module, its
    exercises are judged in nbval's kernel after their check cells (:func:`add_exercise_items`), and
    test_solutions.py's own run of that notebook is deselected. (A plugin of the root conftest.py.)"""
    if not (getattr(config.option, "nbval", False) or getattr(config.option, "nbval_lax", False)):
        return
    judged = {p.name[:2] for p in add_exercise_items(items)}
    again = [item for item in items if getattr(item, "originalname", None) == SOLUTIONS_TEST
             and item.callspec.params["path"].stem[2:] in judged]
    if again:
        config.hook.pytest_deselected(items=again)
        items[:] = [item for item in items if item not in again]


def add_exercise_items(items: list) -> set:
    """Put an :class:`ExerciseItem` after the check cell of each exercise of every notebook nbval
    collected that has a solutions module; return those notebooks' paths."""
    from nbval.plugin import IPyNbCell

    done, out = set(), []
    by_file = {}
    for item in items:
        if isinstance(item, IPyNbCell) and solutions_for(item.path):
            by_file.setdefault(item.parent, {})[item.cell.get("id")] = item
    after = {}   # check cell item -> exercise items to run after it
    for nbfile, cells in by_file.items():
        try:
            exs = exercises(nbfile.nb, load(solutions_for(nbfile.path)))
        except AssertionError:   # a solutions module that does not fit its notebook: test_solutions.py says how
            continue
        for ex in exs:
            if ex.check in cells:
                after.setdefault(cells[ex.check], []).append(
                    ExerciseItem.from_parent(nbfile, name=f"exercise {ex.answer}", exercise=ex))
        done.add(nbfile.path)
    for item in items:
        out.append(item)
        out.extend(after.get(item, []))
    items[:] = out
    return done
