"""Notebook 16's decode kernels on a real GPU, in fp16 (and bf16 where the GPU has it) at d 64 and 128: every tile the
probe sweeps, split or not, grouped or per query head, paged at 16/64/256 with shuffled pages, speculative tokens;
lengths no multiple of any block. Skipped on the CPU."""
import pytest
import torch

import utils  # first: chooses the mode before triton is imported
from triton.runtime.errors import OutOfResources  # noqa: E402
from gpu_course.kernels import triton_decode as td
from gpu_course.lessons import decode as dl

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")
DTYPES = [torch.float16] + ([torch.bfloat16] if utils.gpu_supports("bf16")[0] else [])


def inputs(d, dtype, T=1, L=3001):
    q, k, v = dl.make_cache(3, 8, 2, L, d, tokens=T, dtype=dtype, seed=d)
    return q, k, v, torch.tensor([L, L * 3 // 5 + 2, 40], dtype=torch.int32, device="cuda")   # all within L


def err(out, ref):
    return (out.double() - ref).abs().max().item()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("tile", [(32, 4, 2), (64, 4, 3), (128, 8, 3), (64, 2, 4)])
def test_tiles_and_splits(dtype, d, tile):
    q, k, v, lens = inputs(d, dtype)
    ref = td.decode_reference(q, k, v, lens)
    for splits in (1, 4, 13):
        try:
            out = td.decode_attention(q, k, v, lens, splits=splits, block_n=tile[0], num_warps=tile[1],
                                      num_stages=tile[2], poison=True)
        except OutOfResources:
            pytest.skip(f"tile {tile} needs more shared memory than this GPU gives a block")
        assert err(out, ref) < 2e-2, (splits, tile)


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_query_head_and_speculative(dtype):
    q, k, v, lens = inputs(128, dtype, T=4)
    ref = td.decode_reference(q, k, v, lens)
    assert err(td.decode_attention(q, k, v, lens), ref) < 2e-2
    assert err(td.decode_attention(q, k, v, lens, group_heads=False), ref) < 2e-2


@pytest.mark.parametrize("page", [16, 64, 256])
@pytest.mark.parametrize("block_n", [16, 64, 128])
def test_paged(page, block_n):
    q, k, v, lens = inputs(128, DTYPES[-1], L=1500)
    kp, vp, table = td.paged_cache(k, v, page, lens.cpu(), generator=torch.Generator().manual_seed(page), spare=5)
    out = td.paged_decode_attention(q, kp, vp, table, lens, block_n=block_n, poison=True)
    assert err(out, td.decode_reference(q, k, v, lens)) < 2e-2


@pytest.mark.parametrize("splits", [2, 4, 13, 33])
def test_last_program_combines(splits):
    """One launch a step: the last program of each column combines; run three times (the counts are reused)."""
    q, k, v, lens = inputs(128, DTYPES[-1], T=2)
    ref = td.decode_reference(q, k, v, lens)
    for _ in range(3):
        assert err(td.decode_attention(q, k, v, lens, splits=splits, poison=True, last_combines=True), ref) < 2e-2
    assert not td._zero_counts(1, q.device).any()
    kp, vp, table = td.paged_cache(k, v, 16, lens.cpu(), generator=torch.Generator().manual_seed(splits))
    out = td.paged_decode_attention(q, kp, vp, table, lens, splits=splits, poison=True, last_combines=True)
    assert err(out, ref) < 2e-2
