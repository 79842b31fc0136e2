"""What a caller runs: :func:`attention_forward` (the autotuned descriptor forward where
:func:`~.forward_desc.uses_descriptors`, else the pointer forward, or a fixed ``cfg``; once :func:`~.route.build_route`
has built its C++ route, a call of a kind seen before goes through it), the autograd Function
:class:`FlashAttention` that pairs it with the backward, and :func:`flash_attention`, the differentiable entry point.
"""
from __future__ import annotations

import torch

from ...launch import cdiv
from ...triton_launch import direct
from ..triton_matmul import dot_precision
from .backward import attention_backward
from .forward import (_FORWARD_TUNER, _LAST_FORWARD, _forward_buffers, attention_fwd_kernel, attention_fwd_tuned,
                      check_flash_inputs)
from .forward_desc import attention_fwd_desc_tuned, attention_forward_desc, uses_descriptors
from .reference import default_scale
from .route import route_first


def attention_forward(q, k, v, causal=False, scale=None, cfg=None, alloc=torch.empty, descriptors=None):
    """FlashAttention's forward: ``(out, lse)``, ``out`` as q, ``lse`` fp32 of shape (B, H, N), the
    natural-log log-sum-exp of each row's scaled scores. Autotuned, or with ``cfg`` (BLOCK_M,
    BLOCK_N, num_warps, num_stages; BLOCK_M a multiple of BLOCK_N) fixed. Non-contiguous inputs are
    copied to contiguous ones first. Autotuned where :func:`uses_descriptors` (``descriptors=None``), it runs
    the descriptor kernel's autotuner (:func:`attention_forward_desc` with ``cfg="tuned"``); ``descriptors=False``
    or a ``cfg`` keeps the pointer kernel :func:`attention_fwd_kernel`."""
    if cfg is None and descriptors is not False and (descriptors or uses_descriptors(q)):
        _FORWARD_TUNER[0] = attention_fwd_desc_tuned
        return attention_forward_desc(q, k, v, causal, scale, cfg="tuned", alloc=alloc)
    if cfg is None:
        _FORWARD_TUNER[0] = attention_fwd_tuned
    q, k, v, out, lse = _forward_buffers(q, k, v, "flash_attention", alloc)
    B, H, N, D = q.shape
    args = (q, k, v, out, lse, default_scale(D, scale), N)
    switches = dict(HEAD_DIM=D, CAUSAL=bool(causal), DOT_PRECISION=dot_precision(q.dtype))
    if cfg is None:
        ck = direct(attention_fwd_tuned)[lambda meta: (cdiv(N, meta["BLOCK_M"]), B * H)](*args, **switches)
    else:
        if cfg["BLOCK_M"] % cfg["BLOCK_N"]:
            raise ValueError(f"flash_attention: BLOCK_M must be a multiple of BLOCK_N, got {cfg}")
        ck = direct(attention_fwd_kernel)[(cdiv(N, cfg["BLOCK_M"]), B * H)](*args, **switches, **cfg)
    _LAST_FORWARD[0] = ck
    return out, lse


attention_forward = route_first(attention_forward)   # the C++ route in front (the source above is the launcher's)


class FlashAttention(torch.autograd.Function):
    """``flash_attention`` for autograd: the forward saves q, k, v, the output and the LSE (O(N)
    extra memory, not the N x N probabilities); the backward runs :func:`attention_backward`."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, scale=None, deterministic=True):
        out, lse = attention_forward(q, k, v, causal, scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, out, lse, dout, ctx.causal, ctx.scale,
                                        deterministic=ctx.deterministic)
        return dq, dk, dv, None, None, None


def flash_attention(q, k, v, causal=False, scale=None, deterministic=True):
    """``softmax(scale * q @ k^T) @ v`` (scale ``1/sqrt(d)`` unless given; ``causal``: query i sees
    keys <= i) with FlashAttention's Triton kernels, differentiable. q, k, v: (batch, heads, N, d),
    one shape, d in 16, 32, 64, 128, fp16 or bf16 (fp32 too: exact dots, slower). ``deterministic=False``:
    the backward sums dQ with atomic adds (:func:`attention_backward_atomic`)."""
    check_flash_inputs(q, k, v, "flash_attention")
    return FlashAttention.apply(q, k, v, causal, scale, deterministic)
