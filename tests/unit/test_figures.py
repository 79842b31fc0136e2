"""The legibility check (gpu_course.figures), its hook in notebooks/matplotlibrc, and the figure helpers
(gpu_course.plots, the ladders and rooflines drawn with them): each helper's figure passes the check."""
import math
import os
import subprocess
import sys
import warnings

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpu_course import figures, plots, timeline as tl  # noqa: E402
from gpu_course.paths import ROOT  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def kinds(fig, **kw):
    return sorted({p.split(":")[0] for p in figures.problems(fig, **kw)})


def test_overlapping_tick_labels_are_refused_and_a_good_figure_passes():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar([f"a long kernel name {i}" for i in range(4)], [1, 2, 3, 4])
    ax.set(ylabel="time (ms)", title="on NVIDIA H200")
    assert kinds(fig) == ["overlapping text"]
    with pytest.raises(figures.FigureIllegible, match="overlapping"):
        figures.check_legible(fig)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 3], [1, 4, 9])
    ax.set(xlabel="n (elements)", ylabel="time (ms)", title="on NVIDIA H200")
    assert figures.check_legible(fig) is fig


def test_labels_units_and_the_device_are_required():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    assert kinds(fig) == ["no axis label", "no device"]
    ax.set(xlabel="size", ylabel="rate", title="on the CPU")
    assert kinds(fig) == ["no unit"]
    ax.set(xlabel="size (bytes)", ylabel="GB/s")
    assert kinds(fig) == []
    ax.set(xlabel="step", ylabel="MSE loss", title="no machine named")     # counts and losses need no unit
    assert kinds(fig) == ["no device"]
    assert kinds(figures.drawing(fig)) == []                                # a drawing measures nothing


def test_notes_covering_one_another_or_the_legend_are_refused():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="a line")
    ax.set(xlabel="x (ms)", ylabel="y (ms)", title="on NVIDIA H200")
    ax.text(1.5, 1.5, "a note"), ax.text(1.5, 1.5, "another note")
    assert kinds(fig) == ["overlapping text"]
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="a line")
    ax.set(xlabel="x (ms)", ylabel="y (ms)", title="on NVIDIA H200")
    ax.legend(loc="upper left")
    ax.annotate("under the legend", (1, 2), xytext=(0, -5), textcoords="offset points", va="top")
    assert kinds(fig) == ["overlapping text"]


def test_watch_raises_when_strict_warns_otherwise_and_can_be_off(monkeypatch):
    def shown(env):
        monkeypatch.setenv(figures.ENV, env)
        fig = plt.figure()          # pyplot runs rcParams["figure.hooks"] on the figures it makes
        fig.add_subplot().plot([1, 2], [3, 4])
        fig.canvas.draw()
    monkeypatch.setitem(matplotlib.rcParams, "figure.hooks", ["gpu_course.figures:watch"])
    with pytest.raises(figures.FigureIllegible, match="no axis label"):
        shown("1")
    with pytest.warns(UserWarning, match="no axis label"):
        shown("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shown("0")


def test_the_notebooks_matplotlibrc_checks_every_figure_pyplot_makes():
    code = ("import matplotlib.pyplot as plt, io\nfig, ax = plt.subplots()\nax.plot([1, 2], [3, 4])\n"
            "fig.savefig(io.BytesIO(), format='png')\n")
    env = dict(os.environ, COURSE_CHECK_FIGURES="1", MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "notebooks", env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "FigureIllegible" in r.stderr and "no axis label" in r.stderr


def test_grouped_hbars_keep_long_names_apart():
    names = [f"rung {i} a long description of what this rung changes" for i in range(12)]
    fig = plots.grouped_hbars(names, {"4096³": list(range(12)), "8192³": [None] * 12}, "TFLOP/s",
                              "a ladder on NVIDIA H200", ref={"spec-sheet peak 989 TFLOP/s": 989}, highlight=names[-1:])
    assert figures.problems(fig) == []


def test_plot_ceilings_and_attention_memory_pass_the_check():
    ceil = {"copy": 4258, "fp32": 51.1, "tf32": 358, "fp16": 663, "bf16": 690}
    rounds = {k: [0.98 * v, 1.02 * v] for k, v in ceil.items()}
    spec = {"copy": 4800, "fp32": 66.9, "tf32": 495, "fp16": 989, "bf16": 989}
    fig = plots.plot_ceilings(ceil, rounds, spec, "ceilings of NVIDIA H200")
    assert figures.problems(fig) == [] and len(fig.axes[0].patches) == 5
    sizes = [1024, 2048, 4096, 8192, 16384]
    rows = [dict(n=n, naive=plots.attention_bytes(n, 4, 16, 64)[0] if n < 16384 else math.inf,
                 ours=plots.attention_bytes(n, 4, 16, 64)[1]) for n in sizes]
    for measured in (rows, None):
        fig = plots.plot_attention_memory(sizes, 4, 16, 64, measured, "memory on NVIDIA H200")
        assert figures.problems(fig) == []


def test_declutter_moves_or_drops_notes_on_one_spot():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2], [1, 2])
    notes = [ax.annotate(f"note {i}", (1.5, 1.5), textcoords="offset points", xytext=(4, 2)) for i in range(10)]
    kept = plots.declutter(ax, notes)
    ax.set(xlabel="x (ms)", ylabel="y (ms)", title="on NVIDIA H200")
    assert 1 <= len(kept) < 10 and figures.problems(fig) == []


def test_a_gpu_timeline_passes_the_check():
    ev = [{"ph": "X", "cat": "kernel", "name": f"void at::native::vectorized_elementwise_kernel<{i}>", "pid": 0,
           "tid": 7, "ts": 200 * i, "dur": 190} for i in range(8)]
    ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20 * i, "dur": 6}
           for i in range(8)]
    fig = tl.draw(tl.bars({"traceEvents": ev}), "Two profiled steps on NVIDIA H200")
    assert figures.problems(fig) == []


def test_the_ladders_and_rooflines_pass_the_check():
    from gpu_course.lessons import matmul
    from gpu_course.roofline import plot_roofline
    names = [f"rung {i} {w}" for i, w in enumerate(["naive, x->row", "coalesced", "smem tiles 32x32"] * 4)]
    rows = [dict(kernel=n, size=s, tflops=1.0 + i) for i, n in enumerate(names) for s in ("4096³", "8192³")]
    assert figures.problems(matmul.plot_ladder(rows, names, ["4096³", "8192³"], "ladder on NVIDIA H100")) == []
    pts = [(0.25 * 2 ** (i % 4), 1.0 + i % 3, n) for i, n in enumerate(names)]
    fig = matmul.plot_roofline(pts, {"copy": 3000.0, "fp32": 50.0}, "Roofline: NVIDIA H100")
    assert figures.problems(fig) == []
    pts = [dict(label=f"k {i}", kernel="k", precision="fp16", size="4096³", intensity=1000 + i, tflops=500 + i,
                notebook="07") for i in range(6)]
    ax = plot_roofline(pts, {"copy": 3000.0, "fp16": 700.0}, "on NVIDIA H100", annotate=lambda p: p["label"])
    assert figures.problems(ax.figure) == []


def test_the_fusion_drawing_counts_gelus_bytes_and_passes_the_check():
    import math
    import torch
    from gpu_course.inductor import eager_op_bytes

    def gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    eager = eager_op_bytes(gelu)
    assert len(eager) == 8 and sum(b for _, b in eager) == 72
    fig = plots.plot_fusion_bytes({"eager: 8 kernels": eager, "compiled: 1 kernel (x in, result out)": [("fused", 8)]},
                                  "GeLU, fp32")
    assert figures.problems(fig) == []


def test_declutter_keeps_notes_off_the_legend():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2], [1, 2], label="a line with a long legend entry")
    ax.set(xlabel="x (ms)", ylabel="y (ms)", title="on NVIDIA H200")
    ax.legend(loc="lower left")
    note = ax.annotate("a note near the legend", (1.05, 1.05), textcoords="offset points", xytext=(4, 2))
    plots.declutter(ax, [note])
    assert figures.problems(fig) == []


def test_who_computed_names_each_elements_block_and_thread_and_its_drawing_passes():
    from gpu_course.lessons.numba_cuda import who_computed
    ids = who_computed(5, 7, threads=(4, 2))
    assert ids.shape == (4, 5, 7) and bool((ids >= 0).all())
    assert ids[:, 4, 6].tolist() == [1, 2, 2, 0]          # column 6 = block 1, thread 2; row 4 = block 2, thread 0
    fig = plots.plot_who_computed(ids, (4, 2), "blocks of 4 × 2 threads")
    assert figures.problems(fig) == []


def test_declutter_under_the_strict_hook_checks_only_the_finished_figure(monkeypatch):
    monkeypatch.setenv(figures.ENV, "1")
    monkeypatch.setitem(matplotlib.rcParams, "figure.hooks", ["gpu_course.figures:watch"])
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2], [1, 2], label="a line")
    ax.set(xlabel="x (ms)", ylabel="y (ms)", title="on NVIDIA H200")
    ax.legend(loc="lower left")
    notes = [ax.annotate(f"note {i}", (1.5, 1.5), textcoords="offset points", xytext=(4, 2)) for i in range(3)]
    plots.declutter(ax, notes)     # its first draw has the notes on one another: not checked
    fig.canvas.draw()              # the finished figure is


def test_no_stored_output_holds_a_refused_figure():
    """A GPU run (not strict) warns in the cell's output where a figure fails the check: none may be stored."""
    import json
    bad = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for out in cell.get("outputs", []):
                if "the figure is hard to read" in "".join(out.get("text", "")):
                    bad.append(f"{path.name} {cell.get('id')}")
    assert not bad, bad


def test_the_online_softmax_trace_rescales_at_each_new_maximum_and_its_drawing_passes():
    import math
    import torch
    from gpu_course.plots import online_softmax_trace, plot_online_softmax
    row = torch.tensor([0.0, 1.0, -1.0, 3.0, 0.5, 2.0, 4.0, -2.0, 1.0], dtype=torch.float64)   # the last block is short
    trace = online_softmax_trace(row, block=2)
    assert [t["m"] for t in trace] == [1.0, 3.0, 3.0, 4.0, 4.0]
    assert [round(t["alpha"], 12) for t in trace[1:]] == [round(math.exp(-2.0), 12), 1.0, round(math.exp(-1.0), 12), 1.0]
    assert math.isclose(trace[-1]["l"], torch.exp(row - row.max()).sum().item(), rel_tol=1e-14)
    fig = plot_online_softmax(row, trace, 2, "an online softmax, blocks of 2")
    assert figures.problems(fig) == []       # a drawing: no device to name
    plt.close(fig)
