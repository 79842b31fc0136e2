"""pytest hooks for every test of the repository, the notebooks' nbval cells included (which
tests/conftest.py does not see when only notebooks/ is collected): the exercises judged in nbval's
run of each notebook (tests/notebooks/exercise_runs.py), the ``slow`` mark of ``course.py test
--quick``, and the worker groups of ``course.py test``."""
import os
import re

import pytest

# Every figure a notebook draws under nbval is checked for legibility (gpu_course/figures.py, hooked in through
# notebooks/matplotlibrc); in the tests a figure that fails the check fails its cell. The kernels inherit this.
os.environ.setdefault("COURSE_CHECK_FIGURES", "1")

pytest_plugins = ["tests.notebooks.exercise_runs"]   # the exercises, judged in nbval's kernels


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: left out of `python3 course.py test --quick` (runs a "
                                       "notebook, a bench script or many builds)")


def xdist_group(nodeid: str) -> str:
    """The worker group of a test, for ``course.py test`` (pytest-xdist with ``--dist loadgroup``).

    A notebook's nbval cells and its exercises (judged in nbval's kernel) form one group, since they
    need one kernel, with test_solutions.py's tests of that notebook (its own run, when nbval does
    not run it, writes the same files: notebooks/traces/...). Every other test file is a group of
    its own, so that its module fixtures (emulated builds) are built once.

    >>> xdist_group("notebooks/04_matmul_shared_memory.ipynb::Cell 3")
    'nb04'
    >>> xdist_group("notebooks/04_matmul_shared_memory::ipynb::Cell 3")  # how pytest 9.2 + xdist spell it
    'nb04'
    >>> xdist_group("tests/notebooks/test_solutions.py::test_solutions_pass_and_cheats_are_refused[nb04.py]")
    'nb04'
    >>> xdist_group("notebooks/04_matmul_shared_memory.ipynb::exercise ex04-1-answer")
    'nb04'
    >>> xdist_group("tests/unit/test_mode.py::test_choose_mode")
    'tests/unit/test_mode.py'
    """
    m = re.match(r"notebooks/(\d\d)_[^/:.]*(\.|::)ipynb(::|$)", nodeid) or re.search(r"\[nb(\d\d)\.py\]$", nodeid)
    return f"nb{m.group(1)}" if m else nodeid.split("::")[0]


# The groups that take longest in cpu mode, longest first (measured on 2 cores, 2026-11, cold build
# cache). On two workers the run ends soonest when they start first; the others follow in the order
# of collection. A group missing here only starts later; tests/unit/test_course_cli.py checks that
# each name is a group of this repository.
LONGEST_FIRST = ["nb09", "nb04", "tests/unit/test_exercises_cuda.py", "nb05", "nb03", "nb13",
                 "tests/unit/test_cuda_files.py", "tests/unit/test_bench_scripts.py", "nb12", "tests/unit/test_tensor_cores.py",
                 "nb08", "nb10", "tests/notebooks/test_course.py", "tests/unit/test_gpu_build.py", "nb01",
                 "nb06", "tests/unit/test_distributed.py", "tests/unit/test_emulation.py", "nb11", "tests/unit/test_exercises.py",
                 "tests/unit/test_emulation_mistakes.py", "tests/unit/test_cache_files.py",
                 "tests/unit/test_layernorm.py", "tests/unit/test_mode.py", "tests/unit/test_exercises_executed.py",
                 "tests/unit/test_emulation_races.py", "nb07"]


def longest_first(groups: list) -> list:
    """``groups`` (names of :func:`xdist_group`) in the order to start them: those of LONGEST_FIRST
    in its order, then the others in their own order.

    >>> longest_first(["tests/unit/test_x.py", "nb00", "nb05", "nb04"])
    ['nb04', 'nb05', 'tests/unit/test_x.py', 'nb00']
    """
    rank = {g: i for i, g in enumerate(LONGEST_FIRST)}
    return sorted(groups, key=lambda g: rank.get(g, len(LONGEST_FIRST)))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On pytest-xdist's workers: the tests in the order of :func:`longest_first` (a group's own
    tests keep their order), which the scheduler below keeps."""
    if not hasattr(config, "workerinput"):
        return
    order = {g: i for i, g in enumerate(longest_first(list(dict.fromkeys(xdist_group(it.nodeid) for it in items))))}
    items.sort(key=lambda it: order[xdist_group(it.nodeid)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups of :func:`xdist_group`, read off the test ids. (xdist's
    own loadgroup reads ``xdist_group`` marks through a test-id suffix that pytest 9.2 ignores.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling
    config.option.loadscopereorder = False   # keep the collection's order: longest first, not most tests first

    class CourseGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return CourseGroups(config, log)
