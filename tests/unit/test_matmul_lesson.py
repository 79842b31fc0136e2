"""Notebook 04's lesson helpers (gpu_course.lessons.matmul): timing rounds and claims, tables and figures, the
kernel names of the occupancy cells, racecheck's report and ncu's counters, all on the CPU."""
import matplotlib
import pytest
import torch

from gpu_course import occupancy
from gpu_course.kernels import matmul_ladder
from gpu_course.lessons import matmul as lesson
from gpu_course.timing import Timing

matmul_ladder_rungs = dict(matmul_ladder.RUNGS)


class _FakeBench:
    """A bench that returns a fixed time per function (by name) and records the calls."""
    def __init__(self, times):
        self.times, self.calls = times, []

    def __call__(self, fn, *args, budget_ms=None):
        self.calls.append(fn.__name__)
        return Timing(times_ms=(self.times[fn.__name__],), method="fake", device="cpu", on_gpu=False)


def test_round_medians_alternates_and_ratio_rounds():
    def a(): pass
    def b(): pass
    fake = _FakeBench({"a": 2.0, "b": 1.0})
    r = lesson.round_medians({"A": a, "B": b}, rounds=3, timer=fake)
    assert fake.calls == ["a", "b", "b", "a", "a", "b"]
    assert r == {"A": [2.0] * 3, "B": [1.0] * 3}
    assert lesson.ratio_rounds(r, "A", "B") == [2.0] * 3
    with pytest.raises(ValueError):
        lesson.round_medians({"A": a}, rounds=0, timer=fake)


def _run(ms8=3.2, ms7=3.3):
    """A LadderRun with plausible H100-like times (ms) at one size."""
    ms = {1: 141.0, 2: 25.6, 3: 15.2, 4: 7.8, 5: 8.4, 6: 4.8, 7: ms7, 8: ms8, 9: 3.2, 10: 2.9}
    run = lesson.LadderRun()
    for r, t in ms.items():
        run.ms["4096³", r] = t
    run.ms.update({("4096³", "5 two blocks"): 7.0, ("4096³", "9 cfg 4"): 3.4, ("4096³", "9 mt"): 3.1,
                   ("4096³", "10 two stages"): 2.95, ("4096³", "transpose"): 0.05, ("4096³", "10 row order"): 2.9})
    return run


def test_ladder_claims_print_the_variants(capsys):
    lesson.ladder_claims(_run(), matmul_ladder_rungs)
    out = capsys.readouterr().out
    assert "rung 8 (warptiling) is within 3 % of rung 7 or faster" in out
    assert "rung 5 with __launch_bounds__(256, 2) takes 7.000 ms: 1.20× as fast as rung 5, 1.11× as fast as rung 4" in out
    assert "cfg 4 fed m transposed first" in out and "rung 10 is 1.17× as fast" in out


def test_views_table_names_and_figures():
    matplotlib.use("Agg")
    rows = [dict(kernel=n, size=s, tflops=10.0 + r, vs=0.1 * r) for r, n in matmul_ladder_rungs.items()
            for s in ("4096³", "5120×256×5120")] + [dict(kernel=lesson.CUBLAS, size="4096³", tflops=50.0, vs=1.0)]
    names = list(matmul_ladder_rungs.values()) + [lesson.CUBLAS]
    table = lesson.ladder_table(rows, names, ["4096³", "5120×256×5120"])
    assert len(table.splitlines()) == len(names) + 1 and "50.0 TFLOP/s  1.00×" in table
    assert lesson.short_name("rung 10 cp.async pipeline") == "10 cp.async"
    assert len({lesson.short_name(n) for n in names}) == len(names)            # labels stay distinct
    fig = lesson.plot_ladder(rows, names, ["4096³", "5120×256×5120"], "t")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == names     # full names, across: none overlap
    pts = lesson.roofline_points(rows, {8: "rung 8 warptiling", 9: "rung 9 autotuned warptiling"}, lambda r: 32.0)
    pts = [(a, 42.5, n) for a, _, n in pts]                                      # rung 9 = rung 8: one point
    fig = lesson.plot_roofline(pts, {"copy": 3000.0, "fp32": 50.0}, "t")
    assert [t.get_text() for t in fig.axes[0].texts] == ["8, 9"]
    assert lesson.last_rung_ratio(rows, lesson.CUBLAS, "4096³") == 1.0
    assert lesson.closing_lines(rows, ["nope"]) == ""


def test_kernel_names_are_those_ptxas_reports():
    """Every kernel the occupancy cells look up is one the ladder compiles (its demangled name)."""
    src = matmul_ladder.source()
    for key, name in lesson.KERNEL_OF.items():
        bare = name.removeprefix("void ").split("<")[0]
        assert bare in src, key
    assert lesson.KERNEL_OF[5].endswith("<128, 128, 8, 8, 8, 1>")   # rung 5's MINB, cfg 0
    usage = {lesson.KERNEL_OF[5]: (130, 8192, 0), lesson.KERNEL_OF["rung 5, launch bounds (256, 2)"]: (128, 8192, 0)}
    limits = occupancy.sm_limits()

    def occ(regs, smem, threads):
        o = occupancy.blocks_per_sm(threads, regs, smem, limits)
        return o.blocks, o.fraction
    lines = lesson.occupancy_lines(usage, {5: "rung 5 2D blocktiling"}, {5: 256}, occ)
    assert "1 blocks/SM" in lines[0] and "2 blocks/SM" in lines[1]


def test_racecheck_report_and_match_rate():
    text = ("========= Error: Race reported between Write access at k+0x370 in cuda_src:27\n"
            "=========     and Read access at k+0x390 in cuda_src:29 [10752 hazards]\n"
            "=========     and Read access at k+0x3b0 in cuda_src:29 [9152 hazards]\n"
            "========= Warning: Race reported between Read access at k+0x1 in cuda_src:29\n"
            "=========     and Write access at k+0x2 in cuda_src:26 [8 hazards]\n"
            "========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n")
    r = lesson.parse_racecheck(text)
    assert len(r.lines) == 6 and r.hazards == 2 and r.summary.endswith("(1 error, 1 warning)")
    clean = lesson.parse_racecheck("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    assert clean.hazards == 0
    assert lesson.parse_racecheck("nothing").hazards is None
    flips = iter([torch.ones(2), torch.zeros(2), torch.full((2,), float("nan"))])
    assert lesson.match_rate(lambda: next(flips), torch.ones(2), runs=3) == 1


def test_ncu_counters_from_raw():
    metrics = list(lesson.METRICS)
    head = ['"ID"', '"Kernel Name"', *[f'"{m}"' for m in metrics],
            '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"',
            '"smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"']
    units = ['""', '""', '"inst"', '""', '""', '"inst"', '"%"', '"ratio"', '"ratio"']
    rows = [['"0"', '"void mm_pipe_k<128, 128, 8>(...)"', '"201,326,592"', '"402,658,495"', '"5"', '"68,719,476,736"',
             '"65"', '"0.5"', '"2.0"'],
            ['"1"', '"void mm_warp_k<128, 128, 16, 64, 64, 2, 4, 4, 128>(...)"', '"100,663,296"', '"268,435,456"',
             '"0"', '"68,719,476,736"', '"67"', '"1.5"', '"0.2"']]
    text = "==PROF== noise\n" + "\n".join(",".join(r) for r in [head, units, *rows]) + "\n"
    c = lesson.counters_from_raw(text, rungs=(7, 8))
    assert set(c.values) == {7, 8}
    ratio = c.per_fma(7, metrics[1]) / c.per_fma(8, metrics[1])
    assert ratio == pytest.approx(1.5, rel=1e-3)
    assert c.stalls[7][0] == ("mio_throttle", 2.0) and c.stalls[8][0] == ("barrier", 1.5)
    table = lesson.counter_table(c)
    assert "rung 7" in table and "mio_throttle 2.00" in table
    assert lesson.counters_from_raw("no csv here").values == {}
