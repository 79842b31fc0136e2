"""Notebook 03's Nsight Compute run: the grid-stride GeLU (U = 1) on several grids (one thread per float4, and
multiples of the blocks the SMs hold at once), one launch each, from a small script that loads the notebook's build
from ``load_cuda``'s cache. Read per grid: the kernel's time, how long the least, the average and the most busy SM
were active (an uneven finish shows as a gap between them), and the DRAM bytes and throughput (a change in how the
memory is used would show there)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..profiling import TO_BASE_UNITS, ncu_counted, ncu_raw_rows

METRICS = {"gpu__time_duration.sum": "time",
           "sm__cycles_active.min": "least busy SM, cycles active",
           "sm__cycles_active.avg": "average SM, cycles active",
           "sm__cycles_active.max": "busiest SM, cycles active",
           "dram__bytes_read.sum": "DRAM bytes read",
           "dram__bytes_write.sum": "DRAM bytes written",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput, % of peak"}
KERNEL = "gelu_fast_k"
_SCRIPT = """import json, sys, torch, utils
b = json.load(open(sys.argv[1]))
mod = utils.load_cuda(b["cuda_src"], b["cpp_src"], b["funcs"])    # the notebook's build, from the cache
x = torch.randn(b["n"], device=utils.DEVICE)
out = torch.empty_like(x)
for blocks in b["grids"]:
    mod.gelu_fast(x, out, blocks, b["threads"], 1)
utils.synchronize()
"""
_GRID = re.compile(r"\(?\s*(\d+)")


@dataclass
class GridCounters:
    """What ncu measured per grid: ``values``: label -> {metric: value} (time in µs, bytes, cycles, %); ``command``
    as shown; ``problem``: why there are none."""
    values: dict = field(default_factory=dict)
    command: str = ""
    problem: str | None = None

    def spread(self, label: str) -> float:
        """The least busy SM's active cycles over the busiest's: 1.0 where every SM finished together."""
        v = self.values[label]
        return v["sm__cycles_active.min"] / v["sm__cycles_active.max"]


def counters_from_raw(text: str, grids: dict) -> GridCounters:
    """Read ``ncu --csv --page raw`` output (only its CSV lines) into :class:`GridCounters`: each launch of
    :data:`KERNEL` is matched to the label of ``grids`` (label -> blocks) whose block count its grid size shows.

    >>> units = ["", "", "", "nsecond", "cycle", "cycle", "Kcycle", "Mbyte", "Kbyte", "%"]
    >>> rows = [["ID", "Kernel Name", "Grid Size", *METRICS], units,
    ...         ["0", "void gelu_fast_k<1>(const float *, float *, int)", "(1056, 1, 1)", "273,568", *"123456"]]
    >>> c = counters_from_raw("\\n".join(",".join(f'"{v}"' for v in r) for r in rows), {"1x": 1056, "2x": 2112})
    >>> v = c.values["1x"]
    >>> v["gpu__time_duration.sum"], v["dram__bytes_read.sum"], round(c.spread("1x"), 4), list(c.values)
    (273.568, 4000000.0, 0.0003, ['1x'])
    """
    lines = [l for l in text.splitlines() if l.startswith('"')]
    out = GridCounters()
    if not lines:
        return out
    by_blocks = {b: label for label, b in grids.items()}
    for row in ncu_raw_rows("\n".join(lines) + "\n"):
        m = _GRID.match(row.get("Grid Size", ""))
        label = by_blocks.get(int(m.group(1))) if m and KERNEL in row.get("Kernel Name", "") else None
        if label is None or label in out.values:
            continue
        vals = {k: row[k][0] * TO_BASE_UNITS.get(row[k][1], float("nan")) for k in METRICS
                if isinstance(row.get(k), tuple) and isinstance(row[k][0], float)}   # in base units, time in µs
        if len(vals) == len(METRICS):
            out.values[label] = vals
    return out


def profile_grids(cuda_src: str, cpp_src: str, funcs: list, n: int, threads: int, grids: dict,
                  timeout: float = 300) -> GridCounters:
    """Profile one launch of ``gelu_fast(x, out, blocks, threads, 1)`` on ``n`` floats for each ``grids`` (label ->
    blocks, all different) under ncu (:data:`METRICS`). Never raises: no ncu, a failure or missing counters come
    back as ``problem``."""
    if len(set(grids.values())) != len(grids):
        raise ValueError(f"profile_grids: the grids must differ in their block counts, got {grids}")
    args = ["--kernel-name", f"regex:{KERNEL}", "--metrics", ",".join(METRICS), "--csv", "--page", "raw",
            "--print-units", "base"]
    shown = f"$ ncu --kernel-name regex:{KERNEL} --metrics {','.join(METRICS)} --csv --page raw --print-units base " \
            "python3 grids.py"
    build = dict(cuda_src=cuda_src, cpp_src=cpp_src, funcs=funcs, n=n, threads=threads, grids=list(grids.values()))
    return ncu_counted(args, shown, _SCRIPT, build, lambda text: counters_from_raw(text, grids), len(grids),
                       "every grid", GridCounters, timeout)


def grid_table(c: GridCounters) -> str:
    """Per grid: time (µs, under ncu), the SMs' active cycles (thousands: least, average, most busy, and least over
    most), the DRAM bytes moved (MB, read + written) and the DRAM throughput (% of peak)."""
    w = max(len(label) for label in c.values) + 1
    lines = [f"{'':<{w}}{'µs':>8}{'SM kcycles: min':>17}{'avg':>7}{'max':>7}{'min/max':>9}{'DRAM MB':>9}{'DRAM %':>8}"]
    for label, v in c.values.items():
        k = [v[f"sm__cycles_active.{s}"] / 1e3 for s in ("min", "avg", "max")]
        mb = (v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"]) / 1e6
        lines.append(f"{label:<{w}}{v['gpu__time_duration.sum']:8.1f}{k[0]:17.1f}{k[1]:7.1f}{k[2]:7.1f}"
                     f"{c.spread(label):9.2f}{mb:9.1f}{v['dram__throughput.avg.pct_of_peak_sustained_elapsed']:8.1f}")
    return "\n".join(lines)
