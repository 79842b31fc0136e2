"""Wrapper 1: the launchers as ``torch.autograd.Function`` s (:class:`LayerNorm`, :class:`GeLU`, called through
:func:`layer_norm` and :func:`gelu`), enough for eager autograd; under ``torch.compile`` Dynamo must trace
through the Python launchers themselves.
"""
from __future__ import annotations

import torch

from .launch import _backward, _check_inputs, _forward, _rows, _shaped, gelu_backward, gelu_forward


# ---------------------------------------------------------------- wrapper 1: autograd.Function
class LayerNorm(torch.autograd.Function):
    """LayerNorm with the Triton forward and backward, for eager autograd. The inputs are checked once,
    in the forward; the backward launches on what the forward saved (its CPU time counts on every
    training step)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        _check_inputs("layer_norm", x, weight, bias)
        x2 = _rows(x)
        y, mean, rstd = _forward(x2, weight, bias, eps, None, torch.empty)
        ctx.save_for_backward(x2, weight, mean, rstd)
        return _shaped(y, x)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = _backward(_rows(dy), x2, weight, mean, rstd, None, torch.empty)
        return dx.view(dy.shape) if dy.dim() != 2 else dx, dw, db, None


def layer_norm(x, weight, bias, eps=1e-5):
    """``torch.nn.functional.layer_norm(x, (w,), weight, bias, eps)`` through :class:`LayerNorm`."""
    return LayerNorm.apply(x, weight, bias, eps)


class GeLU(torch.autograd.Function):
    """GeLU with the Triton forward and backward, for eager autograd."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return gelu_forward(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return gelu_backward(dy, x)


def gelu(x):
    """``torch.nn.functional.gelu(x)`` through :class:`GeLU`."""
    return GeLU.apply(x)
