""".devcontainer/: its definition names a Linux Python image and runs post-create.sh once, which runs the course's
own setup (`python3 course.py setup`, as CI does) from the repository's root. The container engine is not run
here: the script is, with a stand-in Python that records what it is asked."""
import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / ".devcontainer"


def definition() -> dict:
    text = (DEV / "devcontainer.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))   # JSON with comments, as VS Code reads it


def test_the_definition_runs_the_post_create_script_in_a_python_image():
    d = definition()
    assert d["postCreateCommand"] == "bash .devcontainer/post-create.sh"
    m = re.fullmatch(r"mcr\.microsoft\.com/devcontainers/python:3\.(\d+)-bookworm", d["image"])
    assert m and int(m.group(1)) >= 10                          # pyproject.toml: Python >= 3.10
    assert 8888 in d["forwardPorts"] and d["customizations"]["vscode"]["settings"][
        "python.defaultInterpreterPath"].endswith("/.venv/bin/python")   # where course.py setup installs


def test_post_create_runs_the_course_setup_from_the_root(tmp_path):
    record = tmp_path / "args"
    fake = tmp_path / "python3"
    fake.write_text(f"#!/bin/sh\necho \"$PWD $*\" > {record}\nexit 3\n")
    fake.chmod(0o755)
    r = subprocess.run(["bash", str(DEV / "post-create.sh")], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "COURSE_PYTHON": str(fake)})
    assert r.returncode == 3, r.stderr                          # setup's status is the script's
    assert record.read_text().split() == [str(ROOT), "course.py", "setup"]
