"""course.py as a user meets it: help, bad commands, notebook names, reset, the course's Jupyter
settings, lecture mode and slides (the deck of notebook 00 is built here, as in CI)."""
import json
import os
import re
import shutil
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
    from gpu_course import session
    assert session.LECTURE_ENV == course.LECTURE_ENV
    note = session.stored_outputs_note({"JPY_SESSION_NAME": "/x/04_matmul_shared_memory.ipynb"}, colab=False)
    stored = json.loads((ROOT / "notebooks" / "04_matmul_shared_memory.ipynb").read_text())["metadata"]["course"]
    assert f"a run on an {stored['outputs_from']}," in note and "python3 course.py reset 04_matmul_shared_memory" in note
    # the GPU named is the one the notebook's own metadata records (13 is stored from two H200s)
    assert "a run on an NVIDIA H200," in session.stored_outputs_note({"JPY_SESSION_NAME": "13_multi_gpu.ipynb"})
    assert "reset NB" in session.stored_outputs_note({}, colab=False)
    assert "Open in Colab" in session.stored_outputs_note({}, colab=True)
    lecture = session.stored_outputs_note({course.LECTURE_ENV: "/tmp/lec"}, colab=False)
    assert lecture.startswith("Lecture copy") and "/tmp/lec" in lecture
    assert session.stored_outputs_note({"COURSE_SAVE_RESULTS": "1"}) == ""  # `execute` stores outputs
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


@pytest.mark.slow  # runs nbconvert on a notebook
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
    for var in ("CUDA_EMU_CACHE", "COURSE_CUDA_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    home = Path.home()
    emu = "~/" + str(toolchain.cache_dir().relative_to(home)) + "/"
    assert emu in section and "$CUDA_EMU_CACHE" in section
    assert "~/" + str(gpu_build.cache_dir().relative_to(home)) + "/" in section
    assert "$COURSE_CUDA_CACHE" in section and "$XDG_CACHE_HOME/gpu-course/" in section
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
    assert quick == ["tests", "-m", "not slow", "-p", "no:nbval", "-n", "2", "--dist", "loadgroup"]
    assert not any(a.startswith("--nbval") or a == "notebooks" for a in quick)
    # the user's options come last (pytest takes the last -n) and --quick may stand anywhere
    assert course.pytest_args(["-x", "--quick", "-n", "0"], 4, False) == \
        ["tests", "-m", "not slow", "-p", "no:nbval", "-n", "4", "--dist", "loadgroup", "-x", "-n", "0"]
    assert course.pytest_args(["--quick"], 16, True) == ["tests", "-m", "not slow", "-p", "no:nbval"]  # a GPU: serially
    # cmd_test hands them to pytest in the course's Python, from the repository's root
    calls = []
    monkeypatch.setattr(course, "setup", lambda: Path("/venv/bin/python"))
    monkeypatch.setattr(course, "usable_cpus", lambda: 2)
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(course.subprocess, "call", lambda cmd, cwd: calls.append((cmd, cwd)) or 5)
    assert course.main(["test", "--quick", "-k", "mode"]) == 5
    assert calls == [(["/venv/bin/python", "-m", "pytest", "tests", "-m", "not slow", "-p", "no:nbval", "-n", "2",
                       "--dist", "loadgroup", "-k", "mode"], course.ROOT)]


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


# ---------------------------------------------------------------- the package and its install
def project() -> dict:
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements(extra: str | None = None) -> list:
    from packaging.requirements import Requirement
    proj = project()
    reqs = proj["dependencies"] if extra is None else proj["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def pins(path: Path) -> dict:
    """``{name: version}`` of a constraints file (names normalised as pip does)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            out[canonicalize_name(req.name)] = str(next(iter(req.specifier)).version)
    return out


def test_torch_is_left_to_course_py_and_the_extras_build_on_each_other():
    names = {r.name for r in requirements()}
    assert "torch" not in names and {"numpy", "numba", "numba-cuda", "triton"} <= names
    assert {r.name for r in requirements("lab")} >= {"jupyterlab", "ipykernel", "nbclient"}
    assert {"gpu-course", "pytest", "nbval", "pytest-xdist"} <= {r.name for r in requirements("test")}
    assert [r.extras for r in requirements("test") if r.name == "gpu-course"] == [{"lab"}]
    assert set(course.EXTRAS.split(",")) == {"lab", "test"}
    assert "-e .[lab,test]" in (ROOT / "environment.yml").read_text()   # conda: the same list
    assert not (ROOT / "requirements.txt").exists()                      # not a second copy


def test_colab_needs_are_pinned_like_pyproject():
    declared = {r.name: r.specifier for r in requirements()}
    from packaging.requirements import Requirement
    for _, req in course.COLAB_NEEDS:
        r = Requirement(req)
        assert r.specifier == declared[r.name], req


def test_cpu_constraints_pin_every_package_within_the_declared_ranges():
    """constraints-cpu.txt is what CI installs: every package the course asks for is pinned, and
    each pin lies in pyproject.toml's range (else pip refuses the pair)."""
    cpu = pins(course.CPU_CONSTRAINTS)
    assert cpu["torch"] == course.pinned("torch") and cpu["torch"].endswith("+cpu")
    wanted = requirements() + [r for extra in course.EXTRAS.split(",") for r in requirements(extra)]
    for req in wanted:
        if req.name == "gpu-course" or (req.marker and not req.marker.evaluate()):
            continue
        assert req.name in cpu, f"{req.name} is not pinned in constraints-cpu.txt"
        assert req.specifier.contains(cpu[req.name], prereleases=True), (req, cpu[req.name])
    assert course.pinned("no-such-package") is None
    assert course.pinned("Numba_CUDA") == cpu["numba-cuda"]   # named as pip would


def test_gpu_constraints_record_the_versions_of_the_stored_outputs():
    gpu = pins(ROOT / "constraints-gpu.txt")
    for req in requirements():
        if req.name in gpu:
            assert req.specifier.contains(gpu[req.name], prereleases=True), (req, gpu[req.name])
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        meta = json.loads(path.read_text())["metadata"].get("course", {})
        if "NVIDIA" not in meta.get("outputs_from", ""):   # a GPU's run: an H100's, or (11, 13) an H200's
            continue
        assert meta["torch"] == gpu["torch"], path.name
        for name, version in meta.get("versions", {}).items():   # recorded by `execute`
            if name != "python" and version is not None:
                assert gpu.get(name) == version, (path.name, name, version)


def test_setup_pins_ci_versions_only_in_its_own_venv_on_linux_without_a_gpu():
    assert course.use_cpu_constraints(managed_env=False, platform_="linux", gpu=False)
    assert not course.use_cpu_constraints(managed_env=True, platform_="linux", gpu=False)
    assert not course.use_cpu_constraints(managed_env=False, platform_="linux", gpu=True)
    assert not course.use_cpu_constraints(managed_env=False, platform_="darwin", gpu=False)


@pytest.fixture
def pip_calls(monkeypatch):
    """course.pip replaced by a recorder; ``fail`` holds the argument that makes a call fail."""
    calls, fail = [], set()

    def fake_pip(py, *args, quiet=False):
        calls.append([str(a) for a in args])
        return 1 if fail & {str(a) for a in args} else 0
    monkeypatch.setattr(course, "pip", fake_pip)
    return calls, fail


def test_torch_already_there_is_kept_and_a_cpu_machine_gets_the_tested_cpu_build(pip_calls, monkeypatch):
    calls, fail = pip_calls
    monkeypatch.setattr(course, "has_module", lambda py, name: True)
    course.install_torch(Path(sys.executable))
    assert calls == []
    monkeypatch.setattr(course, "has_module", lambda py, name: False)
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(course.sys, "platform", "linux")
    version = course.pinned("torch")
    course.install_torch(Path(sys.executable))
    assert calls == [["-q", f"torch=={version}"]]             # a local or mirrored wheel first
    calls.clear()
    fail.add(f"torch=={version}")                              # none: PyTorch's CPU index
    course.install_torch(Path(sys.executable))
    assert calls[1] == ["-q", f"torch=={version}", "--index-url", course.TORCH_CPU_INDEX]
    assert calls[2] == ["-q", "torch", "--index-url", course.TORCH_CPU_INDEX]
    calls.clear()
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: True)   # a GPU: PyPI's (CUDA) build
    course.install_torch(Path(sys.executable))
    assert calls == [["-q", "torch"]]


def test_the_course_installs_editable_with_its_extras_pinned_or_else_in_range(pip_calls):
    calls, fail = pip_calls
    editable = f"{ROOT}[lab,test]"
    course.install_course(Path(sys.executable), constrained=True)
    assert calls == [["-q", "-c", str(course.CPU_CONSTRAINTS), "-e", editable]]
    calls.clear()
    fail.add(str(course.CPU_CONSTRAINTS))          # pins that do not install here (another Python)
    course.install_course(Path(sys.executable), constrained=True)
    assert calls[1] == ["-q", "-e", editable]
    calls.clear()
    course.install_course(Path(sys.executable), constrained=False)
    assert calls == [["-q", "-e", editable]]
    fail.add(editable)
    with pytest.raises(SystemExit, match="could not install the course"):
        course.install_course(Path(sys.executable), constrained=False)


def test_setup_warms_the_emulation_with_torch_alone(monkeypatch):
    """The script runs in an environment that has torch and nothing else of the course's: it loads the
    emulation's toolchain without the package's __init__ files (which import numpy, triton, numba)."""
    script = course.WARM_EMULATION.replace("toolchain.warm_cache()", "print(sorted(sys.modules))")
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = r.stdout
    assert "gpu_course.cuda.emulation.toolchain" in loaded
    assert not any(f"'{m}'" in loaded for m in ("numpy", "triton", "numba", "gpu_course.mode"))
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: True)        # gpu mode: no emulation to warm
    assert course.warm_emulation(Path(sys.executable)) is None


def test_a_warming_that_takes_too_long_is_stopped_and_setup_goes_on(capsys):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    course.finish_warming(proc, timeout=0.5)
    assert proc.returncode is not None and "left to the first build" in capsys.readouterr().out


def test_warm_cache_builds_tier_1_then_the_runtime_that_uses_it_then_tier_2(monkeypatch):
    from gpu_course.cuda.emulation import toolchain
    done = []
    monkeypatch.setattr(toolchain, "_pch", lambda tc, opt, tier, verbose: done.append(("pch", opt, tier)))
    monkeypatch.setattr(toolchain, "_runtime", lambda tc, verbose: done.append(("runtime",)))
    toolchain.warm_cache()
    assert done == [("pch", True, 1), ("runtime",), ("pch", True, 2)]


def test_torch_requires_is_what_pip_install_torch_brings():
    """The packages setup's background pip leaves to install_torch are torch's requirements and theirs: with
    one missing, the two pips would install it at once."""
    import importlib.metadata
    from packaging.requirements import Requirement
    brought, todo = set(), ["torch"]
    while todo:
        for text in importlib.metadata.requires(todo.pop()) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                name = course.dist_name(req.name)
                if name not in brought:
                    brought.add(name)
                    todo.append(name)
    assert brought == course.TORCH_REQUIRES


def test_setup_installs_the_pinned_rest_beside_torch_only_into_a_fresh_pinned_env(monkeypatch, tmp_path):
    done = []

    class Pip:   # the background pip of start_locked_install
        def wait(self):
            done.append("rest installed")
    monkeypatch.setattr(course, "target_python", lambda: Path(sys.executable))
    monkeypatch.setattr(course, "STAMP", str(tmp_path / "stamp"))   # an absolute path: prefix / STAMP is it
    monkeypatch.setattr(course, "start_locked_install", lambda py: done.append("rest started") or Pip())
    monkeypatch.setattr(course, "install_torch", lambda py: done.append("torch"))
    monkeypatch.setattr(course, "warm_emulation", lambda py: None)
    monkeypatch.setattr(course, "install_course", lambda py, constrained: done.append(f"course {constrained}"))
    for constrained, torch_there, expected in [
            (True, False, ["rest started", "torch", "rest installed", "course True"]),
            (True, True, ["torch", "course True"]),      # torch there already: pip resolves the rest
            (False, False, ["torch", "course False"])]:  # the user's versions: nothing pinned to install
        done.clear()
        monkeypatch.setattr(course, "use_cpu_constraints", lambda: constrained)
        monkeypatch.setattr(course, "has_module", lambda py, name: torch_there and name == "torch")
        course.setup()
        assert done == expected


def test_the_pinned_rest_installs_with_pip_in_the_background(monkeypatch):
    seen = {}
    monkeypatch.setattr(course.subprocess, "Popen", lambda cmd, **kw: seen.update(cmd=cmd, kw=kw) or "proc")
    assert course.start_locked_install(Path("py")) == "proc"
    cmd = seen["cmd"]
    assert cmd[:6] == ["py", "-m", "pip", "install", "--disable-pip-version-check", "-q"] and "--no-deps" in cmd
    pins = [c for c in cmd if "==" in c]
    assert pins == course.locked_rest() and len(pins) > 100
    assert not {course.dist_name(p.split("==")[0]) for p in pins} & (course.TORCH_REQUIRES | {"torch"})


def test_setup_runs_again_when_pyproject_or_the_constraints_change(tmp_path, monkeypatch):
    for name in ("pyproject.toml", course.CPU_CONSTRAINTS.name):
        (tmp_path / name).write_text("x\n")
    monkeypatch.setattr(course, "ROOT", tmp_path)
    seen = {course.setup_fingerprint()}
    for name in ("pyproject.toml", course.CPU_CONSTRAINTS.name):
        (tmp_path / name).write_text(f"{name} changed\n")
        seen.add(course.setup_fingerprint())
    assert len(seen) == 3


def test_execute_runs_in_the_active_env_else_the_course_venv_else_this_python(tmp_path):
    venv_py = tmp_path / "bin" / "python"
    assert course.execute_python(True, venv_py) == (Path(sys.executable), "the active environment")
    assert course.execute_python(False, venv_py)[0] == Path(sys.executable)   # a GPU machine, no .venv
    venv_py.parent.mkdir()
    venv_py.write_text("")
    assert course.execute_python(False, venv_py) == (venv_py, "the course's .venv/")


def test_execute_started_by_another_python_runs_again_in_the_course_python(tmp_path, monkeypatch, capsys):
    other = tmp_path / "bin" / "python"
    monkeypatch.delenv(course.EXECUTE_CHILD, raising=False)
    monkeypatch.setattr(course, "execute_python", lambda: (other, "the course's .venv/"))
    seen = {}
    monkeypatch.setattr(course.subprocess, "call", lambda cmd, env: seen.update(cmd=cmd, env=env) or 7)
    assert course.main(["execute", "00"]) == 7
    nb00 = str(ROOT / "notebooks" / "00_setup.ipynb")
    assert seen["cmd"] == [str(other), str(ROOT / "course.py"), "execute", nb00]
    assert seen["env"][course.EXECUTE_CHILD] == "1"
    assert capsys.readouterr().out == f"[course] execute: the notebooks run in {other} (the course's .venv/)\n"


@pytest.mark.slow  # starts a Jupyter kernel
def test_execute_runs_a_notebook_in_place_and_records_device_and_versions(tmp_path, monkeypatch):
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(6 * 7)")]
    path = tmp_path / "42_x.ipynb"
    nbformat.write(nb, path)
    env = {k: v for k, v in os.environ.items() if k not in (course.EXECUTE_CHILD, "COURSE_SAVE_RESULTS")}
    r = cli("execute", str(path), env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"[course] execute: the notebooks run in {sys.executable} (")
    out = nbformat.read(path, as_version=4)
    assert out.cells[0].outputs[0]["text"] == "42\n"
    import torch
    meta = out.metadata["course"]
    assert meta["outputs_from"] == "CPU" and meta["torch"] == torch.__version__
    assert meta["versions"]["torch"] == torch.__version__ and set(meta["versions"]) == \
        {"python", "torch", "triton", "numba", "numba-cuda", "numpy", "helion"}


@pytest.mark.slow  # builds and installs a wheel, then the emulation's headers from it (~25 s)
def test_a_wheel_holds_every_file_the_package_reads_and_runs_cuda_c_from_it(tmp_path):
    """`pip install .` (not editable) copies only what pyproject.toml packages: build the wheel from
    a copy of the package, install it, and build a kernel of gpu_course/kernels/cuda/ with the
    emulator's headers from there, in cpu mode, far from the repository."""
    pytest.importorskip("setuptools")
    import zipfile
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "utils.py"):
        shutil.copy(ROOT / name, src)
    shutil.copytree(ROOT / "gpu_course", src / "gpu_course",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    wheel = next((tmp_path / "dist").glob("*.whl"))
    packaged = set(zipfile.ZipFile(wheel).namelist())
    files = {p.relative_to(src).as_posix() for p in (src / "gpu_course").rglob("*") if p.is_file()}
    assert files and files <= packaged, sorted(files - packaged)
    assert "utils.py" in packaged
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                        "--target", str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import torch, utils, gpu_course\n"
            "from gpu_course.kernels import elementwise\n"
            "x = torch.randn(1000)\n"
            "out = torch.full_like(x, float('nan'))\n"
            "elementwise.build('naive').square_naive(x, out)\n"
            "print(utils.MODE, gpu_course.__file__, torch.equal(out, x * x))\n")
    env = {**os.environ, "PYTHONPATH": str(site), "COURSE_MODE": "cpu"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["cpu", str(site / "gpu_course" / "__init__.py"), "True"]


def test_execute_scratch_takes_a_folder_and_every_notebook_by_default(tmp_path):
    names, scratch = course.execute_args(["--scratch", str(tmp_path)])
    assert scratch == tmp_path and names == [p.stem for p in course._tracked_notebooks()] and "00_setup" in names
    with pytest.raises(SystemExit, match="--scratch needs a folder"):
        course.execute_args(["03", "--scratch"])


@pytest.mark.slow  # starts a Jupyter kernel
def test_execute_scratch_writes_the_copy_elsewhere_and_leaves_the_notebook(tmp_path):
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os; print(os.environ.get('COURSE_SAVE_RESULTS'))")]
    path = tmp_path / "42_x.ipynb"
    nbformat.write(nb, path)
    before = path.read_text()
    env = {k: v for k, v in os.environ.items() if k not in (course.EXECUTE_CHILD, "COURSE_SAVE_RESULTS")}
    r = cli("execute", "--scratch", str(tmp_path / "out"), str(path), env={**env, "COURSE_GPU_PROFILE": "t4"},
            cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert path.read_text() == before                                   # the stored notebook untouched
    out = nbformat.read(tmp_path / "out" / "42_x.ipynb", as_version=4)
    assert out.cells[0].outputs[0]["text"] == "None\n"                   # results/ not written
    assert out.metadata["course"]["scratch"] == {"COURSE_GPU_PROFILE": "t4"}
    assert "1 of 1 notebooks finished" in r.stdout
