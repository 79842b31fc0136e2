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
