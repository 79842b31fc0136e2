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
