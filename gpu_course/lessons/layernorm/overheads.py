"""Where the CPU time of notebook 10's LayerNorm goes: under a CUDA graph, with the backward on autograd's worker
thread or the calling thread, through the C++ node, what any Python backward pays, the launcher's layers, and the
kernels a call launches."""
from __future__ import annotations

import torch

from ...kernels.triton_layernorm import layer_norm_forward, layer_norm_node, node_status
from ...mode import ON_GPU, by_mode
from ...rounds import interleaved_rounds, pooled_user
from .compare import EAGER, EPS, NODE, OP_DIRECT, OURS, check_variants, fwd_bwd, inputs, time_user, time_users, variants


def under_cuda_graph(h, w, dtype, seed=0):
    """Forward + backward of eager ``F.layer_norm`` and of ours (:func:`layer_norm_op`), each captured
    once in a CUDA graph (``utils.cuda_graph``) and replayed: ``{name: UserTiming}``, names
    ``"<variant>, CUDA graph"``. A replay launches every kernel of the step for one launch's CPU cost.
    Each replay's gradients are checked against torch first. On the CPU there are no CUDA graphs:
    the functions are called directly."""
    from ...timing import cuda_graph
    x, wt, b, dy = inputs(h, w, dtype, seed)
    fns = {k: f for k, f in variants(w).items() if k in (EAGER, OURS)}
    out = {}
    for name, f in fns.items():
        replay = cuda_graph(fwd_bwd(f), x, wt, b, dy)
        replay()
        check_variants({f"{name}, CUDA graph": lambda *_: None}, x, wt, b, dy, ran=True)
        out[f"{name}, CUDA graph"] = time_user(replay)
    return out


def on_the_calling_thread(h, w, dtype, seed=0):
    """Forward + backward of eager ``F.layer_norm`` and of ours (:func:`layer_norm_op`), each timed with
    autograd's engine running the backward on its worker thread for the GPU (the default) and on the
    thread that calls ``.backward()`` (``torch.autograd.set_multithreading_enabled(False)``), the two
    settings in alternating rounds (:func:`on_each_thread`): ``{name: UserTiming}``, names
    ``"<variant>, <thread>"`` with thread ``"worker thread"`` or ``"calling thread"``; under each setting the two variants' loops and calls are interleaved. The
    gradients are checked against torch first, under the calling-thread setting."""
    x, wt, b, dy = inputs(h, w, dtype, seed)
    fns = {k: f for k, f in variants(w).items() if k in (EAGER, OURS)}
    with torch.autograd.set_multithreading_enabled(False):
        check_variants(fns, x, wt, b, dy)
    return on_each_thread(fns, x, wt, b, dy)


def on_each_thread(fns, x, wt, b, dy, rounds=None):
    """Forward + backward of each of ``fns`` timed (:func:`time_users`, the functions interleaved) with
    the backward on autograd's worker thread and on the calling thread, in ``rounds`` rounds (3 on a GPU,
    1 on the CPU) whose order of the two settings alternates (worker first, then calling first, ...), so
    that a drift of the host falls on both: ``{"<name>, <thread>": UserTiming}`` (each figure the median
    of the rounds'), each name's two rows together."""
    steps = {name: fwd_bwd(f) for name, f in fns.items()}

    def timed(on_worker):
        with torch.autograd.set_multithreading_enabled(on_worker):
            return time_users(steps, x, wt, b, dy)
    taken = interleaved_rounds({"worker thread": lambda: timed(True), "calling thread": lambda: timed(False)},
                               rounds=rounds or by_mode(gpu=3, cpu=1), timer=lambda f, budget_ms: f())
    return {f"{name}, {thread}": pooled_user([run[name] for run in runs])
            for name in fns for thread, runs in taken.items()}


def node_comparison(h, w, dtype, seed=0):
    """Forward + backward of eager ``F.layer_norm``, of ours through the ``autograd.Function``
    (:func:`layer_norm_python`) and through the C++ node (:func:`layer_norm_node`; :func:`build_node`
    first, else it is layer_norm_python), each checked against torch in float64 (after a first step that
    compiles the kernels), then timed, the backward on autograd's worker thread as a training loop runs
    it, plain and each captured in a CUDA graph: ``{name: UserTiming}``, graph rows named
    ``"<variant>, CUDA graph"``. Where the node is not built (:func:`node_status` says why), its rows are
    left out: the rest are eager torch, the ``autograd.Function`` and eager torch's CUDA graph."""
    from ...timing import cuda_graph
    x, wt, b, dy = inputs(h, w, dtype, seed)
    fns = {k: f for k, f in variants(w).items() if k in (EAGER, OURS)}
    built = node_status() is None              # not built (cpu mode, a failed build): no node rows at all
    if built:
        fns[NODE] = lambda x, wt, b: layer_norm_node(x, wt, b, EPS)
        fwd_bwd(fns[NODE])(x, wt, b, dy)       # a shape's first step compiles through the Python path
    check_variants(fns, x, wt, b, dy)
    out = time_users({name: fwd_bwd(f) for name, f in fns.items()}, x, wt, b, dy)
    for name in (EAGER, NODE) if built else (EAGER,):
        replay = cuda_graph(fwd_bwd(fns[name]), x, wt, b, dy)
        replay()
        check_variants({f"{name}, CUDA graph": lambda *_: None}, x, wt, b, dy, ran=True)
        out[f"{name}, CUDA graph"] = time_user(replay)
    return out


class Times1(torch.autograd.Function):
    """``x * 1`` with a Python backward that only passes the gradient on: the least a Python autograd
    node can do (for :func:`python_backward_floor`)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        return x * 1

    @staticmethod
    def backward(ctx, dy):
        return dy, None, None


TIMES1_CPP = "x * 1 (torch's C++ backward)"
TIMES1_PY = "x * 1, a Python backward passing dy on"


def python_backward_floor(h, w, dtype, seed=0):
    """What any Python backward pays before doing any work: forward + backward of ``x * 1`` with
    torch's C++ backward node, and of the same ``x * 1`` through an ``autograd.Function`` whose Python
    ``backward`` only returns ``dy``, each on autograd's worker thread and on the calling thread (as
    :func:`on_the_calling_thread`): ``{name: UserTiming}``. The GPU work is one elementwise kernel
    each way, so the loop and CPU figures are the autograd layers' cost."""
    x, wt, b, dy = inputs(h, w, dtype, seed)
    fns = {TIMES1_CPP: lambda x, wt, b: x * 1, TIMES1_PY: Times1.apply}
    return on_each_thread(fns, x, wt, b, dy)


def cpu_layers(h, w, dtype, seed=0):
    """Where ours' CPU time per call goes, forward (under ``no_grad``) and forward + backward, layer by
    layer (``utils.cpu_ms_per_call``, ms): the forward launcher alone (argument checks, allocations,
    one Triton launch), and the same with its kernel launched through ``kernel[grid]`` rather than
    its ``Launcher``'s direct path; :func:`layer_norm_op` (under ``no_grad`` it skips the
    ``autograd.Function`` and the statistics, although its row is labelled "forward, autograd.Function"); the
    same launchers through the Python custom op's dispatch; and forward + backward through each
    wrapper (autograd's engine and the backward's two launches added)."""
    from ...user_timing import cpu_ms_per_call
    from ...triton_launch import through_jit
    x, wt, b, dy = inputs(h, w, dtype, seed)
    v = variants(w)
    with torch.no_grad():
        with through_jit():
            jit = cpu_ms_per_call(layer_norm_forward, x, wt, b)
        out = {"forward launcher, through kernel[grid]": jit,
               "forward launcher alone": cpu_ms_per_call(layer_norm_forward, x, wt, b),
               "forward, autograd.Function": cpu_ms_per_call(v[OURS], x, wt, b),
               "forward, custom op": cpu_ms_per_call(v[OP_DIRECT], x, wt, b),
               "forward, F.layer_norm": cpu_ms_per_call(v[EAGER], x, wt, b)}
    for name in (OURS, OP_DIRECT, EAGER):
        label = {OURS: "autograd.Function", OP_DIRECT: "custom op", EAGER: "F.layer_norm"}[name]
        out[f"forward + backward, {label}"] = cpu_ms_per_call(fwd_bwd(v[name]), x, wt, b, dy)
    return out


def kernels_launched(fn, *args):
    """Names of the GPU kernels one call of ``fn(*args)`` runs, in order, recorded by
    ``torch.profiler`` (notebook 02). On the CPU there are no GPU kernels: ``[]``.
    """
    if not ON_GPU:
        fn(*args)
        return []
    from ...profiling import gpu_kernels
    return gpu_kernels(fn, *args)
