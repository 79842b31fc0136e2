"""Notebook 06's fused softmax in Triton, timed by ``bench/triton_basics_bench.py``: each program
holds ``ROWS`` whole rows, so a row is read once and written once (2 x 4 bytes per element), and
short rows are packed several to a program. :func:`softmax_config` picks the block, rows and warps
for a row length; :func:`softmax` takes another ``cfg`` for sweeps.

Notebook 06's sweep over row lengths: :func:`softmax_sweep` times it against ``torch.softmax`` on a
GPU and records each width (``save_result``); :func:`stored_softmax_sweep` reads the same rows back
from a stored GPU run (what the notebook shows on a CPU); :func:`sweep_table` prints either.

>>> softmax_config(777)
{'BLOCK_W': 1024, 'ROWS': 1, 'num_warps': 2}
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..checking import check, poisoned
from ..device_ceilings import throughput
from ..launch import cdiv
from ..mode import DEVICE
from ..results import save_result, stored_results
from ..timing import bench

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
    softmax_rows_kernel[(cdiv(h, cfg["ROWS"]),)](x, out, x.stride(0), out.stride(0), h, w, **cfg)
    return out


SWEEP_FLOATS = 2**26  # 256 MB of fp32 per point: every row length moves the same bytes
SWEEP_W = [128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384]


def softmax_sweep(notebook, widths=SWEEP_W, floats=SWEEP_FLOATS, reps=None) -> list:
    """Time :func:`softmax` and ``torch.softmax`` (L2 flushed before each run) on ``floats`` fp32
    values in rows of each width in ``widths``, after checking the result, and record each width
    with ``save_result`` under ``notebook`` (on a GPU). One dict per width: ``w``, ``triton`` and
    ``torch`` (GB/s, counting the bytes read and written), ``ceiling`` (the measured copy rate)
    and ``device``.

    >>> [sorted(row) for row in softmax_sweep("doc", widths=[16], floats=64, reps=1)]
    [['ceiling', 'device', 'torch', 'triton', 'w']]
    """
    rows = []
    for w in widths:
        h = floats // w
        x = torch.randn(h, w, device=DEVICE)
        check(softmax(x, alloc=poisoned), torch.softmax(x, dim=1), atol=1e-6, rtol=1e-5,
              name=f"softmax {h}x{w}")  # check before timing
        t_torch = bench(torch.softmax, x, 1, l2_flush=True, reps=reps)
        t = bench(softmax, x, l2_flush=True, reps=reps)
        achieved = throughput(t, nbytes=2 * x.nbytes)
        save_result(notebook, "softmax (triton)", f"{h}x{w}", t, achieved, baseline=t_torch)
        rows.append(dict(w=w, triton=achieved.value, torch=2 * x.nbytes / t_torch.median / 1e6,
                         ceiling=achieved.ceiling, device=t.device))
    return rows


def stored_softmax_sweep(notebook, rows=None) -> list:
    """The rows of :func:`softmax_sweep`, from the results a GPU run stored for ``notebook`` (an
    H100's if there are several GPUs'; ``rows``: result rows to read instead of the stored ones),
    sorted by width; empty if there are none.

    >>> r = dict(kernel="softmax (triton)", size="4x128", device="GPU", rate="100", baseline_ms="0.04",
    ...          pct_of_ceiling="50")
    >>> stored_softmax_sweep("06", rows=[r])
    [{'w': 128, 'triton': 100.0, 'torch': 0.1024, 'ceiling': 200.0, 'device': 'GPU'}]
    """
    stored = [r for r in (stored_results(notebook=notebook) if rows is None else rows)
              if r["kernel"] == "softmax (triton)"]
    devices = sorted({r["device"] for r in stored}, key=lambda d: ("H100" not in d, d))
    out = []
    for r in stored:
        if r["device"] != devices[0]:
            continue
        h, w = (int(v) for v in r["size"].split("x"))
        rate = float(r["rate"])
        out.append(dict(w=w, triton=rate, torch=2 * 4 * h * w / float(r["baseline_ms"]) / 1e6,
                        ceiling=rate * 100 / float(r["pct_of_ceiling"]), device=r["device"]))
    return sorted(out, key=lambda row: row["w"])


def sweep_table(sweep) -> str:
    """The rows of a sweep as a text table: GB/s of both, their ratio, the % of the copy ceiling.

    >>> print(sweep_table([dict(w=128, triton=100.0, torch=80.0, ceiling=200.0, device="GPU")]))
         w  Triton GB/s  torch GB/s  vs torch  % of copy
       128          100          80     1.25x        50%
    """
    lines = [f"{'w':>6} {'Triton GB/s':>12} {'torch GB/s':>11} {'vs torch':>9} {'% of copy':>10}"]
    for row in sweep:
        lines.append(f"{row['w']:>6} {row['triton']:>12,.0f} {row['torch']:>11,.0f} "
                     f"{row['triton'] / row['torch']:>8.2f}x {100 * row['triton'] / row['ceiling']:>9.0f}%")
    return "\n".join(lines)
