"""Judging a kernel exercise (:func:`judge_kernel`, printed by :func:`kernel_exercise`): the learner's
kernel of the asked kind ran (recorded by :mod:`gpu_course.launches`), the result is memory it wrote,
the result matches a reference, the course's own launch of the kernel on fresh memory computes it too
(:mod:`.replay` for Triton and Numba, :mod:`.cuda_launch` for CUDA C), and each evidence
(:mod:`.evidence`) holds for the :class:`Attempt`."""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..checking import CheckFailed, check
from ..launches import Launch, LaunchLog, launches
from . import guard
from .provenance import (_KINDS, _SYNTAX, _check_scopes, _name_of, _provenance_problem, _py_function,
                         _rebound)
from .runner import _first_line, _hint_note

_COURSE_DIR = Path(__file__).resolve().parent.parent  # where the course's own .cu kernels are


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
    """``{name: body tokens}`` of every ``__global__`` function in CUDA C ``source`` (read once:
    the same parse as ``get_sig`` and ``load_cuda``'s)."""
    from ..cuda.parsed import parse
    return parse(source).kernel_bodies


def _cuda_kernel_body(source: str, name: str) -> list:
    return _cuda_kernels(source).get(name, [])


_COURSE_BODIES: dict = {}  # a course file's path -> ((mtime, size), [the token texts of each kernel body])


def _course_kernel_bodies(path: Path) -> list:
    """The token texts of each ``__global__`` body in the course file ``path`` (read again only
    when the file changed)."""
    from ..cuda.parsed import ParsedSource
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        if path not in _COURSE_BODIES or _COURSE_BODIES[path][0] != stamp:
            kernels = ParsedSource(path.read_text()).kernel_bodies  # not kept by parse(): only the bodies are
            _COURSE_BODIES[path] = (stamp, [tuple(t.text for t in body) for body in kernels.values()])
    except (OSError, UnicodeDecodeError):
        return []
    return _COURSE_BODIES[path][1]


def _course_cuda_kernel(source: str, name: str) -> str | None:
    """The course file holding a kernel with the same body as ``name`` in ``source``, if any."""
    body = tuple(t.text for t in _cuda_kernel_body(source, name))
    if not body:
        return None
    root = _COURSE_DIR
    for path in sorted(root.rglob("*.cu*")):
        if "emulation" in path.parts or path.suffix not in (".cu", ".cuh"):
            continue
        if body in _course_kernel_bodies(path):
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
        from .cuda_launch import build_with_launcher  # cpu mode: the check's launcher in the same build
        try:
            mod = build(source) if kname is None else build_with_launcher(build, source, kname)
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
        if execution.counted and L.kind == "triton":
            idle = execution.programs - sum(1 for n in execution.stored.values() if n > 0)
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

    >>> kernel_exercise("a fused kernel", None, kind="triton", run=None, reference=None)
    ⬜ a fused kernel: not answered yet
    """
    try:
        verdict = judge_kernel(title, answer, kind=kind, run=run, reference=reference, kernel=kernel,
                               build=build, atol=atol, rtol=rtol, evidence=evidence, hint=hint,
                               name=name, inputs=inputs, _scopes=_check_scopes())
    except Exception as e:  # noqa: BLE001  never raise from a check
        verdict = Verdict(False, [f"❌ {title}: the check itself failed ({_first_line(e)})"])
    print(verdict)


class _SetupError(Exception):
    """Evidence that does not apply to the exercise's kind: the check's fault, not the learner's."""


def mode_on_gpu() -> bool:
    from .. import mode
    return mode.ON_GPU
