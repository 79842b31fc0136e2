"""libdevice's math functions in Triton's interpreter (gpu_course.triton_libdevice): a kernel that calls
libdevice.erf / exp / sqrt computes them in cpu mode, as a GPU does, instead of failing on a stub's None."""
import math

import utils  # noqa: F401  (the mode first: cpu mode sets TRITON_INTERPRET)

import pytest
import torch

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="the interpreter's gap: cpu mode only")

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402

from gpu_course import triton_libdevice  # noqa: E402


@triton.jit
def _erf_exp_sqrt_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=0.0)
    tl.store(out_ptr + i, libdevice.erf(x) + libdevice.exp(x) + libdevice.sqrt(tl.abs(x)), mask=i < n)


def test_libdevice_functions_that_tl_math_has_run_in_the_interpreter():
    assert triton_libdevice.install() and triton_libdevice.install()    # once, and again is a no-op
    x = torch.linspace(-3, 3, 37)
    out = utils.poisoned(37)
    _erf_exp_sqrt_kernel[(3,)](x, out, 37, BLOCK=16)
    ref = torch.tensor([math.erf(v) + math.exp(v) + math.sqrt(abs(v)) for v in x.double().tolist()], dtype=torch.float64)
    assert torch.allclose(out.double(), ref, rtol=1e-6, atol=1e-6)
    assert "erf" in triton_libdevice.shared_names() and "tanh" not in triton_libdevice.shared_names()
