"""The Triton kernels of notebook 10, and nothing else: LayerNorm's forward (one program per row), its
backward's two kernels (``dx`` with each program's partial ``dweight`` and ``dbias`` sums, then the sum of the
partials over the programs), and GeLU's forward and backward (elementwise). The notebook shows their source.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..triton_matmul import gelu as gelu_erf  # the erf GeLU of notebook 07's epilogue


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
