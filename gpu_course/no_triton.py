"""Where Triton is not installed (it has wheels for Linux only: macOS and Windows have none), the notebooks
still run, and likewise where an optional package a notebook uses is missing (Helion and CuTe DSL, in notebook
17): each cell that needs Triton prints one line saying so (what it does, and where it runs) and is
skipped, and every other cell runs (CUDA C through the emulation, Numba's simulator, torch.compile's C++).

How: when ``utils`` is imported in IPython without Triton, :func:`install` adds an AST transformer that runs
each later cell inside ``try``; a cell stopped by Triton's absence (``import triton`` or a module that
imports it, a name that a skipped cell would have defined, ``triton`` and ``tl`` among them, or one of
the course's custom ops in ``torch.ops.gpu_course``, which its Triton modules register) prints
:func:`skip_line` instead of a traceback, and the names it would have defined are remembered. With Triton
installed nothing is added: cells run as written. A notebook's imports cell calls :func:`without_optional`
(``utils.without_triton`` in the notebooks that need Triton only) in its ``except ImportError`` branch (the
transformer starts with the next cell). Each skipped line names the package that was missing.

>>> skip_line("defines the Triton kernel `add_kernel`")[:61]
'Skipped: this cell defines the Triton kernel `add_kernel`, an'
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys

WHERE = "on Linux, in WSL2 on Windows, on Colab, or in the course's dev container (.devcontainer/)"
# package -> (its name in a sentence, why it may be missing, where its cells run, the names a notebook binds from it)
OPTIONAL = {"triton": ("Triton", "it has wheels for Linux only", WHERE, {"triton", "tl"}),
            "helion": ("Helion", "an optional package", "where `pip install helion` works: " + WHERE, {"helion", "hl"}),
            "cutlass": ("CuTe DSL", "an optional package", "where `pip install nvidia-cutlass-dsl` works: on Linux, in "
                        "WSL2, on Colab", {"cutlass", "cute", "ck"})}
ALWAYS_MISSING = OPTIONAL["triton"][3]
_skipped_names: dict = dict.fromkeys(ALWAYS_MISSING, "triton")   # a name a skipped cell bound -> its package
_installed = False


def available(package: str = "triton") -> bool:
    """Whether ``package`` can be imported here (``sys.modules[package] = None`` makes it not).

    >>> available() == (importlib.util.find_spec("triton") is not None if sys.modules.get("triton", 1) else False)
    True
    """
    try:
        return importlib.util.find_spec(package) is not None
    except ValueError:   # in sys.modules with no spec
        return package in sys.modules and sys.modules[package] is not None


def skip_line(what: str, package: str = "triton") -> str:
    """The one line a skipped cell prints: what it does, which package is missing and where it runs."""
    name, why, where, _ = OPTIONAL[package]
    return f"Skipped: this cell {what}, and {name} is not installed here ({why}); run it {where}."


def notebook_line(package: str = "triton") -> str:
    """What a notebook's imports cell prints where ``package`` is missing."""
    name, why, where, _ = OPTIONAL[package]
    return (f"{name} is not installed here ({why}): each cell that needs it says so in one line and is skipped, and "
            f"the rest of the notebook runs; to run those cells too, open the notebook {where}.")


def version() -> str:
    """``"triton 3.6.0"``, or ``"triton: not installed"`` where it is missing."""
    if not available():
        return "triton: not installed"
    import triton
    return f"triton {triton.__version__}"


def missing_package(error: BaseException) -> str | None:
    """The optional package whose absence ``error`` is, or None: an ImportError of it (or a submodule), or a
    NameError of a name that a skipped cell would have defined (``triton`` and ``tl`` included)."""
    if isinstance(error, ImportError):
        root = (error.name or "").split(".")[0]
        return root if root in OPTIONAL else None
    if isinstance(error, NameError):
        return _skipped_names.get(getattr(error, "name", None))
    if isinstance(error, AttributeError):   # torch.ops.gpu_course.*: the course's custom ops, which its Triton
        return "triton" if "'_OpNamespace' 'gpu_course'" in str(error) else None   # modules register
    lost = re.search(r"Failed to find name `(\w+)`", str(error))   # torch.compile's form of a NameError
    return _skipped_names.get(lost.group(1)) if lost else None


def without_optional(error: ImportError) -> None:
    """A notebook's imports cell, ``except ImportError as e: utils.without_optional(e)``: where Triton, or
    another package of :data:`OPTIONAL`, is missing, print :func:`notebook_line` (the cells that need it say so
    from here on); any other ImportError, or one of a package that is in fact there, is raised again."""
    package = missing_package(error)
    if package is None or available(package):
        raise error
    install(force=True)
    _skipped_names.update(dict.fromkeys(OPTIONAL[package][3], package))
    try:   # the imports cell's own names (``ln``, ``flash_attention``...) count as skipped from here on
        from IPython import get_ipython
        _skipped_names.update(dict.fromkeys(_bound_names(ast.parse(get_ipython().user_ns["In"][-1])), package))
    except Exception:
        pass
    print(notebook_line(package))


without_triton = without_optional   # the name the notebooks that need Triton only call it by


def _bound_names(tree: ast.AST) -> set:
    """The names a cell binds at its top level (assignments, defs, classes, imports, loop and with targets)."""
    names = set()

    def visit(node, top=True):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return names


def _what(tree: ast.AST, error: BaseException, package: str = "triton") -> str:
    """What the cell does, for :func:`skip_line`: the kernels it defines or launches, else the course module it
    imports, else the name it lacks; in the words of ``package``, the one missing."""
    name, _, _, own = OPTIONAL[package]
    kernels = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(
        "jit" in ast.unparse(d) or "autotune" in ast.unparse(d) or "kernel" in ast.unparse(d)
        for d in n.decorator_list)]
    if kernels:
        return f"defines the {name} kernel" + ("s " if len(kernels) > 1 else " ") + \
            ", ".join(f"`{k}`" for k in kernels[:3])
    launched = [ast.unparse(n.func.value) for n in ast.walk(tree)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]
    if launched and package == "triton":
        return "launches the Triton kernel " + ", ".join(f"`{k}`" for k in dict.fromkeys(launched[:3]))
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
               and n.module.startswith("gpu_course")]
    if isinstance(error, ImportError) and modules:
        return f"runs the course's {name} code ({modules[0]})"
    if isinstance(error, NameError) and error.name not in own:
        return f"uses `{error.name}`, which comes from a cell that needs {name}"
    return f"runs {name} code"


def _skip(error: BaseException, source: str, namespace: dict | None = None, before=()) -> bool:
    """The transformed cell's ``except`` branch: print the line where ``error`` is Triton's absence and
    return True; else False (the cell raises it again, its traceback as without this module). A skipped
    cell defines nothing: the names it bound that ``namespace`` did not have ``before`` it ran are removed
    (a later cell that uses one is skipped in turn)."""
    package = missing_package(error)
    if package is None:
        return False
    tree = ast.parse(source)
    bound = _bound_names(tree)
    _skipped_names.update(dict.fromkeys(bound, package))
    if namespace is not None:
        for name in bound - set(before):
            namespace.pop(name, None)
    print(skip_line(_what(tree, error, package), package))
    return True


def _show(value) -> None:
    """The cell's last expression, shown as IPython shows it."""
    sys.displayhook(value)


class _SkipWithoutTriton(ast.NodeTransformer):
    """Run the cell in ``try``, its last expression shown as before; a Triton-less stop prints one line."""

    def visit_Module(self, node):
        body = list(node.body)
        if not body or any(isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in body):
            return node
        source = ast.unparse(node)
        if isinstance(body[-1], ast.Expr):
            body[-1] = ast.Expr(ast.Call(ast.Attribute(ast.Name("__course_no_triton__", ast.Load()), "_show",
                                                       ast.Load()), [body[-1].value], []))
        handler = ast.ExceptHandler(
            ast.Name("Exception", ast.Load()),
            "__course_error__",
            [ast.If(ast.UnaryOp(ast.Not(), ast.Call(
                ast.Attribute(ast.Name("__course_no_triton__", ast.Load()), "_skip", ast.Load()),
                [ast.Name("__course_error__", ast.Load()), ast.Constant(source),
                 ast.Call(ast.Name("globals", ast.Load()), [], []), ast.Name("__course_before__", ast.Load())],
                [])), [ast.Raise()], [])])
        prologue = ast.parse("import gpu_course.no_triton as __course_no_triton__\n"
                             "__course_before__ = set(globals())").body
        new = ast.Module([*prologue, ast.Try(body, [handler], [], [])], type_ignores=[])
        return ast.fix_missing_locations(new)


def install(shell=None, force: bool = False) -> bool:
    """Where Triton is missing (or with ``force``: another optional package is) and IPython runs this, transform
    every later cell (see the module's docstring); returns whether the transformer is in place."""
    global _installed
    if available() and not force:
        return False
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    if not any(isinstance(t, _SkipWithoutTriton) for t in shell.ast_transformers):
        shell.ast_transformers.append(_SkipWithoutTriton())
    _installed = True
    return True
