"""Exercises that check themselves and never raise, so a notebook with open exercises still
runs top to bottom.

* :func:`exercise`: any answer, checked by a function (a number, a string, a timer...).
* :func:`kernel_exercise`: a kernel, checked for the method, not only the numbers: the learner's
  kernel of the asked kind ran (recorded by :mod:`.launches`), the result is memory it wrote,
  the result matches a reference, the course's own launch of the kernel on fresh memory computes
  it too (:mod:`.replay` for Triton and Numba, :mod:`.cuda_launch` for CUDA C), and optional
  evidence of the technique holds, read from what that launch executed
  (:func:`uses_shared_memory`, :func:`shared_tiles`, :func:`threads_per_block`,
  :func:`grid_is`, :func:`calls`, :func:`launches_at_most`, :func:`only_reads`,
  :func:`splits_work`, :func:`shared_atomics`).
* :func:`formula_exercise`: a number the learner works out, asked as a function of the
  question's parameters and tried on several of them, so a number copied from a stored output
  cannot pass.
* :func:`hint`: hints are opt-in: a check registers its hint and prints how to ask for it.

Put the learner's code and the check in different cells: anything defined inside the cell that
calls the check (or inside the function that calls it) is refused as an answer.
"""
from __future__ import annotations

import ast
import copy
import inspect
import sys
import textwrap
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..checking import CheckFailed, check
from ..launch import cdiv  # noqa: F401  (used by the doctest)
from ..launches import Launch, LaunchLog, dims3, launches
from . import guard
from .guard import genuine as _evidence

__all__ = ["exercise", "kernel_exercise", "judge_kernel", "formula_exercise", "hint", "Verdict",
           "Attempt", "uses_shared_memory", "threads_per_block", "grid_is", "calls",
           "launches_at_most", "only_reads", "differs_from", "watch_calls", "slow_work", "Call",
           "shared_tiles", "splits_work", "shared_atomics"]

_HINTS: dict[str, str] = {}


def exercise(title: str, answer, check, hint: str = "") -> None:
    """Check a learner's ``answer`` with ``check(answer)`` and print one line about it.

    ``check`` says no by returning False or raising (its message is shown); a check that returns
    None counts as passed, so assert-style checks work. An ``answer`` of ``None`` means
    "not attempted yet". A function defined inside the cell that runs the check is refused (the
    answer goes in its own cell above). Never raises itself, so a notebook with open exercises
    still runs top to bottom. ``hint`` is registered for :func:`hint`, never printed here.

    >>> exercise("blocks for 1000 items", 4, lambda a: a == cdiv(1000, 256))
    ✅ blocks for 1000 items: correct
    >>> exercise("blocks for 1000 items", 3, lambda a: a == cdiv(1000, 256), hint="round up")
    ❌ blocks for 1000 items: not yet (utils.hint('blocks for 1000 items') prints a hint)
    """
    note = _hint_note(title, hint)
    if answer is None:
        print(f"⬜ {title}: not answered yet{note}")
        return
    why = _rebound()
    if why:
        print(f"❌ {title}: not yet: {why}")
        return
    if callable(answer) and any(s.holds(answer) for s in _check_scopes()):
        print(f"❌ {title}: not yet: {_name_of(answer)} is defined inside the check cell: define it "
              f"in your own cell above the check and hand that in")
        return
    try:
        ok = check(answer)
        why = ""
    except AssertionError as e:  # an assert of the check: its message says what is wrong
        ok, why = False, (str(e).strip().splitlines() or [""])[0] or _first_line(e)
    except Exception as e:  # the learner's answer may fail in any way: report, do not raise
        ok, why = False, _first_line(e)
    if ok is None or ok:
        print(f"✅ {title}: correct")
    else:
        print(f"❌ {title}: not yet" + (f": {why}" if why else "") + note)


def hint(title: str) -> None:
    """Print the hint of exercise ``title`` (registered when its check cell ran).

    >>> _ = kernel_exercise("demo", None, kind="triton", run=len, reference=None, hint="mask the tail")
    ⬜ demo: not answered yet (utils.hint('demo') prints a hint)
    >>> hint("demo")
    💡 demo: mask the tail
    """
    if title in _HINTS:
        print(f"💡 {title}: {_HINTS[title]}")
    else:
        known = ", ".join(repr(t) for t in _HINTS) or "none yet"
        print(f"no hint for {title!r}: run its check cell first (hints so far: {known})")


def _hint_note(title: str, text: str | None) -> str:
    if not text:
        return ""
    _HINTS[title] = text
    return f" (utils.hint({title!r}) prints a hint)"


def _first_line(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}".rstrip(": ")


# ----------------------------------------------------------------------------------------------
# Where things come from

_LIBRARIES = ("torch", "triton", "numba", "numba_cuda", "numpy", "builtins", "math", "operator",
              "functools")
_COURSE = ("gpu_course", "utils")
_COURSE_DIR = Path(__file__).resolve().parent.parent  # where the course's own .cu kernels are
_KINDS = {"triton": "Triton", "numba": "Numba", "cuda": "CUDA C"}
_SYNTAX = {"triton": "{k}[grid](...)", "numba": "{k}[blocks, threads](...)",
           "cuda": "{k}<<<blocks, threads>>>(...) in your host function"}


def _top(module: str | None) -> str:
    return (module or "").split(".")[0]


def _py_function(obj):
    """The Python function under a kernel object: a Triton JITFunction / InterpretedFunction (also
    under autotune/heuristics wrappers), a Numba dispatcher or simulator kernel, or ``obj``."""
    for _ in range(8):
        inner = getattr(obj, "py_func", None) or getattr(obj, "fn", None)
        if inner is None or inner is obj:
            break
        obj = inner
    return obj


def _kind_of(obj) -> str | None:
    """Which kind of kernel ``obj`` is: "triton", "numba", or None (not a kernel)."""
    for klass in type(obj).__mro__:
        mod = _top(klass.__module__)
        if mod == "triton":
            return "triton"
        if mod in ("numba", "numba_cuda"):
            return "numba"
    return None


def _module_of(obj) -> str:
    fn = _py_function(obj)
    return getattr(fn, "__module__", None) or getattr(obj, "__module__", None) or ""


def _name_of(obj) -> str:
    fn = _py_function(obj)
    return getattr(fn, "__name__", None) or getattr(obj, "__name__", None) or type(obj).__name__


@dataclass
class _Scope:
    """Lines of one code object: the cell (or function) that runs a check."""
    filename: str
    first: int
    last: int

    def holds(self, obj) -> bool:
        code = getattr(_py_function(obj), "__code__", None)
        return (code is not None and code.co_filename == self.filename
                and self.first <= code.co_firstlineno <= self.last)


def _scope(code) -> _Scope:
    lines = [ln for _, _, ln in code.co_lines() if ln]
    return _Scope(code.co_filename, code.co_firstlineno, max(lines, default=code.co_firstlineno))


def _is_cell(filename: str) -> bool:
    return filename.startswith("<ipython-input") or "ipykernel_" in filename


def _check_scopes() -> list[_Scope]:
    """The code that is running a check: the caller of the exercise helper and its callers in
    the same file (a test and its helpers), and the notebook cell around them (the ``<module>``
    frame of an IPython cell) if there is one."""
    here = Path(__file__).resolve().parent  # this subpackage
    f = sys._getframe(1)
    while f is not None and (Path(f.f_code.co_filename).resolve().parent == here
                             or f.f_globals.get("__name__") in ("utils", "gpu_course")):
        f = f.f_back
    scopes, g = [], f
    while g is not None and g.f_code.co_filename == f.f_code.co_filename:
        scopes.append(_scope(g.f_code))
        g = g.f_back
    while g is not None:
        if g.f_code.co_name == "<module>" and _is_cell(g.f_code.co_filename):
            scopes.append(_scope(g.f_code))
            break
        g = g.f_back
    return scopes


def _provenance_problem(obj, what: str, kind: str, scopes, reference=None) -> str | None:
    """Why ``obj`` (an answer or a kernel) cannot be the learner's own work, or None."""
    if reference is not None and obj is reference:
        return (f"that is the reference the check compares with: hand in your own {what}, "
                f"which launches your {_KINDS[kind]} kernel")
    if not callable(obj):
        return None
    name, module = _name_of(obj), _module_of(obj)
    if any(s.holds(obj) for s in scopes):
        return (f"{name} is defined inside the check cell: define it in your own cell above the "
                f"check and hand that in")
    if _top(module) in _COURSE:
        return f"{name} comes from the course package ({module}): write your own {what}"
    if _top(module) in _LIBRARIES:
        return (f"{name} is {module}'s, not yours: the exercise asks for a {what} that launches "
                f"your own {_KINDS[kind]} kernel")
    other = _kind_of(obj)
    if other is not None and other != kind:
        return (f"{name} is a {_KINDS[other]} kernel; this exercise asks for a {_KINDS[kind]} "
                f"kernel, launched as {_SYNTAX[kind].format(k='kernel')}")
    return None


# ----------------------------------------------------------------------------------------------
# Kernel exercises

@dataclass
class Verdict:
    """What a check found: ``ok`` is True (passed), False (refused) or None (not answered);
    ``lines`` are what :func:`kernel_exercise` prints."""
    ok: bool | None
    lines: list[str]

    def __str__(self):
        return "\n".join(self.lines)


@dataclass
class Attempt:
    """What evidence checks look at: the learner's ``launches`` (of the asked ``kind``) of the
    kernel ``name``, the whole ``seen`` log, the CUDA C ``source`` (CUDA C only), the
    ``output``."""
    kind: str
    name: str
    launches: list[Launch]
    seen: LaunchLog
    output: torch.Tensor
    source: str | None = None
    execution: object = None  # what ran in the course's own launch (replay.Execution, cuda_launch.CudaExecution)
    replayed: torch.Tensor | None = None  # the output of the course's own launch
    _trees: dict = field(default_factory=dict)

    def functions(self) -> list:
        """The learner's launched kernels as Python functions (Triton, Numba), once each."""
        out = []
        for L in self.launches:
            if L.fn is not None and all(L.fn is not f for f in out):
                out.append(L.fn)
        return out

    def tree(self, fn) -> ast.FunctionDef:
        """The AST of kernel function ``fn`` (its source from ``inspect.getsource``)."""
        if fn not in self._trees:
            self._trees[fn] = _function_tree(fn)
        return self._trees[fn]

    def cuda_body(self) -> list:
        """Tokens of the body of CUDA C kernel ``name`` in ``source``."""
        return _cuda_kernel_body(self.source or "", self.name)


def _function_tree(fn) -> ast.FunctionDef:
    src = textwrap.dedent(inspect.getsource(fn))
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    raise ValueError(f"no function definition in the source of {fn!r}")


def _dotted(node) -> str:
    """``cuda.shared.array`` for the expression ``cuda.shared.array`` ("" if not a name chain)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _called_names(tree) -> set[str]:
    return {_dotted(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)} - {""}


def _is_stub(tree) -> bool:
    """A body of only ``pass``, ``...`` and strings: the starter, not yet written."""
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
               for s in tree.body)


def _cuda_kernels(source: str) -> dict[str, list]:
    """``{name: body tokens}`` of every ``__global__`` function in CUDA C ``source``."""
    from ..cuda.cxx import match_brackets, tokenize
    toks = tokenize(source)
    pairs = match_brackets(toks)
    kernels = {}
    for i, t in enumerate(toks):
        if t.text != "__global__":
            continue
        j = i + 1
        while j < len(toks) and toks[j].text not in ("(", ";", "{"):
            j += 1
        while j < len(toks) and toks[j - 1].text == "__launch_bounds__" and j in pairs:   # not the name
            j = pairs[j] + 1
            while j < len(toks) and toks[j].text not in ("(", ";", "{"):
                j += 1
        if j >= len(toks) or toks[j].text != "(" or j not in pairs:
            continue
        name = toks[j - 1].text
        k = pairs[j] + 1
        while k < len(toks) and toks[k].text not in ("{", ";"):
            k += 1
        if k < len(toks) and toks[k].text == "{" and k in pairs:
            kernels[name] = toks[k + 1:pairs[k]]
    return kernels


def _cuda_kernel_body(source: str, name: str) -> list:
    return _cuda_kernels(source).get(name, [])


def _course_cuda_kernel(source: str, name: str) -> str | None:
    """The course file holding a kernel with the same body as ``name`` in ``source``, if any."""
    body = [t.text for t in _cuda_kernel_body(source, name)]
    if not body:
        return None
    root = _COURSE_DIR
    for path in sorted(root.rglob("*.cu*")):
        if "emulation" in path.parts or path.suffix not in (".cu", ".cuh"):
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        for other in _cuda_kernels(text).values():
            if [t.text for t in other] == body:
                return str(path.relative_to(root.parent))
    return None


def _evaluate(reference):
    return reference() if callable(reference) and not isinstance(reference, torch.Tensor) else reference


def judge_kernel(title: str, answer, *, kind: str, run, reference, kernel=None, build=None,
                 atol: float = 1e-5, rtol: float = 1e-5, evidence=(), hint: str | None = None,
                 name: str | None = None, inputs=(), _scopes=None) -> Verdict:
    """The verdict of :func:`kernel_exercise` (same arguments), without printing it."""
    scopes = _check_scopes() if _scopes is None else _scopes
    note = _hint_note(title, hint)

    def no(why: str) -> Verdict:
        return Verdict(False, [f"❌ {title}: not yet: {why}"])

    if kind not in _KINDS:
        return Verdict(False, [f"❌ {title}: the check is set up wrongly: kind={kind!r}, not one of "
                               f"{', '.join(_KINDS)}"])
    if answer is None:
        return Verdict(None, [f"⬜ {title}: not answered yet{note}"])
    why = _rebound()
    if why:
        return no(why)
    for ev in evidence:
        if not guard.is_genuine(ev) and not any(s.holds(ev) for s in scopes):
            return no(f"{_name_of(ev)} is not evidence the course made, nor a function of the check cell: "
                      f"the check's evidence comes from utils (utils.grid_is(...), ...)")
    Kind = _KINDS[kind]
    what = "CUDA C source" if kind == "cuda" else "function or kernel"

    # 1. where the answer and the named kernel come from
    why = _provenance_problem(answer, what, kind, scopes, reference)
    if why:
        return no(why)
    if kernel is not None and not isinstance(kernel, str):
        why = _provenance_problem(kernel, "kernel", kind, scopes)
        if why:
            return no(why)
    kname = kernel if isinstance(kernel, str) else (_name_of(kernel) if kernel is not None else None)
    source, mod, kernels = None, None, {}
    if kind != "cuda" and not callable(answer):
        return no(f"hand in the {what} itself, not a {type(answer).__name__}: the check runs it")
    if kind == "cuda":
        if not isinstance(answer, str):
            return no(f"hand in your CUDA C source as a string (utils.cuda_begin + r\"\"\"...\"\"\"), "
                      f"not a {type(answer).__name__}")
        source = answer
        kernels = _cuda_kernels(source)
        if kname is not None and kname not in kernels:
            return no(f"your source has no __global__ kernel named {kname}: write one (the check "
                      f"looks for its launches)")
        if kname is not None:
            where = _course_cuda_kernel(source, kname)
            if where:
                return no(f"{kname} is the course's own kernel from {where}: write your own")
        try:
            mod = build(source)
        except Exception as e:  # noqa: BLE001  a build error is the learner's to fix
            lines = str(e).strip().splitlines() or [type(e).__name__]
            return Verdict(False, [f"❌ {title}: not yet: your source does not build:"]
                           + [f"    {ln}" for ln in lines[:12]])
    try:
        ref = _evaluate(reference)
    except Exception as e:  # noqa: BLE001
        return Verdict(False, [f"❌ {title}: the check is set up wrongly (its reference raised "
                               f"{_first_line(e)})"])

    # the inputs the check names (``inputs=`` and those of only_reads), kept by value
    inputs = list(inputs) + [t for ev in evidence for t in getattr(ev, "inputs", ())]
    before = [(t, t.detach().clone()) for t in inputs]

    # 2. run it, recording launches (and, for CUDA C, what torch did inside the host functions)
    host_torch = _HostTorch()
    try:
        with host_torch.watching(mod), launches(modules=[mod] if mod is not None else (), snapshot=True) as seen:
            out = run(mod if kind == "cuda" else answer)
    except Exception as e:  # noqa: BLE001  the learner's code may fail in any way
        return no(f"running it raised {_first_line(e)}")
    if kind == "cuda" and isinstance(out, torch.Tensor):
        why = host_torch.problem(out)
        if why:
            return no(why)

    for i, (t, was) in enumerate(before):
        if not _same_bytes(t, was):
            return no(f"running it changed input {i + 1} of the check (a {_describe(t)}): a kernel "
                      f"reads its inputs and writes only its output")

    # 3. the learner's launches of the asked kind
    label = kname or f"your {Kind} kernel"
    syntax = _SYNTAX[kind].format(k=kname or "your_kernel")
    if kind == "cuda" and _module_name_of(mod) in seen.uncounted:
        return no(f"cannot tell whether {label} ran: {seen.uncounted[_module_name_of(mod)]}")
    mine, refused = [], []
    for L in seen.of(kind):
        if not L.finished:
            continue
        if kname is not None and L.name != kname:
            continue
        if kernel is not None and not isinstance(kernel, str) and L.fn is not _py_function(kernel):
            continue
        if kind == "cuda":
            if L.kernel is mod and L.name in kernels:
                mine.append(L)
            continue
        why = _provenance_problem(L.kernel, "kernel", kind, scopes)
        (refused if why else mine).append((L, why) if why else L)
    if not mine:
        if refused:
            return no(refused[0][1])
        others = [L for L in seen if L.kind != kind and L.finished]
        if others:
            o = others[0]
            return no(f"only a {_KINDS[o.kind]} kernel ({o.name}) was launched: this exercise asks "
                      f"for a {Kind} kernel, launched as {syntax}")
        if kname is not None and seen.of(kind):
            ran = ", ".join(sorted({str(L.name) for L in seen.of(kind)}))
            return no(f"no launch of {kname} was recorded ({ran} ran instead): launch it with "
                      f"{syntax}")
        return no(f"no launch of {label} was recorded: the result came from somewhere else — "
                  f"launch the kernel with {syntax}")
    label = kname or mine[0].name or label

    # 4. the output is memory the learner's kernel wrote, unchanged since
    if isinstance(out, tuple(_numpy_array_types())):
        out = torch.from_numpy(out)
    if not isinstance(out, torch.Tensor):
        return no(f"the result is a {type(out).__name__}, not a tensor: return the output tensor "
                  f"that {label} wrote")
    if out.numel() == 0:
        return no("the result is an empty tensor")
    if not seen.writers_of(out, among=mine):
        return no(f"the returned tensor is not memory {label} was given: it was computed "
                  f"afterwards (by torch?) — return the output tensor you passed to {label}")
    last = seen.writers_of(out)[-1]
    if last not in mine:
        return no(f"after {label}, {last.name} was given the output too: the result must be what "
                  f"{label} wrote")
    if seen.changed_since_launch(out, last):
        return no(f"the output changed after {label} wrote it: something (torch?) overwrote it "
                  f"afterwards — return what the kernel wrote")
    label = kname or last.name or label  # the kernel that wrote the result, among several of the learner's
    fns = [L.fn for L in mine if L.fn is not None]
    try:
        if fns and all(_is_stub(_function_tree(f)) for f in fns):
            return Verdict(None, [f"⬜ {title}: not answered yet: {label}'s body is still the "
                                  f"starter's `pass`{note}"])
    except (OSError, TypeError, ValueError, SyntaxError):
        pass  # no source to read: the value check below still judges it

    # 5. the values
    try:
        check(out, ref, atol=atol, rtol=rtol, name=name or label)
    except CheckFailed as e:
        lines = str(e).splitlines()
        return Verdict(False, [f"❌ {title}: not yet: {lines[0]}"]
                       + [f"    {ln.strip()}" for ln in lines[1:]])
    except Exception as e:  # noqa: BLE001  a shape or dtype the check cannot compare
        return no(f"the result cannot be compared with the reference ({_first_line(e)})")

    # 5b. the course launches the learner's kernel itself, on fresh memory
    execution = replayed = None
    if kind in ("triton", "numba"):
        why, replayed, execution = _own_launch(mine, out, inputs, ref, atol, rtol, name or label, label)
        if why:
            return no(why)
    else:
        why, replayed, execution = _own_cuda_launch(source, label, last, out, inputs, ref, atol, rtol,
                                                    name or label, host_torch.zeroed(out))
        if why:
            return no(why)

    # 6. the method
    attempt = Attempt(kind, label, mine, seen, out, source, execution=execution, replayed=replayed)
    for ev in evidence:
        try:
            why = ev(attempt)
        except _SetupError as e:
            return Verdict(False, [f"❌ {title}: the check is set up wrongly ({e})"])
        except Exception as e:  # noqa: BLE001  e.g. no source to read
            return no(f"the method could not be checked ({_first_line(e)})")
        if why:
            return no(why)
    return Verdict(True, [f"✅ {title}: correct (your {Kind} kernel {label} wrote the result)"])


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and _same_bytes(a, b)
    except Exception:  # noqa: BLE001
        return False


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype and bytes (so NaN equals NaN, and -0.0 is not 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.detach().contiguous().view(torch.uint8) if a.dim() else a.detach().reshape(1).view(torch.uint8),
                       b.detach().contiguous().view(torch.uint8) if b.dim() else b.detach().reshape(1).view(torch.uint8))


def _describe(t: torch.Tensor) -> str:
    return f"{'×'.join(str(n) for n in t.shape) or 'scalar'} {str(t.dtype).replace('torch.', '')} tensor"


def _own_launch(mine, out, inputs, ref, atol, rtol, name, label):
    """The course's own launch of the learner's kernel(s) (:func:`.replay.replay`): the same
    launches on fresh, poisoned memory. Returns (why not, or None; the replayed output; what ran)."""
    from .replay import replay, written
    try:
        got, execution, mem = replay(mine, out, inputs)
    except Exception as e:  # noqa: BLE001  the learner's kernel may fail in any way
        return f"the check launched {label} itself (your grid and arguments, on fresh memory) and it raised " \
               f"{_first_line(e)}", None, None
    why = _replayed_result(label, mem, got, ref, atol, rtol, name, "your grid and arguments", "function")
    if why:
        return why, got, execution
    if len(mine) == 1 and execution.programs > 2:
        L = mine[0]
        unit = "program" if L.kind == "triton" else "block"
        counted = execution if execution.counted else _interpreted_execution(mine, out, inputs)
        if counted is not None and L.kind == "triton":
            idle = counted.programs - sum(1 for n in counted.stored.values() if n > 0)
            if idle:
                return (f"{idle} of the {execution.programs} programs of {label} stored nothing: split the "
                        f"work so that each program computes and stores its own part"), got, execution
        try:
            one, _, _ = replay(mine, out, inputs, grid=(1, 1, 1))
        except Exception as e:  # noqa: BLE001
            return (f"the check launched {label} with a single {unit} and it raised {_first_line(e)}: "
                    f"a {unit} must work on its own part, whatever the grid"), got, execution
        n = int(written(one).sum())
        if n >= out.numel():
            return (f"launched alone, {unit} 0 of {label} wrote all {n} outputs, the work of the whole grid "
                    f"of {execution.programs}: each {unit} must compute its own part, not loop over the "
                    f"others'"), got, execution
    return None, got, execution


_INTERPRETED_PROGRAMS_MAX = 1024  # beyond this, the interpreter's count would take minutes


def _interpreted_execution(mine, out, inputs):
    """On a GPU machine, what each program of the learner's one Triton launch stored, counted by
    running the launch again in Triton's interpreter (the compiled kernel cannot say which program
    stored what). None where that cannot be had: not a plain Triton kernel, too many programs, or
    a kernel the interpreter cannot run (the other evidence still applies then)."""
    from .replay import replay
    L = mine[0]
    if not mode_on_gpu() or L.kind != "triton" or L.grid is None \
            or L.grid[0] * L.grid[1] * L.grid[2] > _INTERPRETED_PROGRAMS_MAX:
        return None
    try:
        _, execution, _ = replay(mine, out, inputs, interpret=True)
    except Exception:  # noqa: BLE001  a kernel the interpreter cannot run is judged without this count
        return None
    return execution if execution.counted else None


def _own_cuda_launch(source, label, launch, out, inputs, ref, atol, rtol, name, zeroed):
    """The course's own launch of the learner's CUDA C kernel ``label`` (:func:`.cuda_launch.own_launch`):
    the launches of it that the host call ``launch`` made, again, on fresh memory. Returns (why not,
    or None; the output it wrote; what ran)."""
    from .cuda_launch import CudaLaunchError, own_launch
    try:
        got, execution, mem = own_launch(source, label, launch, out, inputs, zeroed)
    except CudaLaunchError as e:
        return f"the check launches {label} itself and cannot: {e}", None, None
    except Exception as e:  # noqa: BLE001  the learner's kernel may fail in any way
        return (f"the check launched {label} itself (your launch configuration and arguments, on fresh "
                f"memory) and it raised {_first_line(e)}"), None, None
    why = _replayed_result(label, mem, got, ref, atol, rtol, name, "your launch configuration and arguments",
                           "host function")
    return why, got, execution


def _replayed_result(label, mem, got, ref, atol, rtol, name, launched, rest):
    """Why the course's own launch of ``label`` (``launched``: what of the learner's it reused) does not
    count, or None: it wrote into an input, or its output ``got`` is not the reference's."""
    changed = mem.changed_inputs()
    if changed:
        return (f"{label} wrote into its input ({changed[0]}) when the check launched it: a kernel reads "
                f"its inputs and writes only its output")
    try:
        check(got, ref, atol=atol, rtol=rtol, name=name)
    except Exception as e:  # noqa: BLE001
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return (f"the check launched {label} itself ({launched}, on fresh memory, without the rest of your "
                f"{rest}) and it did not compute the result: {first}")
    return None


# aten operators a host function may run: allocation, views, copies and conversions, zeroing
_HOST_OPS_ALLOWED = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "zero_", "fill_", "clone", "contiguous", "copy_", "_to_copy", "to", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "t", "transpose", "permute", "select", "slice", "as_strided", "alias",
    "detach", "expand", "unsqueeze", "squeeze", "flatten", "narrow", "lift_fresh", "resize_", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "_local_scalar_dense", "set_",
    "record_stream", "view_as", "unflatten", "split", "chunk", "unbind", "item",
}


class _HostTorch:
    """What torch did inside a CUDA C module's host functions (aten operators, seen through a
    TorchDispatchMode, which sees the operators C++ code calls too): a host function allocates,
    checks and launches; it does not compute, and it does not write the output, except to zero it."""

    def __init__(self):
        self.ops: list[tuple[str, str, list, object]] = []  # (host function, op, storages written, fill value)

    @contextmanager
    def watching(self, mod):
        if mod is None:
            yield
            return
        from torch.utils._python_dispatch import TorchDispatchMode
        log = self

        class Mode(TorchDispatchMode):
            host = ""

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                written = []
                for i, a in enumerate(func._schema.arguments):
                    if a.alias_info is not None and a.alias_info.is_write:
                        v = args[i] if i < len(args) else kwargs.get(a.name)
                        if isinstance(v, torch.Tensor):
                            written.append(v.untyped_storage().data_ptr())
                name = func._overloadpacket.__name__
                value = args[1] if name == "fill_" and len(args) > 1 else None
                log.ops.append((self.host, name, written, value))
                return func(*args, **kwargs)

        wrapped = []
        for attr in dir(mod):
            f = getattr(mod, attr)
            if attr.startswith("_") or not callable(f) or isinstance(f, type):
                continue

            def host_call(*args, _f=f, _attr=attr, **kwargs):
                mode = Mode()
                mode.host = _attr
                with mode:
                    return _f(*args, **kwargs)
            wrapped.append((attr, attr in getattr(mod, "__dict__", {}), f))
            setattr(mod, attr, host_call)
        try:
            yield
        finally:
            for attr, had_own, f in reversed(wrapped):
                if had_own:
                    setattr(mod, attr, f)
                else:
                    delattr(mod, attr)

    def zeroed(self, out: torch.Tensor) -> bool:
        """Whether a host function zeroed the output's memory (``out.zero_()``, ``fill_(0)``): the
        course's own launch of the kernel then starts from zeros too (a kernel that adds into it)."""
        ptr = out.untyped_storage().data_ptr()
        return any(ptr in written and (name == "zero_" or (name == "fill_" and type(value) in (int, float)
                                                             and value == 0))
                   for _, name, written, value in self.ops)

    def problem(self, out: torch.Tensor) -> str | None:
        """Why the host functions' use of torch is not allowed, or None."""
        ptr = out.untyped_storage().data_ptr()
        for host, name, written, value in self.ops:
            zeroing = name == "zero_" or (name == "fill_" and type(value) in (int, float) and value == 0)
            if ptr in written and not zeroing:
                return (f"your host function {host} writes the output with torch (aten.{name}): the "
                        f"result must be what your kernel wrote (a host function may only zero it first)")
            if name not in _HOST_OPS_ALLOWED:
                return (f"your host function {host} computes with torch (aten.{name}): the kernel must do "
                        f"the work; a host function checks, allocates, zeroes and launches")
        return None


def _rebound() -> str | None:
    """Why a check cannot be trusted now: a function of torch or of the course was reassigned."""
    name = guard.reassigned()
    if name:
        return (f"{name} is not the original any more (it was reassigned in this session), and the check "
                f"relies on it: restart the kernel and run the notebook again without reassigning it")
    return None


def _module_name_of(mod) -> str:
    return getattr(mod, "__name__", None) or f"module@{id(mod):x}"


def _numpy_array_types():
    np = sys.modules.get("numpy")
    return (np.ndarray,) if np is not None else ()


def kernel_exercise(title: str, answer, *, kind: str, run, reference, kernel=None, build=None,
                    atol: float = 1e-5, rtol: float = 1e-5, evidence=(), hint: str | None = None,
                    name: str | None = None, inputs=()) -> None:
    """Check a kernel exercise for its method as well as its numbers; print ⬜/✅/❌ and a
    sentence that says what to do. Never raises.

    * ``answer``: what the learner hands in: a function that launches their kernel and returns
      its output (``add_relu``), a kernel (``matmul_rect_numba``), or for ``kind="cuda"`` the
      CUDA C source, which ``build(source)`` turns into a module. None: not answered yet.
    * ``kind``: "triton", "numba" or "cuda": the kind of kernel that must run.
    * ``run(answer)`` (``run(module)`` for CUDA C): runs the exercise on the check's inputs and
      returns the output; outputs it allocates should come from ``utils.poisoned``.
    * ``reference``: the expected output (a tensor, or a function of no arguments returning one),
      compared with ``utils.check`` within ``atol`` / ``rtol``.
    * ``kernel``: the kernel's name (a string: the safest, it cannot be rebound to another
      kernel) or object; None accepts any kernel of that kind written by the learner.
    * ``evidence``: checks of the technique, e.g. ``[uses_shared_memory()]``.
    * ``hint``: registered for :func:`hint`, never printed by the check.

    It passes only if (a) the learner's kernel of that kind was launched while ``run`` ran: not
    a kernel of the course package, of a library, or defined inside the check cell; (b) the
    returned tensor is memory one of those launches was given, and nothing changed it after the
    learner's last launch; (c) it matches the reference; (d) every ``evidence`` holds. An answer
    that is the reference itself, a torch function, or a function defined in the check cell is
    refused; a kernel whose body is still ``pass`` counts as not answered.

    >>> kernel_exercise("fused add + ReLU", None, kind="triton", run=None, reference=None)
    ⬜ fused add + ReLU: not answered yet
    """
    try:
        verdict = judge_kernel(title, answer, kind=kind, run=run, reference=reference, kernel=kernel,
                               build=build, atol=atol, rtol=rtol, evidence=evidence, hint=hint,
                               name=name, inputs=inputs, _scopes=_check_scopes())
    except Exception as e:  # noqa: BLE001  never raise from a check
        verdict = Verdict(False, [f"❌ {title}: the check itself failed ({_first_line(e)})"])
    print(verdict)


# ----------------------------------------------------------------------------------------------
# Evidence of the method: each takes an Attempt and returns None (holds) or why not

class _SetupError(Exception):
    """Evidence that does not apply to the exercise's kind: the check's fault, not the learner's."""


def uses_shared_memory():
    """Evidence: the kernel stages data in shared memory, as the course's own launch executed it.
    Numba: every thread of a block wrote a ``cuda.shared.array`` and read it (simulator), the
    compiled kernel loads and stores shared memory (GPU); CUDA C: every thread that touched global
    memory stored into shared memory and loaded from it (an atomic on shared memory counts as both;
    emulation), the compiled kernel's SASS stores to and loads from shared memory (GPU). Where
    nothing was executed or compiled to read, the code's text: a call of ``cuda.shared.array`` in a
    Numba kernel's AST, a ``__shared__`` token in a CUDA C kernel's body."""
    def holds(a: Attempt):
        if a.kind == "cuda" and a.execution is not None:
            from .cuda_evidence import shared_used
            why = shared_used(a.name, a.execution)
            if why is not False:
                return why
        if a.kind == "numba" and a.execution is not None:
            why = _numba_shared_executed(a, None)
            if why is not False:
                return why
        if a.kind == "numba":
            for fn in a.functions():
                if any(c == "shared.array" or c.endswith(".shared.array")
                       for c in _called_names(a.tree(fn))):
                    return None
            return (f"{a.name} does not use shared memory: the exercise asks for tiles staged in "
                    f"cuda.shared.array(...)")
        if a.kind == "cuda":
            if any(t.text == "__shared__" for t in a.cuda_body()):
                return None
            return (f"{a.name} declares no __shared__ array: the exercise asks for tiles staged in "
                    f"shared memory")
        raise _SetupError("uses_shared_memory applies to Numba and CUDA C kernels; Triton places "
                          "shared memory itself")
    return _evidence(holds)


def shared_tiles(*shapes):
    """Evidence: the Numba kernel stages a tile of each of ``shapes`` in shared memory: a
    ``cuda.shared.array(shape, ...)`` of that shape (numbers, or module-level constants such as
    ``(TH, TW)``) assigned to a name that the kernel both writes (``ms[i, j] = ...``) and reads.
    A shared array declared and never used, or of another shape, does not count.

    >>> ev = shared_tiles((8, 16), (16, 16))   # the m tile and the n tile of a rectangular tiling
    """
    from collections import Counter
    want = Counter(_as_shape(s) for s in shapes)

    def holds(a: Attempt):
        if a.kind != "numba":
            raise _SetupError("shared_tiles applies to Numba kernels (CUDA C: uses_shared_memory; "
                              "Triton places shared memory itself)")
        if a.execution is not None:
            for shape in want:
                why = _numba_shared_executed(a, shape)
                if why is False:
                    break
                if why:
                    return (f"{a.name} stages no {_show_shape(shape)} tile in shared memory that every thread "
                            f"writes and reads ({why}): the exercise asks for tiles of "
                            f"{', '.join(_show_shape(s) for s in want)}")
            else:
                return None
        have = Counter()
        for fn in a.functions():
            have.update(_staged_shared_shapes(a.tree(fn), getattr(fn, "__globals__", {})))
        missing = want - have
        if missing:
            shape = next(iter(missing))
            return (f"{a.name} stages no {_show_shape(shape)} tile in shared memory (a "
                    f"cuda.shared.array of that shape that the kernel writes and reads): the "
                    f"exercise asks for tiles of {', '.join(_show_shape(s) for s in want)}")
        return None
    return _evidence(holds)


def _numba_shared_executed(a: Attempt, shape):
    """Executed evidence of shared memory in a Numba kernel (optionally of one ``shape``): None if
    it holds, why not, or False when nothing was counted (no course launch to read)."""
    ex = a.execution
    if ex.counted:
        blocks, threads = ex.blocks, ex.threads
        uses = [u for u in ex.shared.values() if shape is None or u.shape == shape]
        if not uses:
            return ("no cuda.shared.array of that shape was created" if shape else
                    "no cuda.shared.array was created when the check launched it")
        for u in uses:
            if all(len({w for w in u.writers if w[0] == b}) == threads
                   and len({r for r in u.readers if r[0] == b}) == threads for b in blocks):
                return None
        u = max(uses, key=lambda u: len(u.writers) + len(u.readers))
        return (f"in the check's launch, {len(u.writers)} (block, thread) pairs wrote the shared array "
                f"and {len(u.readers)} read it, of {len(blocks) * threads}: every thread of a block loads "
                f"its part of the tile and reads the tile back")
    if ex.compiled or mode_on_gpu():
        from .compiled import numba_ptx, ptx_ops, ptx_shared_elements
        try:
            ptx = "\n".join(numba_ptx(L.kernel) for L in a.launches)
        except Exception:  # noqa: BLE001
            return False
        ops = ptx_ops(ptx)
        if not (ops["shared_load"] and ops["shared_store"]):
            return "the compiled kernel has no shared-memory loads and stores"
        if shape is not None:
            n = 1
            for v in shape:
                n *= v
            if not any(n in counts for counts in ptx_shared_elements(ptx)):
                return "the compiled kernel declares no shared array of that many elements"
        return None
    return False


def mode_on_gpu() -> bool:
    from .. import mode
    return mode.ON_GPU


def _as_shape(s) -> tuple:
    return tuple(int(v) for v in s) if isinstance(s, (tuple, list)) else (int(s),)


def _show_shape(shape: tuple) -> str:
    return " × ".join(str(v) for v in shape)


def _constant(node, names: dict):
    """The value of a shape expression made of ints, module-level int constants, tuples and
    + - * //, or None."""
    import operator
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv}
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        v = names.get(node.id)
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(node, (ast.Tuple, ast.List)):
        vals = [_constant(e, names) for e in node.elts]
        return None if any(v is None for v in vals) else tuple(vals)
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        lo, hi = _constant(node.left, names), _constant(node.right, names)
        if isinstance(lo, int) and isinstance(hi, int):
            return ops[type(node.op)](lo, hi)
    return None


def _staged_shared_shapes(tree, names: dict) -> list:
    """Shapes of the shared arrays of a Numba kernel's AST that are both written and read."""
    arrays = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and (_dotted(node.value.func) == "shared.array"
                     or _dotted(node.value.func).endswith(".shared.array"))):
            call = node.value
            arg = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg == "shape"), None)
            shape = _constant(arg, names) if arg is not None else None
            for t in node.targets:
                if isinstance(t, ast.Name) and shape is not None:
                    arrays[t.id] = _as_shape(shape)
    used = {"load": set(), "store": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            used["store" if isinstance(node.ctx, ast.Store) else "load"].add(node.value.id)
    return [shape for name, shape in arrays.items()
            if name in used["load"] and name in used["store"]]


def _configs(a: Attempt, what: str) -> list:
    """The grids or blocks (``what``) of the learner's launches: for CUDA C, of every launch its host
    calls made (from the module's launch log)."""
    if a.kind == "cuda":
        return [getattr(c, what) for L in a.launches for c in L.calls]
    return [getattr(L, what) for L in a.launches]


def threads_per_block(*dims):
    """Evidence: every launch of the learner's Numba or CUDA C kernel used blocks of ``dims`` threads."""
    want = dims3(dims if len(dims) > 1 else dims[0])

    def holds(a: Attempt):
        if a.kind == "triton":
            raise _SetupError("threads_per_block applies to Numba and CUDA C launches (Triton has no threads)")
        bad = [b for b in _configs(a, "block") if b != want]
        if bad:
            return (f"{a.name} was launched with blocks of {_show(bad[0])} threads; the exercise "
                    f"asks for {_show(want)}")
        return None
    return _evidence(holds)


def grid_is(*dims, meaning: str | None = None):
    """Evidence: every launch of the learner's kernel had a grid of ``dims`` (Triton programs,
    Numba or CUDA C blocks), e.g. ``grid_is(h, meaning="one program per row")``."""
    want = dims3(dims if len(dims) > 1 else dims[0])

    def holds(a: Attempt):
        bad = [g for g in _configs(a, "grid") if g != want]
        if bad:
            unit = "programs" if a.kind == "triton" else "blocks"
            lead = f"{meaning}: " if meaning else ""
            return (f"{lead}expected a grid of {_show(want)} {unit}, but {a.name} was launched on "
                    f"{_show(bad[0])}")
        return None
    return _evidence(holds)


def calls(*names: str):
    """Evidence: the kernel calls each of ``names``. For ``tl.dot`` this is what *executed*: in cpu
    mode every program of the course's own launch that stored a result ran ``tl.dot`` (counted by
    the interpreter), on a GPU the compiled kernel holds a dot (its GPU IR, where dead code is
    gone; Triton's compiler also turns ``tl.sum(a[:, :, None] * b[None, :, :], axis=1)`` into a dot,
    which the GPU check therefore accepts and the interpreter's count does not). For other Python names, the kernel's code calls them (its AST: ``"tl.dot"`` matches
    ``tl.dot(...)`` and ``triton.language.dot(...)``). For CUDA C, ``__syncthreads``, the
    ``__shfl_*_sync`` and ``atomicAdd`` as executed by the course's own launch (every thread passed a
    barrier; every thread that touched global memory shuffled; an atomic ran) or, on a GPU, as
    present in the compiled kernel's SASS (``wmma::mma_sync`` likewise: every thread that stored a result
    executed one, or the SASS holds a tensor-core instruction); other names as calls in the kernel's body (see
    :func:`_cuda_calls`)."""
    def holds(a: Attempt):
        if a.kind == "cuda":
            return _cuda_calls(a, names)
        executed = [n for n in names if n.split(".")[-1] == "dot" and a.kind == "triton"]
        for n in executed:
            why = _dot_executed(a)
            if why:
                return why
        rest = [n for n in names if n not in executed]
        have = set().union(*(_called_names(a.tree(fn)) for fn in a.functions())) if rest else set()
        last = {c.split(".")[-1] for c in have}
        missing = [n for n in rest if n not in have and n.split(".")[-1] not in last]
        if missing:
            return f"{a.name} does not call {', '.join(missing)}: the exercise asks you to use it"
        return None
    return _evidence(holds)


def _dot_executed(a: Attempt) -> str | None:
    from .compiled import triton_ops
    ex = a.execution
    if ex is None:
        return None
    if ex.counted:
        storing = [p for p, n in ex.stored.items() if n > 0]
        idle = [p for p in storing if ex.dots.get(p, 0) == 0]
        if not storing or idle:
            return (f"{a.name} did not execute tl.dot when the check launched it (in {len(idle)} of the "
                    f"{len(storing)} programs that stored a result): the exercise asks for the product "
                    f"as tl.dot on tiles")
        return None
    if ex.compiled:
        if not any(triton_ops(k)["dot"] for k in ex.compiled):
            return (f"the compiled {a.name} holds no dot: the exercise asks for the product as tl.dot on "
                    f"tiles (a tl.dot whose result is not used is removed by the compiler)")
    return None


def _cuda_calls(a: Attempt, names) -> str | None:
    """CUDA C: ``__syncthreads``, the ``__shfl_*_sync`` and ``atomicAdd`` as executed (see
    :mod:`.cuda_evidence`); other names as tokens called in the kernel's body."""
    from . import cuda_evidence as ce
    rest = []
    for n in names:
        why = False
        if a.execution is not None and n in ce.EXECUTED:
            if n == "__syncthreads":
                why = ce.barrier_passed(a.name, a.execution)
            elif n in ce.SHUFFLES:
                why = ce.shuffled(a.name, a.execution, n)
            elif n in ce.MMA:
                why = ce.mma_ran(a.name, a.execution, n)
            else:
                why = ce.atomics_ran(a.name, a.execution, n)
        if why is False:
            rest.append(n)
        elif why:
            return why
    names = rest
    body = a.cuda_body()
    have = {t.text for t, n in zip(body, body[1:]) if n.text == "(" and t.kind == "id"}
    missing = [n for n in names if n.split("::")[-1].split(".")[-1] not in have]
    if missing:
        return f"{a.name} does not call {', '.join(missing)}: the exercise asks you to use it"
    return None


def splits_work(share: float = 1 / 16):
    """Evidence (CUDA C): the work is split between threads: in the course's own launch no thread
    made more than ``share`` of the kernel's global memory accesses (loads, stores, atomics),
    counted per thread by the emulation (cpu mode; on a GPU there is no count to read, and it
    holds). A kernel where one thread loops over everything is refused."""
    def holds(a: Attempt):
        if a.kind != "cuda":
            raise _SetupError("splits_work applies to CUDA C kernels (Triton and Numba: the course's own "
                              "launch with a single program or block shows it)")
        if a.execution is None:
            return None
        from .cuda_evidence import work_split
        why = work_split(a.name, a.execution, share)
        return why or None
    return _evidence(holds)


def shared_atomics():
    """Evidence (CUDA C): privatized counters: the kernel's atomics go to shared memory (at least as
    many as to global memory) in the course's own launch (cpu mode), the compiled kernel holds
    atomics on shared memory, ATOMS (GPU)."""
    def holds(a: Attempt):
        if a.kind != "cuda":
            raise _SetupError("shared_atomics applies to CUDA C kernels")
        if a.execution is None:
            return None
        from .cuda_evidence import shared_atomics as privatized
        why = privatized(a.name, a.execution)
        if why is False:
            return None
        return why
    return _evidence(holds)


def launches_at_most(n: int, why: str = "a fused kernel is one launch"):
    """Evidence: the learner's kernels were launched at most ``n`` times in all."""
    def holds(a: Attempt):
        total = sum(L.count or 0 for L in a.launches)
        if total > n:
            return f"{why}: {total} launches of {a.name} were recorded, at most {n} expected"
        return None
    return _evidence(holds)


def only_reads(*inputs: torch.Tensor):
    """Evidence: the learner's kernel was given only the ``inputs`` (or copies of them, equal by
    value) and its output, so it cannot copy a result torch computed beforehand. The ``inputs``
    are also the ones the course's own launch copies (everything else it poisons), and the check
    compares them before and after the learner's code ran."""
    from ..launches import tensor_extent

    def holds(a: Attempt):
        allowed = [(tensor_extent(t), t.device.type) for t in inputs]
        out_lo, out_hi = tensor_extent(a.output)
        for L in a.launches:
            tensors = [v for v in list(L.args) + list(L.kwargs.values()) if isinstance(v, torch.Tensor)]
            for b in L.buffers:
                if b.contains(out_lo, out_hi, a.output.device.type):
                    continue
                if any(b.ptr <= lo and hi <= b.ptr + b.nbytes and dev == b.device
                       or (lo <= b.ptr and b.ptr + b.nbytes <= hi and dev == b.device)
                       for (lo, hi), dev in allowed):
                    continue
                mine = [t for t in tensors if b.contains(*tensor_extent(t), t.device.type)]
                if mine and all(any(_same_values(t, i) for i in inputs) for t in mine):
                    continue  # a copy of an input
                return (f"{a.name} was given {b.name}, which is neither an input nor the "
                        f"output: compute from the inputs inside the kernel")
        return None
    holds.inputs = tuple(inputs)
    return _evidence(holds)


def differs_from(*refs):
    """Evidence: the learner's kernel is not one of ``refs``, the notebook's own kernels that the
    exercise starts from or that already solve it (Triton or Numba kernel objects; for CUDA C, a
    source string whose ``__global__`` kernels all count): not the same object, and not the same
    code under another name (the same AST of the body for Python kernels, the same tokens of the
    body for CUDA C)."""
    def holds(a: Attempt):
        if a.kind == "cuda":
            mine = [t.text for t in a.cuda_body()]
            for ref in refs:
                if not isinstance(ref, str):
                    raise _SetupError("differs_from takes CUDA C sources (strings) for a CUDA C "
                                      "exercise")
                for name, body in _cuda_kernels(ref).items():
                    if [t.text for t in body] == mine:
                        return (f"{a.name} is the notebook's {name} under another name: the "
                                f"exercise asks you to change it")
            return None
        for fn in a.functions():
            for ref in refs:
                if isinstance(ref, str):
                    raise _SetupError("differs_from takes kernel objects for a Triton or Numba "
                                      "exercise")
                other = _py_function(ref)
                if fn is other or _body_dump(a.tree(fn)) == _body_dump(_function_tree(other)):
                    return (f"{_name_of(fn)} is the notebook's {_name_of(other)}"
                            + ("" if fn is other else " under another name")
                            + ": the exercise asks you to change it")
        return None
    return _evidence(holds)


def _body_dump(tree: ast.FunctionDef) -> str:
    """The body of a function (without its docstring) as an AST dump: equal for the same code."""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _show(d3: tuple) -> tuple:
    d = tuple(d3)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return d


# ----------------------------------------------------------------------------------------------
# Numbers worked out by hand, asked as formulas

def formula_exercise(title: str, answer, expected, cases, *, rtol: float = 0.0,
                     hint: str | None = None, labels=None, refuse=()) -> None:
    """Check a number the learner works out, asked as a function of the question's parameters:
    ``answer(*case)`` must equal ``expected(*case)`` for every ``case`` (within ``rtol``). A number
    copied from a stored output cannot pass: it is not a function, and a function returning it
    fails the other cases. ``cases`` needs at least two with different expected values. The
    answers may be any values ``==`` compares (numbers, tuples, sets).

    Refused: not a function, the ``expected`` function itself, a function defined inside the
    check cell, and a function that calls ``expected`` or one of ``refuse`` (the notebook's own
    function that computes the answer: the exercise is to work it out) while it runs. ``labels`` (one string
    per case) name the cases in the messages instead of the arguments' ``repr``, for arguments
    such as functions. ``hint`` is registered for :func:`hint`, never printed here. Never raises.

    >>> blocks = lambda n: cdiv(n, 256)   # the learner's cell
    >>> formula_exercise("blocks of 256 for n items", blocks, lambda n: -(-n // 256),
    ...                  [(1000,), (1_000_000,), (256,)])
    ✅ blocks of 256 for n items: correct
    >>> formula_exercise("blocks of 256 for n items", 3907, lambda n: -(-n // 256), [(1000,), (256,)])
    ❌ blocks of 256 for n items: not yet: give a function of the question's parameters ...
    >>> formula_exercise("blocks of 256 for n items", blocks, lambda n: -(-n // 256),
    ...                  [(1000,), (256,)], refuse=[cdiv])
    ❌ blocks of 256 for n items: not yet: for 1000 it calls cdiv, which computes the answer: work it out yourself
    """
    note = _hint_note(title, hint)
    if answer is None:
        print(f"⬜ {title}: not answered yet{note}")
        return
    scopes = _check_scopes()
    try:
        expect = [expected(*c) for c in cases]
        if len(cases) < 2 or len({repr(e) for e in expect}) < 2:
            raise ValueError("formula_exercise needs at least two cases with different answers")
        if labels is not None and len(labels) != len(cases):
            raise ValueError(f"{len(labels)} labels for {len(cases)} cases")
    except Exception as e:  # noqa: BLE001
        print(f"❌ {title}: the check is set up wrongly ({_first_line(e)})")
        return
    names = list(labels) if labels is not None else [_args(c) for c in cases]
    # the check's function is refused as itself; the notebook's helpers also as copies of their code
    refused = {c: _name_of(f) for f in (expected,) for c in [getattr(_py_function(f), "__code__", None)]
               if c is not None}
    refused.update({guard.code_key(c): _name_of(f) for f in refuse
                    for c in [getattr(_py_function(f), "__code__", None)] if c is not None})
    rebound = _rebound()
    if rebound:
        why = rebound
    elif not callable(answer):
        what = "number" if isinstance(answer, (int, float)) else type(answer).__name__
        why = (f"give a function of the question's parameters (e.g. lambda n: ...), not a {what}: "
               f"the check tries it on other cases")
    elif answer is expected:
        why = "that is the function the check compares with: write your own"
    elif any(answer is f for f in refuse):
        why = f"that is {_name_of(answer)}, which computes the answer: work it out yourself"
    elif any(s.holds(answer) for s in scopes):
        why = "that function is defined inside the check cell: define it in your own cell above"
    else:
        why = None
        for c, e, name in zip(cases, expect, names):
            try:
                got, called = _call_watching(answer, copy.deepcopy(c), refused)
                got = copy.deepcopy(got)  # judged as returned, whatever happens to it later
            except Exception as err:  # noqa: BLE001
                why = f"for {name} it raised {_first_line(err)}"
                break
            if called:
                why = f"for {name} it calls {called}, which computes the answer: work it out yourself"
                break
            try:
                if not rtol:
                    good = guard.same(got, e)
                else:
                    g, ee = guard.plain(got), guard.plain(e)
                    good = (type(g) in (int, float) and type(ee) in (int, float)
                            and abs(g - ee) <= rtol * abs(ee))
            except Exception:  # noqa: BLE001  e.g. a tensor, or a type that does not compare
                good = False
            if not good:
                why = f"for {name} it gives {got!r}, expected {e!r}"
                break
    print(f"✅ {title}: correct" if why is None else f"❌ {title}: not yet: {why}")


def _call_watching(fn, args, refused: dict):
    """``fn(*args)``, and the name of the first function of ``refused`` ({code: name}) it called
    (directly or not), or None."""
    if not refused:
        return fn(*args), None
    seen = []

    keys: dict = {}

    own = getattr(_py_function(fn), "__code__", None)

    def profiler(frame, event, arg):
        if event == "call" and not seen:
            code = frame.f_code
            if code in refused:
                seen.append(refused[code])
                return
            if code is own:
                return
            key = keys.get(code)
            if key is None:
                key = keys[code] = guard.code_key(code)
            if key in refused:
                seen.append(refused[key])
    old = sys.getprofile()
    sys.setprofile(profiler)
    try:
        got = fn(*args)
    finally:
        sys.setprofile(old)
    return got, (seen[0] if seen else None)


def _args(case) -> str:
    return ", ".join(repr(v) for v in case)


# ----------------------------------------------------------------------------------------------
# Checks of code that is not a kernel: what it called, and work that only a synchronize waits for

@dataclass
class Call:
    """One recorded call: its arguments and what it returned (or raised)."""
    args: tuple
    kwargs: dict
    result: object = None
    error: BaseException | None = None


def _rebind(original, replacement, extra=()) -> list:
    """Bind ``replacement`` wherever a module (or a dict in ``extra``, such as a function's
    globals) holds ``original``; return what :func:`_unbind` needs to put it back."""
    done, spaces = [], [getattr(m, "__dict__", None) for m in list(sys.modules.values())]
    for d in spaces + list(extra):
        if not isinstance(d, dict):
            continue
        for name, value in list(d.items()):
            if value is original:
                d[name] = replacement
                done.append((d, name))
    return done


def _unbind(done: list, original, replacement) -> None:
    for d, name in done:
        if d.get(name) is replacement:
            d[name] = original


@contextmanager
def watch_calls(fn, *, within=()):
    """Record every call of ``fn`` (``utils.bench``, say) made while the block runs, however the
    code reached it: every module attribute bound to ``fn`` (``utils.bench``, or ``bench`` after
    ``from utils import bench`` in a notebook) calls a recorder while the block is open; pass
    ``within=[f]`` to cover a function ``f`` whose globals are not a module's. Yields the list
    of :class:`Call`, in order. (Code that kept ``fn`` in a closure or a default argument is not
    seen.)

    >>> import gpu_course.launch as launch
    >>> with watch_calls(launch.cdiv) as seen:
    ...     _ = launch.cdiv(10, 4)
    >>> [(c.args, c.result) for c in seen]
    [((10, 4), 3)]
    """
    seen: list[Call] = []

    def recorder(*args, **kwargs):
        call = Call(args, kwargs)
        seen.append(call)
        try:
            call.result = fn(*args, **kwargs)
        except BaseException as e:
            call.error = e
            raise
        return call.result
    recorder.__wrapped__ = fn
    done = _rebind(fn, recorder, [getattr(f, "__globals__", None) for f in within])
    try:
        yield seen
    finally:
        _unbind(done, fn, recorder)


@contextmanager
def slow_work(ms: float = 50.0, *, within=()):
    """For checks of a timer: yields ``launch``, a function that behaves like launching ``ms`` ms
    of GPU work: it returns at once, and the work is over only when a synchronize has waited for
    it. On a GPU the work is real (a spin kernel, :func:`~gpu_course.timing.spin_gpu`), so
    ``utils.synchronize()``, ``torch.cuda.synchronize()`` or anything else that waits for the GPU
    waits for it. In cpu mode it is simulated: while the block is open, ``utils.synchronize``
    (however it was imported, see :func:`watch_calls` for ``within``) and
    ``torch.cuda.synchronize`` sleep until the work would be over.

    >>> import time
    >>> from gpu_course import mode
    >>> with slow_work(20) as launch:
    ...     t0 = time.perf_counter(); launch(); mode.synchronize()
    ...     waited = (time.perf_counter() - t0) * 1e3
    >>> waited >= 15
    True
    """
    from .. import mode
    from ..timing import spin_gpu

    if mode.ON_GPU:
        yield lambda: spin_gpu(ms)
        return
    until = [0.0]

    def launch():
        until[0] = time.perf_counter() + ms / 1e3

    def wait(*_, **__):
        time.sleep(max(0.0, until[0] - time.perf_counter()))
    extra = [getattr(f, "__globals__", None) for f in within]
    done = [(_rebind(f, wait, extra), f) for f in (mode.synchronize, torch.cuda.synchronize)]
    try:
        yield launch
    finally:
        for d, f in done:
            _unbind(d, f, wait)


guard.remember()  # torch's and the course's functions as they are at import
