"""Notebook 10's GPU-only paths on a real GPU, at a small size (fast): forward + backward captured in a
CUDA graph and replayed (gradients checked against torch by ``under_cuda_graph`` itself), and the
profiler's list of the backward's kernels. Skipped on the CPU."""
import pytest
import torch

import utils
from gpu_course.kernels import triton_layernorm as ln

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_under_cuda_graph_replays_correct_gradients(dtype):
    got = ln.under_cuda_graph(64, 1000, dtype)  # raises CheckFailed if a replay's gradients are wrong
    ours = got[f"{ln.OURS}, CUDA graph"]
    assert ours.cpu_ms < 0.05, ours           # a replay is one launch: well under 50 µs of CPU


def test_kernels_launched_lists_ours_backward():
    x, wt, b, dy = ln.inputs(64, 1000, torch.float16)
    y = ln.layer_norm_op(x, wt, b)

    def backward():
        x.grad = wt.grad = b.grad = None
        y.backward(dy, retain_graph=True)
    names = ln.kernels_launched(backward)
    assert any("layer_norm_bwd_dx_kernel" in n for n in names), names
    assert any("layer_norm_bwd_dwdb_kernel" in n for n in names), names
