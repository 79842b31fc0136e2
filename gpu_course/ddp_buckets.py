"""DDP's gradient buckets, as torch forms them, and the check of notebook 13's exercise that asks for them.

DDP all-reduces gradients in buckets, filled in the order backward produces the gradients (for a chain of layers:
the parameters in reverse order). A bucket closes as soon as it holds at least its cap of bytes (so one parameter
larger than the cap is a bucket of its own); the first bucket's cap is smaller (1 MiB by default, against 25 MiB for
the others), so that the first all-reduce can start early in backward.

* :func:`torch_assignment`: the buckets torch's own C++ function (the one DDP's reducer calls when it rebuilds its
  buckets after the first iteration) makes for parameters of given sizes, in backward's order;
* :func:`observed_buckets`: run on every rank: a DDP model of bias-free linear layers, two training steps, and the
  buckets its reducer all-reduced in the second step, in the order it launched them (seen by a communication hook);
* :func:`check_bucket_assignment`: the exercise's check, on cases the notebook does not show and on the ranks.
"""
from __future__ import annotations

import random

import torch
import torch.distributed as dist

from .distributed import rank_device

MiB = 2 ** 20
FIRST_CAP, CAP = 1 * MiB, 25 * MiB          # DDP's defaults (dist._DEFAULT_FIRST_BUCKET_BYTES, bucket_cap_mb=25)
# the ranks' model: Linear(dims[i], dims[i + 1], bias=False), fp32 weights of 1.5 MiB, 258 KiB, 688 KiB, 24 MiB,
# 12 KiB, 8 MiB, 12 MiB, 24 KiB and 512 KiB
DIMS = (256, 1536, 43, 4096, 1536, 2, 2 ** 20, 3, 2048, 64)


def torch_assignment(param_bytes, cap: int, first_cap: int) -> list:
    """The buckets (lists of indices into ``param_bytes``, in the order DDP all-reduces them) that torch's
    ``dist._compute_bucket_assignment_by_size`` forms for fp32 parameters of ``param_bytes`` bytes, whose gradients
    backward produces last parameter first, with caps ``first_cap`` for the first bucket and ``cap`` for the rest.

    >>> torch_assignment([4 * MiB, 64, 2 * MiB, MiB // 2, MiB // 2], cap=3 * MiB, first_cap=MiB)
    [[4, 3], [2, 1, 0]]
    """
    order = list(reversed(range(len(param_bytes))))
    tensors = [torch.empty(param_bytes[i] // 4) for i in order]
    buckets, _ = dist._compute_bucket_assignment_by_size(tensors, [first_cap, cap], [False] * len(tensors), order)
    return [list(b) for b in buckets]


def param_bytes_of(dims=DIMS) -> list:
    """The bytes of each weight of the ranks' model (fp32, in ``parameters()`` order)."""
    return [4 * a * b for a, b in zip(dims[:-1], dims[1:])]


def observed_buckets(dims=DIMS) -> list:
    """On every rank: DDP (default buckets) over a chain of bias-free ``Linear(dims[i], dims[i + 1])``, two
    steps; the buckets of the second step (after DDP has rebuilt them in the order the gradients arrived), as
    lists of parameter indices in the order their all-reduces were launched."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    device = rank_device()
    model = torch.nn.Sequential(*[torch.nn.Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:])]).to(device)
    index = {p.data_ptr(): i for i, p in enumerate(model.parameters())}
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    seen: list = []

    def hook(state, bucket):
        seen.append([index[p.data_ptr()] for p in bucket.parameters()])
        return allreduce_hook(state, bucket)
    ddp.register_comm_hook(dist.group.WORLD, hook)
    x = torch.randn(2, dims[0], device=device)
    for _ in range(2):
        seen.clear()
        ddp(x).square().mean().backward()
    return _plain(seen)


def _cases(rng: random.Random) -> list:
    """Cases the notebook does not show: (param_bytes, cap, first_cap), sizes multiples of 4 bytes; some equal to
    a cap, some larger than one."""
    cases = [([4 * MiB, 64, 2 * MiB, MiB // 2, MiB // 2], 3 * MiB, MiB),
             ([MiB, MiB, MiB, MiB], MiB, MiB),                      # each bucket reaches its cap exactly
             ([100 * MiB], CAP, FIRST_CAP),                         # one parameter, larger than any cap
             ([4096] * 10, 4 * 4096, 4096)]                         # the first bucket one parameter, then 4 each
    for _ in range(8):
        cap = 4 * rng.randint(2, 40) * 1024
        first = min(cap, 4 * rng.randint(1, 20) * 1024)
        sizes = [4 * rng.choice([rng.randint(1, 64), rng.randint(1, 8192), rng.randint(1, 3 * cap // 4)])
                 for _ in range(rng.randint(3, 14))]
        cases.append((sizes, cap, first))
    return cases


class _Refused(Exception):
    pass


def _plain(got) -> list:
    """``got`` as a list of lists of ints (the learner may return tuples or numpy ints)."""
    return [sorted((int(i) for i in b), reverse=True) for b in got]


def check_bucket_assignment(ranks, fn, seed: int = 13) -> None:
    """The check of ``fn(param_bytes, cap, first_cap) -> [[parameter index, ...], ...]`` (the buckets in the order
    DDP all-reduces them): equal to :func:`torch_assignment` on cases the notebook does not show, without calling
    it or torch's function, then to what DDP's reducer all-reduced on ``ranks`` (:func:`observed_buckets`).
    Raises AssertionError saying which case differs."""
    assert callable(fn), "hand in a function ddp_buckets(param_bytes, cap, first_cap) that returns a list of buckets"
    name = getattr(fn, "__name__", "your function")
    own = dist._compute_bucket_assignment_by_size

    def refused(*args, **kwargs):
        raise _Refused("torch's own bucket assignment")
    for sizes, cap, first in _cases(random.Random(seed)):
        expect = _plain(torch_assignment(sizes, cap, first))
        dist._compute_bucket_assignment_by_size = refused
        try:
            got = fn(list(sizes), cap, first)
        except _Refused:
            raise AssertionError(f"{name} calls torch's own bucket assignment: work it out yourself") from None
        finally:
            dist._compute_bucket_assignment_by_size = own
        try:
            good = _plain(got) == expect
        except TypeError:
            good = False
        assert good, (f"for param_bytes={sizes}, cap={cap}, first_cap={first} it gives {got!r}, DDP makes "
                      f"{expect!r}")
    sizes = param_bytes_of()
    seen = ranks.run(observed_buckets)[0]
    got = _plain(fn(list(sizes), CAP, FIRST_CAP))
    assert got == seen, (f"DDP on the ranks, default caps, weights of {sizes} bytes: its reducer all-reduced the "
                         f"buckets {seen}, {name} gives {got}")
