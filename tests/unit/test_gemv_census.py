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
    assert first["all"] > 100 and strided["all"] > 100 and first["ld.global"] > 0 and strided["ld.global"] > 0


def test_the_first_kernels_loop_waits_at_many_more_barriers(census):
    first, strided = census.values()
    assert strided["bar.sync"] >= 1 and first["bar.sync"] >= 5 * strided["bar.sync"]
    assert first["st.shared"] > strided["st.shared"]


def test_a_loop_is_a_label_and_the_branch_back_to_it():
    ptx = "a;\n$L__BB0_1:\nb;\n$L__BB0_2:\nc;\n@%p1 bra $L__BB0_2;\nd;\n@%p2 bra $L__BB0_1;\nret;"
    assert C.loop_body(ptx) == ["b;", "c;", "@%p1 bra $L__BB0_2;", "d;", "@%p2 bra $L__BB0_1;"]
    assert C.loop_body("a;\nbra.uni $L__BB0_9;\n$L__BB0_9:\nret;") == []    # a branch forward is no loop
