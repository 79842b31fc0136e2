"""Notebook 12's ladder timed against cuBLAS fp16: each rung (rungs with shapes autotuned first) at each size,
recorded in the results; the rows from this run or from a stored GPU run; the table with each rung's intensity."""
from __future__ import annotations

from ...kernels.tensor_cores import CONFIGS, RUNGS, autotune, flops, run
from ...mode import ON_GPU


CUBLAS = "cuBLAS fp16 (torch.matmul)"
# FLOP per byte of m and n that a block tile loads from global memory, BM BN / (BM + BN), per rung in its default shape
# (cfg 0; the autotuner may run another: notebook 12's table). Rung 6's cfg 0 runs in clusters of 2 that read n's
# tile once per pair (multicast): each block loads all of its 128 rows of m and half of its 256 columns of n.
INTENSITY = {1: 16 * 16 / 32, 2: 128 * 128 / 256, 3: 128 * 128 / 256, 4: 128 * 256 / 384, 5: 128 * 256 / 384,
             6: 128 * 256 / (128 + 256 / 2)}


def time_ladder(mod, rungs: dict, sizes: dict, notebook: str) -> tuple:
    """Time cuBLAS fp16 and every rung of ``rungs`` at each of ``sizes`` (``{label: (h, w, k)}``) with ``bench_user``,
    recording each in the results and printing one table per size (GPU time, loop, CPU per call, TFLOP/s and the
    ratios to cuBLAS); rungs with shapes are autotuned first (:func:`autotune_rungs` prints the sweep; a size tuned
    there is not timed again) and each size's header names the shapes chosen. Returns ``(ladder, rung_ms)``:
    ``ladder`` a list of rows (kernel, size, TFLOP/s, ratio to cuBLAS fp16), ``rung_ms`` ``{(size, rung): median GPU
    time in ms}``. GPU only."""
    import torch
    from ...device_ceilings import throughput
    from ...mode import DEVICE
    from ...results import save_result
    from ...user_timing import bench_user, user_cells, user_header, user_ratios
    ladder, rung_ms = [], {}
    for size, (h, w, k) in sizes.items():
        m, n = torch.randn(h, k, device=DEVICE).half(), torch.randn(k, w, device=DEVICE).half()
        o = torch.empty(h, w, device=DEVICE, dtype=torch.float16)
        fl = flops(h, w, k)
        times, chosen = {CUBLAS: bench_user(torch.matmul, m, n, out=o)}, []   # GPU time, loop, CPU per call
        for rung, name in rungs.items():
            cfg = 0
            if rung in CONFIGS:
                cfg = autotune(mod, rung, m, n).best   # checks, then times, every shape of the rung (once a size)
                chosen.append(f"rung {rung} cfg {cfg}")
            times[name] = bench_user(run, mod, rung, m, n, o, cfg)
            rung_ms[size, rung] = times[name].median
        base = times[CUBLAS]
        print(f"{size} (h, w, k = {h}, {w}, {k})" + (f", autotuned: {', '.join(chosen)}" if chosen else ""))
        print(f"{'':38}{user_header(10)}  TFLOP/s   × cuBLAS (GPU, loop)")
        for name, t in times.items():
            rate = fl / t.median / 1e9
            print(f"{name:38}{user_cells(t, 10)}  {rate:7.0f}  {user_ratios(t, base)}")
            save_result(notebook, name, size, t, throughput(t, flops=fl, kind="fp16"),
                        None if name == CUBLAS else base, "cuBLAS fp16")
            ladder.append(dict(kernel=name, size=size, tflops=rate, vs=base.median / t.median))
        print()
    return ladder, rung_ms


def autotune_rungs(mod, rungs: dict, size: tuple) -> dict:
    """Autotune every rung of ``rungs`` that has shapes (:data:`CONFIGS`) at ``size`` (h, w, k) and print each
    rung's table (every shape checked against float64, then timed): ``{rung: Tuned}``. The choice is cached, so
    :func:`time_ladder` runs it at that size without timing the shapes again. GPU only (on the CPU the emulation
    would check every shape at full size)."""
    import torch
    from ...mode import DEVICE
    h, w, k = size
    m, n = torch.randn(h, k, device=DEVICE).half(), torch.randn(k, w, device=DEVICE).half()
    out = {}
    for rung in rungs:
        if rung in CONFIGS:
            out[rung] = autotune(mod, rung, m, n)
            print(out[rung], end="\n\n")
    return out


def ladder_rows(ladder: list, sizes: dict, notebook: str) -> tuple:
    """``(rows, source)``: this run's ``ladder`` on a GPU; on the CPU the stored GPU results of ``notebook`` at
    ``sizes`` (``([], None)`` where none are stored)."""
    from ...mode import device_name
    from ...results import stored_results
    if ON_GPU:
        return ladder, device_name() + " (this run)"
    rows = [r for r in stored_results(notebook=notebook) if r["size"] in sizes]
    out = [dict(kernel=r["kernel"], size=r["size"], tflops=float(r["rate"]),
                vs=float(r["vs_baseline"]) if r["vs_baseline"] else 1.0) for r in rows]
    return out, (f"stored results from {rows[0]['device']}, not this machine" if rows else None)


def ladder_table(rows: list, source: str, sizes, spec: float | None) -> str:
    """The ladder's table: per kernel its intensity (:data:`INTENSITY`, of each rung's default shape), and at each size
    its TFLOP/s, % of the spec-sheet peak ``spec`` (left out where ``spec`` is None: no sheet for this GPU) and ratio
    to cuBLAS fp16."""
    about = f"% of the spec-sheet peak ({spec} TFLOP/s)" if spec else "no spec sheet for this GPU"
    lines = [f"fp16 tensor-core ladder: {source}; {about}\n",
             f"{'kernel':40s} {'FLOP/B':>6s}" + "".join(f"{s:>29s}" for s in sizes)]
    for name in [RUNGS[r] for r in sorted(RUNGS)] + [CUBLAS]:
        rung = next((r for r, nm in RUNGS.items() if nm == name), None)
        cells = []
        for s in sizes:
            r = next((r for r in rows if r["kernel"] == name and r["size"] == s), None)
            pct = f"{100 * r['tflops'] / spec:3.0f} %" if r and spec else "  - %"
            cells.append(f"{r['tflops']:6.0f} TFLOP/s {pct} {r['vs']:5.2f}×" if r else "")
        lines.append(f"{name:40s} " + (f"{INTENSITY[rung]:6.0f}" if rung else " " * 6) + "".join(f"{c:>29s}" for c in cells))
    return "\n".join(lines)
