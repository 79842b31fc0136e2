"""The CPU emulation built with clang++ (Apple's compiler on a Mac is clang): a subset of test_emulation.py run
with CXX=clang++ in its own build cache, where clang++ is installed (.ci/run installs it on CI's Linux)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBSET = ["test_square_with_tail", "test_missing_barrier_is_a_race",
          "test_templated_kernel_dispatch", "test_torch_check_message", "test_compile_error_shows_the_learners_line"]


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("clang++"), reason="clang++ is not installed (apt-get install clang)")
def test_the_emulation_builds_and_runs_with_clang(tmp_path):
    cache = Path(os.environ.get("COURSE_CLANG_CACHE", tmp_path))   # a kept cache makes a rerun quick
    env = {**os.environ, "CXX": "clang++", "CUDA_EMU_CACHE": str(cache), "COURSE_MODE": "cpu"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "tests/unit/test_emulation.py", "-k", " or ".join(SUBSET)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "skipped" not in r.stdout.splitlines()[-1], r.stdout[-2000:]
