"""Notebook 11's speed tables: ours against SDPA's backends per shape and phase (TFLOP/s, % of a peak, ratios),
what is recorded in the results, and the closing summary from this run or from a stored GPU run."""
from __future__ import annotations

import math

from ...device_ceilings import ceilings, spec_peak, throughput
from ...kernels.triton_attention import attention_flops
from ...mode import ON_GPU
from ...results import report, save_result, stored_results
from ...timing import fmt_ms

def rate_label():
    """``(kind, peak TFLOP/s, label)`` that attention's fp16 rates are set against: the spec-sheet fp16
    peak where the course has this GPU's spec sheet, else cuBLAS's fp16 rate measured here; ``None`` on
    the CPU (no fp16 ceiling there)."""
    if not ON_GPU:
        return None
    spec = spec_peak("fp16")
    if spec:
        return "spec", spec, f"of the spec-sheet fp16 peak ({spec:.0f} TFLOP/s)"
    best = ceilings()["fp16"]
    return "measured", best, f"of cuBLAS fp16 at 8192³ measured here ({best:.0f} TFLOP/s)"


def shape_tag(d, causal):
    """``"d=64"`` or ``"d=64, causal"``: how the notebook and the results name a shape of the timings."""
    return f"d={d}" + (", causal" if causal else "")


def speed_table(times, phase, flops):
    """One table of :func:`time_attention`'s timings for ``phase``: per name, GPU time, time per step
    in a loop, CPU time per call, TFLOP/s (``flops`` over the GPU time) and, on a GPU, its % of the
    peak of :func:`rate_label`; a last line names any launch-bound call (CPU per call > GPU time)."""
    names = [n for n, ph in times if ph == phase]
    label = rate_label()
    lines = [f"{phase:<16}{'GPU time':>11}{'loop/step':>11}{'CPU/call':>11}{'TFLOP/s':>9}"
             + (f"{'% peak':>8}" if label else "")]
    for name in names:
        t = times[name, phase]
        rate = flops / t.median / 1e9
        lines.append(f"{name:<16}{fmt_ms(t.median):>11}{fmt_ms(t.loop_ms):>11}{fmt_ms(t.cpu_ms):>11}{rate:>9.0f}"
                     + (f"{100 * rate / label[1]:>7.0f}%" if label else ""))
    if label:
        lines.append(f"(% peak: {label[2]})")
    launch_bound = [n for n in names if times[n, phase].launch_bound]
    if launch_bound and ON_GPU:
        lines.append(f"launch-bound (CPU per call > GPU time): {', '.join(launch_bound)}")
    return "\n".join(lines)


def speed_ratios(speed, baseline, phase):
    """``{(d, causal): (gpu, loop)}``: ``baseline``'s time over ours (above 1: ours is faster) by GPU
    time and by time per step in a loop, for each shape of ``speed`` (``{(d, causal): times}`` of
    :func:`time_attention`) where ``baseline`` ran."""
    out = {}
    for key, times in speed.items():
        if (baseline, phase) in times:
            b, o = times[baseline, phase], times["ours", phase]
            out[key] = (b.median / o.median, b.loop_ms / o.loop_ms)
    return out


def ratio_table(speed, baselines=("SDPA flash", "SDPA cuDNN")):
    """A table of :func:`speed_ratios`: per shape, ours against each of ``baselines`` (those that ran),
    forward and backward, GPU time and loop; ``1.00x`` is the library's speed, above is faster."""
    cols = [(b, ph) for ph in ("forward", "backward") for b in baselines
            if any((b, ph) in t for t in speed.values())]
    ratios = {c: speed_ratios(speed, *c) for c in cols}
    lines = ["ours: the library's time over ours (GPU time, loop); above 1.00x ours is faster",
             f"{'shape':<14}" + "".join(f"{dict(forward='fwd', backward='bwd')[ph] + ' vs ' + b[5:]:>19}" for b, ph in cols)]
    for key in speed:
        cells = []
        for c in cols:
            g, lp = ratios[c].get(key, (math.nan, math.nan))
            cells.append(f"{g:>11.2f}x,{lp:>5.2f}x")
        lines.append(f"{shape_tag(*key):<14}" + "".join(cells))
    return "\n".join(lines)


def record_speed(notebook, tag, size, times, phase, flops):
    """Record :func:`time_attention`'s timings of ``phase`` in the results (on a GPU, during
    ``course.py execute``): each SDPA backend's row, and ours (with :func:`~gpu_course.results.save_result`)
    once against each of SDPA flash and SDPA cuDNN that ran (kernel ``flash attention {phase}, {tag}``
    and ``... vs cuDNN``), without printing: the notebook's tables show the same figures. Returns those kernels' names."""
    rate = dict(flops=flops, kind="fp16") if ON_GPU else {}
    for name, ph in times:
        if ph == phase and name != "ours" and ON_GPU:
            save_result(notebook, f"{name} {phase}, {tag}", size, times[name, ph],
                        throughput(times[name, ph], **rate), baseline_name=name)
    kernels = []
    for base, suffix in (("SDPA flash", ""), ("SDPA cuDNN", " vs cuDNN")):
        if (base, phase) in times:
            kernels.append(kernel := f"flash attention {phase}, {tag}{suffix}")
            if ON_GPU:
                t = times["ours", phase]
                save_result(notebook, kernel, size, t, throughput(t, **rate), times[base, phase], base)
    return kernels


def summary_rows(speed, shape):
    """The closing table's rows from this run's ``speed`` (``{(d, causal): times}`` of
    :func:`time_attention`, at ``shape`` = (batch, heads, N)): one dict per shape and phase with
    ``what``, ``ms`` (ours, GPU time), ``tflops``, ``pct_spec`` (% of the spec-sheet fp16 peak, or
    None), ``vs_flash`` and ``vs_cudnn`` (the library's GPU time over ours, None where it did not run)."""
    spec, rows = spec_peak("fp16") if ON_GPU else None, []
    for (d, causal), times in speed.items():
        for phase in ("forward", "backward"):
            ms = times["ours", phase].median
            tflops = attention_flops(*shape, d, causal, backward=phase == "backward") / ms / 1e9
            ratio = {b: times[b, phase].median / ms if (b, phase) in times else None
                     for b in ("SDPA flash", "SDPA cuDNN")}
            rows.append(dict(what=f"flash attention {phase}, {shape_tag(d, causal)}", ms=ms, tflops=tflops,
                             pct_spec=100 * tflops / spec if spec else None,
                             vs_flash=ratio["SDPA flash"], vs_cudnn=ratio["SDPA cuDNN"]))
    return rows


def stored_summary_rows(notebook):
    """:func:`summary_rows` from the results stored by a GPU run of ``notebook`` (for the CPU): ours
    against SDPA flash (kernel ``flash attention ...``) and SDPA cuDNN (``... vs cuDNN``), and the
    device they come from (``None`` without stored results): the device of the newest row, where GPUs of
    more than one kind have stored results (a table of one run, not a mix)."""
    stored = [r for r in stored_results(notebook=notebook) if r["kernel"].startswith("flash attention")]
    if stored:
        newest = max(stored, key=lambda r: r["when"])["device"]
        stored = [r for r in stored if r["device"] == newest]
    vs_cudnn = {r["kernel"][:-len(" vs cuDNN")]: r for r in stored if r["kernel"].endswith(" vs cuDNN")}
    rows = []
    for r in stored:
        if r["kernel"].endswith(" vs cuDNN"):
            continue
        spec = spec_peak("fp16", r["device"])
        c = vs_cudnn.get(r["kernel"])
        rows.append(dict(what=r["kernel"], ms=float(r["ms"]), tflops=float(r["rate"]),
                         pct_spec=100 * float(r["rate"]) / spec if spec else None,
                         vs_flash=float(r["vs_baseline"]) if r["vs_baseline"] else None,
                         vs_cudnn=float(c["vs_baseline"]) if c and c["vs_baseline"] else None))
    return rows, (stored[0]["device"] if stored else None)


def summary_table(rows):
    """The closing table of :func:`summary_rows` as text."""
    def x(v):
        return f"{v:5.2f}x" if v is not None else f"{'-':>6}"
    lines = [f"{'':<40}{'ours':>10}{'TFLOP/s':>9}{'% spec':>8}{'vs flash':>10}{'vs cuDNN':>10}"]
    for r in rows:
        pct = f"{r['pct_spec']:6.0f}%" if r["pct_spec"] is not None else f"{'-':>7}"
        lines.append(f"{r['what']:<40}{fmt_ms(r['ms']):>10}{r['tflops']:>9.0f}{pct:>8}{x(r['vs_flash']):>10}"
                     f"{x(r['vs_cudnn']):>10}")
    lines.append("(% spec: of the spec-sheet fp16 peak; vs: the library's GPU time over ours, above 1.00x ours is "
                 "faster)")
    return "\n".join(lines)
