"""Unit tests of gpu_course/display.py (CPU; the GPU branches run in tests/gpu and the notebooks)."""
import os

import pytest
import torch

import utils


def test_show_img_layouts():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ax = utils.show_img(torch.rand(3, 8, 10), title="chw")
    assert ax.get_images()[0].get_array().shape == (8, 10, 3) and ax.get_title() == "chw"
    ax = utils.show_img(torch.rand(8, 10))
    assert ax.get_images()[0].get_cmap().name == "gray"
    with pytest.raises(ValueError, match="2 or 3 dimensions"):
        utils.show_img(torch.rand(10))
    plt.close("all")


def test_show_img_does_not_import_matplotlib_at_import(run_py):
    r = run_py("import sys, utils; print('matplotlib' in sys.modules)", COURSE_MODE="cpu")
    assert r.stdout.strip() == "False", r.stderr


def test_capture_printf_sees_c_level_output(capsys):
    import ctypes
    libc = ctypes.CDLL(None)
    with utils.capture_printf() as cap:
        libc.printf(b"thread %d says hi\n", 7)
        os.write(2, b"on stderr\n")
    assert cap.text == "thread 7 says hi\non stderr\n"
    assert capsys.readouterr().out == cap.text


def test_capture_printf_prints_even_when_the_block_raises(capsys):
    with pytest.raises(ZeroDivisionError):
        with utils.capture_printf() as cap:
            os.write(1, b"before the error\n")
            1 / 0
    assert cap.text == "before the error\n"
