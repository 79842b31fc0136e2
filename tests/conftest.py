"""pytest setup for the course's tests.

tests/unit       the course package and course.py, on the CPU (CI)
tests/gpu        what only a GPU can show (skipped without one)
tests/notebooks  the nbval plumbing; its fixtures/ are inputs (one fails on purpose), not notebooks
                 to collect here. The course's notebooks are collected from notebooks/.
tests/browser    JupyterLab in headless Chromium (skipped without Playwright and a Chromium)
"""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
collect_ignore_glob = ["notebooks/fixtures/*"]

# Tests run in the course's environment, where `import utils` works through the editable install;
# this keeps them working from a plain checkout too.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")



def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist runs on one worker")


def xdist_group(nodeid: str) -> str:
    """The worker group of a test (course.py test runs pytest-xdist with --dist loadgroup).

    A notebook's nbval cells and its solutions run (test_solutions[nbNN.py]) form one group: they
    write the same files (notebooks/traces/...), so they must not run at once. Every other test file
    is a group of its own, so that its module fixtures (emulated builds) are built once.

    >>> xdist_group("notebooks/04_matmul_shared_memory.ipynb::Cell 3")
    'nb04'
    >>> xdist_group("tests/notebooks/test_solutions.py::test_solutions_pass_and_cheats_are_refused[nb04.py]")
    'nb04'
    >>> xdist_group("tests/unit/test_mode.py::test_choose_mode")
    'tests/unit/test_mode.py'
    """
    path = nodeid.split("::")[0]
    m = re.match(r"notebooks/(\d\d)_[^/]*\.ipynb$", path) or re.search(r"\[nb(\d\d)\.py\]$", nodeid)
    return f"nb{m.group(1)}" if m else path


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(name=xdist_group(item.nodeid)))


@pytest.fixture
def run_py():
    """Run code in a fresh interpreter (the mode is chosen once, at import), with the mode's
    environment variables cleared unless given."""
    def run(code: str, **env) -> subprocess.CompletedProcess:
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("COURSE_MODE", "NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")}
        full_env.update(env)
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                              text=True, env=full_env, cwd=ROOT, timeout=300)
    return run
