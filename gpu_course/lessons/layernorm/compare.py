"""Notebook 10's comparison with torch: the LayerNorm variants (eager torch, torch.compile, ours through each
wrapper), their inputs, their check against float64, how they are timed, and the table."""
from __future__ import annotations

import torch

from ...checking import check
from ...kernels.triton_layernorm import layer_norm_node, layer_norm_python, node_status
from ...mode import DEVICE, by_mode
from ...timing import bench
from ...user_timing import bench_user, bench_users


EPS = 1e-5

EAGER = "torch F.layer_norm (eager)"
OURS = "ours, autograd.Function (eager)"
OP_DIRECT = "ours, torch.ops.gpu_course.layer_norm"
OURS_COMPILED = "torch.compile(layer_norm_op)"
NODE = "ours, C++ autograd node"


def variants(w, eps=EPS, backend="inductor"):
    """name -> LayerNorm function of ``(x, weight, bias)`` over ``w`` features, torch's first: eager
    ``F.layer_norm``; ``torch.compile`` of it (``fullgraph=True``, ``backend``: Inductor's generated
    Triton on a GPU; ``"aot_eager"`` traces without generating code, for the CPU); ours as a model
    calls it in eager mode before the C++ node is built (:func:`layer_norm_python`: the ``autograd.Function``
    where a gradient is needed, the forward launcher alone, without the statistics, under ``no_grad``); the custom op called
    directly (``torch.ops.gpu_course.layer_norm``: what the Python custom op's dispatch costs a call);
    and ``torch.compile`` of a function calling :func:`layer_norm_op` (the custom op in a graph). Once
    :func:`build_node` has built it, :func:`layer_norm_node` too, after ours."""
    torch_ln = lambda x, wt, b: torch.nn.functional.layer_norm(x, (w,), wt, b, eps)  # noqa: E731
    ours = lambda x, wt, b: layer_norm_python(x, wt, b, eps)  # noqa: E731
    out = {EAGER: torch_ln,
           "torch.compile(F.layer_norm)": torch.compile(torch_ln, fullgraph=True, backend=backend),
           OURS: ours}
    if node_status() is None:   # built (build_node): the C++ node beside the autograd.Function
        out[NODE] = lambda x, wt, b: layer_norm_node(x, wt, b, eps)
    out[OP_DIRECT] = lambda x, wt, b: torch.ops.gpu_course.layer_norm(x, wt, b, eps)[0]
    out[OURS_COMPILED] = torch.compile(ours, fullgraph=True, backend=backend)
    return out


def dtypes_here(supports=None):
    """The dtypes the LayerNorm comparison runs in on this machine, and why any is left out:
    ``([torch.float16, torch.bfloat16], [])`` where the GPU has bf16, else fp16 alone and the one-line
    reason of ``utils.gpu_supports("bf16")`` (Colab's T4, sm_75, has no bf16).

    >>> dtypes_here(lambda f: (False, "no bf16 here"))
    ([torch.float16], ['bfloat16: no bf16 here'])
    """
    from ...hardware import gpu_supports
    ok, why = (supports or gpu_supports)("bf16")
    return ([torch.float16, torch.bfloat16], []) if ok else ([torch.float16], [f"bfloat16: {why}"])


def fwd_bwd(f):
    """A function of ``(x, weight, bias, dy)`` that runs ``f`` forward and backward (grads into
    ``.grad``, cleared first)."""
    def run(x, wt, b, dy):
        x.grad = wt.grad = b.grad = None
        f(x, wt, b).backward(dy)
    return run


def check_variants(fns, x, wt, b, dy, eps=EPS, ran=False):
    """Each of ``fns``'s y, dx, dweight and dbias against torch's ``F.layer_norm`` in float64 (raises
    ``CheckFailed``). Tolerances for fp16/bf16 outputs: a few units in their last place; fp32: 1e-4;
    dweight and dbias are sums over all rows, their ``atol`` grows as the square root of the rows.
    ``ran=True``: the backward already ran (e.g. a CUDA graph's replay): only the gradients in
    ``x.grad``, ``wt.grad`` and ``b.grad`` are checked."""
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, wt, b))
    ref = torch.nn.functional.layer_norm(xd, (x.shape[-1],), wd, bd, eps)
    ref.backward(dy.double())
    tol = {torch.float16: dict(atol=2e-2, rtol=1e-2), torch.bfloat16: dict(atol=1e-1, rtol=2e-2)}.get(
        x.dtype, dict(atol=1e-4, rtol=1e-4))
    rows = x.numel() // x.shape[-1]
    sum_tol = dict(atol=tol["atol"] * rows ** 0.5, rtol=tol["rtol"])  # a sum of `rows` roundings
    for name, f in fns.items():
        if not ran:
            fwd_bwd(f)(x, wt, b, dy)
            check(f(x, wt, b), ref, **tol, name=f"{name}: y")
        check(x.grad, xd.grad, **tol, name=f"{name}: dx")
        check(wt.grad, wd.grad, **sum_tol, name=f"{name}: dweight")
        check(b.grad, bd.grad, **sum_tol, name=f"{name}: dbias")


def time_it(fn, *args):
    """``utils.bench`` as the LayerNorm comparisons use it: L2 flushed; on a GPU about 200 ms of runs,
    on the CPU 2 runs (the interpreter's times mean nothing)."""
    return bench(fn, *args, l2_flush=True, reps=by_mode(gpu=None, cpu=2), budget_ms=by_mode(gpu=200, cpu=None))


def inputs(h, w, dtype, seed=0, device=None):
    """``x`` (h, w), ``weight``, ``bias`` (all requiring grad) and ``dy`` of ``dtype``, random with
    ``seed``: weight near 1, bias near 0, as a trained LayerNorm's."""
    g = torch.Generator().manual_seed(seed)
    device = DEVICE if device is None else device
    # drawn on the CPU (so the same on every device, and under torch.set_default_device too), then moved
    r = lambda *s: torch.randn(*s, generator=g, device="cpu").to(device)  # noqa: E731
    x = r(h, w).to(dtype).requires_grad_()
    wt = (1 + 0.1 * r(w)).to(dtype).requires_grad_()
    b = (0.1 * r(w)).to(dtype).requires_grad_()
    return x, wt, b, r(h, w).to(dtype)


def time_user(fn, *args):
    """``utils.bench_user`` as the LayerNorm comparisons use it (L2 flushed; GPU time from about
    200 ms of runs): GPU time, time per step in a loop, CPU time per call."""
    return bench_user(fn, *args, l2_flush=True, budget_ms=by_mode(gpu=200, cpu=None))


def time_users(fns, *args):
    """:func:`time_user` of each of ``fns`` (name -> function), the loop and CPU figures interleaved
    (``utils.bench_users``): ``{name: UserTiming}``."""
    return bench_users(fns, *args, l2_flush=True, budget_ms=by_mode(gpu=200, cpu=None))


def compare_with_torch(h, w, dtype, backend="inductor", seed=0):
    """Check every variant (:func:`variants`) against torch in float64 on an (h, w) input of ``dtype``,
    then time each with :func:`time_user`, forward alone (under ``no_grad``) and forward + backward:
    ``{(what, name): UserTiming}`` with ``what`` in ``"forward"``, ``"forward + backward"`` (the keys
    of :func:`bytes_moved`)."""
    x, wt, b, dy = inputs(h, w, dtype, seed)
    fns = variants(w, backend=backend)
    check_variants(fns, x, wt, b, dy)
    with torch.no_grad():
        fwd = time_users(fns, x, wt, b)
    both = time_users({name: fwd_bwd(f) for name, f in fns.items()}, x, wt, b, dy)
    return {**{("forward", n): t for n, t in fwd.items()}, **{("forward + backward", n): t for n, t in both.items()}}


def table(times, what):
    """The table ``utils.compare`` prints (GPU time, loop/step, CPU/call, eager torch's time over each
    for the GPU and the loop) for the ``what`` rows of :func:`compare_with_torch`'s result, or for a
    ``{name: UserTiming}`` when ``what`` is None."""
    from ...user_timing import user_table
    rows = times if what is None else {n: t for (w_, n), t in times.items() if w_ == what}
    return user_table(rows, next(iter(rows)))
