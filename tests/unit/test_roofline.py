"""The roofline of recorded matmul results: shapes read from the records, intensities, roofs."""
import matplotlib
import pytest

from gpu_course import roofline

matplotlib.use("Agg")


def row(kernel, size, rate, precision, unit="TFLOP/s", notebook="07_triton_matmul"):
    return dict(kernel=kernel, size=size, rate=str(rate), ceiling=precision, unit=unit, notebook=notebook)


def test_shapes_and_intensity():
    assert roofline.matmul_dims("1024³") == (1024, 1024, 1024)
    assert roofline.matmul_dims("5120×256×5120") == (5120, 256, 5120)
    assert roofline.matmul_dims("8192x1024 @ 1024x4096") == (8192, 1024, 4096)
    # 2 n³ FLOP over 3 n² elements of 4 bytes
    assert roofline.intensity("4096³", "fp32") == pytest.approx(2 * 4096 / 12)
    assert roofline.intensity("4096³", "fp16") == pytest.approx(2 * roofline.intensity("4096³", "fp32"))


@pytest.mark.parametrize("bad", ["1e+08 fp32", "8192x1024 @ 512x4096", "4096"])
def test_unreadable_shapes_are_refused(bad):
    with pytest.raises(ValueError, match="cannot read a matmul shape"):
        roofline.matmul_dims(bad)


def test_points_keep_only_matmul_records_and_the_plot_draws_each_roof():
    rows = [row("triton fp16", "4096³", 700, "fp16"), row("rung 7", "4096³", 41.3, "fp32", notebook="04"),
            row("copy", "1e+08 fp32", 2900, "copy", unit="GB/s"), row("torch.mean", "1e+08", "", "fp32")]
    pts = roofline.points(rows)
    assert [p["label"] for p in pts] == ["triton fp16 4096³", "rung 7 4096³"]
    ceil = {"copy": 3000.0, "fp16": 700.0, "fp32": 51.0}
    ax = roofline.plot_roofline(pts, ceil, title="t", annotate=lambda p: p["label"])
    assert len(ax.get_lines()) == 2 + 2  # one roof per precision, one marker per point
    assert [t.get_text() for t in ax.texts] == ["triton fp16 4096³", "rung 7 4096³"]


def test_reference_ceilings_come_from_the_stored_file(tmp_path, monkeypatch):
    f = tmp_path / "ceilings.json"
    f.write_text('{"GPU A": {"ceilings": {"copy": 1.0}}, "GPU B": {"ceilings": {"copy": 2.0}}}')
    monkeypatch.setattr(roofline, "CEILINGS_FILE", f)
    monkeypatch.setattr(roofline, "ON_GPU", False)
    assert roofline.reference_ceilings() == {"copy": 1.0}
    assert roofline.reference_ceilings("GPU B") == {"copy": 2.0}
    assert roofline.reference_ceilings("GPU C") is None
    monkeypatch.setattr(roofline, "CEILINGS_FILE", tmp_path / "missing.json")
    assert roofline.reference_ceilings() is None
