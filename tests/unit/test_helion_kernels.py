"""Notebook 17's Helion kernels (gpu_course.kernels.helion_kernels) against float64, on shapes no block divides, into
NaN-poisoned outputs; and the Triton Helion generates for them (read on any machine). Skipped where Helion is not
installed. In cpu mode the generated Triton runs in Triton's interpreter."""
import utils  # noqa: F401  (the mode first)

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("helion")
from gpu_course.kernels import helion_kernels as hk  # noqa: E402

DTYPES = [(torch.float32, 1e-4), (torch.float16, 2e-2)]


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_softmax_rows_matches_float64(dtype, tol):
    x = torch.randn(37, 100, dtype=dtype, device=utils.DEVICE) * 4
    out = hk.softmax_rows(x, utils.poisoned(37, 100, dtype=dtype, device=utils.DEVICE))
    assert not out.isnan().any()
    torch.testing.assert_close(out.double(), torch.softmax(x.double(), 1), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_matmul_and_the_fused_epilogue_match_float64(dtype, tol):
    a = torch.randn(45, 70, dtype=dtype, device=utils.DEVICE)
    b = torch.randn(70, 37, dtype=dtype, device=utils.DEVICE)
    bias = torch.randn(37, dtype=dtype, device=utils.DEVICE)
    prod = a.double() @ b.double()
    got = hk.matmul(a, b, utils.poisoned(45, 37, dtype=dtype, device=utils.DEVICE))
    torch.testing.assert_close(got.double(), prod, atol=tol * 8, rtol=tol)   # sums of 70 products of size ~1
    got = hk.matmul_bias_gelu(a, b, bias, utils.poisoned(45, 37, dtype=dtype, device=utils.DEVICE))
    torch.testing.assert_close(got.double(), F.gelu(prod + bias.double()), atol=tol * 8, rtol=tol)


def test_the_generated_triton_reads_as_the_course_writes_it():
    a = torch.randn(45, 70, device=utils.DEVICE)
    b = torch.randn(70, 37, device=utils.DEVICE)
    code = hk.triton_code(hk.matmul, (a, b, torch.empty(45, 37, device=utils.DEVICE)))
    assert "@triton.jit" in code and "tl.dot(" in code and "tl.program_id(0)" in code
    assert "mask_0 = indices_0 < 45" in code and "mask_1 = indices_1 < 37" in code   # static shapes: edges as constants
    x = torch.randn(37, 100, device=utils.DEVICE)
    code = hk.triton_code(hk.softmax_rows, (x, torch.empty_like(x)))
    assert "tl.sum(" in code and "libdevice.exp(" in code


def test_lines_of_code_count_the_kernel_not_its_docstring():
    from gpu_course.lessons.languages import python_loc
    assert python_loc(hk.softmax_rows) == 7           # the def, five lines of body, the return (no docstring)
    assert python_loc(hk.matmul) < python_loc(hk.matmul_bias_gelu) + 1


def test_the_helion_kind_owns_helion_kernels_and_finds_the_triton_they_generate():
    """Exercise 4 of notebook 17 is judged by the Triton kernel Helion generated from the learner's function: the kind
    must tell a Helion kernel from a Triton one, and find the generated kernel after a call."""
    from gpu_course.exercises import kinds
    from gpu_course.exercises.kinds.helion import generated_kernels
    assert kinds.get("helion").owns(hk.matmul) and not kinds.get("triton").owns(hk.matmul)
    assert kinds.kind_of(hk.softmax_rows) is kinds.get("helion")
    x = torch.randn(37, 100, device=utils.DEVICE)
    out = hk.softmax_rows(x, torch.empty_like(x))
    assert [f.__name__ for f in generated_kernels(hk.softmax_rows, (x, out))] == ["_helion_softmax_rows"]


def test_a_gpu_with_little_shared_memory_keeps_the_matmul_configs_that_fit_or_a_small_one():
    from gpu_course.hardware import acting_as_profile
    with acting_as_profile("t4"):
        assert [c.block_sizes for c in hk.fitting_matmul_configs(hk.MATMUL_CONFIGS)] == [[128, 128, 32]]
        assert hk.fitting_matmul_configs(hk.MATMUL_CONFIGS[:3]) == [hk.SMALL_MATMUL]   # none of these fits 64 KB


@pytest.mark.skipif(utils.ON_GPU, reason="cpu mode's rule: a GPU times a configs list")
def test_a_helion_answer_with_a_configs_list_is_refused_in_cpu_mode_with_the_fix():
    import helion
    from gpu_course.exercises.kinds.helion import one_config_on_the_cpu
    one_config_on_the_cpu(hk.matmul)                                 # one config: runs
    listed = helion.kernel(hk.matmul.fn, configs=hk.MATMUL_CONFIGS[:2])
    with pytest.raises(ValueError, match=r"has 2 configs: in cpu mode .*config=helion.Config"):
        one_config_on_the_cpu(listed)
    with pytest.raises(ValueError, match="has no config"):
        one_config_on_the_cpu(helion.kernel(hk.matmul.fn))
