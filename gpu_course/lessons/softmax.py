"""Notebook 06's sweep of the fused softmax (:mod:`gpu_course.kernels.triton_softmax`) over row lengths:
:func:`softmax_sweep` times it against ``torch.softmax`` on a GPU and records each width (``save_result``);
:func:`stored_softmax_sweep` reads the same rows back from a stored GPU run (what the notebook shows on a
CPU); :func:`sweep_table` prints either."""
from __future__ import annotations

import torch

from ..checking import check, poisoned
from ..device_ceilings import throughput
from ..kernels.triton_softmax import softmax
from ..mode import DEVICE
from ..results import save_result, stored_results
from ..timing import bench

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
