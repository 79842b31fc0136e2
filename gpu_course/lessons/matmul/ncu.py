"""Notebook 04's Nsight Compute run: one launch each of rungs 6, 7 and 8 at 4096³, from a small script that loads the
notebook's build from ``load_cuda``'s cache, with the shared-memory counters (load instructions, wavefronts, bank
conflicts), the FFMA count, how busy the FMA pipe was, and the warp-stall reasons (``WarpStateStats``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...profiling import limiters, ncu_counted, ncu_raw_rows

METRICS = {"smsp__inst_executed_op_shared_ld.sum": "shared-load instructions (warps)",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "shared-load wavefronts",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "bank conflicts of shared loads",
           "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": "FFMA by threads",
           "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "FMA pipe busy, %"}
KERNELS = {6: "mm_vec_k", 7: "mm_pipe_k", 8: "mm_warp_k"}   # rung -> its kernel's name
SIZE = 4096
_SCRIPT = """import json, sys, torch, utils
b = json.load(open(sys.argv[1]))
mod = utils.load_cuda(b["cuda_src"], b["cpp_src"], b["funcs"])    # the notebook's build, from the cache
m, n = torch.randn({n}, {n}, device=utils.DEVICE), torch.randn({n}, {n}, device=utils.DEVICE)
o = torch.empty({n}, {n}, device=utils.DEVICE)
for rung in {rungs}:
    mod.matmul_rung(m, n, o, rung)
utils.synchronize()
"""


@dataclass
class RungCounters:
    """What ncu measured per rung: ``values``: rung -> {metric: value}; ``stalls``: rung -> the largest warp-stall
    reasons as (reason, warps per issued instruction); ``command`` as shown; ``problem``: why there are none."""
    values: dict = field(default_factory=dict)
    stalls: dict = field(default_factory=dict)
    command: str = ""
    problem: str | None = None

    def per_fma(self, rung: int, metric: str) -> float:
        """``metric`` per multiply-add (per FFMA executed by a thread)."""
        v = self.values[rung]
        return v[metric] / v["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"]


def counters_from_raw(text: str, rungs=tuple(KERNELS), stalls: int = 3) -> RungCounters:
    """Read ``ncu --csv --page raw`` output (only its CSV lines are used) into :class:`RungCounters`, one profiled
    launch per rung of ``rungs``, recognised by its kernel's name."""
    lines = [l for l in text.splitlines() if l.startswith('"')]
    out = RungCounters()
    if not lines:
        return out
    for row in ncu_raw_rows("\n".join(lines) + "\n"):
        rung = next((r for r in rungs if KERNELS[r] in row.get("Kernel Name", "")), None)
        if rung is None or rung in out.values:
            continue
        vals = {m: row[m][0] for m in METRICS if isinstance(row.get(m), tuple) and isinstance(row[m][0], float)}
        if len(vals) == len(METRICS):
            out.values[rung] = vals
            out.stalls[rung] = limiters(row, stalls=stalls)["stalls"]
    return out


def profile_rungs(cuda_src: str, cpp_src: str, funcs: list, rungs=(6, 7, 8), timeout: float = 300) -> RungCounters:
    """Profile one launch of each of ``rungs`` at 4096³ under ncu (:data:`METRICS` and the ``WarpStateStats``
    section). Never raises: no ncu, a failure or missing counters come back as ``problem``."""
    regex = "|".join(KERNELS[r] for r in rungs)
    args = ["--kernel-name", f"regex:{regex}", "--section", "WarpStateStats", "--metrics", ",".join(METRICS),
            "--csv", "--page", "raw"]
    shown = f"$ ncu --kernel-name regex:'{regex}' --section WarpStateStats --metrics {','.join(METRICS)} " \
            f"--csv --page raw python3 rungs.py"
    return ncu_counted(args, shown, _SCRIPT.format(n=SIZE, rungs=tuple(rungs)),
                       dict(cuda_src=cuda_src, cpp_src=cpp_src, funcs=funcs), lambda text: counters_from_raw(text, rungs),
                       len(rungs), "every rung", RungCounters, timeout)


def counter_table(c: RungCounters) -> str:
    """Per rung: each metric of :data:`METRICS` in millions (the FMA pipe in %), then its largest stall reasons."""
    labels = {"shared-load instructions (warps)": "LDS instr.", "shared-load wavefronts": "wavefronts",
              "bank conflicts of shared loads": "conflicts", "FFMA by threads": "FFMA", "FMA pipe busy, %": "FMA %"}
    lines = ["millions of:" + "".join(f"{labels[l]:>12s}" for l in METRICS.values())]
    for rung, vals in c.values.items():
        lines.append(f"rung {rung:<7d}" + "".join(f"{v:12.1f}" if m.endswith("pct_of_peak_sustained_active")
                                                 else f"{v / 1e6:12,.1f}" for m, v in vals.items()))
    for rung, st in c.stalls.items():
        lines.append(f"rung {rung} stalls (warps waiting per issued instruction): "
                     + (", ".join(f"{n} {v:.2f}" for n, v in st) or "none reported"))
    return "\n".join(lines)
