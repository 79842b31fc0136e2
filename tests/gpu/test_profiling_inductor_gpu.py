"""What notebooks 02 and 08 read from the tools, on a real GPU: the profiler's Activity Buffer Request
row copies the first kernel's time and is counted in its operator's CUDA total; Inductor keeps fp16
addmm with its bias but splits fp32 addmm into mm + a generated bias kernel. Skipped on the CPU."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import utils
from gpu_course import inductor, profiling

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


def test_the_buffer_request_row_is_counted_in_the_first_operators_cuda_total():
    x = torch.randn(2048, 2048, device="cuda")
    lin = torch.nn.Linear(2048, 2048, device="cuda")
    with torch.no_grad():
        lin(x)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            lin(x)
            torch.cuda.synchronize()
    rows = {e.key: e for e in p.key_averages()}
    kernels = sum(us for _, us in profiling.kernel_times(p).values())
    buffer = sum(rows[k].device_time_total for k in profiling.PROFILER_ROWS if k in rows)
    assert kernels > 0 and not set(profiling.PROFILER_ROWS) & set(profiling.kernel_times(p))
    assert abs(rows["aten::addmm"].device_time_total - kernels - buffer) <= 0.01 * rows["aten::addmm"].device_time_total


@pytest.mark.parametrize("dtype, calls", [(torch.float16, ["addmm"]), (torch.float32, ["mm"])])
def test_inductor_keeps_half_precision_bias_in_addmm_and_splits_fp32(dtype, calls):
    torch._dynamo.reset()
    lin = torch.nn.Linear(256, 512, device="cuda", dtype=dtype)
    x = torch.randn(128, 256, device="cuda", dtype=dtype)
    fn = torch.compile(lambda t: torch.nn.functional.gelu(lin(t), approximate="tanh"))
    with torch.no_grad(), inductor.capture_logs(output_code=True) as log:
        fn(x)
    assert inductor.extern_calls(log.text) == calls
    if dtype == torch.float32:  # the bias went into the generated GeLU kernel
        assert any("addmm" in k and "gelu" in k for k in inductor.kernels_in(log.text)), list(inductor.kernels_in(log.text))
