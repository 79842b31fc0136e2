"""Every docstring example in the course package runs and prints what it says."""
import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import gpu_course
import utils


def has_examples(name: str) -> bool:
    """Does the module's source hold a docstring example (a ``>>>`` line)? Read, not imported."""
    source = importlib.util.find_spec(name).origin
    return any(line.lstrip().startswith(">>>") for line in open(source, encoding="utf-8"))


# Modules without an example are left out: their doctest run could not fail.
MODULES = [name for name in ["gpu_course", "utils"] +
           sorted(m.name for m in pkgutil.walk_packages(gpu_course.__path__, "gpu_course."))
           if has_examples(name)]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result


def test_the_package_has_doctests_where_it_matters():
    counted = {name: doctest.testmod(importlib.import_module(name), report=False).attempted
               for name in ("gpu_course.launch", "gpu_course.checking", "gpu_course.timing",
                            "gpu_course.cuda", "gpu_course.cuda.cxx", "gpu_course.cuda.parsed", "gpu_course.exercises.runner",
                            "gpu_course.display")}
    assert all(counted.values()), counted


def test_utils_is_the_package_under_one_name():
    assert set(utils.__all__) == set(gpu_course.__all__)
    for name in gpu_course.__all__:
        assert getattr(utils, name) is getattr(gpu_course, name), name
