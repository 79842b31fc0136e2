"""What notebook 11's kernels are made of: the matmuls in their source, the tensor-core instructions in their PTX,
the kernels a call launches (profiler), whether a backward is deterministic, and the configurations the autotuners
kept."""
from __future__ import annotations

import torch

from ...kernels.triton_attention import (BACKWARD_LOOPS, attention_backward, attention_bwd_dkdv_kernel,
                                         attention_bwd_dkdv_tuned, attention_bwd_dq_kernel, attention_bwd_dq_tuned,
                                         attention_forward, attention_fwd_tuned, default_scale, last_forward_kernel,
                                         last_forward_tuner)
from ...kernels.triton_matmul import dot_precision
from ...launch import cdiv
from ...mode import ON_GPU


def count_dots(*fns):
    """How many ``tl.dot`` calls the source of each Triton function in ``fns`` makes (in its loop
    body: one per tile pair visited): ``{name: count}``.

    >>> count_dots(*BACKWARD_LOOPS)
    {'_dkdv_inner': 4, '_dq_inner': 3}
    """
    import inspect
    import re
    out = {}
    for fn in fns:
        src = inspect.getsource(getattr(fn, "fn", fn))
        out[getattr(fn, "__name__", None) or fn.fn.__name__] = len(re.findall(r"\btl\.dot\(", src))
    return out


BACKWARD_MATMULS = {"counted": 5, "ours": sum(count_dots(*BACKWARD_LOOPS).values())}
"""Matmuls of N x N x d per (batch, head) in the backward: as the usual FLOP count has it (S recomputed,
dV, dP, dQ, dK: 2.5 forwards), and as our two kernels execute them (S and dP in both kernels: 7)."""


def mma_instructions(ptx):
    """The tensor-core opcodes in PTX text (``wgmma.mma_async...`` on Hopper, ``mma.sync...`` before),
    sorted and without repeats.

    >>> mma_instructions("  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...};\\n  mma.sync.aligned.m16n8k16 x;")
    ['mma.sync.aligned.m16n8k16', 'wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16']
    """
    ops = set()
    for line in ptx.splitlines():
        op = line.strip().split(" ")[0]
        if op.startswith(("wgmma.mma_async", "mma.sync")):
            ops.add(op)
    return sorted(ops)


def tensor_core_instructions(q, k, v, dout, causal=False):
    """``{"forward": [...], "dK/dV": [...], "dQ": [...]}``: the tensor-core opcodes (:func:`mma_instructions`)
    in the PTX that Triton compiled for each of our kernels, with the configuration its autotuner kept for
    these inputs (run once here). GPU only: the interpreter compiles nothing."""
    if not ON_GPU:
        raise RuntimeError("tensor_core_instructions needs a GPU: in cpu mode Triton interprets and compiles no PTX")
    q, k, v, dout = (t.detach().contiguous() for t in (q, k, v, dout))
    out, lse = attention_forward(q, k, v, causal)          # tunes the forward for these inputs
    attention_backward(q, k, v, out, lse, dout, causal)    # and the backward
    B, H, N, D = q.shape
    sc, sw = default_scale(D), dict(HEAD_DIM=D, CAUSAL=bool(causal), DOT_PRECISION=dot_precision(q.dtype))
    delta = (out.float() * dout.float()).sum(-1)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))

    def cfg(tuned):
        c = tuned.best_config
        return dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)
    kc, qc = cfg(attention_bwd_dkdv_tuned), cfg(attention_bwd_dq_tuned)
    attention_forward(q, k, v, causal)                     # its compiled kernel, tuned above
    compiled = {
        "forward": last_forward_kernel(),
        "dK/dV": attention_bwd_dkdv_kernel[(cdiv(N, kc["BLOCK_N"]), B * H)](
            q, k, v, dout, lse, delta, dk, dv, sc, N, **sw, **kc),
        "dQ": attention_bwd_dq_kernel[(cdiv(N, qc["BLOCK_M"]), B * H)](q, k, v, dout, lse, delta, dq, sc, N, **sw, **qc),
    }
    return {name: mma_instructions(c.asm["ptx"]) for name, c in compiled.items()}


def profiled_kernels(fn, *args, **kwargs):
    """The names of the GPU kernels that ``fn(*args, **kwargs)`` launched, in order of first launch,
    from ``torch.profiler`` (memory copies and fills left out). GPU only."""
    if not ON_GPU:
        raise RuntimeError("profiled_kernels needs a GPU: in cpu mode no GPU kernel runs")
    from ...profiling import gpu_kernels
    return list(dict.fromkeys(gpu_kernels(fn, *args, **kwargs)))  # each name once, in order of first launch


def short_kernel_name(name, width=110):
    """A kernel's name cut to ``width`` characters (C++ template arguments make them long)."""
    return name if len(name) <= width else name[:width - 3] + "..."


def distinct_grads(fn, q, k, v, dout, causal=False, runs=5):
    """How many different dQ (bit for bit) ``runs`` backwards of ``fn`` give for the same inputs: 1 for a
    deterministic backward; more where the gradient is summed with atomics in a run-dependent order."""
    seen = set()
    for _ in range(runs):
        out = fn(q, k, v, causal)
        dq = torch.autograd.grad(out, (q,), dout)[0]
        seen.add(dq.cpu().numpy().tobytes())
    return len(seen)


def config_str(cfg):
    """``128x64 w8 s4`` for a Triton config of these kernels (BLOCK_M x BLOCK_N, warps, stages), followed by
    `` TMA`` for the descriptor forward's (`` TMA pipelined`` with its PIPE, `` persistent k/SM`` with its
    PERSIST); ``-`` for None."""
    if cfg is None:
        return "-"
    kind = "" if "PIPE" not in cfg.kwargs else " TMA pipelined" if cfg.kwargs["PIPE"] else " TMA"
    if cfg.kwargs.get("PERSIST"):
        kind += f" persistent {cfg.kwargs['PERSIST']}/SM"
    return f"{cfg.kwargs['BLOCK_M']}x{cfg.kwargs['BLOCK_N']} w{cfg.num_warps} s{cfg.num_stages}{kind}"


def tuned_configs():
    """The configurations the autotuners kept last: ``{"forward": ..., "dkdv": ..., "dq": ...}`` as
    :func:`config_str` strings (``-`` before any tuning); the forward's from the autotuner the last autotuned
    forward went through (descriptors or pointers)."""
    kernels = {"forward": last_forward_tuner() or attention_fwd_tuned, "dkdv": attention_bwd_dkdv_tuned,
               "dq": attention_bwd_dq_tuned}
    return {k: config_str(getattr(kern, "best_config", None)) for k, kern in kernels.items()}
