"""Notebook 09's plumbing: what ``torch.use_deterministic_algorithms`` changes (:func:`deterministic`,
:func:`raised_under_flag`), kernel names shortened for print (:func:`short_kernel`), and the closing
table of every rung with the notebook's three goals (:func:`closing_rows`, :func:`goal_lines`), and bytes with no
runs for exercise 2's check (:func:`bytes_without_repeats`)."""
from __future__ import annotations

import contextlib

import torch

from ..device_ceilings import throughput
from ..mode import ON_GPU, device_name
from ..results import fmt_ratio, stored_results
from ..timing import fmt_ms, fmt_num


@contextlib.contextmanager
def deterministic():
    """``torch.use_deterministic_algorithms(True)`` for the ``with`` block, the earlier setting back after it."""
    import torch

    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def raised_under_flag(fns: dict) -> dict:
    """Call each of ``fns`` (name -> function of no argument) once, synchronized: ``{name: None}`` when it
    ran, ``{name: the first line of its RuntimeError}`` when it raised.

    >>> raised_under_flag({"fine": lambda: 1, "refused": lambda: (_ for _ in ()).throw(RuntimeError("no\\nmore"))})
    {'fine': None, 'refused': 'no'}
    """
    from ..mode import synchronize

    out = {}
    for name, fn in fns.items():
        try:
            fn()
            synchronize()
            out[name] = None
        except RuntimeError as e:
            out[name] = str(e).splitlines()[0]
    return out


def short_kernel(name: str, width: int = 60) -> str:
    """A kernel's name as the profiler gives it, without its return type and template arguments.

    >>> short_kernel("void at_cuda_detail::cub::DeviceScanKernel<AgentScanPolicy<128, 15>, float*>(float*, int)")
    'at_cuda_detail::cub::DeviceScanKernel'
    """
    name = name.split("<")[0].split("(")[0]
    return name.removeprefix("void ").strip()[:width]


def closing_rows(measured: dict, notebook: str) -> tuple:
    """The closing table's rows ``(kernel, ms, GB/s, % of the copy rate measured, torch's time over ours,
    baseline)`` and where they come from: on a GPU this run's ``measured`` (name -> (Timing, baseline
    Timing or None, baseline name, bytes)), on a CPU the results stored by a GPU run of ``notebook``.

    >>> closing_rows({}, "no such notebook")[0] if not ON_GPU else []
    []
    """
    if ON_GPU:
        rows = []
        for name, (t, base, base_name, nbytes) in measured.items():
            r = throughput(t, nbytes=nbytes)
            rows.append((name, t.median, r.value, r.pct, base.median / t.median if base else None, base_name))
        return rows, f"{device_name()}, this run"
    stored = stored_results(notebook=notebook)
    rows = [(r["kernel"], float(r["ms"]), float(r["rate"]), float(r["pct_of_ceiling"]),
             float(r["vs_baseline"]) if r["vs_baseline"] else None, r["baseline"]) for r in stored]
    return rows, (f"stored results from {stored[0]['device']}, not this machine" if stored else None)


def table_lines(rows) -> list:
    """One printed line per row of :func:`closing_rows`.

    >>> table_lines([("k", 0.5, 1000.0, 50.0, 1.25, "torch")])[0].split()
    ['k', '500.0', 'µs', '1,000', 'GB/s', '50', '%', 'copy', '1.25×', 'torch']
    >>> table_lines([("k", 0.5, 1000.0, 50.0, 0.00063, "torch")])[0].split()[-2]   # as the report lines print it
    '0.00063×'
    """
    return [f"{name:>38} {fmt_ms(ms):>10} {fmt_num(gbs):>7} GB/s {pct:4.0f} % copy" + (f"  {fmt_ratio(vs):>7} {base}" if vs else "")
            for name, ms, gbs, pct, vs, base in rows]


def goal_lines(rows, goals) -> list:
    """``goals``: ``(statement, kernel names, bound)``; each goal's value is the best ratio to its baseline
    among those kernels' rows. Returns ``(statement, value, bound)`` for each.

    >>> goal_lines([("a", 1, 1, 1, 1.2, "t"), ("b", 1, 1, 1, 0.9, "t")], [("a or b >= 1", ("a", "b"), 1.0)])
    [('a or b >= 1', 1.2, 1.0)]
    """
    ratio = {name: vs for name, _, _, _, vs, _ in rows}
    return [(statement, max((ratio.get(k) or 0) for k in kernels), bound) for statement, kernels, bound in goals]


def bytes_without_repeats(n: int, device=None) -> torch.Tensor:
    """``n`` uint8 bytes in the 32 bins of 8 grey levels (bin = byte >> 3) where no bin repeats within 32
    neighbouring bytes (byte i in bin 7 i mod 32, its low 3 bits drawn at random): every run is one byte long, so
    aggregation makes one atomic per byte, and so does merging equal bins within a window of 32 neighbours; a
    thread that counts bytes far apart together (a private histogram over its whole share) makes far fewer.

    >>> b = bytes_without_repeats(40)
    >>> (b >> 3)[:6].tolist(), len(set((b[:32] >> 3).tolist())), len(set((b[5:37] >> 3).tolist()))
    ([0, 7, 14, 21, 28, 3], 32, 32)
    """
    g = torch.Generator().manual_seed(n)
    grey = 8 * ((7 * torch.arange(n)) % 32) + torch.randint(0, 8, (n,), generator=g)
    grey = grey.to(torch.uint8)
    return grey.to(device) if device is not None else grey
