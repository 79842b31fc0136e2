"""Kernels for notebook 10 (autograd, custom ops and ``torch.compile``), timed by
``bench/layernorm.py``: a row LayerNorm with its backward, and a GeLU with its backward, each in
Triton, each wrapped two ways:

* a ``torch.autograd.Function`` (:class:`LayerNorm`, :class:`GeLU`; called through
  :func:`layer_norm` and :func:`gelu`): enough for eager autograd; under ``torch.compile`` Dynamo
  must trace through the Python launchers and the Triton launches themselves (on a GPU it has
  support for user-written Triton kernels; under the CPU interpreter it fails, tracing the
  interpreter's own code);
* a custom operator (``torch.ops.gpu_course.layer_norm`` and ``torch.ops.gpu_course.gelu``, called
  through :func:`layer_norm_op` and :func:`gelu_op`): ``torch.library.custom_op`` declares it,
  ``register_fake`` tells the compiler the shapes and dtypes of its outputs without running it, and
  ``register_autograd`` gives it the Triton backward (itself a custom op), so that
  ``torch.compile(fullgraph=True)`` keeps it in the graph as one opaque call.

LayerNorm over the last dimension, ``w`` features per row (``h`` rows, any row stride):

* forward, one program per row: mean and variance in fp32 (fp64 for fp64 input), ``y = (x - mean)
  * rstd * weight + bias``; the mean and ``rstd = 1 / sqrt(var + eps)`` of each row are saved;
* backward, ``GROUPS`` programs, program ``g`` owning rows ``g, g + GROUPS, ...``: for each row,
  ``dx = rstd * (wdy - mean(wdy) - xhat * mean(wdy * xhat))`` with ``xhat = (x - mean) * rstd`` and
  ``wdy = weight * dy``, while it adds the row's ``dy * xhat`` and ``dy`` to its own fp32 partial
  ``dweight`` and ``dbias`` rows; it writes them once, to row ``g`` of each half of a
  ``[2, GROUPS, w]`` buffer (no locks, no atomics: the result does not depend on timing); a second
  kernel sums each half over the groups.

The launchers call each kernel through a ``gpu_course.triton_launch.Launcher``: after a shape's first
call, the compiled kernel is launched without ``kernel[grid]``'s per-call binding and hashing (a
training step calls them on every step, and their GPU time is a few tens of µs).

What notebook 10 and ``bench/layernorm.py`` compare these with (eager torch, ``torch.compile``, CUDA graphs,
autograd's threads, the launchers' CPU layers) is in :mod:`gpu_course.lessons.layernorm`.

Inputs are fp32, fp16 or bf16 (fp64 too, for ``gradcheck``); statistics and sums are in fp32 (fp64
for fp64), outputs in the input's dtype. Rows longer than :data:`MAX_W` are refused (a row lives in
one program's registers).

>>> layer_norm_config(777, groups=8)
{'BLOCK_W': 1024, 'num_warps': 4, 'GROUPS': 8}
>>> x = torch.randn(5, 300, device=DEVICE)
>>> wt, b = torch.ones(300, device=DEVICE), torch.zeros(300, device=DEVICE)
>>> torch.allclose(layer_norm(x, wt, b), torch.nn.functional.layer_norm(x, (300,), wt, b), atol=1e-5)
True
"""
from __future__ import annotations

from pathlib import Path

import torch
import triton
import triton.language as tl

from . import num_warps_for
from ..launch import cdiv
from ..hardware import sm_count
from ..mode import DEVICE, ON_GPU
from ..triton_launch import Launcher, aligned, direct_allowed, int_kind
from .triton_matmul import gelu as gelu_erf  # the erf GeLU of notebook 07's epilogue

MAX_W = 16384          # features per row: a row (and, backward, its partial sums) lives in registers
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_ACC = {torch.float64: tl.float64}  # the dtype of statistics and sums: fp32 unless the input is fp64


# ------------------------------------------------------------------------------------ kernels
@triton.jit
def layer_norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, x_row_stride, y_row_stride,
                          w, eps, BLOCK_W: tl.constexpr, ACC: tl.constexpr, SAVE_STATS: tl.constexpr = True):
    row = tl.program_id(0)                       # one program per row
    c = tl.arange(0, BLOCK_W)
    ok = c < w
    x = tl.load(x_ptr + row * x_row_stride + c, mask=ok, other=0.0).to(ACC)
    mean = tl.sum(x, axis=0) / w
    d = tl.where(ok, x - mean, 0.0)              # the padding must not count in the variance
    var = tl.sum(d * d, axis=0) / w
    rstd = 1.0 / tl.sqrt(var + eps)
    wt = tl.load(w_ptr + c, mask=ok, other=0.0).to(ACC)
    b = tl.load(b_ptr + c, mask=ok, other=0.0).to(ACC)
    y = d * rstd * wt + b
    tl.store(y_ptr + row * y_row_stride + c, y.to(y_ptr.dtype.element_ty), mask=ok)
    if SAVE_STATS:                               # saved for the backward (not when nothing needs a gradient)
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)


@triton.jit
def layer_norm_bwd_dx_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, part_ptr, dy_row_stride,
                             x_row_stride, dx_row_stride, h, w, groups, BLOCK_W: tl.constexpr, ACC: tl.constexpr):
    g = tl.program_id(0)                         # this program owns rows g, g + groups, ...
    c = tl.arange(0, BLOCK_W)
    ok = c < w
    wt = tl.load(w_ptr + c, mask=ok, other=0.0).to(ACC)
    dw = tl.zeros((BLOCK_W,), dtype=ACC)         # this program's partial sums, in registers
    db = tl.zeros((BLOCK_W,), dtype=ACC)
    for row in range(g, h, groups):
        x = tl.load(x_ptr + row * x_row_stride + c, mask=ok, other=0.0).to(ACC)
        dy = tl.load(dy_ptr + row * dy_row_stride + c, mask=ok, other=0.0).to(ACC)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(ok, (x - mean) * rstd, 0.0)
        wdy = wt * dy                            # 0 in the padding: wt and dy were loaded as 0 there
        c1 = tl.sum(xhat * wdy, axis=0) / w
        c2 = tl.sum(wdy, axis=0) / w
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row * dx_row_stride + c, dx.to(dx_ptr.dtype.element_ty), mask=ok)
        dw += dy * xhat
        db += dy
    tl.store(part_ptr + g * w + c, dw, mask=ok)  # row g of each half of the [2, groups, w] buffer
    tl.store(part_ptr + (groups + g) * w + c, db, mask=ok)


@triton.jit
def layer_norm_bwd_dwdb_kernel(part_ptr, dw_ptr, db_ptr, groups, w,
                               BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    c = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)  # BLOCK_N columns, all the groups
    col_ok = c < w
    dw = tl.zeros((BLOCK_G, BLOCK_N), dtype=ACC)
    db = tl.zeros((BLOCK_G, BLOCK_N), dtype=ACC)
    for g0 in range(0, groups, BLOCK_G):
        g = g0 + tl.arange(0, BLOCK_G)
        ok = (g[:, None] < groups) & col_ok[None, :]
        offs = g[:, None] * w + c[None, :]
        dw += tl.load(part_ptr + offs, mask=ok, other=0.0)               # dweight's partial sums
        db += tl.load(part_ptr + groups * w + offs, mask=ok, other=0.0)  # dbias's, after them
    tl.store(dw_ptr + c, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=col_ok)
    tl.store(db_ptr + c, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def gelu_fwd_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, ACC: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    x = tl.load(x_ptr + i, mask=ok, other=0.0).to(ACC)
    tl.store(y_ptr + i, gelu_erf(x).to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def gelu_bwd_kernel(dy_ptr, x_ptr, dx_ptr, n, BLOCK: tl.constexpr, ACC: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    x = tl.load(x_ptr + i, mask=ok, other=0.0).to(ACC)
    dy = tl.load(dy_ptr + i, mask=ok, other=0.0).to(ACC)
    cdf = 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476))  # d/dx [x * cdf(x)] = cdf + x * pdf
    pdf = tl.exp(-0.5 * x * x) * 0.3989422804014327
    tl.store(dx_ptr + i, (dy * (cdf + x * pdf)).to(dx_ptr.dtype.element_ty), mask=ok)


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
# in the order the launchers pass them: the C++ node (below) finds the kernels a launch compiled by them.
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


def layer_norm_op(x, weight, bias, eps=1e-5):
    """LayerNorm for a model: the custom op ``torch.ops.gpu_course.layer_norm`` (``y`` only) while
    ``torch.compile`` traces, so that ``fullgraph=True`` keeps the Triton kernels in its graph as one
    opaque call; in eager mode the same launchers through :class:`LayerNorm` (or the forward launcher
    alone when nothing needs a gradient), because a Python custom op's dispatch costs tens of µs of CPU a
    call (notebook 10's H100 run: ~43 µs forward, ~150 µs forward + backward; see pytorch/pytorch#176592
    and #177109), about as much as the forward kernel takes on the GPU. Neither wrapper's backward is
    itself differentiable (it launches kernels autograd cannot see): no second derivative through it."""
    if torch.compiler.is_compiling():
        return torch.ops.gpu_course.layer_norm(x, weight, bias, eps)[0]
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return LayerNorm.apply(x, weight, bias, eps)
    _check_inputs("layer_norm", x, weight, bias)     # nothing to differentiate: no graph node, no statistics
    return _shaped(_forward(_rows(x), weight, bias, eps, None, torch.empty, save=False)[0], x)


def gelu_op(x):
    """GeLU for a model: the custom op ``torch.ops.gpu_course.gelu`` under ``torch.compile``, and
    :class:`GeLU` in eager mode (as :func:`layer_norm_op`)."""
    if torch.compiler.is_compiling():
        return torch.ops.gpu_course.gelu(x)
    if torch.is_grad_enabled() and x.requires_grad:
        return GeLU.apply(x)
    return gelu_forward(x)


# ------------------------------------------- wrapper 3: a C++ autograd node launching the same kernels
# Autograd runs a CUDA backward on a worker thread of its own. A Python backward there costs that thread
# the interpreter and Triton's Python launcher on every step: ~116 µs for ours' backward on an H100 host,
# against ~57 µs for the same Python on the calling thread. The node (cuda/layer_norm/node.cpp) is a
# C++ autograd Function whose forward and backward launch the kernels the Python path compiled, with
# cuLaunchKernel: no Python runs on the worker thread at all.
NODE_SOURCE = Path(__file__).parent / "cuda" / "layer_norm" / "node.cpp"
_NODE = {"mod": None, "why": "not built yet: ln.build_node() builds it"}
_NODE_IDS = {}   # (device, the three keys, config) -> the node's kernel ids, or None where it cannot launch them
_NODE_SIGS = {}  # a matrix call's argument kinds (layer_norm_node) -> the node's kernel ids, once checked


def build_node(verbose=False):
    """Build the C++ node's extension from :data:`NODE_SOURCE` with torch's ``cpp_extension`` (about a
    minute the first time; later sessions load it from the course's build cache) and turn
    :func:`layer_norm_node` on. Returns True when it is ready; otherwise False, and
    :func:`node_status` says why (cpu mode: the node launches compiled GPU kernels through the CUDA
    driver; a failed build: its first error lines). Never raises for a failed build."""
    if _NODE["mod"] is not None:
        return True
    if not ON_GPU:
        _NODE["why"] = ("cpu mode: the node launches compiled GPU kernels through the CUDA driver; "
                        "layer_norm_node runs layer_norm_op here")
        return False
    from torch.utils.cpp_extension import load
    from ..cuda.cache_files import cache_dir
    build = cache_dir("cuda") / "layer_norm_node"
    build.mkdir(parents=True, exist_ok=True)
    try:
        _NODE["mod"] = load(name="gpu_course_layer_norm_node", sources=[str(NODE_SOURCE)], extra_cflags=["-O2"],
                            extra_ldflags=["-ldl"], build_directory=str(build), verbose=verbose)
    except Exception as e:  # a compiler's error: say it, keep the Python path
        _NODE["why"] = "the build failed: " + " ".join(str(e).split())[:300]
        return False
    _NODE["why"] = None
    return True


def node_status():
    """None when :func:`layer_norm_node` launches through the C++ node, else why it does not."""
    return _NODE["why"]


def _node_kernel(ck, nargs):
    """Register compiled kernel ``ck`` (``nargs`` runtime arguments) with the node: its id, or None where
    a launch through ``cuLaunchKernel`` would not be the launch Triton makes (an argument type other
    than a pointer, i32, i64 or fp32; scratch memory; a cluster of programs)."""
    meta, sig = ck.metadata, list(ck.src.signature.values())
    if (getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0)
            or getattr(meta, "num_ctas", 1) != 1 or len(sig) < nargs or any(t != "constexpr" for t in sig[nargs:])):
        return None
    codes = {"i32": "i", "i64": "l", "fp32": "f", "constexpr": "-"}
    layout = "".join("p" if t.startswith("*") else codes.get(t, "?") for t in sig[:nargs])
    if "?" in layout:
        return None
    scratch = 2 if hasattr(meta, "profile_scratch_size") else 1 if hasattr(meta, "global_scratch_size") else 0
    return _NODE["mod"].add_kernel(ck.function, 32 * meta.num_warps, meta.shared, layout, scratch)


def _node_ids(x2, weight, bias, cfg):
    """The node's ids of the three kernels this call needs (forward storing the statistics; the backward's
    two for a contiguous, aligned dy, which the node makes sure of), or None until the Python path has
    compiled all three for these keys (a shape's first step) or where the node cannot launch them."""
    groups, dt = cfg["GROUPS"], x2.dtype
    keys = (_fwd_key(x2, weight, bias), _dx_key(dt, True, x2.shape[1], x2, weight, True, True, groups),
            _dwdb_key(dt, weight.dtype, groups, x2.shape[1]))
    full = (torch._C._cuda_getDevice(), keys, cfg["BLOCK_W"], cfg["num_warps"], groups)
    if full in _NODE_IDS:
        return _NODE_IDS[full]
    cks = (_fwd_launch.compiled(keys[0], **_fwd_consts(cfg, dt, True)), _dx_launch.compiled(keys[1], **_dx_consts(cfg, dt)),
           _dwdb_launch.compiled(keys[2], **_dwdb_consts(dt)))
    if None in cks:
        return None          # not compiled yet: no entry, so a later call looks again
    ids = tuple(_node_kernel(ck, n) for ck, n in zip(cks, (10, 13, 5)))
    _NODE_IDS[full] = None if None in ids else (*ids, groups, _BLOCK_N)
    return _NODE_IDS[full]


def layer_norm_node(x, weight, bias, eps=1e-5):
    """LayerNorm for a model's training step, through the C++ autograd node once :func:`build_node` has
    built it: the same kernels as :func:`layer_norm_op`, launched from C++ forward and backward. Where
    the node cannot take a call it is :func:`layer_norm_op`: before the build (and in cpu mode), while
    ``torch.compile`` traces, without gradients, while launches are recorded or hooked
    (``utils.launches``, profilers' hooks), and on a shape's first step (its kernels compile through
    the Python path)."""
    mod = _NODE["mod"]
    if (mod is None or not torch.is_grad_enabled() or not (x.requires_grad or weight.requires_grad or bias.requires_grad)
            or not direct_allowed()):
        return layer_norm_op(x, weight, bias, eps)
    # A training step calls with the same kinds of arguments every time: one look-up of everything the
    # checks and the three launch keys depend on gives the kernel ids (~5 µs; checks and keys: ~25).
    sig = None
    if x.dim() == 2 and x.stride(1) == 1 and weight.is_contiguous() and bias.is_contiguous():
        sig = (x.dtype, weight.dtype, bias.dtype, x.shape, x.stride(0), weight.shape, bias.shape, x.device,
               weight.device, bias.device, x.data_ptr() % 16, weight.data_ptr() % 16, bias.data_ptr() % 16)
        ids = _NODE_SIGS.get(sig)
        if ids is not None:
            return mod.layer_norm(x, weight, bias, eps, *ids)
    _check_inputs("layer_norm", x, weight, bias)
    x2 = _rows(x)
    h, w = x2.shape
    cfg = _config(w, h, x2.device)
    weight, bias = weight.contiguous(), bias.contiguous()
    ids = _node_ids(x2, weight, bias, cfg)
    if ids is None:
        return LayerNorm.apply(x, weight, bias, eps)
    if sig is not None:
        _NODE_SIGS[sig] = ids
    return _shaped(mod.layer_norm(x2, weight, bias, eps, *ids), x)
