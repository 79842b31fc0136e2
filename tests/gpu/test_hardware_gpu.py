"""gpu_course.hardware on a real GPU: where the course's table has this GPU, the table agrees with what the
driver reports (SMs, compute capability, and its architecture's limits). Skipped on the CPU."""
import pytest
import torch

import utils
from gpu_course import hardware

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


def test_the_table_agrees_with_the_driver():
    p = torch.cuda.get_device_properties(0)
    gpu = hardware.this_gpu()
    assert (gpu.name, gpu.sms, gpu.cc) == (p.name, p.multi_processor_count, (p.major, p.minor))
    arch = gpu.arch   # each figure torch reports (older torch lacks some: those are not compared)
    assert arch.threads == getattr(p, "max_threads_per_multi_processor", arch.threads)
    assert arch.registers == getattr(p, "regs_per_multiprocessor", arch.registers)
    assert arch.shared_per_sm == getattr(p, "shared_memory_per_multiprocessor", arch.shared_per_sm)
    assert arch.shared_per_block == getattr(p, "shared_memory_per_block_optin", arch.shared_per_block)
    if hardware.lookup(p.name) is None:
        pytest.skip(f"{p.name} is not in gpu_course.hardware.GPUS: its limits above come from its architecture")
