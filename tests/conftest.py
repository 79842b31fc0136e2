"""pytest setup for the course's tests.

tests/unit       the course package and course.py, on the CPU (CI)
tests/gpu        what only a GPU can show (skipped without one)
tests/notebooks  the nbval plumbing; its fixtures/ are inputs (one fails on purpose), not notebooks
                 to collect here. The course's notebooks are collected from notebooks/.
tests/browser    JupyterLab in headless Chromium (skipped without Playwright and a Chromium)
"""
import os
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


@pytest.fixture(scope="module")
def without_nvcc_check():
    """The CPU emulation's builds without their nvcc check of the device code (CUDA_EMU_NVCC=0), for a test
    file whose builds test something else: ~0.6 s of CPU less a build. The notebooks' runs, and the tests of
    the check itself (test_emulation.py, test_exercises_cuda.py...), keep it."""
    with pytest.MonkeyPatch.context() as mp:   # the module's own monkeypatch: undone after its last test
        mp.setenv("CUDA_EMU_NVCC", "0")
        yield
