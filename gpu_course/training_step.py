"""The whole training step (notebook 14): hidden synchronisations counted in a learner's loop, the
small model and loops the notebook measures, an input pipeline (DataLoader, pinned memory, prefetch on
a side stream), the step captured as a CUDA graph, and the step's memory.

:func:`count_syncs` flags, in code you hand it, each call that makes the CPU wait for the GPU when
its tensor is on the GPU: ``.item()``, ``float(t)``/``int(t)``/``if t:``, ``print(t)``/f-strings,
``.cpu()``/``.tolist()``/``.numpy()``, ``nonzero``, boolean-mask indexing (a data-dependent shape),
``synchronize``. It reads the calls (a ``TorchFunctionMode``), so it works in cpu mode too, where it
says what *would* wait on a GPU; on a GPU, ``torch.cuda.set_sync_debug_mode("warn")`` is counted
beside it.

>>> x = torch.ones(3)
>>> report = count_syncs(lambda: float(x.sum()) + x[x > 0].numel())
>>> report.count, report.ops
(2, ['__float__', '__getitem__ with a boolean mask'])
"""
from __future__ import annotations

import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import mode
from .mode import DEVICE, ON_GPU, synchronize

SYNCING = {"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "__repr__",
           "__format__", "nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"}
_HERE = __file__
_MACHINERY = {"_note", "__torch_function__", "counted_sync", "_user_frame"}


def _on_device(args) -> bool:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device.type == DEVICE.type
        if isinstance(a, (list, tuple)) and _on_device(a):
            return True
    return False


def _has_bool_index(args) -> bool:
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, (tuple, list)) else (idx,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _user_frame():
    """The frame of the first caller outside torch and this module (None if the call came from torch
    itself, e.g. an optimizer reading a CPU step counter)."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if (name == _HERE and f.f_code.co_name in _MACHINERY) or name.endswith("overrides.py") \
                or "/torch/_tensor" in name:
            f = f.f_back
            continue
        return None if "/torch/" in name else f
    return None


@dataclass
class SyncReport:
    """What :func:`count_syncs` saw: the syncing ops in order (``ops``), where each was called
    (``where``: ``function:line``), and on a GPU the warnings of ``set_sync_debug_mode("warn")``."""
    ops: list = field(default_factory=list)
    where: list = field(default_factory=list)
    debug_warnings: int | None = None
    debug_where: list = field(default_factory=list)
    result: object = None

    @property
    def count(self) -> int:
        return len(self.ops)

    def __str__(self):
        lines = [f"{self.count} synchronisation(s) in the code"
                 + (f"; set_sync_debug_mode('warn') warned {self.debug_warnings} time(s)"
                    if self.debug_warnings is not None else " (cpu mode: what would wait on a GPU)")]
        seen = {}
        for op, w in zip(self.ops, self.where):
            seen[(op, w)] = seen.get((op, w), 0) + 1
        lines += [f"  {n:>4} × {op:<32} at {w}" for (op, w), n in seen.items()]
        counted = {w for w in self.where}
        extra = {}
        for w in self.debug_where:
            if w.split(" (")[0] not in counted or "inside torch" in w:
                extra[w] = extra.get(w, 0) + 1
        lines += [f"  {n:>4} × warned by the debug mode only, at {w}" for w, n in extra.items()]
        return "\n".join(lines)


class _SyncMode(TorchFunctionMode):
    def __init__(self, report):
        super().__init__()
        self.report = report

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        hit = None
        if name in SYNCING and _on_device(args):
            hit = name
        elif name in ("__getitem__", "__setitem__", "index_put_", "index_put") and _on_device(args[:1]) \
                and _has_bool_index(args):
            hit = f"{name} with a boolean mask"
        elif name == "to" and _on_device(args[:1]) and DEVICE.type != "cpu" and not kwargs.get("non_blocking") \
                and any(str(a).startswith("cpu") for a in list(args[1:]) + [kwargs.get("device")]):
            hit = "to('cpu')"
        if hit:
            self._note(hit)
        return func(*args, **kwargs)

    def _note(self, op):
        f = _user_frame()
        if f is not None:
            self.report.ops.append(op)
            self.report.where.append(f"{f.f_code.co_name}:{f.f_lineno}")


def _warned_where() -> str:
    """Where a sync-debug warning was raised: the first caller outside torch, warnings and this
    module, with the innermost torch function when the call came from inside torch."""
    f, inner = sys._getframe(1), None
    while f is not None:
        name = f.f_code.co_filename
        if name.endswith("warnings.py") or (name == _HERE and f.f_code.co_name in _MACHINERY | {"_warned_where",
                                                                                             "_show"}):
            f = f.f_back
            continue
        if "/torch/" in name:
            inner = inner or f.f_code.co_name
            f = f.f_back
            continue
        break
    if f is None:
        return "unknown"
    return f"{f.f_code.co_name}:{f.f_lineno}" + (f" (inside torch: {inner})" if inner else "")


def count_syncs(fn, *args, **kwargs) -> SyncReport:
    """Run ``fn(*args, **kwargs)`` and report the synchronisations it asked for (module docstring);
    ``report.result`` is what ``fn`` returned. Calls made inside torch itself are not counted.

    >>> r = count_syncs(lambda t: print(f"{t.sum():.1f}"), torch.ones(2))
    2.0
    >>> r.ops
    ['__format__']
    """
    report = SyncReport()
    sm = _SyncMode(report)
    real_mode, real_cuda = mode.synchronize, torch.cuda.synchronize

    def counted_sync(*a, **k):
        sm._note("synchronize")
        if ON_GPU:
            real_cuda(*a, **k)
    from .exercises.watching import rebind, unbind
    done = rebind(real_mode, counted_sync)
    done_cuda = rebind(real_cuda, counted_sync) if ON_GPU else []
    try:
        caught = []

        def _show(message, category, filename, lineno, file=None, line=None):
            where = _warned_where()
            if "inside torch: set_sync_debug_mode" in where:
                return          # the mode's own one-time notice (it does not detect every sync), not a sync
            caught.append(message)
            if "synchroniz" in str(message):
                report.debug_where.append(where)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = _show
            if ON_GPU:
                torch.cuda.set_sync_debug_mode("warn")
            try:
                with sm:
                    report.result = fn(*args, **kwargs)
            finally:
                if ON_GPU:
                    torch.cuda.set_sync_debug_mode("default")
        if ON_GPU:
            report.debug_warnings = sum("synchroniz" in str(m) for m in caught)
    finally:
        unbind(done, real_mode, counted_sync)
        unbind(done_cuda, real_cuda, counted_sync)
    return report


# ------------------------------------------------------------------------------ the model and loops
def make_model(width: int, depth: int, classes: int = 10, seed: int = 0) -> torch.nn.Module:
    """An MLP of ``depth`` hidden layers of ``width`` (Linear + ReLU) on the device, seeded."""
    torch.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, classes)).to(DEVICE)


def make_batches(steps: int, batch: int, width: int, classes: int = 10, seed: int = 1) -> list:
    """``steps`` batches ``(x, y)`` on the device, seeded."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, width, generator=g).to(DEVICE),
             torch.randint(0, classes, (batch,), generator=g).to(DEVICE)) for _ in range(steps)]


def setup(width: int, depth: int, seed: int = 0):
    """``(model, optimizer)``: :func:`make_model` and SGD with momentum."""
    model = make_model(width, depth, seed=seed)
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def host_work(ms: float) -> None:
    """``ms`` milliseconds of CPU work that launches nothing on the GPU: it stands for what a real loop
    does on the CPU between steps (preparing the next batch, logging, bookkeeping in Python), here a
    fixed, known amount (a loop on the CPU's clock)."""
    from .timing import busy_cpu
    busy_cpu(ms)


def loop_with_syncs(model, opt, batches, cpu_ms: float = 0.0) -> torch.Tensor:
    """A training loop as often written: drops non-finite rows with a boolean mask (``x[keep]`` and
    ``y[keep]``: one synchronisation each) and logs each step's loss with ``.item()`` (one more): three
    synchronisations a step; then ``cpu_ms`` of CPU work (:func:`host_work`). Returns the losses."""
    log = []
    for x, y in batches:
        keep = torch.isfinite(x).all(1)
        x, y = x[keep], y[keep]                      # a data-dependent shape: the CPU must wait
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        log.append(loss.item())                      # the CPU waits for this step's loss
        host_work(cpu_ms)                            # the next batch, logging: the GPU has nothing queued
    return torch.tensor(log)


def loop_without_syncs(model, opt, batches, cpu_ms: float = 0.0) -> torch.Tensor:
    """The same loop with no synchronisation: the mask becomes a weight (fixed shapes), the losses stay
    on the device and are read once, after the loop; the same ``cpu_ms`` of CPU work a step."""
    log = []
    for x, y in batches:
        keep = torch.isfinite(x).all(1)
        x = torch.where(keep[:, None], x, 0.0)
        per_row = F.cross_entropy(model(x), y, reduction="none")
        loss = (per_row * keep).sum() / keep.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        log.append(loss.detach())
        host_work(cpu_ms)                            # runs while the GPU works on this step
    return torch.stack(log)


def loop_to_fix(model, opt, batches):
    """The exercise's loop: returns ``(losses, correct)``; it has two hidden synchronisations."""
    losses, correct = [], 0
    for x, y in batches:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss))
        correct += int((logits.argmax(1) == y).sum())
    return torch.tensor(losses), correct


def check_sync_free(fn, width: int, depth: int, batches: list) -> None:
    """The check of the hidden-sync exercise: ``fn(model, opt, batches)`` on a fresh model must make
    no synchronisation, return losses and the count of correct predictions equal to
    :func:`loop_to_fix`'s, and leave the model trained as that loop does. Raises AssertionError."""
    ref_model, ref_opt = setup(width, depth)
    ref_losses, ref_correct = loop_to_fix(ref_model, ref_opt, batches)
    model, opt = setup(width, depth)
    report = count_syncs(fn, model, opt, batches)
    assert report.count == 0 and not report.debug_warnings, \
        f"still {report.count} synchronisation(s): {', '.join(sorted(set(report.ops)))}"
    losses, correct = report.result
    assert torch.allclose(torch.as_tensor(losses).double().cpu(), ref_losses.double(), rtol=1e-4, atol=1e-5), \
        "the losses differ from the original loop's"
    assert int(correct) == ref_correct, f"{int(correct)} correct predictions, the original loop counts {ref_correct}"
    for p, q in zip(model.parameters(), ref_model.parameters()):
        assert torch.allclose(p, q, rtol=1e-4, atol=1e-5), "the model is not trained as the original loop trains it"


def step_loop_ms(loop, width: int, depth: int, batches: list, rounds: int = 3, cpu_ms: float = 0.0) -> float:
    """Time per step of ``loop(model, opt, batches, cpu_ms)`` on a fresh model, ms (median of ``rounds``
    loops after one warm-up loop; 1 round in cpu mode), the GPU's work included."""
    return loops_ms({"loop": loop}, width, depth, batches, rounds, cpu_ms)["loop"]


def loops_ms(loops: dict, width: int, depth: int, batches: list, rounds: int = 3, cpu_ms: float = 0.0) -> dict:
    """:func:`step_loop_ms` of each of ``{name: loop}``, their rounds interleaved (round r of each
    before round r + 1 of any), so that a slow phase of the host falls on all of them. ``{name: ms}``."""
    made = {n: setup(width, depth) for n in loops}
    for n, loop in loops.items():
        loop(*made[n], batches[:3], cpu_ms)
    out = {n: [] for n in loops}
    for _ in range(rounds if ON_GPU else 1):
        for n, loop in loops.items():
            synchronize()
            t0 = time.perf_counter()
            loop(*made[n], batches, cpu_ms)
            synchronize()
            out[n].append((time.perf_counter() - t0) * 1e3 / len(batches))
    return {n: statistics.median(v) for n, v in out.items()}


def issue_ms(loop, width: int, depth: int, batches: list, cpu_ms: float = 0.0) -> float:
    """The CPU's time to issue one step of ``loop`` (which must not synchronise), ms: from an idle GPU
    until the loop over ``batches`` returns, before the GPU is done, divided by the steps (few enough
    steps that the launch queue never fills, so the CPU never waits)."""
    model, opt = setup(width, depth)
    loop(model, opt, batches[:2], cpu_ms)
    synchronize()
    t0 = time.perf_counter()
    loop(model, opt, batches, cpu_ms)
    ms = (time.perf_counter() - t0) * 1e3 / len(batches)
    synchronize()
    return ms


def profile(fn, *args):
    """A ``torch.profiler`` run of ``fn(*args)`` (CPU, and CUDA on a GPU), for :mod:`.timeline`."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ON_GPU else [])
    fn(*args)
    synchronize()
    from .timeline import run_profiled
    p = prof(activities=acts, acc_events=True)           # one cycle: acc_events only silences a warning
    run_profiled(p, fn, *args)
    return p
