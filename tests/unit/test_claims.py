"""Unit tests of gpu_course/claims.py and display.say (CPU)."""
import pytest

import utils
from gpu_course import claims


def test_a_true_claim_prints_a_check(capsys, monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", True)
    assert claims.claim("flushed runs are slower", 2.0 > 1.0, evidence="2.0 ms vs 1.0 ms") is None
    assert capsys.readouterr().out == "✓ flushed runs are slower (2.0 ms vs 1.0 ms)\n"


def test_a_false_gpu_claim_fails_the_cell_on_the_reference_gpu(monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", True)
    monkeypatch.setattr(claims, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    monkeypatch.delenv("COURSE_STRICT_CLAIMS", raising=False)
    with pytest.raises(claims.ClaimFailed, match="flushed runs are slower .1.0 ms vs 2.0 ms"):
        claims.claim("flushed runs are slower", 1.0 > 2.0, evidence="1.0 ms vs 2.0 ms")


def test_on_another_gpu_a_false_claim_is_reported_and_the_notebook_goes_on(capsys, monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", True)
    monkeypatch.setattr(claims, "device_name", lambda: "Tesla T4")
    monkeypatch.delenv("COURSE_STRICT_CLAIMS", raising=False)
    claims.claim("flushed runs are slower", False)
    assert capsys.readouterr().out.startswith("✗ not on this GPU (Tesla T4): flushed runs are slower.")
    monkeypatch.setenv("COURSE_STRICT_CLAIMS", "1")
    with pytest.raises(claims.ClaimFailed):
        claims.claim("flushed runs are slower", False)


def test_a_gpu_claim_is_not_checked_in_cpu_mode(capsys, monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", False)
    claims.claim("flushed runs are slower", False)  # no raise
    out = capsys.readouterr().out
    assert out.startswith("(on a GPU: flushed runs are slower. Not checked in cpu mode")


def test_a_mode_free_claim_is_checked_everywhere(monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", False)
    with pytest.raises(claims.ClaimFailed):
        claims.claim("a compile happens again for n/4", False, gpu_only=False)


def test_a_claim_needs_a_sentence():
    with pytest.raises(ValueError, match="non-empty"):
        utils.claim("  ", True)


def test_say_prints_outside_a_notebook(capsys):
    utils.say("copy runs at **2,971 GB/s**")
    assert capsys.readouterr().out == "copy runs at **2,971 GB/s**\n"
