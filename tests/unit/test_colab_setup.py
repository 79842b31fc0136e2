"""The notebooks' first cell as Colab runs it, with a fake ``google.colab`` module: it clones the course (here from
this repository), runs ``course.py colab``, which installs only what Colab lacks with torch, triton, numba and
matplotlib pinned as they are, and ``import utils`` then works from the clone."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import course

ROOT = Path(__file__).resolve().parents[2]
FAKE_COLAB = "import sys, types; sys.modules['google'] = types.ModuleType('google'); " \
             "sys.modules['google.colab'] = types.ModuleType('google.colab')\n"


def test_colab_installs_what_is_missing_and_pins_what_colab_has(monkeypatch, capsys):
    monkeypatch.setattr(course, "colab_missing", lambda: ["wurlitzer>=3.1"])
    monkeypatch.setattr(course, "colab_pins", lambda: ["torch==2.8.0", "triton==3.4.0", "numba==0.60.0",
                                                       "matplotlib==3.10.0"])
    seen = {}

    def pip(py, *args, quiet=False):
        seen["args"] = args
        seen["pins"] = Path(args[args.index("-c") + 1]).read_text().split()
        return 0
    monkeypatch.setattr(course, "pip", pip)
    assert course.main(["colab"]) == 0
    assert seen["args"][-1] == "wurlitzer>=3.1" and seen["pins"] == ["torch==2.8.0", "triton==3.4.0",
                                                                      "numba==0.60.0", "matplotlib==3.10.0"]
    assert "installing wurlitzer>=3.1, keeping torch==2.8.0" in capsys.readouterr().out


def test_colab_never_installs_what_colab_has():
    asked = {req.split(">")[0].split("=")[0].replace("-", "_") for _, req in course.COLAB_NEEDS}
    assert not asked & set(course.COLAB_KEEP) and set(course.COLAB_KEEP) >= {"torch", "triton", "numba", "matplotlib"}
    assert course.colab_missing(lambda name: object()) == []      # all present: nothing to install


def test_colab_show_prints_the_setup_cell(capsys):
    assert course.main(["colab", "--show"]) == 0
    assert capsys.readouterr().out == course.SETUP_CELL + "\n"


@pytest.mark.slow   # a git clone and a Python that imports torch
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout: nothing to clone from")
def test_the_setup_cell_in_a_fake_colab_clones_and_imports_utils(tmp_path):
    clone = tmp_path / "gpu-course"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(COURSE_REPO=ROOT.as_uri(), COURSE_DIR=str(clone), COURSE_MODE="cpu")
    code = FAKE_COLAB + course.SETUP_CELL + "\nimport utils\nprint('utils from', utils.__file__)\n"
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    took = time.perf_counter() - start
    assert r.returncode == 0, r.stdout + r.stderr
    assert (clone / "course.py").exists() and f"utils from {clone / 'utils.py'}" in r.stdout
    assert "[course] Colab setup: nothing to install (keeping torch==" in r.stdout   # all present here
    print(f"setup cell in a fake Colab: {took:.1f} s")
    r2 = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                        timeout=300)
    assert r2.returncode == 0 and "utils from" in r2.stdout    # a second run: the clone is kept
