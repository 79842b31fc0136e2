"""The check of notebook 13's exercise, an all-reduce composed of one reduce-scatter and one all-gather: the
learner's function run on every rank with each ``torch.distributed`` communication call recorded."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

from .distributed import Ranks, rank_device

# what each communication call of torch.distributed is called, by the ProcessGroup method that runs it
_KINDS = (("reduce_scatter", "reduce_scatter"), ("allgather", "all_gather"), ("all_gather", "all_gather"),
          ("allreduce", "all_reduce"), ("all_reduce", "all_reduce"), ("alltoall", "all_to_all"),
          ("all_to_all", "all_to_all"), ("broadcast", "broadcast"), ("reduce", "reduce"), ("gather", "gather"),
          ("scatter", "scatter"), ("send", "send"), ("recv", "recv"))
_GATHERS, _SCATTERS = ("all_gather",), ("reduce_scatter",)
_QUIET = ("barrier", "monitored_barrier")   # synchronize, move no data


def _kind(method: str) -> str | None:
    """The collective a ProcessGroup (or Backend) method runs, by its name: ``all_gather_single`` and
    ``_allgather_base`` are ``all_gather``, ``allreduce_coalesced`` is ``all_reduce``; None for the
    methods that move no data."""
    m = method.lower().lstrip("_")
    if any(m.startswith(q) for q in _QUIET):
        return None
    return next((kind for key, kind in _KINDS if key in m), None)


def _tensors(args) -> list:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += _tensors(a)
    return out


def _watched_classes() -> list:
    c10d = torch._C._distributed_c10d
    return [k for k in (getattr(c10d, "ProcessGroup", None), getattr(c10d, "Backend", None)) if k is not None]


def run_watched(fn, numel: int) -> tuple:
    """On every rank: ``fn(t)`` on a fresh float64 ``t`` of ``numel`` random numbers, with every
    communication of ``torch.distributed`` recorded where it runs, at the C10D level: each call of a method of
    the ProcessGroup (or of a Backend) that moves data, however the code reached it (``dist.all_reduce``,
    ``dist.distributed_c10d.all_reduce``, the group object itself). Returns ``(fn's result, the sum over ranks
    of t computed by dist.all_reduce after fn returned, [(collective, [numel of each tensor argument], [the tensor
    arguments' storages], [whether each holds t's values]), ...], {"given": t's storage, "out": the result's, and
    whether an all-gather's input and the result carry data from the reduce-scatter and the all-gather, however
    copied (:class:`_Flow`)}``, storages as ``(device, address)``."""
    g = torch.Generator().manual_seed(7 + dist.get_rank())
    t = torch.randn(numel, generator=g, dtype=torch.float64).to(rank_device())
    seen, depth, flow, fed = [], [0], _Flow(), []   # fed: whether each all-gather's input came from a reduce-scatter

    def watched(kind, f):
        def call(*args, **kwargs):
            tensors = _tensors((*args, *kwargs.values()))
            if not depth[0]:   # each tensor: its storage's address, and whether it holds t's values
                seen.append((kind, [a.numel() for a in tensors], [_where(a) for a in tensors],
                             [a.numel() == given.numel() and torch.equal(a.reshape(-1), given.reshape(-1))
                              for a in tensors]))
                if kind in _GATHERS:
                    fed.append(flow.holds("scattered", tensors[-1]))
            depth[0] += 1
            try:
                return f(*args, **kwargs)
            finally:
                depth[0] -= 1
                if not depth[0] and tensors:   # what this collective wrote carries its mark from now on
                    if kind in _SCATTERS:
                        flow.mark("scattered", tensors[:1])
                    elif kind in _GATHERS:
                        flow.mark("gathered", tensors[:-1])
        return call
    originals = []
    for klass in _watched_classes():
        for name, f in list(vars(klass).items()):
            kind = _kind(name)
            if kind is not None and callable(f) and not isinstance(f, type):
                originals.append((klass, name, f))
                setattr(klass, name, watched(kind, f))
    given = t.clone()
    try:
        with flow:
            out = fn(given)
    finally:
        for klass, name, f in originals:
            setattr(klass, name, f)
    ref = t.clone()       # the sum over ranks, made after fn returned: nothing fn can read from a frame
    dist.all_reduce(ref)
    mem = {"given": _where(given), "out": _where(out) if isinstance(out, torch.Tensor) else None}
    mem.update(gathers_scattered=any(fed), out_gathered=flow.holds("gathered", out))
    return out, ref, seen, mem


class _Flow(TorchFunctionMode):
    """Which tensors hold data that came out of a reduce-scatter or an all-gather, through any torch
    operation the learner's code applies (``torch.cat`` of gathered parts, a ``clone``, a ``copy_`` into
    another tensor): an operation's results are marked when one of its tensor arguments is; a tensor written
    in place from other tensors none of which is marked (``copy_``, ``add_`` of such a tensor) loses its mark (one
    changed by scalars only, ``mul_(2)``, keeps it); marks are
    storages, so views share them. A marked storage is kept alive while the flow lives: its address, once
    freed, would be handed to the next tensor of its size, which would then pass for one a collective wrote."""

    def __init__(self):
        super().__init__()
        self.marks = {"scattered": set(), "gathered": set()}
        self._kept = []   # the marked storages themselves, so that no later tensor can reuse their addresses

    def mark(self, key: str, tensors) -> None:
        with torch._C.DisableTorchFunction():
            self._kept.extend(a.untyped_storage() for a in tensors)
            self.marks[key].update(_where(a) for a in tensors)

    def holds(self, key: str, a) -> bool:
        with torch._C.DisableTorchFunction():
            return isinstance(a, torch.Tensor) and _where(a) in self.marks[key]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        given = _tensors((*args, *kwargs.values()))
        made = _tensors([out] if isinstance(out, torch.Tensor) else out if isinstance(out, (list, tuple)) else [])
        name = getattr(func, "__name__", "")
        overwritten = given[:1] if name.endswith("_") and not name.startswith("__") and given else []
        sources = [a for a in given if all(a is not w for w in overwritten)]
        for key in self.marks:
            if made and any(self.holds(key, a) for a in sources):
                self.mark(key, made)
            elif overwritten and sources:   # written in place (copy_, add_) from tensors no collective wrote
                with torch._C.DisableTorchFunction():
                    self.marks[key].discard(_where(overwritten[0]))
        return out


def _where(a: torch.Tensor) -> tuple:
    return str(a.device), a.untyped_storage().data_ptr()


def check_composed_all_reduce(ranks: Ranks, fn, timeout_s: float = 60.0) -> None:
    """The check of an all-reduce built from one reduce-scatter and one all-gather: run on every rank by
    :func:`run_watched` at two lengths (multiples of the number of ranks); raises AssertionError saying
    what is wrong (a wrong sum, an all_reduce, not exactly one reduce-scatter and one all-gather, an
    all-gather of anything but the reduce-scatter's output, other communication). A function that makes the ranks wait forever gives
    :class:`RanksTimeout` after ``timeout_s``."""
    n, name = ranks.world, getattr(fn, "__name__", "your function")
    for numel in (3 * n, 4099 * n):
        for rank, (out, ref, seen, mem) in enumerate(ranks.run(run_watched, fn, numel, timeout_s=timeout_s)):
            calls = [c for c, *_ in seen]
            assert "all_reduce" not in calls, f"{name} calls dist.all_reduce: build the sum from a reduce-scatter " \
                                              f"and an all-gather"
            assert isinstance(out, torch.Tensor) and out.shape == ref.shape, \
                f"{name} must return the summed tensor, of t's shape {tuple(ref.shape)}; it returned " \
                f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}"
            bad = (out.double() - ref).abs().max().item()
            assert bad <= 1e-9 * ref.abs().max().item(), \
                f"on rank {rank}, {numel} elements: the result differs from the sum over ranks by up to {bad:.3g}"
            scatters = [s for s in seen if s[0] in _SCATTERS]
            gathers = [s for s in seen if s[0] in _GATHERS]
            assert scatters, f"{name} runs no reduce-scatter (coll.reduce_scatter_into)"
            assert gathers, f"{name} runs no all-gather (coll.all_gather_into)"
            whole = [c for c, sizes, *_ in gathers if min(sizes, default=0) >= numel]
            assert not whole, f"{name} all-gathers the whole tensor: each rank then receives n times the data; " \
                              f"gather only the summed parts (numel / n each)"
            assert len(scatters) == 1 and len(gathers) == 1, \
                f"{name} runs {len(scatters)} reduce-scatter(s) and {len(gathers)} all-gather(s): the all-reduce is " \
                f"exactly one of each"
            assert sum(scatters[0][1][1:]) == numel and sum(gathers[0][1][:-1]) == numel, \
                f"{name}'s reduce-scatter and all-gather must move the whole tensor between them: the reduce-scatter " \
                f"reduces all {numel} elements of t, the all-gather brings back all {numel} summed ones " \
                f"(here they covered {sum(scatters[0][1][1:])} and {sum(gathers[0][1][:-1])})"
            others = sorted({c for c in calls if c not in _SCATTERS + _GATHERS})
            assert not others, f"{name} also calls {', '.join(others)}: one reduce-scatter and one all-gather " \
                               f"are the whole all-reduce"
            (_, _, s_mem, s_is_t), (_, _, g_mem, _) = scatters[0], gathers[0]
            assert s_mem[-1] == mem["given"] or s_is_t[-1], \
                f"{name}'s reduce-scatter does not reduce t: reduce-scatter the tensor you were given"
            assert s_mem[0] == g_mem[-1] or mem["gathers_scattered"], \
                f"{name}'s all-gather does not gather the reduce-scatter's output: gather the summed part that the " \
                f"reduce-scatter wrote, so that every rank receives every summed part"
            assert mem["out_gathered"], \
                f"{name} does not return what its all-gather wrote: the summed parts it gathered are the " \
                f"all-reduce's result — return that tensor (or a view of it)"
