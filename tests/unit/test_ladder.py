"""gpu_course/kernels/ladder.py: what the four CUDA C ladders share, on a made-up ladder whose "kernels" are torch
functions (no build): which files a build reads, which rungs run here, and autotuning (checked against float64
first, the fastest kept, cached per size, a wrong shape refused by name)."""
from __future__ import annotations

import pytest
import torch

import utils
from gpu_course.kernels import matmul_ladder, tensor_cores
from gpu_course.kernels.ladder import Ladder, Tuned, numbered
from gpu_course.timing import Timing

FILES = {1: ["a.cuh", "r1.cu"], 2: ["a.cuh", "b.cuh", "r2.cu"], 3: ["a.cuh", "r3.cu"]}


def toy(**kw):
    """Three rungs; rung 3 has three shapes and does not run here."""
    defaults = dict(configs={3: ["small", "medium", "large"]}, unit=lambda *names: "|".join(names),
                    runs_here=lambda rung: (rung != 3, "" if rung != 3 else "rung 3: not on this machine"),
                    funcs=lambda rungs: [f"f{r}" for r in (rungs or [1, 2, 3])])
    return Ladder("toy", {1: "rung 1", 2: "rung 2", 3: "rung 3"}, FILES.get, **{**defaults, **kw})


def timing(ms):
    return Timing((ms,), "made up", "cpu", False)


def test_a_build_reads_each_file_once_in_order_and_the_whole_ladder_by_default():
    lad = toy()
    assert lad.build_files([1, 2]) == ["a.cuh", "r1.cu", "b.cuh", "r2.cu"]
    assert lad.source([2, 1]) == "a.cuh|b.cuh|r2.cu|r1.cu"
    assert lad.source() == "a.cuh|r1.cu|b.cuh|r2.cu|r3.cu"
    assert toy(whole=lambda: ["dispatcher.cu"]).source() == "dispatcher.cu"
    assert lad.rung_file(2) == "r2.cu"
    with pytest.raises(ValueError, match=r"rung_file: no rung 4; the ladder has rungs \[1, 2, 3\]"):
        lad.rung_file(4)
    with pytest.raises(ValueError, match=r"tensor_cores: no rung 0; the sum ladder has rungs"):
        toy(what="the sum ladder").rung_files(0, "tensor_cores")


def test_numbered_rungs_are_the_files_of_their_number():
    files = numbered("matmul")
    assert files(10) == ["matmul/10_async_pipeline.cu"] and files(11) == [] and files("3") == []


def test_rungs_here_leaves_out_and_says_why(capsys):
    assert toy().rungs_here() == {1: "rung 1", 2: "rung 2"}
    assert capsys.readouterr().out == "rung 3: not on this machine\n"
    assert toy().rungs_here(quiet=True) == {1: "rung 1", 2: "rung 2"}
    assert capsys.readouterr().out == ""


def shapes_of(m, n, wrong=()):
    """``call(out, cfg)`` for rung 3 of the toy: cfg c computes m @ n (plus 1 where c is in ``wrong``) into out."""
    def product(out, cfg):
        out.copy_(m @ n + (1.0 if cfg in wrong else 0.0))
        return out
    return lambda out, cfg: (product, (out, cfg))


def test_autotune_checks_then_keeps_the_fastest_and_caches_it_per_size():
    m, n = torch.randn(5, 7), torch.randn(7, 3)
    lad, timed = toy(), []

    def bench(fn, out, cfg):
        timed.append(cfg)
        return timing({0: 3.0, 1: 1.0, 2: 2.0}[cfg])
    tuned = lad.autotune(3, m, n, shapes_of(m, n), cfgs=[0, 1, 2], tol=dict(atol=1e-4, rtol=1e-4), who="t",
                         bench=bench)
    assert (tuned.rung, tuned.size, tuned.best) == (3, (5, 3, 7), 1)
    assert [(c, name) for c, name, _ in tuned.table] == [(0, "small"), (1, "medium"), (2, "large")]
    assert lad.autotune(3, m, n, shapes_of(m, n), cfgs=[0, 1, 2], tol={}, who="t", bench=bench) is tuned
    assert timed == [0, 1, 2]                            # the second call timed nothing
    lad.autotune(3, m, n, shapes_of(m, n), cfgs=[2], tol=dict(atol=1e-4, rtol=1e-4), who="t", bench=bench,
                 retune=True)
    assert timed == [0, 1, 2, 2]


def test_autotune_refuses_a_wrong_shape_by_name_before_timing_it():
    m, n = torch.randn(4, 4), torch.randn(4, 4)
    with pytest.raises(utils.CheckFailed, match=r"rung 3 cfg 1 \(medium\)"):
        toy().autotune(3, m, n, shapes_of(m, n, wrong={1}), cfgs=[0, 1, 2], tol=dict(atol=1e-4, rtol=1e-4),
                       who="t", bench=lambda fn, *a: timing(1.0))
    with pytest.raises(TypeError, match="t: bench must return a Timing, got float"):
        toy().autotune(3, m, n, shapes_of(m, n), cfgs=[0], tol=dict(atol=1e-4, rtol=1e-4), who="t",
                       bench=lambda fn, *a: 1.0)


def test_tuned_prints_in_each_ladders_style():
    table = [(0, "small", timing(2.0)), (1, "medium", timing(1.0))]
    plain = str(Tuned(4, (8, 8, 8), 1, table)).splitlines()
    assert plain[0] == "rung 4 at h=8, w=8, k=8: every shape checked against float64, then timed"
    assert plain[2].startswith("* cfg 1 medium ") and plain[-2:] == [
        "best: cfg 1 (medium)", "cpu mode: the emulation picked cfg 1; its times say nothing about a GPU"]
    mm = str(Tuned(9, (8, 8, 8), 1, table, **matmul_ladder.TUNED_STYLE)).splitlines()
    assert mm[0] == "rung 9 at h=8, w=8, k=8: every tile shape checked against float64, then timed"
    assert mm[1].startswith("  cfg  0 small" + " " * 33) and mm[-1].startswith("cpu mode: cfg 1 took ")


def test_the_four_ladders_are_declared_once_each():
    from gpu_course.kernels import elementwise, reductions
    assert [lad.name for lad in (matmul_ladder.LADDER, tensor_cores.LADDER, reductions.LADDER, elementwise.LADDER)] == \
        ["matmul_ladder", "tensor_cores", "reductions", "elementwise"]
    assert matmul_ladder.LADDER.rungs is matmul_ladder.RUNGS and tensor_cores.LADDER.configs is tensor_cores.CONFIGS
