"""Notebook 06's fused softmax in Triton, timed by ``bench/triton_basics_bench.py``: each program
holds ``ROWS`` whole rows, so a row is read once and written once (2 x 4 bytes per element), and
short rows are packed several to a program. :func:`softmax_config` picks the block, rows and warps
for a row length; :func:`softmax` takes another ``cfg`` for sweeps.
Once :func:`build_route` has built the C++ route that it shares with the means, a call of a kind seen before
goes through it (:mod:`gpu_course.triton_route`). Notebook 06's sweep over row lengths is in :mod:`gpu_course.lessons.softmax`.

>>> softmax_config(777)
{'BLOCK_W': 1024, 'ROWS': 1, 'num_warps': 2}
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import triton_route
from ..launch import cdiv
from ..triton_launch import direct

MAX_W = 16384  # longer rows do not fit one program's registers well (they need an online softmax)


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, h, w,
                        BLOCK_W: tl.constexpr, ROWS: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # this program's ROWS rows
    c = tl.arange(0, BLOCK_W)
    r_in = tl.minimum(r, h - 1)                        # rows past the end re-read the last row...
    col_ok = c < w
    x = tl.load(x_ptr + r_in[:, None] * x_row_stride + c[None, :], mask=col_ok[None, :], other=-float("inf"))
    x = x - tl.max(x, axis=1)[:, None]                 # one max per row: a (ROWS,) block, broadcast back
    num = tl.exp(x)
    out = num / tl.sum(num, axis=1)[:, None]
    store_ok = (r[:, None] < h) & col_ok[None, :]      # ...and are never stored
    tl.store(out_ptr + r[:, None] * out_row_stride + c[None, :], out, mask=store_ok)


def softmax_config(w):
    """Block width, rows per program and warps: short rows are packed several to a program (at
    least 512 floats each), and a program gets one warp per 512 floats (1 to 16 warps). Tuned on an
    H100 by timing candidates: more warps than that slowed short rows down."""
    BLOCK_W = triton.next_power_of_2(w)
    ROWS = max(1, 512 // BLOCK_W)
    return dict(BLOCK_W=BLOCK_W, ROWS=ROWS, num_warps=max(1, min(16, BLOCK_W * ROWS // 512)))


def softmax(x, cfg=None, alloc=torch.empty):
    h, w = x.shape
    assert x.stride(1) == 1, "columns must be contiguous"
    if w > MAX_W:  # 16384 floats
        raise ValueError(f"softmax: rows of {w} floats do not fit in one program's registers; "
                         "that needs a loop over the row (an online softmax)")
    cfg = cfg or softmax_config(w)
    out = alloc(h, w, device=x.device)
    direct(softmax_rows_kernel)[(cdiv(h, cfg["ROWS"]),)](x, out, x.stride(0), out.stride(0), h, w, **cfg)
    return out


# ------------------------------------------------- the C++ route (gpu_course/triton_route.py, cuda/triton_route/)
ROUTE = triton_route.route("softmax_mean_route", triton_route.ROUTE_DIR / "softmax_mean.cpp")   # the means' too


def build_route(verbose=False) -> bool:
    """Build the C++ route of the softmax and the means (``cuda/triton_route/softmax_mean.cpp``; about a minute the
    first time) and turn it on for :func:`softmax` and :mod:`~gpu_course.kernels.triton_mean`'s two parallel means:
    True when it is ready, else False and ``ROUTE.why`` says why."""
    return ROUTE.build(verbose)


def route_key(x):
    """The route's key for ``softmax(x)`` (the means share its table): everything the compiled kernel's
    specialisation depends on: dtype, shape, strides, the pointer's 16-byte alignment, the devices (the tensor's
    and the current one) and the output's dtype."""
    return ("softmax", x.dtype, x.shape, x.stride(), x.data_ptr() % 16, x.device, torch._C._cuda_getDevice(),
            torch.get_default_dtype())


def _route_key(x, cfg=None, alloc=torch.empty):
    """:func:`route_key` of a call with the default configuration and output, else None (the Python path)."""
    return route_key(x) if cfg is None and alloc is torch.empty and isinstance(x, torch.Tensor) else None


def _route_entry(x, cfg=None, alloc=torch.empty):
    """The route's arguments for calls like this one: the kernel the launcher just launched, its rows a program."""
    ids = ROUTE.register((direct(softmax_rows_kernel).last, 6))
    return ids and (ids[0], softmax_config(x.shape[1])["ROWS"])


# the route in front of the launcher (softmax's source above is the launcher's)
softmax = ROUTE.front(softmax, _route_key, lambda mod, hit, x, *_, **__: mod.softmax(x, *hit), _route_entry)
