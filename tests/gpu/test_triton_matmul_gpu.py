"""The Triton matmul on a real GPU: Hopper tensor cores for TF32 in both layouts of b, and a
k-major b tuned apart from a row-major one. Skipped on the CPU."""
import pytest
import torch

import utils
from gpu_course.kernels.triton_matmul import matmul, tensor_core_instruction

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.mark.parametrize("k_major", [False, True])
def test_tf32_uses_tensor_cores_in_both_layouts(k_major):
    a, b = torch.randn(512, 384, device="cuda"), torch.randn(384, 640, device="cuda")
    if k_major:
        b = b.t().contiguous().t()
    utils.check(matmul(a, b, tf32=True, alloc=utils.poisoned), a.double() @ b.double(), atol=0.1, rtol=1e-2)
    op = tensor_core_instruction(a, b, tf32=True)
    wanted = "wgmma" if torch.cuda.get_device_capability() >= (9, 0) else "mma"
    assert op.startswith(wanted) and "tf32" in op, op


@pytest.mark.parametrize("dtype, shape, epilogue", [(torch.float16, (1000, 777, 555), False),
                                                    (torch.float16, (256, 512, 384), True),
                                                    (torch.float32, (300, 200, 100), True)])
def test_the_cpp_route_gives_the_python_paths_result_bit_for_bit(dtype, shape, epilogue):
    from gpu_course.kernels import triton_matmul as tm
    assert tm.build_route(), tm.route_status()
    h, k, w = shape
    a, b = torch.randn(h, k, device="cuda", dtype=dtype), torch.randn(k, w, device="cuda", dtype=dtype)
    kw = dict(bias=torch.randn(w, device="cuda", dtype=dtype), activation="gelu") if epilogue else {}
    with tm.without_route():
        want = tm.matmul(a, b, **kw)                       # tunes, compiles, registers nothing
    first = tm.matmul(a, b, **kw)                          # the Python path, registering the kernel
    assert tm.route_taken(a, b, kw.get("bias"), kw.get("activation", "")), "the route did not take this kernel"
    got = tm.matmul(a, b, **kw)                            # through the route
    assert torch.equal(first, want) and torch.equal(got, want)
    torch.cuda.synchronize()
