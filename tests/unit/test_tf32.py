"""Notebook 07's TF32 emulation (CPU)."""
import pytest
import torch

from gpu_course.lessons import tf32


def test_tf32_cuts_within_an_ulp_truncating_toward_zero_and_rounding_within_half():
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(1)) * 100
    ulp = torch.ldexp(torch.ones_like(x), torch.frexp(x).exponent - 11)     # TF32's ulp: 10 bits after the point
    t, r = tf32.to_tf32(x, "truncate"), tf32.to_tf32(x, "nearest")
    assert ((x - t).abs() < ulp).all() and (t.abs() <= x.abs()).all()
    assert ((x - r).abs() <= ulp / 2).all()
    assert torch.equal(tf32.to_tf32(t, "truncate"), t) and torch.equal(tf32.to_tf32(r, "nearest"), r)
    assert (t.view(torch.int32) & tf32.LOW_BITS).eq(0).all() and (r.view(torch.int32) & tf32.LOW_BITS).eq(0).all()


def test_tf32_refuses_what_it_cannot_cut():
    with pytest.raises(ValueError, match="float32"):
        tf32.to_tf32(torch.ones(3, dtype=torch.float64), "truncate")
    with pytest.raises(ValueError, match="rounding"):
        tf32.to_tf32(torch.ones(3), "down")


def test_truncated_inputs_leave_more_error_than_rounded_ones():
    e = tf32.product_errors(n=256, seed=0)
    assert 2 ** -13 < e["nearest"] < e["truncate"] < 2 ** -9
