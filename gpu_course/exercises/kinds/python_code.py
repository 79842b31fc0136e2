"""What the kinds whose kernels are Python functions (Triton, Numba) share: the kernel's code read as
an AST (:func:`function_tree`, :func:`called_names`, :func:`is_stub_tree`, :func:`body_dump`), and
:class:`PythonKind`: the learner's launches are those of kernels the learner wrote (by the kernel's
function), and the course's own launch is :func:`..replay.replay` of them on fresh memory."""
from __future__ import annotations

import ast
import inspect
import textwrap

from ..provenance import name_of, provenance_problem, py_function
from . import Kind, SetupError

__all__ = ["function_tree", "dotted", "called_names", "is_stub_tree", "body_dump", "PythonKind"]


def function_tree(fn) -> ast.FunctionDef:
    """The AST of function ``fn`` (its source from ``inspect.getsource``)."""
    src = textwrap.dedent(inspect.getsource(fn))
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    raise ValueError(f"no function definition in the source of {fn!r}")


def dotted(node) -> str:
    """``cuda.shared.array`` for the expression ``cuda.shared.array`` ("" if not a name chain)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def called_names(tree) -> set[str]:
    """The dotted names a function's AST calls."""
    return {dotted(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)} - {""}


def is_stub_tree(tree) -> bool:
    """A body of only ``pass``, ``...`` and strings: the starter, not yet written."""
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
               for s in tree.body)


def body_dump(tree: ast.FunctionDef) -> str:
    """The body of a function (without its docstring) as an AST dump: equal for the same code."""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


class PythonKind(Kind):
    """A kind whose kernel is a Python function launched from Python (``kernel[...](...)``)."""
    unit_one = "block"

    def learner_launches(self, trial):
        mine, refused = [], []
        for L in trial.seen.of(self.key):
            if not L.finished or (trial.kname is not None and L.name != trial.kname):
                continue
            if trial.kernel_object is not None and L.fn is not py_function(trial.kernel_object):
                continue
            why = provenance_problem(L.kernel, "kernel", self, trial.scopes)
            (refused if why else mine).append((L, why) if why else L)
        return mine, refused

    def is_stub(self, trial) -> bool:
        fns = [L.fn for L in trial.mine if L.fn is not None]
        try:
            return bool(fns) and all(is_stub_tree(function_tree(f)) for f in fns)
        except (OSError, TypeError, ValueError, SyntaxError):
            return False  # no source to read: the value check judges it

    def own_launch(self, trial):
        """:func:`..replay.replay` of the learner's launches; what it executed must split the work
        (:meth:`executed_problem`, whatever the number of launches); then, for one launch on a grid of
        more than two, a single program or block alone must not write the whole output, unless the
        programs combine their results in it with atomics (:meth:`combined`: then each of them writes
        every output, and the exercise's evidence judges the method)."""
        from ..replay import replay, written
        from ..runner import first_line
        label, mine, out, inputs = trial.label, trial.mine, trial.out, trial.inputs
        try:
            got, execution, mem = replay(mine, out, inputs)
        except Exception as e:  # noqa: BLE001  the learner's kernel may fail in any way
            return (f"the check launched {label} itself (your grid and arguments, on fresh memory) and it raised "
                    f"{first_line(e)}"), None, None
        why = self.replayed_problem(trial, mem, got, "your grid and arguments", "function")
        if why:
            return why, got, execution
        why = self.executed_problem(trial, execution)   # whatever the number of launches
        if why or len(mine) != 1 or execution.programs <= 2:
            return why, got, execution
        unit = self.unit_one
        if self.counted_per_program(execution):   # what each one wrote in the learner's own grid
            where, n = max(execution.wrote.items(), key=lambda kv: kv[1])
            if n >= out.numel() and not self.combined(execution, where):
                return (f"{unit} {_show(where[1])} of {label} wrote all {out.numel()} outputs itself, the work of "
                        f"the whole grid of {execution.programs}: each {unit} must compute its own part, not "
                        f"loop over the others'"), got, execution
            return None, got, execution
        try:
            one, _, _ = replay(mine, out, inputs, grid=(1, 1, 1))
        except Exception as e:  # noqa: BLE001
            return (f"the check launched {label} with a single {unit} and it raised {first_line(e)}: "
                    f"a {unit} must work on its own part, whatever the grid"), got, execution
        n = int(written(one).sum())
        if n >= out.numel() and not self.combined(execution, None):
            return (f"launched alone, {unit} 0 of {label} wrote all {n} outputs, the work of the whole grid "
                    f"of {execution.programs}: each {unit} must compute its own part, not loop over the "
                    f"others'"), got, execution
        return None, got, execution

    def fresh_output(self, trial):
        """The output of :func:`..replay.replay` of the learner's launches once more (:mod:`..fresh`: on the
        inputs as they are now)."""
        from ..replay import replay
        return replay(trial.mine, trial.out, trial.inputs)[0]

    def counted_per_program(self, execution) -> bool:
        """Whether the course's own launch counted the elements each program or block stored
        (``execution.wrote``): then whether one of them wrote the whole output is read from the learner's
        own grid, instead of from a launch of a single one (which a grid-stride loop rightly answers by
        doing all the work, its grid being of one)."""
        return False

    def combined(self, execution, program) -> bool:
        """Whether the programs or blocks of the course's own launch combined their results into the
        output with atomic operations (a max or a sum of all of them in one number), so that one of them
        writing every output is no sign of it doing the others' work. ``program``: the (launch, program)
        that wrote them all, where :meth:`counted_per_program`; None otherwise. False here: the kind
        tells."""
        return False

    def launch_again(self, launch, args, kwargs, grid, execution) -> None:
        """Launch the kernel of recorded ``launch`` with ``args`` / ``kwargs`` (on the check's memory)
        on ``grid``, noting in ``execution`` (:class:`..replay.Execution`) what ran."""
        raise NotImplementedError

    def finish_launches(self) -> None:
        """Wait for the launches made by :meth:`launch_again` (torch's stream is synchronized already)."""

    def executed_problem(self, trial, execution) -> str | None:
        """Why what the course's own launch executed shows the work is not split, or None."""
        return None

    def functions(self, attempt) -> list:
        """The learner's launched kernels as Python functions, once each."""
        out = []
        for L in attempt.launches:
            if L.fn is not None and all(L.fn is not f for f in out):
                out.append(L.fn)
        return out

    def calls(self, attempt, names) -> str | None:
        """The kernel's code calls each of ``names`` (its AST: ``"tl.dot"`` matches ``tl.dot(...)``
        and ``triton.language.dot(...)``)."""
        if not names:
            return None
        have = set().union(*(called_names(attempt.tree(fn)) for fn in self.functions(attempt)))
        last = {c.split(".")[-1] for c in have}
        missing = [n for n in names if n not in have and n.split(".")[-1] not in last]
        if missing:
            return f"{attempt.name} does not call {', '.join(missing)}: the exercise asks you to use it"
        return None

    def same_code(self, attempt, refs) -> str | None:
        """Why the learner's kernel is one of ``refs`` (kernel objects), the same object or the same
        AST of the body under another name, or calls one of them (directly or through helpers of the
        learner's own); None if it differs."""
        for ref in refs:
            if isinstance(ref, str):
                raise SetupError("differs_from takes kernel objects for a Triton or Numba exercise")
        others = [py_function(ref) for ref in refs]
        for fn in self.functions(attempt):
            for other in others:
                if fn is other or body_dump(attempt.tree(fn)) == body_dump(function_tree(other)):
                    return (f"{name_of(fn)} is the notebook's {name_of(other)}"
                            + ("" if fn is other else " under another name")
                            + ": the exercise asks you to change it")
            for name, callee in _callees(fn, attempt.tree(fn)):
                if any(callee is other for other in others):
                    return (f"{name_of(fn)} calls the course's {name}, which already does the work: "
                            f"write that part yourself")
        return None


def _resolve(fn, name: str):
    """What the dotted ``name`` called in ``fn``'s body refers to in ``fn``'s globals (its Python
    function under a kernel object), or None."""
    parts = name.split(".")
    try:   # an attribute look-up runs arbitrary code (a property, a lazy module): whatever fails names nothing
        obj = getattr(py_function(fn), "__globals__", {}).get(parts[0])
        for part in parts[1:]:
            obj = getattr(obj, part, None)
        return None if obj is None else py_function(obj)
    except Exception:
        return None


def _callees(fn, tree, depth: int = 4):
    """(name, function) for every function ``fn``'s body calls by a name its globals resolve, and,
    through helpers defined where ``fn`` was (the learner's own), theirs, ``depth`` levels down."""
    seen, todo, out = {id(py_function(fn))}, [(fn, tree, depth)], []
    while todo:
        f, t, d = todo.pop()
        for name in sorted(called_names(t)):
            g = _resolve(f, name)
            if g is None or id(g) in seen or not inspect.isfunction(g):
                continue
            seen.add(id(g))
            out.append((name, g))
            if d > 1 and g.__module__ == py_function(fn).__module__:
                try:
                    todo.append((g, function_tree(g), d - 1))
                except (OSError, TypeError, ValueError):
                    pass
    return out


def _show(p) -> str:
    """A program's index as the learner writes it: ``0``, or ``(1, 2)`` for a 2-D grid."""
    p = tuple(p)
    while len(p) > 1 and p[-1] == 0:
        p = p[:-1]
    return str(p[0]) if len(p) == 1 else str(p)
