"""The training step around the model (notebook 14): its input pipeline (DataLoader with workers and
pinned memory, a prefetch on a side stream) and the whole step captured as a CUDA graph. Its memory is
in :mod:`gpu_course.step_memory`.

In cpu mode the DataLoader runs without workers and there is no CUDA graph (the "graphed" step is the
eager step).

>>> ds = SlowDataset(8, 16, work=1)
>>> x, y = next(iter(loader(ds, batch=4, workers=0, pin=False)))
>>> tuple(x.shape), tuple(y.shape)
((4, 16), (4,))
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from . import streams
from .mode import DEVICE, ON_GPU, synchronize
from .rounds import interleaved_rounds


# --------------------------------------------------------------------------------- the input pipeline
class SlowDataset(torch.utils.data.Dataset):
    """``n`` samples of ``width`` floats; each ``__getitem__`` does ``work`` rounds of CPU work on its
    sample (as decoding or augmenting would), seeded by the index."""
    def __init__(self, n: int, width: int, work: int = 20, classes: int = 10):
        self.n, self.width, self.work, self.classes = n, width, work, classes

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(self.width, generator=g)
        for _ in range(self.work):
            x = torch.sin(x) * 1.5
        return x, int(i % self.classes)


def loader(ds, batch: int, workers: int, pin: bool):
    """``DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=pin)`` (pinning only on a GPU)."""
    return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=pin and ON_GPU,
                                       persistent_workers=workers > 0)


class Prefetcher:
    """Iterate over ``batches`` (host tensors) with the next batch's copy to the device already queued
    on a side stream while the current step runs; the step's stream waits for the copy before it uses
    the batch. Pinned batches make the copy asynchronous.

    >>> [tuple(x.shape) for x, y in Prefetcher([(torch.ones(2, 3), torch.zeros(2))])]
    [(2, 3)]
    """
    def __init__(self, batches):
        self.it, self.side = iter(batches), streams.Stream()

    def _load(self):
        try:
            x, y = next(self.it)
        except StopIteration:
            return None
        with streams.stream(self.side):
            return x.to(DEVICE, non_blocking=True), y.to(DEVICE, non_blocking=True)

    def __iter__(self):
        nxt = self._load()
        while nxt is not None:
            streams.current_stream().wait_stream(self.side)
            x, y = nxt
            streams.record_stream(x, streams.current_stream())
            streams.record_stream(y, streams.current_stream())
            nxt = self._load()
            yield x, y


def train_epoch(model, opt, batches, prefetch: bool = False, non_blocking: bool = False) -> int:
    """One pass over ``batches`` (host tensors): copy each to the device, one SGD step. Returns steps."""
    source = Prefetcher(batches) if prefetch else \
        ((x.to(DEVICE, non_blocking=non_blocking), y.to(DEVICE, non_blocking=non_blocking)) for x, y in batches)
    n = 0
    for x, y in source:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        n += 1
    return n


def steady_ms_per_step(model, opt, batches, skip: int | None = None, **kwargs) -> float:
    """Time per step of :func:`train_epoch` over ``batches`` (an iterable of host batches, e.g. a
    DataLoader), ms, GPU work included, in the steady state: the clock starts after ``skip`` steps,
    so the loader's start (its workers' first batches) is not counted (8 steps on a GPU, 1 in cpu
    mode). One round; at least ``skip`` + 1 batches."""
    skip = skip if skip is not None else (8 if ON_GPU else 1)
    it = iter(batches)
    head = [next(it) for _ in range(skip)]
    train_epoch(model, opt, head, **kwargs)
    synchronize()
    t0 = time.perf_counter()
    n = train_epoch(model, opt, it, **kwargs)
    synchronize()
    return (time.perf_counter() - t0) * 1e3 / n


def first_batch_ms(make_loader) -> float:
    """Time from making a loader to holding its first batch, ms: with workers, the start of their
    processes and the first batch one worker makes alone."""
    t0 = time.perf_counter()
    next(iter(make_loader()))
    return (time.perf_counter() - t0) * 1e3


def batch_cpu_ms(ds, batch: int, reps: int = 3) -> float:
    """The CPU's time to make one batch of ``ds`` in this process (its samples and their collation),
    ms, the median of ``reps`` batches."""
    times = []
    for r in range(reps):
        t0 = time.perf_counter()
        torch.utils.data.default_collate([ds[i] for i in range(r * batch, (r + 1) * batch)])
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


# ------------------------------------------------------------------------ the step as a CUDA graph
def eager_step(model, opt, x, y):
    """One training step on ``(x, y)``; returns the loss tensor (no synchronisation)."""
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=False)
    loss.backward()
    opt.step()
    return loss


def graphed_step(model, opt, x, y, warmup: int = 3):
    """The whole step (forward, backward, optimizer) captured once in a CUDA graph; returns ``step(xb,
    yb)``, which copies the batch into the captured inputs and replays the graph: one launch for every
    kernel of the step. Warm-up runs on a side stream first (the PyTorch docs' "whole network capture").
    In cpu mode there are no graphs: ``step`` is the eager step.

    >>> import torch.nn as nn
    >>> m = nn.Linear(4, 2).to(DEVICE); o = torch.optim.SGD(m.parameters(), lr=0.1)
    >>> x, y = torch.randn(3, 4, device=DEVICE), torch.tensor([0, 1, 0], device=DEVICE)
    >>> step = graphed_step(m, o, x, y); float(step(x, y)) > 0
    True
    """
    if not ON_GPU:
        return lambda xb, yb: eager_step(model, opt, xb, yb).detach()
    static_x, static_y = x.clone(), y.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            eager_step(model, opt, static_x, static_y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = eager_step(model, opt, static_x, static_y).detach()   # keeps no autograd graph alive

    def step(xb, yb):
        static_x.copy_(xb)
        static_y.copy_(yb)
        graph.replay()
        return static_loss
    step.graph = graph
    return step


def step_times(steps: dict, batches: list, rounds: int = 5) -> dict:
    """For each ``{name: step(x, y)}``, over ``batches`` back to back: ``{"cpu_ms"}`` the CPU's time to
    issue a step (from an idle GPU until the loop's last call returns, before the final synchronize,
    divided by the steps) and ``{"step_ms"}`` time per step (until the GPU is done); the medians of
    ``rounds`` (interleaved; 1 in cpu mode). Keep ``batches`` short enough that the launch queue does
    not fill, or the CPU's figure includes waits for the GPU."""
    out = {n: {"cpu": [], "step": []} for n in steps}
    for _ in range(rounds if ON_GPU else 1):
        for name, step in steps.items():
            synchronize()
            t0 = time.perf_counter()
            for x, y in batches:
                step(x, y)
            out[name]["cpu"].append((time.perf_counter() - t0) * 1e3 / len(batches))
            synchronize()
            out[name]["step"].append((time.perf_counter() - t0) * 1e3 / len(batches))
    return {n: {"cpu_ms": statistics.median(v["cpu"]), "step_ms": statistics.median(v["step"])}
            for n, v in out.items()}


def input_ablation(model, opt, ds, batch: int, configs: dict, rounds: int = 1) -> tuple[dict, dict]:
    """Steady time per step (:func:`steady_ms_per_step`) for each ``{name: (workers, pin, prefetch)}``: a loader
    made (and its workers started) for each, then shut down, in ``rounds`` interleaved rounds (the order reversed every
    other round, so that a drift of the host over the run falls on every configuration alike). ``({name: the median
    ms per step}, {name: "lowest-highest" of the rounds})``. With ``pin`` the copies are ``non_blocking``."""
    def run(workers, pin, prefetch):   # the loader (its workers) lives for this measurement only
        kw = {"prefetch": True} if prefetch else {"non_blocking": pin}
        return steady_ms_per_step(model, opt, loader(ds, batch, workers, pin), **kw)
    times = interleaved_rounds({name: (lambda c=c: run(*c)) for name, c in configs.items()}, rounds=rounds,
                               timer=lambda f, budget_ms: f())
    return ({name: statistics.median(t) for name, t in times.items()},
            {name: f"{min(t):.2f}-{max(t):.2f}" for name, t in times.items()})
