"""How an exercise is judged (tests/notebooks/exercise_runs.py), with a stand-in for the notebook's
kernel: a namespace that runs code and captures what it prints. (The same, in nbval's kernel, is
tests/notebooks/test_course.py's fixture run.)"""
import contextlib
import doctest
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tests.notebooks import exercise_runs  # noqa: E402
from tests.notebooks.exercise_runs import Exercise, judge  # noqa: E402

CHECK = """if answer is None:
    print("⬜ not answered yet")
elif answer == 42:
    print("✅ right")
else:
    print("❌ wrong")"""


def kernel():
    """``run(code) -> (printed, error)`` in one namespace, as a notebook's kernel runs cells."""
    ns = {"answer": None}

    def run(code):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(code, ns)
        except Exception as e:
            return out.getvalue(), f"{type(e).__name__}: {e}"
        return out.getvalue(), None
    return run, ns


def test_the_module_examples():
    result = doctest.testmod(exercise_runs)
    assert result.attempted > 0 and result.failed == 0


def test_a_right_solution_with_refused_cheats_passes_and_stays_in_place():
    run, ns = kernel()
    ex = Exercise("a", "c", CHECK, "answer = 6 * 7", {"off by one": "answer = 41"}, {"zero": "answer = 0"})
    assert judge(ex, run, on_gpu=False) == []
    assert ns["answer"] == 42   # the solution again after the last cheat


def test_every_misjudged_answer_is_reported():
    run, _ = kernel()
    ex = Exercise("a", "c", CHECK, "answer = 42", {"copied": "answer = 42", "a typo": "answer = fourty_two"},
                  {"cpu only": "answer = 42"})
    problems = judge(ex, run, on_gpu=False)
    assert problems == ["a: the cheat 'copied' is not refused: '✅ right\\n'",
                        "a: the cheat 'a typo' itself raised: NameError: name 'fourty_two' is not defined",
                        "a: the cheat 'cpu only' is not refused: '✅ right\\n'"]
    assert len(judge(ex, run, on_gpu=True)) == 2   # CPU_CHEATS are tried in cpu mode only


def test_unusual_answers_must_be_accepted_and_the_solution_is_put_back():
    run, ns = kernel()
    ex = Exercise("a", "c", CHECK, "answer = 42", {"zero": "answer = 0"},
                  unusual={"by a sum": "answer = 40 + 2", "wrongly listed": "answer = 43"})
    assert judge(ex, run, on_gpu=True) == ["a: the right answer 'wrongly listed' is not accepted: '❌ wrong\\n'"]
    assert ns["answer"] == 42


def test_each_refusal_is_recorded_where_asked(tmp_path, monkeypatch):
    log = tmp_path / "refusals.jsonl"
    monkeypatch.setenv("COURSE_REFUSALS", str(log))
    run, _ = kernel()
    assert judge(Exercise("a", "c", CHECK, "answer = 42", {"off by one": "answer = 41"}), run, on_gpu=True) == []
    assert log.read_text().splitlines() == ['{"answer": "a", "cheat": "off by one", "refusal": "❌ wrong"}']


def test_a_rejected_or_raising_solution_is_reported():
    run, _ = kernel()
    assert judge(Exercise("a", "c", CHECK, "answer = 41"), run, on_gpu=True) == \
        ["the solution of a is not accepted by c: '❌ wrong\\n'"]
    assert judge(Exercise("a", "c", CHECK, "answer = 1 / 0"), run, on_gpu=True) == \
        ["the solution of a raised: ZeroDivisionError: division by zero"]
    assert judge(Exercise("a", "c", "raise RuntimeError('check broke')", "answer = 42"), run, on_gpu=True) == \
        ["the solution of a is not accepted by c: RuntimeError: check broke"]
    half = "print('✅ part 1'); print('⬜ part 2 not answered yet')"   # a check of two answers, one given
    assert judge(Exercise("a", "c", half, "answer = 42"), run, on_gpu=True) == \
        ["the solution of a is not accepted by c: '✅ part 1\\n⬜ part 2 not answered yet\\n'"]


def test_cheats_are_built_without_the_nvcc_check_and_the_solution_with_it_in_cpu_mode(monkeypatch):
    monkeypatch.setenv("CUDA_EMU_NVCC", "1")
    run, ns = kernel()
    ns["seen"] = []
    note = "; seen.append(__import__('os').environ.get('CUDA_EMU_NVCC'))"
    ex = Exercise("a", "c", CHECK, "answer = 42" + note, {"off by one": "answer = 41" + note})
    assert judge(ex, run, on_gpu=False) == []
    assert ns["seen"] == ["1", "0", "1"]       # solution, cheat, solution again
    import os
    assert os.environ["CUDA_EMU_NVCC"] == "1" and "_COURSE_NVCC_WAS" not in os.environ
    ns["seen"] = []
    assert judge(ex, run, on_gpu=True) == [] and ns["seen"] == ["1", "1", "1"]   # a GPU builds with nvcc anyway
