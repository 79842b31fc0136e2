"""``gpu_course.jupyter_cost`` on the CPU: each measurement runs and restores what it changed, the script and
the kernel give figures for every call, and the report has its three parts."""
import sys

import pytest

from gpu_course import jupyter_cost as jc


def test_measure_restores_what_it_changes():
    before = sys.getswitchinterval(), sys.stdout
    for v in jc.VARIANTS:
        r = jc.measure(v, calls=20, rounds=1)
        assert set(jc.CALLS) <= set(r) and r["variant"] == v
    assert (sys.getswitchinterval(), sys.stdout) == before
    assert jc.measure("switch interval 1 s", calls=5, rounds=1)["state"]["switch interval (s)"] == 1.0
    with pytest.raises(ValueError):
        jc.measure("something else")


def test_a_script_and_a_kernel_both_give_every_call():
    script = jc.in_script(("as started",), calls=50, rounds=1)
    kernel = jc.in_kernel(("as started",), block_debugpy=True, calls=50, rounds=1, timeout=300)
    assert [r["variant"] for r in script + kernel] == ["as started"] * 2
    assert not kernel[0]["state"]["debugpy imported"] and kernel[0]["state"]["switch interval (s)"] > 0
    assert "script" in jc.table([("script", "as started", script[0]), ("kernel", "as started", kernel[0])])


def test_the_report_has_the_ratio_the_suspects_and_the_state():
    text = jc.report(rounds=1, calls=50)
    assert "here / script" in text and "one suspect removed" in text and "switch interval" in text
