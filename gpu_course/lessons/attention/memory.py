"""Notebook 11's memory measurement: the forward's peak GPU memory above its inputs, naive (N x N scores) against
ours (O(N)), for a list of sequence lengths, and its table."""
from __future__ import annotations

import math

import torch

from ...kernels.triton_attention import attention_forward, naive_attention
from ...mode import DEVICE, ON_GPU


def forward_peak_memory(fn):
    """Bytes that ``fn()`` (run without autograd) allocated at its peak above what was allocated
    before it, on the GPU (``torch.cuda.max_memory_allocated``); ``math.inf`` if it ran out of GPU
    memory. GPU only: CPU torch keeps no such counters (a clear RuntimeError in cpu mode)."""
    if not ON_GPU:
        raise RuntimeError("forward_peak_memory: torch.cuda's memory counters exist on a GPU only (cpu mode)")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    try:
        with torch.no_grad():
            res = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del res
    except torch.cuda.OutOfMemoryError:
        peak = math.inf
    torch.cuda.empty_cache()
    return peak


def gib(x):
    """Bytes as GiB with three decimals, or "out of memory" for ``math.inf`` (:func:`forward_memory`).

    >>> gib(2**30), gib(math.inf)
    ('1.000 GiB', 'out of memory')
    """
    return "out of memory" if math.isinf(x) else f"{x / 2**30:.3f} GiB"


def memory_table(rows, batch, heads, d):
    """The table of :func:`forward_memory`'s ``rows``: N, the naive forward's and ours' peak above the
    inputs, and their ratio."""
    lines = [f"peak memory of the forward above its inputs, batch {batch}, heads {heads}, d {d}, fp16, non-causal:",
             f"{'N':>6} {'naive':>14} {'ours':>10} {'naive / ours':>13}"]
    lines += [f"{r['n']:>6} {gib(r['naive']):>14} {gib(r['ours']):>10} {r['naive'] / r['ours']:>12,.0f}x" for r in rows]
    return "\n".join(lines)


def forward_memory(batch, heads, d, sizes, cfg=None, dtype=torch.float16):
    """The forward's peak memory above its inputs, naive vs ours (non-causal), for each N of
    ``sizes``: a list of ``dict(n=N, scores=bytes of one N x N tensor, naive=bytes, ours=bytes)``,
    ``math.inf`` where it ran out of memory (the naive one, first). Ours runs once before it is
    measured, so that compiling or autotuning is not counted (``cfg``: a fixed configuration, as
    for :func:`attention_forward`). In cpu mode both run (checking that they can) and the
    measurements are None: CPU torch has no peak-memory counter."""
    rows = []
    for n in sizes:
        q, k, v = (torch.randn(batch, heads, n, d, device=DEVICE, dtype=dtype)
                   for _ in range(3))
        row = dict(n=n, scores=batch * heads * n * n * q.element_size())
        ours = lambda: attention_forward(q, k, v, cfg=cfg)  # noqa: E731
        ours()  # compile / autotune outside the measurement
        for name, fn in (("naive", lambda: naive_attention(q, k, v)), ("ours", ours)):
            if ON_GPU:
                row[name] = forward_peak_memory(fn)
            else:
                with torch.no_grad():
                    fn()
                row[name] = None
        rows.append(row)
        del q, k, v
    return rows
