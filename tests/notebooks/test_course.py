"""Tests of the course's plumbing: course.py, the notebooks' setup cells, nbval failing when it
should, JupyterLab serving the notebooks, and .ci/run matching the README."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(ROOT))
import course  # noqa: E402


def notebooks():
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


# ------------------------------------------------------------------------- nbval can fail
# The fixtures' notebooks, each with what its run must give. 9N_exercise.ipynb are copies of
# fixtures/90_exercise.ipynb, each with its own solutions/nb9N.py: its exercise is judged in nbval's
# kernel after the check cell, as `course.py test` judges the course's exercises.
EXERCISES = {   # notebook: (SOLUTIONS, CHEATS, the failure it must report or None)
    "90_exercise.ipynb": ('{"ex90-1-answer": "answer = 6 * 7"}',
                          '{"ex90-1-answer": {"a string": "answer = \'42\'", "a float": "answer = 42.0"}}', None),
    "91_exercise.ipynb": ('{"ex90-1-answer": "answer = 6 * 7"}', '{"ex90-1-answer": {"the number, copied": "answer = 42"}}',
                          "ex90-1-answer: the cheat 'the number, copied' is not refused: '✅ right\\n'"),
    "92_exercise.ipynb": ('{"ex90-1-answer": "answer = 41"}', '{}',
                          "the solution of ex90-1-answer is not accepted by ex90-1-check: '❌ 41 is not it\\n'"),
    "93_exercise.ipynb": ('{"ex90-1-answer": "answer = 6 * 7"}', '{"ex90-1-answer": {"a typo": "answer = fourty_two"}}',
                          "ex90-1-answer: the cheat 'a typo' itself raised: NameError: name 'fourty_two' is not defined"),
}


@pytest.fixture(scope="module")
def nbval_run(tmp_path_factory):
    """nbval, as ``course.py test`` runs it (with the exercises' plugin), once over copies of the
    fixtures' notebooks: {notebook: {test name: (outcome, message)}}."""
    tmp = tmp_path_factory.mktemp("nbval")
    (tmp / "notebooks").mkdir()
    (tmp / "solutions").mkdir()
    for name in ("good.ipynb", "planted_error.ipynb", "planted_mismatch.ipynb"):
        shutil.copy(FIXTURES / name, tmp / "notebooks")
    for name, (solutions, cheats, _) in EXERCISES.items():
        shutil.copy(FIXTURES / "90_exercise.ipynb", tmp / "notebooks" / name)
        (tmp / "solutions" / f"nb{name[:2]}.py").write_text(f"SOLUTIONS = {solutions}\nCHEATS = {cheats}\n")
    (tmp / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.lean_imports", "-q",
                        "-p", "tests.notebooks.exercise_runs", *course.NBVAL_ARGS, "--junitxml", str(tmp / "run.xml"),
                        "notebooks"], capture_output=True, text=True, cwd=tmp, env=env, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr   # the planted failures fail the run
    import xml.etree.ElementTree as ET
    results = {}
    for case in ET.parse(tmp / "run.xml").iter("testcase"):
        notebook = re.search(r"[\w-]+\.ipynb", case.get("classname") + "." + case.get("name")).group(0)
        failure = case.find("failure")
        results.setdefault(notebook, {})[case.get("name")] = (
            "passed" if failure is None else "failed", "" if failure is None else failure.get("message", "") +
            (failure.text or ""))
    return results


def outcomes(results: dict) -> list:
    return sorted(outcome for outcome, _ in results.values())


@pytest.mark.slow
def test_nbval_passes_a_good_notebook(nbval_run):
    assert outcomes(nbval_run["good.ipynb"]) == ["passed", "passed"]


@pytest.mark.slow
@pytest.mark.parametrize("name,symptom", [("planted_error.ipynb", "CheckFailed"),
                                          ("planted_mismatch.ipynb", "41")])
def test_nbval_fails_a_planted_error(nbval_run, name, symptom):
    assert outcomes(nbval_run[name]) == ["failed"]
    assert symptom in next(iter(nbval_run[name].values()))[1]


@pytest.mark.slow
@pytest.mark.parametrize("name", EXERCISES)
def test_an_exercise_fails_the_run_when_a_solution_or_a_cheat_is_misjudged(nbval_run, name):
    results, failure = nbval_run[name], EXERCISES[name][2]
    assert set(results) == {"Cell 0", "Cell 1", "Cell 2", "Cell 3", "exercise ex90-1-answer"}
    assert all(outcome == "passed" for test, (outcome, _) in results.items() if test.startswith("Cell"))
    outcome, message = results["exercise ex90-1-answer"]
    if failure is None:
        # accepted though a later cell rebinds `expected`, which the check reads: judged in order
        assert outcome == "passed", message
    else:
        assert outcome == "failed" and failure in message, message


# ---------------------------------------------------------------------- notebooks' plumbing
def test_notebooks_setup_cells_match_course_py():
    assert notebooks(), "no notebooks found"
    assert course.main(["setup-cells", "--check"]) == 0


def test_setup_cells_adds_badge_and_setup_cell(tmp_path, monkeypatch):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# 42 · Title\n", "text"]},
                    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": ["import utils"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "42_x.ipynb"
    path.write_text(json.dumps(nb))
    before = path.read_text()
    assert course.write_setup_cells(path, write=False) is True  # what `setup-cells --check` does
    assert path.read_text() == before
    assert course.write_setup_cells(path) is True
    cells = json.loads(path.read_text())["cells"]
    assert cells[0]["source"][0].startswith("[![Open In Colab]")
    assert "blob/main/notebooks/42_x.ipynb" in cells[0]["source"][0]
    assert "".join(cells[0]["source"]).endswith("# 42 · Title\ntext")
    assert "".join(cells[1]["source"]) == course.SETUP_CELL and cells[1]["id"] == "course-setup"
    assert "".join(cells[2]["source"]) == "import utils"
    assert course.write_setup_cells(path) is False  # idempotent


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_every_notebook_starts_with_badge_setup_and_utils(path):
    cells = json.loads(path.read_text())["cells"]
    src = ["".join(c["source"]) for c in cells]
    assert src[0].startswith("[![Open In Colab]") and course.REPO_SLUG in src[0]
    assert src[1] == course.SETUP_CELL
    code = [s for c, s in zip(cells, src) if c["cell_type"] == "code"][1:]
    assert "import utils" in code[0], "the first cell after setup must import utils"
    assert not any("sys.path.insert" in s or "sys.path.append" in s for s in code)
    assert not any(re.search(r"""device\s*=\s*["']cuda""", s) for s in code)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_every_notebook_is_valid_nbformat_and_its_code_cells_fit_a_screen(path):
    """The schema Jupyter itself checks (a markdown cell carrying ``execution_count`` once slipped through a
    store), and the course's rule that a code cell fits on a screen: at most 25 lines."""
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.read(path, as_version=4))
    long = [(c.get("id"), n) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"
            and (n := len("".join(c["source"]).splitlines())) > 25]
    assert not long, f"code cells over 25 lines (id, lines): {long}"


@pytest.mark.slow
def test_colab_branch_of_the_setup_cell(tmp_path):
    """Run the setup cell as Colab would (google.colab imported), cloning this repository."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout to clone from")
    fake = tmp_path / "fake"
    (fake / "google").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab.py").write_text("")
    course_dir = tmp_path / "content" / "gpu-course"
    code = ("import google.colab\n" + course.SETUP_CELL +
            "\nimport utils\nprint('utils from', utils.__file__)\n")
    env = {**os.environ, "PYTHONPATH": str(fake), "COURSE_DIR": str(course_dir),
           "COURSE_REPO": ROOT.as_uri(), "COURSE_MODE": "cpu"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (course_dir / "course.py").exists() and (course_dir / "utils.py").exists()
    assert "Colab setup: nothing to install" in r.stdout
    assert f"utils from {course_dir / 'utils.py'}" in r.stdout
    # Outside Colab the same cell does nothing at all.
    r = subprocess.run([sys.executable, "-c", course.SETUP_CELL + "\nprint(len(sys.path))"],
                       capture_output=True, text=True, env={**env, "PYTHONPATH": ""}, timeout=60)
    assert r.returncode == 0 and r.stdout.strip().isdigit()


def test_colab_installs_only_what_is_missing():
    have = {"numba_cuda", "ninja"}
    missing = course.colab_missing(lambda m: object() if m in have else None)
    assert missing == [req for mod, req in course.COLAB_NEEDS if mod == "wurlitzer"]
    assert course.colab_missing(lambda m: object()) == []


# ------------------------------------------------------------------------- README and CI
def readme_commands():
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^(python3? course\.py \w+)", quick, re.M)


def test_readme_quickstart_has_exactly_two_commands_and_ci_runs_the_test_one():
    cmds = readme_commands()
    assert cmds == ["python3 course.py lab", "python3 course.py test"]
    ci = [l for l in (ROOT / ".ci" / "run").read_text().splitlines()
          if l.strip() and not l.lstrip().startswith("#") and not l.startswith(("set ", "cd "))]
    # before it, only the installs of what optional tests need (the browser, clang++), which cannot fail the run
    assert ci[-1] == f"exec {cmds[1]}" and ci[0].startswith("bash .ci/browser-deps || echo ")
    assert all(l.startswith(("bash .ci/browser-deps || echo ", "bash .ci/clang-deps || echo ")) for l in ci[:-1]), ci


def test_ci_installs_the_browser_tests_needs_from_debian_and_the_browser_extra():
    script = ROOT / ".ci" / "browser-deps"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    assert "apt-get install" in text and "sudo -n" in text and "playwright install" not in text  # no browser download
    assert '-e ".[browser]"' in text and "browser = [" in (ROOT / "pyproject.toml").read_text()


def test_readme_results_table_is_made_from_the_results_files():
    import utils
    text = (ROOT / "README.md").read_text()
    block = text.split(course.README_BEGIN, 1)[1].split(course.README_END, 1)[0].strip()
    assert block == utils.results_markdown(utils.stored_results()).strip(), \
        "README's results table is stale: run `python3 course.py results`"


def test_usage_and_unknown_command(capsys):
    assert course.main(["frobnicate"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("course.py: unknown command 'frobnicate'. Commands: lab, test")
    assert course.main([]) == 2 and "no command given" in capsys.readouterr().err
    assert course.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "python3 course.py lab" in out and "``" not in out  # plain text, no reST markup


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_closes(port: int, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
def test_lab_command_serves_the_notebooks(tmp_path):
    """`course.py lab` starts JupyterLab, which lists the notebooks over HTTP."""
    port, token = _free_port(), "course-test"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path), "JUPYTER_CONFIG_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "course.py"), "lab", "--no-browser",
                             f"--port={port}", f"--IdentityProvider.token={token}",
                             "--ServerApp.ip=127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        deadline, listing = time.time() + 120, None
        while time.time() < deadline and proc.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/api/contents?token={token}"
                with urllib.request.urlopen(url, timeout=5) as resp:
                    listing = json.load(resp)
                break
            except OSError:
                time.sleep(1)
        assert listing is not None, "JupyterLab did not answer within 120 s"
        names = {item["name"] for item in listing["content"]}
        assert {p.name for p in notebooks()} <= names
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}",
                                    timeout=10) as resp:
            assert resp.status == 200
            page = resp.read().decode()
        assert "JupyterLab" in page
        # the course's settings (jupyter_config/) apply: no news pop-up
        assert '"disabledExtensions": ["@jupyterlab/apputils-extension:announcements"]' in page
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        stopped = _port_closes(port, timeout=30)
        try:  # a safety net: nothing of this test outlives it, whatever happened above
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert stopped, "JupyterLab kept running after course.py was terminated"
    log = proc.stdout.read().decode()
    # a quiet start: no list of extensions or language servers, no "No web browser found"
    for noise in ("extension was successfully", "Skipped non-installed", "No web browser found",
                  "Serving notebooks from"):
        assert noise not in log, log
    assert len(log.splitlines()) <= 6, log


def test_execute_drops_a_notebooks_old_rows_for_its_device(tmp_path):
    path = tmp_path / "test-gpu-9000.csv"
    path.write_text("when,notebook,kernel,device,ms\n"
                    "t,01_timing,a,Test GPU 9000,1\nt,02_profiling,b,Test GPU 9000,2\n"
                    "t,01_timing,c,Test GPU 9000,3\n")
    assert course.drop_results("Test GPU 9000", "01_timing", results_dir=tmp_path) == 2
    assert path.read_text().splitlines() == ["when,notebook,kernel,device,ms",
                                             "t,02_profiling,b,Test GPU 9000,2"]
    assert course.drop_results("Other GPU", "01_timing", results_dir=tmp_path) == 0
