"""The launchers of notebook 10's kernels: input checks, the block width, warps and backward programs of a
shape (:func:`layer_norm_config`, worked out once a shape), and the functions that allocate the outputs and
launch the kernels (:func:`layer_norm_forward`, :func:`layer_norm_backward`, :func:`gelu_forward`,
:func:`gelu_backward`). LayerNorm's three kernels go through a ``gpu_course.triton_launch.Launcher``, whose keys
(``_fwd_key``, ...) the C++ node (:mod:`.node`) uses to find the compiled kernels.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import num_warps_for
from ...hardware import sm_count
from ...launch import cdiv
from ...mode import ON_GPU
from ...triton_launch import Launcher, aligned, int_kind
from .kernels import (gelu_bwd_kernel, gelu_fwd_kernel, layer_norm_bwd_dwdb_kernel, layer_norm_bwd_dx_kernel,
                      layer_norm_fwd_kernel)

MAX_W = 16384          # features per row: a row (and, backward, its partial sums) lives in registers
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_ACC = {torch.float64: tl.float64}  # the dtype of statistics and sums: fp32 unless the input is fp64


# ------------------------------------------------------------------------------------ launchers
def _acc(dtype):
    return _ACC.get(dtype, tl.float32)


def _stats_dtype(dtype):
    """The dtype of the saved mean and rstd: fp64 for fp64 input, else fp32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _default_groups(h, device=None):
    """Backward programs: one per SM of ``device``'s GPU (each keeps its partial sums in registers),
    4 on the CPU (each program costs the interpreter time); never more than the ``h`` rows."""
    on_gpu = ON_GPU if device is None else torch.device(device).type == "cuda"
    if not on_gpu:
        return max(1, min(h, 4))
    return max(1, min(h, sm_count(device)))


def _check_width(w):
    if not 1 <= w <= MAX_W:
        raise ValueError(f"layer_norm: rows of {w} features; this kernel takes 1 to {MAX_W} (a row "
                         "must fit in one program's registers)")


def layer_norm_config(w, groups=None, h=None, device=None):
    """Block width (``w`` rounded up to a power of two), warps (``num_warps_for``) and backward
    programs ``GROUPS`` (``groups``, else one per SM of ``device`` (default: the course's device) on a
    GPU, 4 on the CPU, at most ``h``)."""
    _check_width(w)
    block = triton.next_power_of_2(w)
    return dict(BLOCK_W=block, num_warps=num_warps_for(block),
                GROUPS=groups if groups is not None else _default_groups(h or 1 << 30, device))


_CONFIGS = {}  # (w, h, device) -> layer_norm_config(...): what the launchers use when given no cfg


def _config(w, h, device):
    """:func:`layer_norm_config` of a shape, worked out once per (w, h, device) and then looked up
    (~0.3 µs instead of ~11 µs: a launcher runs on every training step)."""
    key = (w, h, device)
    cfg = _CONFIGS.get(key)
    if cfg is None:
        cfg = _CONFIGS[key] = layer_norm_config(w, h=h, device=device)
    return cfg


def _check_inputs(name, x, weight, bias=None):
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"{name}: x must be a tensor with at least one dimension (features last)")
    if x.dtype not in DTYPES:
        raise TypeError(f"{name}: x is {x.dtype}; the kernels take "
                        f"{', '.join(str(d) for d in DTYPES)}")
    w = x.shape[-1]
    for pname, p in (("weight", weight), ("bias", bias)):
        if p is None and pname == "bias":
            continue
        if not isinstance(p, torch.Tensor) or tuple(p.shape) != (w,):
            got = tuple(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__
            raise ValueError(f"{name}: {pname} must have shape ({w},) (x's last dimension); got {got}")
        if p.device != x.device:
            raise ValueError(f"{name}: {pname} is on {p.device} but x is on {x.device}")
    if x.numel() == 0:
        raise ValueError(f"{name}: x is empty (shape {tuple(x.shape)})")
    _check_width(w)


def _rows(t):
    """``t`` as an (h, w) matrix with contiguous rows: a view when the layout allows (any row stride),
    else a copy."""
    if t.dim() == 2 and t.stride(1) == 1:  # the common case, without a reshape (~3 µs a call)
        return t
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def layer_norm_forward(x, weight, bias, eps=1e-5, cfg=None, alloc=torch.empty):
    """LayerNorm of ``x`` over its last dimension: ``(y, mean, rstd)``, ``y`` shaped like ``x`` in its
    dtype, ``mean`` and ``rstd`` one per row (``x.numel() // w`` of them, fp32; fp64 for fp64 x).
    ``alloc`` makes ``y`` (tests pass ``utils.poisoned``); ``cfg`` overrides
    :func:`layer_norm_config`."""
    _check_inputs("layer_norm_forward", x, weight, bias)
    y, mean, rstd = _forward(_rows(x), weight, bias, eps, cfg, alloc)
    return _shaped(y, x), mean, rstd


def _shaped(t, like):
    """``t`` (h, w) with ``like``'s shape: itself when ``like`` is a matrix (a ``view`` costs CPU time
    on every call, and an ``autograd.Function`` returning a view pays more)."""
    return t if like.dim() == 2 else t.view(like.shape)


def _forward(x2, weight, bias, eps, cfg, alloc, save=True):
    """The forward launch on checked inputs: ``x2`` (h, w) with contiguous rows. ``save=False``: the kernel
    does not store the statistics, and ``mean`` and ``rstd`` come back as None (one allocation instead of
    three: 19 µs of CPU less a call in notebook 10's run on an H100 host, 26.5 against 45.5 µs, where
    nothing needs a gradient)."""
    h, w = x2.shape
    cfg = cfg or _config(w, h, x2.device)
    y = alloc(h, w, dtype=x2.dtype, device=x2.device)
    if save:
        sd = _stats_dtype(x2.dtype)
        mean = alloc(h, dtype=sd, device=x2.device)
        rstd = alloc(h, dtype=sd, device=x2.device)
    else:
        mean = rstd = None
    weight, bias = weight.contiguous(), bias.contiguous()
    _fwd_launch((h,), _fwd_key(x2, weight, bias), x2, weight, bias, y, y if mean is None else mean,
                y if rstd is None else rstd, x2.stride(0), y.stride(0), w, eps, **_fwd_consts(cfg, x2.dtype, save))
    return y, mean, rstd


# What Triton specialises each kernel on beyond its constexprs (the launchers' keys), and the constexprs
# in the order the launchers pass them: the C++ node (.node) finds the kernels a launch compiled by them.
def _fwd_key(x2, weight, bias):
    # y, mean and rstd are fresh: aligned, rows of w
    return (x2.dtype, weight.dtype, bias.dtype, aligned(x2), aligned(weight), aligned(bias),
            int_kind(x2.stride(0)), int_kind(x2.shape[1]))


def _fwd_consts(cfg, dtype, save):
    return dict(BLOCK_W=cfg["BLOCK_W"], ACC=_acc(dtype), SAVE_STATS=save, num_warps=cfg["num_warps"])


def _dx_key(dy_dtype, dy_aligned, dy_stride, x2, weight, mean_aligned, rstd_aligned, groups):
    h, w = x2.shape
    return (dy_dtype, x2.dtype, weight.dtype, dy_aligned, aligned(x2), aligned(weight), mean_aligned,
            rstd_aligned, int_kind(dy_stride), int_kind(x2.stride(0)), int_kind(h), int_kind(w), int_kind(groups))


def _dx_consts(cfg, dtype):
    return dict(BLOCK_W=cfg["BLOCK_W"], ACC=_acc(dtype), num_warps=cfg["num_warps"])


def _dwdb_key(dtype, wdtype, groups, w):
    return (dtype, wdtype, int_kind(groups), int_kind(w))


def _dwdb_consts(dtype):
    return dict(BLOCK_G=32, BLOCK_N=_BLOCK_N, ACC=_acc(dtype), num_warps=4)


def layer_norm_backward(dy, x, weight, mean, rstd, cfg=None, alloc=torch.empty):
    """Gradients ``(dx, dweight, dbias)`` of LayerNorm, from the output gradient ``dy``, the input
    ``x``, ``weight`` and the ``mean`` and ``rstd`` saved by :func:`layer_norm_forward`."""
    _check_inputs("layer_norm_backward", x, weight)
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"layer_norm_backward: dy has shape {tuple(dy.shape)}, x {tuple(x.shape)}")
    x2 = _rows(x)
    h = x2.shape[0]
    if mean.numel() != h or rstd.numel() != h:
        raise ValueError(f"layer_norm_backward: mean and rstd need one value per row ({h}); got "
                         f"{mean.numel()} and {rstd.numel()}")
    dx, dw, db = _backward(_rows(dy), x2, weight, mean.contiguous(), rstd.contiguous(), cfg, alloc)
    return _shaped(dx, x), dw, db


def layer_norm_backward_partials(dy, x, weight, mean, rstd, groups, alloc=torch.empty):
    """The backward's first kernel alone, with ``groups`` programs: ``(dx, part)``, ``dx`` shaped like
    ``x`` in its dtype, ``part`` the ``[2, groups, w]`` buffer of partial ``dweight`` and ``dbias`` sums
    (fp32; fp64 for fp64 x) that :func:`layer_norm_backward`'s second kernel adds up (notebook 10's
    exercise 2 wraps it in a custom op)."""
    _check_inputs("layer_norm_backward_partials", x, weight)
    rows = x.numel() // x.shape[-1]
    if tuple(dy.shape) != tuple(x.shape) or mean.numel() != rows or rstd.numel() != rows:
        raise ValueError("layer_norm_backward_partials: dy must have x's shape, mean and rstd one value a row")
    x2 = _rows(x)
    cfg = dict(_config(x2.shape[1], x2.shape[0], x2.device), GROUPS=int(groups))
    dx, part, _ = _backward_dx(_rows(dy), x2, weight, mean.contiguous(), rstd.contiguous(), cfg, alloc)
    return _shaped(dx, x), part


def _backward_dx(dy2, x2, weight, mean, rstd, cfg, alloc):
    """The backward's first launch (``dx`` and the partial sums) on checked inputs: ``(dx, part, weight)``."""
    h, w = x2.shape
    groups = cfg["GROUPS"]
    sd = _stats_dtype(x2.dtype)
    dx = alloc(h, w, dtype=x2.dtype, device=x2.device)
    part = alloc(2, groups, w, dtype=sd, device=x2.device)  # every row written by its program
    weight = weight.contiguous()
    key = _dx_key(dy2.dtype, aligned(dy2), dy2.stride(0), x2, weight, aligned(mean), aligned(rstd), groups)
    _dx_launch((groups,), key, dy2, x2, weight, mean, rstd, dx, part, dy2.stride(0), x2.stride(0),
               dx.stride(0), h, w, groups, **_dx_consts(cfg, x2.dtype))
    return dx, part, weight


def _backward(dy2, x2, weight, mean, rstd, cfg, alloc):
    """The backward's two launches on checked inputs (``dy2``, ``x2``: (h, w) with contiguous rows;
    ``mean``, ``rstd`` contiguous): ``(dx, dweight, dbias)``, ``dx`` (h, w)."""
    h, w = x2.shape
    cfg = cfg or _config(w, h, x2.device)
    groups = cfg["GROUPS"]
    dx, part, weight = _backward_dx(dy2, x2, weight, mean, rstd, cfg, alloc)
    dw = alloc(w, dtype=weight.dtype, device=x2.device)
    db = alloc(w, dtype=weight.dtype, device=x2.device)
    _dwdb_launch((cdiv(w, _BLOCK_N),), _dwdb_key(x2.dtype, weight.dtype, groups, w), part, dw, db, groups, w,
                 **_dwdb_consts(x2.dtype))
    return dx, dw, db


_BLOCK_N = 128   # columns per program of the dweight/dbias reduction
# The three kernels' launchers: after a shape's first call they skip kernel[grid]'s per-call work
# (binding, specialising, hashing: ~12 µs of CPU a launch on an H100 host; gpu_course.triton_launch).
_fwd_launch = Launcher(layer_norm_fwd_kernel)
_dx_launch = Launcher(layer_norm_bwd_dx_kernel)
_dwdb_launch = Launcher(layer_norm_bwd_dwdb_kernel)


GELU_BLOCK = 1024


def gelu_forward(x, alloc=torch.empty):
    """GeLU (erf form, like ``torch.nn.functional.gelu``) of every element of ``x``, one kernel."""
    _check_elementwise("gelu_forward", x)
    xc = x.contiguous()
    y = alloc(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    gelu_fwd_kernel[(cdiv(n, GELU_BLOCK),)](xc, y, n, BLOCK=GELU_BLOCK, ACC=_acc(x.dtype))
    return y


def gelu_backward(dy, x, alloc=torch.empty):
    """``dy * gelu'(x)``, elementwise, one kernel (the backward of :func:`gelu_forward`)."""
    _check_elementwise("gelu_backward", x)
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"gelu_backward: dy has shape {tuple(dy.shape)}, x {tuple(x.shape)}")
    dx = alloc(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    gelu_bwd_kernel[(cdiv(n, GELU_BLOCK),)](dy.contiguous(), x.contiguous(), dx, n, BLOCK=GELU_BLOCK,
                                            ACC=_acc(x.dtype))
    return dx


def _check_elementwise(name, x):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: x must be a tensor, got {type(x).__name__}")
    if x.dtype not in DTYPES:
        raise TypeError(f"{name}: x is {x.dtype}; the kernels take {', '.join(str(d) for d in DTYPES)}")
