"""The check of notebook 13's exercise, an all-reduce composed of one reduce-scatter and one all-gather: the
learner's function run on every rank with each ``torch.distributed`` communication call recorded."""
from __future__ import annotations

import torch
import torch.distributed as dist

from .distributed import Ranks, rank_device

# torch.distributed's communication calls, watched while a learner's function runs on the ranks
_GATHERS = ("all_gather", "all_gather_into_tensor", "all_gather_single")
_SCATTERS = ("reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single")
_OTHERS = ("all_reduce", "broadcast", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single",
           "send", "recv", "isend", "irecv", "batch_isend_irecv")


def run_watched(fn, numel: int) -> tuple:
    """On every rank: ``fn(t)`` on a fresh float64 ``t`` of ``numel`` random numbers, with every
    communication call of ``torch.distributed`` recorded (the calls ``fn`` makes, not those one of them makes
    inside). Returns ``(fn's result, the sum over ranks of t computed by dist.all_reduce beforehand, [(call, [numel
    of each tensor argument], [data_ptr of each]), ...])``."""
    g = torch.Generator().manual_seed(7 + dist.get_rank())
    t = torch.randn(numel, generator=g, dtype=torch.float64).to(rank_device())
    ref = t.clone()
    dist.all_reduce(ref)
    seen, depth = [], [0]

    def watched(name, f):
        def call(*args, **kwargs):
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            if not depth[0]:
                seen.append((name, [a.numel() for a in tensors], [a.data_ptr() for a in tensors]))
            depth[0] += 1
            try:
                return f(*args, **kwargs)
            finally:
                depth[0] -= 1
        return call
    originals = {n: getattr(dist, n) for n in _GATHERS + _SCATTERS + _OTHERS if hasattr(dist, n)}
    for n, f in originals.items():
        setattr(dist, n, watched(n, f))
    try:
        out = fn(t.clone())
    finally:
        for n, f in originals.items():
            setattr(dist, n, f)
    return out, ref, seen


def check_composed_all_reduce(ranks: Ranks, fn, timeout_s: float = 60.0) -> None:
    """The check of an all-reduce built from one reduce-scatter and one all-gather: run on every rank by
    :func:`run_watched` at two lengths (multiples of the number of ranks); raises AssertionError saying
    what is wrong (a wrong sum, an all_reduce, not exactly one reduce-scatter and one all-gather, an
    all-gather of anything but the reduce-scatter's output, other communication). A function that makes the ranks wait forever gives
    :class:`RanksTimeout` after ``timeout_s``."""
    n, name = ranks.world, getattr(fn, "__name__", "your function")
    for numel in (3 * n, 4099 * n):
        for rank, (out, ref, seen) in enumerate(ranks.run(run_watched, fn, numel, timeout_s=timeout_s)):
            calls = [c for c, _, _ in seen]
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
            whole = [c for c, sizes, _ in gathers if min(sizes, default=0) >= numel]
            assert not whole, f"{name} all-gathers the whole tensor: each rank then receives n times the data; " \
                              f"gather only the summed parts (numel / n each)"
            assert len(scatters) == 1 and len(gathers) == 1, \
                f"{name} runs {len(scatters)} reduce-scatter(s) and {len(gathers)} all-gather(s): the all-reduce is " \
                f"exactly one of each"
            assert scatters[0][2][0] == gathers[0][2][-1], \
                f"{name}'s all-gather does not gather the reduce-scatter's output: gather the summed part that the " \
                f"reduce-scatter wrote, so that every rank receives every summed part"
            others = sorted({c for c in calls if c in _OTHERS})
            assert not others, f"{name} also calls {', '.join(others)}: one reduce-scatter and one all-gather " \
                               f"are the whole all-reduce"
