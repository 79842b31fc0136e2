"""Notebook 10's last LayerNorm measurement: what a model gets from :func:`layer_norm_op`, the function it calls,
against eager torch, forward + backward in a loop, in interleaved rounds (:mod:`gpu_course.rounds`). Once
``build_node()`` has built the C++ node, ``layer_norm_op`` goes through it (``ln.layer_norm_route()`` says so).

A model calls ``backward()`` once a step for all its layers, and part of that call's CPU time does not grow with
them (setting the backward up, handing it to autograd's worker thread and back; section 4's
:func:`~.overheads.python_backward_floor` measures a whole step of ``x * 1``): ``what_a_model_calls(..., layers=8)``
times a stack of LayerNorms under one ``backward()``, which shares that part among its layers as a model does."""
from __future__ import annotations

import torch

from ...kernels.triton_layernorm import layer_norm_op, layer_norm_route
from ...mode import by_mode
from ...rounds import interleaved_rounds
from .compare import EAGER, EPS, check_variants, fwd_bwd, inputs, time_user

MODEL = "ours, layer_norm_op (what a model calls)"


def what_a_model_calls(h, w, dtype, rounds=None, seed=0, layers=1):
    """Forward + backward of eager ``F.layer_norm`` and of :func:`layer_norm_op` on an (h, w) input of
    ``dtype``: a first step (a shape's first step compiles through the Python launchers), one layer of each
    checked against torch in float64, then timed (``time_user``: GPU time, loop step, CPU per call) in
    ``rounds`` interleaved rounds (5 on a GPU, 1 on the CPU): ``(route, {name: [UserTiming, one a round]})``,
    ``route`` the path ``layer_norm_op`` took (:func:`layer_norm_route`). ``layers``: how many LayerNorms a
    step applies one after the other (:func:`stacked`) before its one ``backward()``."""
    if not (isinstance(layers, int) and not isinstance(layers, bool) and layers >= 1):
        raise ValueError(f"what_a_model_calls: layers must be a positive int, got {layers!r}")
    x, wt, b, dy = inputs(h, w, dtype, seed)
    fns = {EAGER: lambda x, wt, b: torch.nn.functional.layer_norm(x, (w,), wt, b, EPS),
           MODEL: lambda x, wt, b: layer_norm_op(x, wt, b, EPS)}
    fwd_bwd(fns[MODEL])(x, wt, b, dy)
    check_variants(fns, x, wt, b, dy)
    steps = {name: (lambda step=fwd_bwd(stacked(f, layers)): step(x, wt, b, dy)) for name, f in fns.items()}
    taken = interleaved_rounds(steps, rounds=rounds or by_mode(gpu=5, cpu=1), timer=lambda f, budget_ms: time_user(f))
    return layer_norm_route(), taken


def stacked(f, layers):
    """``f`` applied ``layers`` times, each on the previous output with the same weight and bias.

    >>> stacked(lambda x, wt, b: x * wt + b, 3)(1, 2, 1)
    15
    """
    def run(x, wt, b):
        for _ in range(layers):
            x = f(x, wt, b)
        return x
    return run


def loop_speedups(taken, name=MODEL):
    """Per round, eager torch's time per loop step over ``name``'s (above 1: ``name`` is the faster)."""
    return [e.loop_ms / t.loop_ms for e, t in zip(taken[EAGER], taken[name])]
