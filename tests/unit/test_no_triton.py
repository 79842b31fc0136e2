"""gpu_course.no_triton: where Triton cannot be imported, a cell that needs it prints one line and is skipped,
names it would have defined make later cells skip too, and every other error is raised as before."""
import ast
import sys

import pytest

from gpu_course import no_triton


@pytest.fixture
def cell(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)          # as on macOS or Windows
    monkeypatch.setattr(no_triton, "_skipped_names", dict.fromkeys(no_triton.ALWAYS_MISSING, "triton"))
    shown = []
    monkeypatch.setattr(sys, "displayhook", shown.append)
    ns = {}

    def run(source):
        tree = no_triton._SkipWithoutTriton().visit(ast.parse(source))
        exec(compile(tree, "<cell>", "exec"), ns)
        return ns, shown
    return run


def test_triton_is_missing_where_sys_modules_says_so(cell):
    assert not no_triton.available() and no_triton.version() == "triton: not installed"


def test_a_kernel_cell_and_the_cells_that_use_it_print_one_line(cell, capsys):
    cell("import triton\nimport triton.language as tl")
    assert "Skipped: this cell runs Triton code" in capsys.readouterr().out
    cell("@triton.jit\ndef add_kernel(x):\n    pass\nadd = 1")
    out = capsys.readouterr().out
    assert out.startswith("Skipped: this cell defines the Triton kernel `add_kernel`, and Triton is not installed")
    assert out.count("\n") == 1 and "WSL2" in out and "Colab" in out and "dev container" in out
    ns, _ = cell("y = 2\nadd + y")                            # `add` belongs to the skipped cell: removed
    assert "uses `add`, which comes from a cell that needs Triton" in capsys.readouterr().out
    assert "add" not in ns and "y" not in ns                  # a skipped cell defines nothing


def test_other_cells_run_and_show_their_last_value(cell, capsys):
    ns, shown = cell("z = 6\nz * 7")
    assert ns["z"] == 6 and shown == [42] and capsys.readouterr().out == ""


def test_other_errors_are_raised(cell):
    with pytest.raises(NameError, match="no_such_name"):
        cell("no_such_name + 1")
    with pytest.raises(ZeroDivisionError):
        cell("1 / 0")


def test_what_counts_as_triton_missing(monkeypatch):
    monkeypatch.setattr(no_triton, "_skipped_names", {"ln": "triton", "hk": "helion"})
    missing = no_triton.missing_package
    assert missing(ModuleNotFoundError("x", name="triton.language")) == "triton"
    assert missing(ModuleNotFoundError("x", name="numba")) is None
    assert missing(AttributeError("'_OpNamespace' 'gpu_course' object has no attribute 'x'")) == "triton"
    assert missing(RuntimeError("Failed to find name `ln` in frame's builtins.")) == "triton"
    assert missing(RuntimeError("Failed to find name `other`")) is None
    assert missing(ModuleNotFoundError("x", name="helion.language")) == "helion"
    assert missing(NameError("name 'hk' is not defined", name="hk")) == "helion"


def test_without_triton_raises_other_import_errors(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(ImportError, match="numba"):
        no_triton.without_triton(ModuleNotFoundError("no numba", name="numba"))
    no_triton.without_triton(ModuleNotFoundError("no triton", name="triton"))
    assert capsys.readouterr().out.startswith("Triton is not installed here (it has wheels for Linux only)")


def test_a_missing_helion_skips_its_cells_and_says_which_package(monkeypatch, capsys):
    """Notebook 17 on a machine with Triton but without Helion: the imports cell says so once, each Helion cell
    prints one line naming Helion, a cell that needs neither runs."""
    monkeypatch.setitem(sys.modules, "helion", None)
    monkeypatch.setattr(no_triton, "_skipped_names", dict.fromkeys(no_triton.ALWAYS_MISSING, "triton"))
    monkeypatch.setattr(no_triton, "install", lambda shell=None, force=False: True)
    with pytest.raises(ImportError, match="numba"):
        no_triton.without_optional(ModuleNotFoundError("no numba", name="numba"))
    no_triton.without_optional(ModuleNotFoundError("no helion", name="helion"))
    assert capsys.readouterr().out.startswith("Helion is not installed here (an optional package)")
    ns = {}
    exec(compile(no_triton._SkipWithoutTriton().visit(ast.parse(
        "@helion.kernel()\ndef softmax(x):\n    return x")), "<cell>", "exec"), ns)
    out = capsys.readouterr().out
    assert out.startswith("Skipped: this cell defines the Helion kernel `softmax`, and Helion is not installed here")
    assert "pip install helion" in out and "softmax" not in ns
    exec(compile(no_triton._SkipWithoutTriton().visit(ast.parse("z = 6 * 7")), "<cell>", "exec"), ns)
    assert ns["z"] == 42 and capsys.readouterr().out == ""
