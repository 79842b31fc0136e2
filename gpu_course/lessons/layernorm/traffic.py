"""Notebook 10's models of the LayerNorm's cost and accuracy: the bytes a fused LayerNorm must move, the bytes its
backward's two kernels move at a given number of programs and the time that predicts, and errors counted in units
in the last place."""
from __future__ import annotations

import torch


def backward_dram_bytes(h, w, elt, groups):
    """Bytes the backward's two kernels read and write, each tensor counted once per kernel (notebook
    10's exercise 3): the dx kernel reads dy, x, the weight, mean and rstd and writes dx and the
    ``[2, groups, w]`` fp32 partial sums; the reduction reads the partial sums and writes dweight and
    dbias (``elt`` bytes an element). Bytes to and from memory as the kernels ask for them: the partial
    sums (8.7 MB at 132 programs, 34.6 MB at 528, for w = 8192) fit in an H100's 50 MB L2 cache, so
    part of them may never reach DRAM."""
    return 3 * h * w * elt + w * elt + 2 * h * 4 + 2 * groups * w * 4 + 2 * groups * w * 4 + 2 * w * elt


def backward_time_from_bytes(t1, groups, h=4096, w=8192, elt=2, sms=132):
    """The backward's time with ``groups`` programs predicted from its time ``t1`` at one program per
    SM (``sms`` programs), if it moved its bytes (:func:`backward_dram_bytes`) at the same rate at every
    ``groups`` (notebook 10's exercise 3b)."""
    return t1 * backward_dram_bytes(h, w, elt, groups) / backward_dram_bytes(h, w, elt, sms)


def groups_explained_by_bytes(times, sms, tol=0.1):
    """The GROUPS of a sweep ``times`` (``{groups: time}``, with the time at ``sms`` programs among them) at which
    :func:`backward_time_from_bytes` of the time at ``sms`` programs is within ``tol`` of the time measured there
    (relative to the measured time): where the bytes alone explain the backward's time (notebook 10's exercise 3c).

    >>> sorted(groups_explained_by_bytes({66: 150.5, 132: 102.9, 264: 127.4, 528: 162.8}, 132))   # an H100's sweep
    [132]
    """
    t1 = times[sms]
    return {g for g, t in times.items() if abs(backward_time_from_bytes(t1, g, sms=sms) - t) <= tol * t}


def bytes_moved(h, w, elt):
    """The bytes a fused LayerNorm of an (h, w) input of ``elt``-byte elements must move at least (the
    weights and statistics are small next to the rows and left out): the forward reads x and writes y;
    forward + backward also reads dy and x again and writes dx.

    >>> bytes_moved(4096, 8192, 2)
    {'forward': 134217728, 'forward + backward': 335544320}
    """
    return {"forward": 2 * h * w * elt, "forward + backward": 5 * h * w * elt}


def ulps_per_element(out, ref, dtype, floor=None):
    """The largest error of ``out`` against ``ref`` (float64), each element's error counted in units
    of the last place (ulp) of that element's own value in ``dtype``. Elements smaller than ``floor``
    (default: the largest ``|ref|`` / 256) count in the ulp of ``floor``: near 0 an output's error
    comes from the arithmetic on terms of the row's size, not from its own rounding, so it is held to
    an absolute bound there (still 256 times finer than an ulp of the largest value).

    >>> r = torch.tensor([1.0, 1e-2], dtype=torch.float64)
    >>> round(ulps_per_element(r + torch.tensor([0.0, 2 ** -16], dtype=torch.float64), r, torch.float16), 2)
    2.0
    """
    fi = torch.finfo(dtype)
    floor = ref.abs().max().item() / 256 if floor is None else floor
    mag = ref.abs().clamp_min(max(floor, fi.tiny))
    unit = torch.exp2(torch.floor(torch.log2(mag))) * fi.eps
    return ((out.double() - ref).abs() / unit).max().item()
