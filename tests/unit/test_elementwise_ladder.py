"""Notebook 03's v1s kernels and pointer chase (in the emulation, against torch) and the rounds helpers."""
import torch
import torch.nn.functional as F

import utils
from gpu_course.kernels import elementwise
from gpu_course.lessons import elementwise_ladder as L


def _module():
    src = elementwise.source("scalar4")
    funcs = elementwise.functions("scalar4")
    return utils.load_cuda(src, "\n".join(utils.get_sig(f, src) for f in funcs), funcs)


def test_scalar4_matches_torch_on_odd_sizes():
    m = _module()
    for n in (1, 3, 1023, 1025, 4099):
        x = torch.randn(n)
        out = utils.poisoned(n, device="cpu")
        m.square_scalar4(x, out)
        utils.check(out, x * x, name=f"square_scalar4 {n}")
        out = utils.poisoned(n, device="cpu")
        m.gelu_scalar4(x, out)
        utils.check(out, F.gelu(x.double(), approximate="tanh"), atol=1e-6, rtol=1e-5, name=f"gelu_scalar4 {n}")


def test_pointer_chase_ends_where_the_cycle_says():
    m = _module()
    lat = L.chase_latency(m.pointer_chase, 4096 * 4, 1000, reps=1)   # raises if the end is wrong
    assert lat.steps == 1000 and lat.ns > 0 and "pointer chase over" in str(lat)


def test_rounds_and_ratio_range():
    r = L.interleaved({"a": lambda: torch.ones(8), "b": lambda: torch.zeros(8)}, rounds=3, budget_ms=3)
    assert len(r["a"].rounds) == 3 and r["a"].pooled.n == sum(t.n for t in r["a"].rounds)
    lo, hi = L.ratio_range(r["a"], r["b"])
    assert 0 < lo <= hi


def test_ncu_grids_reads_each_grid_once_and_tables_it():
    from gpu_course.lessons import elementwise_ncu as N
    head = ["ID", "Kernel Name", "Grid Size", *N.METRICS]
    units = ["", "", "", "usecond", "cycle", "cycle", "cycle", "byte", "byte", "%"]
    rows = [head, units,
            ["0", "void gelu_fast_k<1>(const float *, float *, int)", "(97657, 1, 1)", "259.1", "403", "406", "408",
             "4e8", "3.8e8", "89.8"],
            ["1", "void other_k(float *)", "(1056, 1, 1)", "1", "1", "1", "1", "1", "1", "1"],      # not the kernel
            ["2", "void gelu_fast_k<1>(const float *, float *, int)", "(1056, 1, 1)", "273.6", "327", "407", "434",
             "4e8", "3.8e8", "85.3"],
            ["3", "void gelu_fast_k<1>(const float *, float *, int)", "(1056, 1, 1)", "999", "1", "1", "1", "1", "1",
             "1"]]                                                                                     # a repeat
    text = "==PROF== noise\n" + "\n".join(",".join(f'"{v}"' for v in r) for r in rows) + "\n"
    c = N.counters_from_raw(text, {"one per float4": 97657, "1x": 1056})
    assert list(c.values) == ["one per float4", "1x"] and c.values["1x"]["gpu__time_duration.sum"] == 273.6
    assert round(c.spread("1x"), 3) == round(327 / 434, 3) and c.spread("one per float4") > 0.98
    table = N.grid_table(c).splitlines()
    assert len(table) == 3 and table[2].split()[:2] == ["1x", "273.6"] and table[2].split()[-2:] == ["780.0", "85.3"]


def test_ncu_grids_refuses_equal_grids_and_says_why_without_ncu(monkeypatch):
    import pytest
    from gpu_course.lessons import elementwise_ncu as N
    with pytest.raises(ValueError, match="differ"):
        N.profile_grids("", "", [], 1024, 256, {"a": 4, "b": 4})
    from gpu_course import profiling
    monkeypatch.setattr(profiling, "find_ncu", lambda: None)
    assert "ncu not found" in N.profile_grids("", "", [], 1024, 256, {"a": 4}).problem


def test_ncu_grids_script_launches_every_grid(tmp_path):
    import json
    import subprocess
    import sys
    from gpu_course.lessons import elementwise_ncu as N
    src, funcs = elementwise.source("scalar4"), elementwise.functions("scalar4")
    build = dict(cuda_src=src, cpp_src="\n".join(utils.get_sig(f, src) for f in funcs), funcs=funcs, n=4099,
                 threads=64, grids=[17, 3])
    (tmp_path / "build.json").write_text(json.dumps(build))
    (tmp_path / "grids.py").write_text(N._SCRIPT + "print(float((out - torch.nn.functional.gelu(x, approximate='tanh'))"
                                       ".abs().max()))\n")
    r = subprocess.run([sys.executable, str(tmp_path / "grids.py"), str(tmp_path / "build.json")],
                       capture_output=True, text=True, timeout=600, cwd=str(tmp_path.parent))
    assert r.returncode == 0, r.stderr[-2000:]
    assert float(r.stdout.split()[-1]) < 1e-5
