"""Wrapper 2: the launchers as custom operators, ``torch.ops.gpu_course.layer_norm`` and ``.gelu`` (with their
backwards), declared by :func:`register_ops` with ``torch.library`` (fake implementations for the compiler,
the Triton backward as their autograd), and :func:`layer_norm_op` and :func:`gelu_op`, which call them while
``torch.compile`` traces and the cheaper :mod:`.function` wrappers in eager mode.
"""
from __future__ import annotations

import torch

from .function import GeLU, LayerNorm
from .launch import (_check_inputs, _forward, _rows, _shaped, _stats_dtype, gelu_backward, gelu_forward,
                     layer_norm_backward, layer_norm_forward)


# --------------------------------------------------------------------- wrapper 2: custom ops
OPS = ("gpu_course::layer_norm", "gpu_course::layer_norm_backward", "gpu_course::gelu",
       "gpu_course::gelu_backward")


def _defined(qualname):
    """Whether the operator ``qualname`` (``ns::name``) is already registered with torch."""
    return bool(torch._C._dispatch_has_kernel(qualname)) if hasattr(torch._C, "_dispatch_has_kernel") \
        else qualname in torch._library.custom_ops.OPDEFS


def register_ops():
    """Define the four custom ops, their fake (shape-only) implementations and their autograd.

    Idempotent: when the module is imported again (``importlib.reload``, a notebook re-running its
    imports), the ops that torch already has are kept as they are, since torch refuses to define an
    operator twice in one process."""
    if all(_defined(q) for q in OPS):
        return

    @torch.library.custom_op("gpu_course::layer_norm", mutates_args=())
    def layer_norm_op_(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return layer_norm_forward(x, weight, bias, eps)

    @torch.library.register_fake("gpu_course::layer_norm")
    def _(x, weight, bias, eps):
        _check_inputs("layer_norm", x, weight, bias)
        rows = x.numel() // x.shape[-1]
        sd = _stats_dtype(x.dtype)
        # like the launcher: y contiguous whatever x's strides (empty_like would copy a transpose's)
        return x.new_empty(x.shape), x.new_empty(rows, dtype=sd), x.new_empty(rows, dtype=sd)

    @torch.library.custom_op("gpu_course::layer_norm_backward", mutates_args=())
    def layer_norm_backward_op_(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                                rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return layer_norm_backward(dy, x, weight, mean, rstd)

    @torch.library.register_fake("gpu_course::layer_norm_backward")
    def _(dy, x, weight, mean, rstd):
        return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)

    def ln_setup(ctx, inputs, output):
        x, weight, _bias, _eps = inputs
        _y, mean, rstd = output
        ctx.mark_non_differentiable(mean, rstd)   # saved for the backward, which has no gradient for them
        ctx.save_for_backward(x, weight, mean, rstd)

    def ln_backward(ctx, dy, _dmean, _drstd):  # _dmean, _drstd: None (mean, rstd are not differentiable)
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = torch.ops.gpu_course.layer_norm_backward(dy, x, weight, mean, rstd)
        return dx, dw, db, None

    torch.library.register_autograd("gpu_course::layer_norm", ln_backward, setup_context=ln_setup)

    @torch.library.custom_op("gpu_course::gelu", mutates_args=())
    def gelu_op_(x: torch.Tensor) -> torch.Tensor:
        return gelu_forward(x)

    @torch.library.register_fake("gpu_course::gelu")
    def _(x):
        return x.new_empty(x.shape)

    @torch.library.custom_op("gpu_course::gelu_backward", mutates_args=())
    def gelu_backward_op_(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return gelu_backward(dy, x)

    @torch.library.register_fake("gpu_course::gelu_backward")
    def _(dy, x):
        return x.new_empty(x.shape)

    def gelu_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def gelu_bwd(ctx, dy):
        (x,) = ctx.saved_tensors
        return torch.ops.gpu_course.gelu_backward(dy, x)

    torch.library.register_autograd("gpu_course::gelu", gelu_bwd, setup_context=gelu_setup)


register_ops()


_ROUTE = {"node": None}   # the C++ node's entry point (node.layer_norm_node), set once build_node() has built it


def layer_norm_op(x, weight, bias, eps=1e-5):
    """LayerNorm for a model. While ``torch.compile`` traces: the custom op ``torch.ops.gpu_course.layer_norm``
    (``y`` only), so that ``fullgraph=True`` keeps the Triton kernels in its graph as one opaque call. In
    eager mode, once ``build_node()`` has built the C++ autograd node: the node (:func:`.node.layer_norm_node`,
    which takes the Python path itself where it cannot launch, e.g. a shape's first step). Otherwise
    :func:`layer_norm_python`. :func:`layer_norm_route` says which."""
    node = _ROUTE["node"]
    if node is not None and not torch.compiler.is_compiling():
        return node(x, weight, bias, eps)
    return layer_norm_python(x, weight, bias, eps)


def layer_norm_python(x, weight, bias, eps=1e-5):
    """LayerNorm through the Python launchers: the custom op while ``torch.compile`` traces; in eager mode
    :class:`LayerNorm` (or the forward launcher alone when nothing needs a gradient), because a Python custom
    op's dispatch costs tens of µs of CPU a call (notebook 10 measures it on its host; see pytorch/pytorch#176592
    and #177109), about as much as the forward kernel takes on the GPU.
    Neither wrapper's backward is itself differentiable (it launches kernels autograd cannot see): no second
    derivative through it."""
    if torch.compiler.is_compiling():
        return torch.ops.gpu_course.layer_norm(x, weight, bias, eps)[0]
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return LayerNorm.apply(x, weight, bias, eps)
    _check_inputs("layer_norm", x, weight, bias)     # nothing to differentiate: no graph node, no statistics
    return _shaped(_forward(_rows(x), weight, bias, eps, None, torch.empty, save=False)[0], x)


def layer_norm_route() -> str:
    """Which path :func:`layer_norm_op` takes in eager mode for a call that needs gradients."""
    if _ROUTE["node"] is not None:
        return ("the C++ autograd node (its launches from C++; a shape's first step, and a call it cannot "
                "take, through the autograd.Function)")
    return "the autograd.Function (the Python launchers; the C++ node is not built)"


def gelu_op(x):
    """GeLU for a model: the custom op ``torch.ops.gpu_course.gelu`` under ``torch.compile``, and
    :class:`GeLU` in eager mode (as :func:`layer_norm_op`)."""
    if torch.compiler.is_compiling():
        return torch.ops.gpu_course.gelu(x)
    if torch.is_grad_enabled() and x.requires_grad:
        return GeLU.apply(x)
    return gelu_forward(x)
