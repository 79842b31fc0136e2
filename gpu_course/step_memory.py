"""The memory of a training step (notebook 14): the caching allocator's peaks per phase, its recorded
history drawn as PyTorch's memory viz draws it (blocks over time, by category: parameters, gradients,
optimizer state, activations, temporaries), the profiler's memory timeline, and activation
checkpointing.

In cpu mode there is no caching allocator: :func:`step_allocations` and :func:`phase_peaks` give None,
and the step's memory over time comes from the profiler's memory profile (:func:`memory_timeline`),
which sees the CPU's allocations.

>>> saved_mb(Blocks(8, 2), torch.ones(4, 8)) > saved_mb(Blocks(8, 2, checkpoint=True), torch.ones(4, 8))
True
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .mode import ON_GPU, synchronize


# -------------------------------------------------------------------------------------- memory
def phase_peaks(model, opt, x, y) -> dict:
    """Peak memory allocated by the caching allocator during each phase of one step, MB above what was
    allocated before the step (the baseline: parameters, optimizer state, inputs and any other live
    tensor), and what stays allocated above it after each phase (on a GPU; None in cpu mode):
    ``{"forward", "backward", "optimizer"}`` -> ``(peak, kept)``; ``"baseline"`` -> MB before the step."""
    if not ON_GPU:
        return None
    synchronize()
    base = torch.cuda.memory_allocated()
    mb = lambda: ((torch.cuda.max_memory_allocated() - base) / 2**20,  # noqa: E731
                  (torch.cuda.memory_allocated() - base) / 2**20)
    out = {}
    torch.cuda.reset_peak_memory_stats()
    loss = F.cross_entropy(model(x), y)
    out["forward"] = mb()
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    del loss
    out["backward"] = mb()
    torch.cuda.reset_peak_memory_stats()
    opt.step()
    opt.zero_grad(set_to_none=True)
    out["optimizer"] = mb()
    out["baseline"] = base / 2**20
    return out


def memory_timeline(fn, *args) -> tuple:
    """Run ``fn(*args)`` under the profiler's memory profile and return ``(times_ms, {category:
    bytes over time})``, the categories being PyTorch's (parameter, optimizer state, input, temporary,
    activation, gradient, autograd detail, unknown): what its memory viz draws, for this device."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ON_GPU else [])
    from .timeline import run_profiled
    p = profile(activities=acts, profile_memory=True, record_shapes=True, with_stack=True, acc_events=True)
    run_profiled(p, fn, *args)
    dev = f"cuda:{torch.cuda.current_device()}" if ON_GPU else "cpu"
    times, sizes = MemoryProfileTimeline(p._memory_profile())._coalesce_timeline(dev)
    t0 = times[0] if times else 0
    cols = {"unknown": 0, **{c.name.lower().replace("_", " "): i + 1 for c, i in _CATEGORY_TO_INDEX.items()
                             if c is not None}}
    return [(t - t0) / 1e3 for t in times], {k: [s[i] for s in sizes] for k, i in cols.items()}


def plot_memory_timeline(times, by_cat: dict, title: str):
    """The memory timeline as stacked areas, MB against ms, one colour per category."""
    import matplotlib.pyplot as plt
    import numpy as np
    fig, ax = plt.subplots(figsize=(8, 3.5))
    keep = {k: np.array(v) / 2**20 for k, v in by_cat.items() if max(v, default=0) > 0}
    ax.stackplot(times, *keep.values(), labels=list(keep), step="post", alpha=0.8,
                 colors=[MEM_COLORS.get(k, "tab:olive") for k in keep])
    ax.set(xlabel="time in the step (ms)", ylabel="memory allocated (MB)", title=title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def peak_mb(fn, *args) -> float:
    """Peak memory during ``fn(*args)`` above what was allocated before, MB: the caching allocator's
    peak on a GPU, the memory profile's peak total on the CPU."""
    if ON_GPU:
        synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn(*args)
        synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    times, by_cat = memory_timeline(fn, *args)
    totals = [sum(v[i] for v in by_cat.values()) for i in range(len(times))]
    return (max(totals) - totals[0]) / 2**20 if totals else 0.0


def saved_mb(fn, *args) -> float:
    """MB of tensors autograd saves for the backward while ``fn(*args)`` runs (a forward): the
    activations a backward will read. Tensors that share a parameter's storage (a layer saves its
    weight, or a transposed view of it, for the backward) are not counted: they exist anyway. The
    parameters are those of ``fn`` and of any argument that is a module. Tensors a checkpointed
    region recomputes are not saved.

    >>> x = torch.ones(1024, requires_grad=True)
    >>> saved_mb(lambda: (x * x).sum()) > 0
    True
    >>> lin = torch.nn.Linear(256, 256, bias=False)
    >>> saved_mb(lin, torch.ones(2, 256)) < 0.01     # the input (2 KB); the weight (256 KB) is a parameter
    True
    """
    total = [0]
    mods = [m for m in (fn, *args) if isinstance(m, torch.nn.Module)]
    params = {p.untyped_storage().data_ptr() for m in mods for p in m.parameters()}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            total[0] += t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return total[0] / 2**20


def matmul_work(fn, *args, early_stop: bool = True) -> tuple:
    """``(addmm calls, GFLOP)`` of ``fn(*args)`` (a forward and backward): the ``aten.addmm`` calls
    (each Linear's forward, recomputed ones included) counted by a dispatch mode, and all the FLOPs
    counted by ``torch.utils.flop_counter.FlopCounterMode``. ``early_stop`` is
    ``torch.utils.checkpoint.set_checkpoint_early_stop``: on (the default), a checkpointed region's
    recomputation stops as soon as every tensor the backward needs is recomputed.

    >>> m = Blocks(8, 2, checkpoint=True); x = torch.ones(4, 8)
    >>> [matmul_work(lambda: m(x).sum().backward(), early_stop=e)[0] for e in (True, False)]
    [6, 8]
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import set_checkpoint_early_stop
    from torch.utils.flop_counter import FlopCounterMode
    calls = [0]

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls[0] += func is torch.ops.aten.addmm.default
            return func(*args, **(kwargs or {}))
    with set_checkpoint_early_stop(early_stop), FlopCounterMode(display=False) as fc, _Count():
        fn(*args)
    return calls[0], fc.get_total_flops() / 1e9


class Blocks(torch.nn.Module):
    """``depth`` blocks of Linear-GELU-Linear (4× wide inside) with residuals; ``checkpoint=True``
    recomputes each block's activations in the backward instead of keeping them."""
    def __init__(self, width: int, depth: int, checkpoint: bool = False):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))
            for _ in range(depth))
        self.checkpoint = checkpoint

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        for b in self.blocks:
            x = x + (checkpoint(b, x, use_reentrant=False) if self.checkpoint else b(x))
        return x


# ------------------------------------------------------------------ the caching allocator's history
MEM_COLORS = {"parameter": "tab:blue", "optimizer state": "tab:green", "input": "tab:gray",
              "activation": "tab:orange", "gradient": "tab:red", "temporary": "tab:purple"}


def step_allocations(model, opt, x, y) -> dict | None:
    """One step (forward, backward, ``opt.step()``, ``zero_grad(set_to_none=True)``) with the caching
    allocator's history recorded (``torch.cuda.memory._record_memory_history``, read back with
    ``torch.cuda.memory._snapshot()``: what PyTorch's memory viz draws). Returns ``{"before": [(key,
    bytes, category)], "events": [("alloc", key, bytes, category) or ("free", key, 0, "")], "marks":
    {phase: events before its end}}``. Blocks alive before the step are parameters, optimizer state,
    the input or other; a block allocated in the step is a gradient, an activation (made in the
    forward and still alive at its end: saved for the backward) or a temporary. Blocks alive before
    the step that are none of the first three (other cells' tensors) are left out. None in cpu mode."""
    if not ON_GPU:
        return None
    mem, dev = torch.cuda.memory, torch.cuda.current_device()
    opt.zero_grad(set_to_none=True)                 # gradients are made in this step's backward
    synchronize()
    mem._record_memory_history(max_entries=200_000)
    count, raw = (lambda: len(mem._snapshot()["device_traces"][dev])), {}
    try:
        raw["start"] = count()
        loss = F.cross_entropy(model(x), y)
        raw["forward"] = count()
        loss.backward()
        raw["backward"] = count()
        grads = {p.grad.data_ptr() for p in model.parameters() if p.grad is not None}
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        synchronize()
        raw["optimizer"] = count()
        snap = mem._snapshot()
    finally:
        mem._record_memory_history(enabled=None)
    return _categorise(snap, dev, raw, grads, model, opt, (x, y))


def _categorise(snap, dev, raw, grads, model, opt, inputs) -> dict:
    """Sort the recorded trace of :func:`step_allocations` into categories (see there)."""
    known = {t.data_ptr(): "parameter" for t in model.parameters()}
    known.update({t.data_ptr(): "optimizer state" for s in opt.state.values() for t in s.values()
                  if isinstance(t, torch.Tensor) and t.is_cuda})
    known.update({t.data_ptr(): "input" for t in inputs})
    live, events, marks, before = {}, [], {}, {}
    for n, e in enumerate(snap["device_traces"][dev][raw["start"]:raw["optimizer"]], start=raw["start"] + 1):
        if e["action"] == "alloc":
            live[e["addr"]] = (e["addr"], n)
            events.append(["alloc", live[e["addr"]], e["size"], ""])
        elif e["action"] == "free_completed":
            key = live.pop(e["addr"], None)
            if key is None:                                  # a block made before the step
                key = (e["addr"], "before")
                before[key] = e["size"]
            events.append(["free", key, 0, ""])
        for phase in ("forward", "backward"):
            marks.setdefault(phase, None)
            if marks[phase] is None and n >= raw[phase]:
                marks[phase] = len(events)
    marks["optimizer"] = len(events)
    freed_in_fwd = {ev[1] for ev in events[:marks["forward"]] if ev[0] == "free"}
    for ev in events:
        if ev[0] == "alloc":
            addr, n = ev[1]
            ev[3] = ("gradient" if addr in grads and raw["forward"] < n <= raw["backward"] else
                     "activation" if n <= raw["forward"] and ev[1] not in freed_in_fwd else "temporary")
    for seg in snap["segments"]:
        addr = seg["address"]
        for blk in seg["blocks"]:
            if blk["state"] == "active_allocated" and addr not in live:
                before[(addr, "before")] = blk["size"]
            addr += blk["size"]
    order = list(MEM_COLORS)
    pre = sorted(((k, n, known[k[0]]) for k, n in before.items() if k[0] in known), key=lambda t: order.index(t[2]))
    return {"before": pre, "events": [tuple(ev) for ev in events], "marks": marks}


def allocation_bands(before: list, events: list) -> tuple:
    """Memory viz's "active memory timeline": the live blocks stacked in the order they were allocated
    (the oldest at the bottom), each block sliding down when one below it is freed. Returns ``(bands,
    totals)``: per block ``(category, [event index], [offset in bytes], bytes)``, and the bytes live
    after each event.

    >>> bands, totals = allocation_bands([("p", 4, "parameter")], [("alloc", "a", 2, "activation"),
    ...     ("alloc", "t", 1, "temporary"), ("free", "a", 0, ""), ("free", "t", 0, "")])
    >>> totals
    [4, 6, 7, 5, 4]
    >>> [(c, k, lo) for c, k, lo, n in bands]   # the temporary slides down when the activation is freed
    [('parameter', [0, 1, 2, 3, 4], [0, 0, 0, 0, 0]), ('activation', [1, 2], [4, 4]), ('temporary', [2, 3], [6, 4])]
    """
    live = [(k, n, c) for k, n, c in before]
    track = {k: (c, [], [], n) for k, n, c in before}

    def note(i):
        off = 0
        for k, n, _ in live:
            track[k][1].append(i)
            track[k][2].append(off)
            off += n
        return off
    totals = [note(0)]
    for i, (act, key, n, cat) in enumerate(events, start=1):
        if act == "alloc":
            live.append((key, n, cat))
            track[key] = (cat, [], [], n)
        else:
            live = [b for b in live if b[0] != key]
        totals.append(note(i))
    return list(track.values()), totals


def plot_allocations(hist: dict, title: str):
    """The recorded step as memory viz draws it: one band per block, coloured by category, MB against
    the allocation events in order, with the phases marked. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    bands, totals = allocation_bands(hist["before"], hist["events"])
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for cat, ks, lo, n in bands:
        ks, lo = ks + [ks[-1] + 1], [v / 2**20 for v in lo + lo[-1:]]      # to the event that frees it
        ax.fill_between(ks, lo, [v + n / 2**20 for v in lo], step="post", color=MEM_COLORS[cat], lw=0.2,
                        edgecolor="white")
    start = 0
    for phase, end in hist["marks"].items():
        ax.axvline(end, color="k", lw=0.6, ls=":")
        ax.text((start + end) / 2, max(totals) / 2**20 * 1.02, phase, ha="center", fontsize=8)
        start = end
    cats = list(dict.fromkeys(c for c, *_ in bands))
    ax.legend(handles=[Patch(color=MEM_COLORS[c], label=c) for c in cats], fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    ax.set(xlabel="allocator event (index, in order)", ylabel="memory allocated (MB)", title=title,
           ylim=(0, max(totals) / 2**20 * 1.12))
    fig.tight_layout()
    return fig


def by_category(hist: dict) -> tuple:
    """``(at_peak, largest)``: MB of each category at the step's peak, and the most each one held."""
    bands, totals = allocation_bands(hist["before"], hist["events"])
    peak = max(range(len(totals)), key=totals.__getitem__)
    at_peak, largest = {}, {}
    for cat, ks, lo, n in bands:
        if ks and ks[0] <= peak <= ks[-1]:
            at_peak[cat] = at_peak.get(cat, 0) + n / 2**20
    for i in range(len(totals)):
        now = {}
        for cat, ks, lo, n in bands:
            if ks and ks[0] <= i <= ks[-1]:
                now[cat] = now.get(cat, 0) + n / 2**20
        for c, v in now.items():
            largest[c] = max(largest.get(c, 0), v)
    return at_peak, largest
