"""Unit tests of gpu_course/claims.py and display.say (CPU)."""
import pytest

import utils
from gpu_course import claims


def test_a_true_claim_prints_a_check(capsys, monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", True)
    assert claims.claim("flushed runs are slower", 2.0 > 1.0, evidence="2.0 ms vs 1.0 ms") is None
    assert capsys.readouterr().out == "✓ flushed runs are slower (2.0 ms vs 1.0 ms)\n"


def _on_gpu(monkeypatch, device: str, stored: str | None):
    """This run on ``device``, in a notebook whose stored outputs come from ``stored``."""
    monkeypatch.setattr(claims, "ON_GPU", True)
    monkeypatch.setattr(claims, "device_name", lambda: device)
    monkeypatch.setattr(claims.session, "_NOTEBOOK", "07_triton_matmul")
    monkeypatch.setattr(claims.session, "stored_device", lambda stem: stored if stem == "07_triton_matmul" else None)
    monkeypatch.delenv("COURSE_STRICT_CLAIMS", raising=False)
    monkeypatch.delenv("COURSE_SAVE_RESULTS", raising=False)


def test_a_false_gpu_claim_fails_the_cell_on_the_gpu_of_the_stored_outputs(monkeypatch):
    _on_gpu(monkeypatch, "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    with pytest.raises(claims.ClaimFailed, match="flushed runs are slower .1.0 ms vs 2.0 ms"):
        claims.claim("flushed runs are slower", 1.0 > 2.0, evidence="1.0 ms vs 2.0 ms")


@pytest.mark.parametrize("device", ["NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA GH200 480GB", "Tesla T4"])
def test_on_another_gpu_a_false_claim_is_reported_and_the_notebook_goes_on(capsys, monkeypatch, device):
    """The stored outputs come from an H100 SXM: another H100, whose name also says "H100", is not it."""
    _on_gpu(monkeypatch, device, "NVIDIA H100 80GB HBM3")
    claims.claim("flushed runs are slower", False)
    out = capsys.readouterr().out
    assert out.startswith(f"✗ not on this GPU ({device}): flushed runs are slower.")
    assert "the run on NVIDIA H100 80GB HBM3 stored in this notebook" in out
    monkeypatch.setenv("COURSE_STRICT_CLAIMS", "1")
    with pytest.raises(claims.ClaimFailed):
        claims.claim("flushed runs are slower", False)


def test_storing_new_outputs_is_strict_on_any_gpu(monkeypatch):
    """`course.py execute` makes the notebook's new stored outputs: a false claim must stop it."""
    _on_gpu(monkeypatch, "NVIDIA H200", "NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("COURSE_SAVE_RESULTS", "1")
    with pytest.raises(claims.ClaimFailed):
        claims.claim("flushed runs are slower", False)


def test_a_notebook_that_does_not_name_itself_is_not_strict(capsys, monkeypatch):
    _on_gpu(monkeypatch, "NVIDIA H200", None)
    claims.claim("flushed runs are slower", False)
    assert "the run stored in this notebook" in capsys.readouterr().out


def test_a_gpu_claim_is_not_checked_in_cpu_mode(capsys, monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", False)
    claims.claim("flushed runs are slower", False)  # no raise
    out = capsys.readouterr().out
    assert out.startswith("(on a GPU: flushed runs are slower. Not checked in cpu mode")


def test_a_mode_free_claim_is_checked_everywhere(capsys, monkeypatch):
    monkeypatch.setattr(claims, "ON_GPU", False)
    with pytest.raises(claims.ClaimFailed):
        claims.claim_everywhere("a compile happens again for n/4", False)
    claims.claim_everywhere("a compile happens again for n/4", True, evidence="2 compiles")
    assert capsys.readouterr().out == "✓ a compile happens again for n/4 (2 compiles)\n"


def test_the_banner_names_the_notebook_whose_stored_gpu_claims_read(monkeypatch):
    monkeypatch.setattr(claims.session, "_NOTEBOOK", None)
    utils.banner("11_flash_attention")
    assert claims.session.current_notebook() == "11_flash_attention"
    assert claims.session.stored_device("11_flash_attention").startswith("NVIDIA ")
    with pytest.raises(ValueError, match="notebook's name"):
        utils.banner("  ")


def test_a_claim_needs_a_sentence():
    with pytest.raises(ValueError, match="non-empty"):
        utils.claim("  ", True)


def test_say_prints_outside_a_notebook(capsys):
    utils.say("copy runs at **2,971 GB/s**")
    assert capsys.readouterr().out == "copy runs at **2,971 GB/s**\n"
