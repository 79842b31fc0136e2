"""pytest hooks for every test of the repository, the notebooks' nbval cells included (which
tests/conftest.py does not see when only notebooks/ is collected)."""
import re

import pytest


def xdist_group(nodeid: str) -> str:
    """The worker group of a test, for ``course.py test`` (pytest-xdist with ``--dist loadgroup``).

    A notebook's nbval cells and its solutions run (test_solutions[nbNN.py]) form one group: nbval
    needs every cell of a notebook in one kernel, and the two runs write the same files
    (notebooks/traces/...), so they must not run at once. Every other test file is a group of its
    own, so that its module fixtures (emulated builds) are built once.

    >>> xdist_group("notebooks/04_matmul_shared_memory.ipynb::Cell 3")
    'nb04'
    >>> xdist_group("notebooks/04_matmul_shared_memory::ipynb::Cell 3")  # how pytest 9.2 + xdist spell it
    'nb04'
    >>> xdist_group("tests/notebooks/test_solutions.py::test_solutions_pass_and_cheats_are_refused[nb04.py]")
    'nb04'
    >>> xdist_group("tests/unit/test_mode.py::test_choose_mode")
    'tests/unit/test_mode.py'
    """
    m = re.match(r"notebooks/(\d\d)_[^/:.]*(\.|::)ipynb(::|$)", nodeid) or re.search(r"\[nb(\d\d)\.py\]$", nodeid)
    return f"nb{m.group(1)}" if m else nodeid.split("::")[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups of :func:`xdist_group`, read off the test ids. (xdist's
    own loadgroup reads ``xdist_group`` marks through a test-id suffix that pytest 9.2 ignores.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CourseGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return CourseGroups(config, log)
