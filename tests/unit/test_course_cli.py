"""course.py as a user meets it: help, bad commands, notebook names, reset, the course's Jupyter
settings, lecture mode and slides (the deck of notebook 00 is built here, as in CI)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import course  # noqa: E402


def cli(*args, **kw):
    return subprocess.run([sys.executable, str(ROOT / "course.py"), *args], capture_output=True,
                          text=True, timeout=120, **kw)


# ------------------------------------------------------------------------------ help, errors
def test_help_is_plain_text_and_names_every_command():
    r = cli("--help")
    assert r.returncode == 0 and r.stderr == ""
    assert "`" not in r.stdout and "``" not in r.stdout  # no reST / Markdown markup
    for name in course.COMMANDS:
        assert re.search(rf"^\s+(python3 course\.py )?{re.escape(name)}\b", r.stdout, re.M), name


def test_unknown_command_says_so_on_stderr_with_status_2():
    r = cli("frobnicate")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("course.py: unknown command 'frobnicate'. Commands: lab, test")
    assert "--help" in r.stderr and len(r.stderr.splitlines()) == 1  # not the whole docstring
    r = cli()
    assert r.returncode == 2 and "no command given" in r.stderr and r.stdout == ""


def test_find_notebook_by_number_stem_name_or_path():
    nb03 = ROOT / "notebooks" / "03_first_cuda_kernels.ipynb"
    for name in ("03", "03_first_cuda_kernels", "03_first_cuda_kernels.ipynb", str(nb03),
                 "notebooks/03_first_cuda_kernels.ipynb"):
        assert course.find_notebook(name) == nb03, name
    for bad in ("99", "0", "", "first_cuda"):
        with pytest.raises(course.NotebookNotFound, match="no such notebook"):
            course.find_notebook(bad)


@pytest.mark.parametrize("cmd", ["reset", "slides", "lecture"])
def test_a_bad_notebook_name_is_status_2_with_the_list(cmd, capsys):
    assert course.main([cmd, "99_nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"course.py {cmd}: no such notebook: 99_nope") and "00_setup" in err


def test_reset_restores_stored_outputs_by_name_or_number(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    nb = repo / "notebooks" / "07_x.ipynb"
    nb.write_text('{"stored": "H100 outputs"}\n')
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(cmd, cwd=repo, check=True)
    monkeypatch.setattr(course, "ROOT", repo)
    monkeypatch.setattr(course, "NOTEBOOKS", repo / "notebooks")
    for name in ("07_x.ipynb", "07"):
        nb.write_text('{"stored": "CPU outputs"}\n')
        assert course.main(["reset", name]) == 0
        assert "H100" in nb.read_text()
    assert course.main(["reset", "99_nope.ipynb"]) == 2


def test_reset_with_a_jupyterlab_copy_beside_and_a_staged_notebook(tmp_path, monkeypatch, capsys):
    """Was: `reset 03` refused (two notebooks start with 03), `reset` of all failed with a git
    pathspec error on the untracked copy, and a notebook staged with `git add` kept its edits
    while reset said it had restored it."""
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    nb, other = repo / "notebooks" / "03_x.ipynb", repo / "notebooks" / "04_y.ipynb"
    for f in (nb, other):
        f.write_text('{"stored": "H100 outputs"}\n')
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                    cwd=repo, check=True, capture_output=True)
    git("init", "-q"), git("add", "-A"), git("commit", "-qm", "x")
    monkeypatch.setattr(course, "ROOT", repo)
    monkeypatch.setattr(course, "NOTEBOOKS", repo / "notebooks")
    copy = repo / "notebooks" / "03_x-Copy1.ipynb"
    copy.write_text('{"mine": 1}\n')
    assert course.find_notebook("03") == nb
    assert course.find_notebook("03_x-Copy1") == copy       # named in full, it is found
    nb.write_text('{"stored": "CPU outputs"}\n')
    git("add", str(nb))                                       # staged
    other.write_text('{"stored": "CPU outputs"}\n')
    capsys.readouterr()
    assert course.main(["reset"]) == 0                        # all of them
    out = capsys.readouterr().out
    assert "H100" in nb.read_text() and "H100" in other.read_text()
    assert "03_x.ipynb: the changes staged with git add were undone too" in out
    assert "left alone: 03_x-Copy1.ipynb" in out and copy.read_text() == '{"mine": 1}\n'
    nb.write_text('{"stored": "CPU outputs"}\n')
    git("add", str(nb))
    assert course.main(["reset", "03"]) == 0 and "H100" in nb.read_text()
    assert subprocess.run(["git", "status", "--porcelain", "--", str(nb)], cwd=repo,
                          capture_output=True, text=True).stdout == ""   # index clean as well


# ----------------------------------------------------------------- the course's Jupyter settings
def test_lab_env_puts_the_course_settings_first_and_keeps_the_others():
    env = course.lab_env({"JUPYTER_CONFIG_PATH": os.pathsep.join(["/a", "/b"]), "X": "1"})
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(course.JUPYTER_CONFIG), "/a", "/b"]
    assert env["X"] == "1"
    assert course.lab_env({})["JUPYTER_CONFIG_PATH"] == str(course.JUPYTER_CONFIG)
    twice = course.lab_env(course.lab_env({}))
    assert twice["JUPYTER_CONFIG_PATH"] == str(course.JUPYTER_CONFIG)


def test_jupyter_settings_quiet_the_log_and_drop_the_news_popup():
    server = json.loads((course.JUPYTER_CONFIG / "jupyter_server_config.json").read_text())
    assert server["ServerApp"]["log_level"] == server["LabApp"]["log_level"] == "WARN"
    page = json.loads((course.JUPYTER_CONFIG / "labconfig" / "page_config.json").read_text())
    assert page["disabledExtensions"] == {"@jupyterlab/apputils-extension:announcements": True}


def test_no_browser_only_when_none_is_found_and_the_user_did_not_say():
    def none():
        raise RuntimeError("could not locate runnable browser")

    assert course.browser_args([], find_browser=none) == ["--no-browser"]
    assert course.browser_args([], find_browser=lambda: object()) == []
    for given in (["--no-browser"], ["--browser=firefox"], ["--ServerApp.open_browser=True"]):
        assert course.browser_args(given, find_browser=none) == []


# ------------------------------------------------------------------------------------ lecture
def test_lecture_copy_is_fresh_each_time_and_leaves_the_repository_alone(tmp_path):
    src = tmp_path / "notebooks"
    src.mkdir()
    (src / "00_a.ipynb").write_text("stored")
    dest = tmp_path / "lecture"
    copies = course.make_lecture_copy(dest, src)
    assert [p.name for p in copies] == ["00_a.ipynb"]
    (dest / "00_a.ipynb").write_text("ran on a laptop")
    course.make_lecture_copy(dest, src)
    assert (dest / "00_a.ipynb").read_text() == "stored"
    assert (src / "00_a.ipynb").read_text() == "stored"


def test_lecture_opens_lab_on_the_copy_outside_the_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(course, "setup", lambda: Path(sys.executable))
    seen = {}
    monkeypatch.setattr(course, "run_lab", lambda py, root, args, open_nb=None, env=None:
                        seen.update(root=root, args=args, open_nb=open_nb, env=env) or 0)
    assert course.main(["lecture", "03", "--port=9999", "--no-browser"]) == 0
    dest = tmp_path / "gpu-course" / "lecture"
    assert seen["root"] == dest and ROOT not in dest.parents
    assert seen["open_nb"] == "03_first_cuda_kernels.ipynb" and (dest / seen["open_nb"]).exists()
    assert seen["args"] == ["--port=9999", "--no-browser"]
    assert seen["env"][course.LECTURE_ENV] == str(dest)
    assert {p.name for p in dest.glob("*.ipynb")} == {p.name for p in
                                                     (ROOT / "notebooks").glob("*.ipynb")}
    assert course.main(["lecture", "--port=9999"]) == 0 and seen["open_nb"] is None


def test_the_banner_says_what_running_does_to_the_stored_outputs():
    import utils
    from gpu_course import mode
    assert mode.LECTURE_ENV == course.LECTURE_ENV
    note = mode.stored_outputs_note({"JPY_SESSION_NAME": "/x/06_triton_basics.ipynb"}, colab=False)
    assert "H100" in note and "python3 course.py reset 06_triton_basics" in note
    assert "reset NB" in mode.stored_outputs_note({}, colab=False)
    assert "Open in Colab" in mode.stored_outputs_note({}, colab=True)
    lecture = mode.stored_outputs_note({course.LECTURE_ENV: "/tmp/lec"}, colab=False)
    assert lecture.startswith("Lecture copy") and "/tmp/lec" in lecture
    assert mode.stored_outputs_note({"COURSE_SAVE_RESULTS": "1"}) == ""  # `execute` stores outputs
    assert utils.banner().startswith(f"Mode {utils.MODE}:")


# ------------------------------------------------------------------------------------- slides
def md(text, **meta):
    return {"cell_type": "markdown", "id": f"m{abs(hash(text)) % 10**8}", "metadata": meta,
            "source": text}


def test_slide_types_from_headings_with_the_cells_own_metadata_winning():
    code = {"cell_type": "code", "id": "c1", "metadata": {}, "outputs": [], "source": "x = 1",
            "execution_count": None}
    setup = {**code, "id": "course-setup", "source": course.SETUP_CELL}
    nb = {"cells": [md("[![badge](x)]\n\n# 42 · Title"), setup,
                    md("## 1. Section\ntext"), code,
                    md("closing words\n\n### 1a. Sub\n```\n# not a heading\n```\n## 2. Next"),
                    md("## Kept whole\n## even so", slideshow={"slide_type": "fragment"}),
                    md("plain")],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    out = course.with_slide_types(nb)
    kinds = [(c["metadata"]["slideshow"]["slide_type"], course._src(c).split("\n")[0])
             for c in out["cells"]]
    assert kinds == [("slide", "[![badge](x)]"), ("skip", course.SETUP_CELL.split("\n")[0]),
                     ("slide", "## 1. Section"), ("-", "x = 1"), ("-", "closing words"),
                     ("subslide", "### 1a. Sub"), ("slide", "## 2. Next"),
                     ("fragment", "## Kept whole"), ("-", "plain")]
    ids = [c["id"] for c in out["cells"]]
    assert len(set(ids)) == len(ids)
    assert "slideshow" not in nb["cells"][2]["metadata"]  # the input is not changed


def test_slides_of_notebook_00_build_with_reveal_sections_and_stored_outputs(tmp_path):
    src = ROOT / "notebooks" / "00_setup.ipynb"
    before = src.read_bytes()
    html = course.build_slides(src, tmp_path, Path(sys.executable)).read_text()
    assert src.read_bytes() == before
    assert "reveal.js" in html and html.count("<section") >= 8
    assert "## 1. The execution mode" not in html and ">1. The execution mode<" in html
    nb = json.loads(before)
    stored = next(o["text"] for c in nb["cells"] if c["cell_type"] == "code"
                  for o in c["outputs"] if o.get("output_type") == "stream")
    first = "".join(stored).splitlines()[0]
    assert first.split("(")[0] in html  # a stored output, not a re-run
    assert course.SETUP_MARK not in html  # the Colab setup cell is left out


# ------------------------------------------------------------------------------------- README
def test_readme_clone_command_names_the_repository_of_course_py():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert f"git clone {course.REPO_URL}.git" in quick
    assert f"cd {course.REPO_SLUG.split('/')[1]}" in quick


def test_readme_troubleshooting_names_the_build_caches_where_the_code_puts_them(monkeypatch):
    from gpu_course.cuda import gpu_build
    from gpu_course.cuda.emulation import toolchain
    for var in ("CUDA_EMU_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    home = Path.home()
    emu = "~/" + str(toolchain.cache_dir().relative_to(home)) + "/"
    assert emu in section and "$CUDA_EMU_CACHE" in section
    if "COURSE_CUDA_CACHE" not in os.environ:
        assert "~/" + str(gpu_build.CACHE.relative_to(home)) + "/" in section
    assert "$COURSE_CUDA_CACHE" in section
    assert "~/" + str(course.lecture_dir().relative_to(home)) in readme
    for topic in ("port is in use", "rm -rf ~/.cache/gpu-course", "Mode cpu", "old NVIDIA driver"):
        assert topic in section, topic


def test_course_test_spreads_over_at_most_four_workers_and_none_on_one_core():
    assert course.xdist_args(2) == ["-n", "2", "--dist", "loadgroup"]
    assert course.xdist_args(16)[:2] == ["-n", "4"]
    assert course.xdist_args(1) == [] and course.xdist_args(None) == []
    assert course.xdist_args(16, gpu=True) == []   # timings on one GPU must not overlap


def test_the_examples_of_course_py():
    import doctest
    result = doctest.testmod(course)
    assert result.attempted > 0 and result.failed == 0


def test_course_test_runs_everything_and_quick_runs_the_quick_tests_only(monkeypatch):
    full = course.pytest_args([], 2, False)
    assert full[:2] == ["tests", "notebooks"] and "--nbval" in full and "-m" not in full
    assert full[-4:] == ["-n", "2", "--dist", "loadgroup"]
    quick = course.pytest_args(["--quick"], 2, False)
    assert quick == ["tests", "-m", "not slow", "-n", "2", "--dist", "loadgroup"]
    assert not any(a.startswith("--nbval") or a == "notebooks" for a in quick)
    # the user's options come last (pytest takes the last -n) and --quick may stand anywhere
    assert course.pytest_args(["-x", "--quick", "-n", "0"], 4, False) == \
        ["tests", "-m", "not slow", "-n", "4", "--dist", "loadgroup", "-x", "-n", "0"]
    assert course.pytest_args(["--quick"], 16, True) == ["tests", "-m", "not slow"]  # a GPU: serially
    # cmd_test hands them to pytest in the course's Python, from the repository's root
    calls = []
    monkeypatch.setattr(course, "setup", lambda: Path("/venv/bin/python"))
    monkeypatch.setattr(course, "usable_cpus", lambda: 2)
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(course.subprocess, "call", lambda cmd, cwd: calls.append((cmd, cwd)) or 5)
    assert course.main(["test", "--quick", "-k", "mode"]) == 5
    assert calls == [(["/venv/bin/python", "-m", "pytest", "tests", "-m", "not slow", "-n", "2", "--dist",
                       "loadgroup", "-k", "mode"], course.ROOT)]


def test_the_slow_mark_is_registered_and_used():
    """--quick leaves out what is marked slow: the mark is known to pytest (--strict-markers) and selects."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers", "--co", "-q",
                        "-m", "slow", "tests/notebooks/test_solutions.py"], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    chosen = [line for line in r.stdout.splitlines() if "::" in line]
    assert any("test_solutions_pass_and_cheats_are_refused" in line for line in chosen), r.stdout
    assert not any("test_stored_check_outputs_are_the_starters" in line for line in chosen), r.stdout  # quick


def root_conftest():
    import importlib.util
    spec = importlib.util.spec_from_file_location("course_root_conftest", ROOT / "conftest.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def test_a_notebook_and_its_solutions_run_share_one_xdist_group():
    import doctest
    import types
    conf = root_conftest()
    result = doctest.testmod(conf)
    assert result.attempted > 0 and result.failed == 0
    solutions = "tests/notebooks/test_solutions.py::test_solutions_pass_and_cheats_are_refused[nb02.py]"
    for cell in ("notebooks/02_profiling.ipynb::Cell 7", "notebooks/02_profiling::ipynb::Cell 7"):
        assert conf.xdist_group(cell) == conf.xdist_group(solutions) == "nb02"
    assert conf.xdist_group("notebooks/03_first_cuda_kernels.ipynb::Cell 0") == "nb03"
    assert conf.xdist_group("tests/unit/test_emulation.py::test_square_with_tail[3]") == "tests/unit/test_emulation.py"

    class Config:   # what the scheduler reads of pytest's config
        option = types.SimpleNamespace(loadscopereorder=True)

        def getvalue(self, name):
            return {"dist": self.dist, "tx": ["popen"] * 2}[name]
    config = Config()
    config.dist = "load"
    assert conf.pytest_xdist_make_scheduler(config, None) is None   # other --dist modes: xdist's own
    pytest.importorskip("xdist")
    config.dist = "loadgroup"
    sched = conf.pytest_xdist_make_scheduler(config, None)
    assert sched._split_scope(solutions) == sched._split_scope("notebooks/02_profiling.ipynb::Cell 7") == "nb02"
    assert config.option.loadscopereorder is False   # groups start in collection order: longest first


def test_the_longest_groups_named_for_the_schedule_exist():
    conf = root_conftest()
    assert len(set(conf.LONGEST_FIRST)) == len(conf.LONGEST_FIRST)
    for group in conf.LONGEST_FIRST:
        if group.startswith("nb"):
            assert len(list((ROOT / "notebooks").glob(f"{group[2:]}_*.ipynb"))) == 1, group
        else:
            assert (ROOT / group).is_file(), group


# ------------------------------------------------------------------------------------- setup cell
def test_setup_cell_speaks_to_the_learner_and_replaces_an_older_wording(tmp_path):
    assert "setup-cells" not in course.SETUP_CELL and "Colab" in course.SETUP_CELL.split("\n")[0]
    old = {"cell_type": "code", "id": "course-setup", "metadata": {}, "outputs": [], "execution_count": None,
           "source": "# Setup (same in every notebook; written by `python3 course.py setup-cells`).\nimport os"}
    nb = {"cells": [md("# 42 · Title"), old, md("text")], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "42_x.ipynb"
    path.write_text(json.dumps(nb))
    assert course.is_setup_cell(old) and not course.is_setup_cell(md("# Setup: in Colab, not code"))
    assert course.write_setup_cells(path) is True
    cells = json.loads(path.read_text())["cells"]
    assert len(cells) == 3 and course._src(cells[1]) == course.SETUP_CELL  # replaced in place, not added
    assert course.write_setup_cells(path, write=False) is False             # what `--check` then finds
