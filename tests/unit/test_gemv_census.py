"""Notebook 15's census of its two int4 GEMV kernels, compiled for sm_90 without a GPU: the k loop is found, both
kernels handle the same weights an iteration, and the first kernel's loop goes through shared memory with far more
barriers than the strided one's (what the notebook's reading of the two kernels rests on)."""
import pytest

import utils  # noqa: F401  the mode first
from gpu_course.lessons.low_precision import census as C

pytestmark = pytest.mark.slow   # two compilations, about ten seconds


@pytest.fixture(scope="module")
def census():
    return C.gemv_census()


def test_both_loops_are_found_with_the_same_work(census):
    first, strided = census.values()
    assert first["weights"] == strided["weights"] == 32 * 512 // 128
    assert first["all"] > 100 and strided["all"] > 100 and first["LDG"] > 0 and strided["LDG"] > 0


def test_the_first_kernels_loop_waits_at_many_more_barriers(census):
    first, strided = census.values()
    assert strided["BAR"] >= 1 and first["BAR"] >= 5 * strided["BAR"]
    assert first["STS"] > strided["STS"]


def test_a_loop_is_a_label_and_the_branch_back_to_it():
    sass = "\n".join(["--:-:-:-:1\tA;", "LBB1:", "--:-:-:-:1\tB;", "LBB2:", "--:-:-:-:1\t@P0 C R1;",
                      "--:-:-:-:5\t@P1 BRA LBB2;", "--:-:-:-:1\tD;", "--:-:-:-:5\t@!P2 BRA LBB1;", "--:-:-:-:1\tEXIT;"])
    assert C.loop_body(sass) == ["B", "C", "BRA", "D", "BRA"]
    assert C.loop_body("--:-:-:-:5\tBRA LBB9;\nLBB9:\n--:-:-:-:1\tEXIT;") == []    # a branch forward is no loop


def test_a_timed_block_adds_a_column_of_the_first_kernel_with_its_own_weights():
    cfg = dict(BLOCK_N=16, BLOCK_K=512, SPLIT_K=1, num_warps=4, num_stages=2)    # one of the autotuner's blocks
    census = C.gemv_census({"first, as timed": cfg})
    assert list(census)[2:] == ["first, as timed"]
    timed = census["first, as timed"]
    assert timed["weights"] == 16 * 512 // 128 and timed["BAR"] >= 1 and timed["LDG"] > 0
    with pytest.raises(AssertionError, match="cfg needs"):
        C.gemv_census({"no stages": dict(BLOCK_N=16, BLOCK_K=512, SPLIT_K=1, num_warps=4)})


def test_tuned_configs_names_each_tuned_shape_by_m_n_k(monkeypatch):
    from gpu_course.kernels import quant_gemv as G
    cfg = dict(BLOCK_N=8, BLOCK_K=512, SPLIT_K=1, num_warps=2, num_stages=2)
    monkeypatch.setattr(G, "_TUNED", {(1, 8192, 8192, "bf16", "cuda:0"): cfg})
    got = G.tuned_configs()
    assert got == {(1, 8192, 8192): cfg}
    got[(1, 8192, 8192)]["BLOCK_N"] = 64           # a copy: the autotuner's record is not changed through it
    assert G._TUNED[(1, 8192, 8192, "bf16", "cuda:0")]["BLOCK_N"] == 8
