"""Unit tests of gpu_course/checking.py (CPU; the GPU branches run in tests/gpu and the notebooks)."""
import pytest
import torch

import utils


def test_check_passes_and_prints_stably():
    ref = torch.randn(100, 37, dtype=torch.float64)
    got = ref.float()
    c = utils.check(got, ref, atol=1e-6, rtol=1e-6, name="copy")
    assert repr(c) == "copy: OK (matches the reference within atol=1e-06, rtol=1e-06)"
    assert c.n == 3700 and c.max_abs < 1e-6

def test_check_catches_a_wrong_element():
    ref = torch.randn(50, 30)
    out = ref.clone()
    out[7, 11] += 1.0
    with pytest.raises(utils.CheckFailed) as e:
        utils.check(out, ref, name="wrong")
    msg = str(e.value)
    assert "wrong: 1 of 1500 elements differ" in msg and "first bad index (7, 11)" in msg
    assert "max abs error 1" in msg

def test_check_catches_an_unwritten_element():
    ref = torch.randn(1000)
    out = utils.poisoned(1000, device="cpu")
    out[:999] = ref[:999]  # a kernel whose grid misses the last element
    with pytest.raises(utils.CheckFailed, match=r"(?s)first bad index 999: got nan.*1 elements are NaN"):
        utils.check(out, ref)

def test_check_shape_and_nan_reference():
    with pytest.raises(utils.CheckFailed, match=r"shape \(3,\) but the reference has \(4,\)"):
        utils.check(torch.zeros(3), torch.zeros(4))
    nan_ref = torch.tensor([1.0, float("nan")])
    utils.check(nan_ref.clone(), nan_ref)  # NaN where the reference is NaN matches
    with pytest.raises(utils.CheckFailed):
        utils.check(torch.tensor([1.0, 2.0]), nan_ref)

def test_poison_ints_and_bools():
    t = utils.poison_(torch.zeros(3, dtype=torch.int32))
    assert (t == torch.iinfo(torch.int32).min).all()
    with pytest.raises(TypeError, match="bool"):
        utils.poison_(torch.zeros(2, dtype=torch.bool))
    assert utils.poisoned((2, 3), device="cpu").shape == (2, 3)
