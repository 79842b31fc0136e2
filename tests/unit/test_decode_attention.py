"""Notebook 16's decode kernels (split-KV, GQA, paged) in Triton's interpreter, against float64, and the lesson's
helpers (the split rule, the combine's partials, the tokens/s formula, SDPA's ways of calling GQA)."""
import pytest
import torch

import utils  # noqa: F401  first: the mode
from gpu_course.kernels import triton_decode as td
from gpu_course.lessons import decode as dl


def _inputs(B=2, HQ=4, HKV=2, T=1, L=37, D=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, HQ, T, D, generator=g), torch.randn(B, HKV, L, D, generator=g),
            torch.randn(B, HKV, L, D, generator=g))


@pytest.mark.parametrize("splits", [1, 2, 5])
@pytest.mark.parametrize("T", [1, 2])
@pytest.mark.parametrize("group_heads", [True, False])
def test_contiguous_matches_float64(splits, T, group_heads):
    q, k, v = _inputs(T=T)
    lens = torch.tensor([37, 18], dtype=torch.int32)                 # neither a multiple of the block (16)
    out = td.decode_attention(q, k, v, lens, splits=splits, group_heads=group_heads, poison=True)
    assert not out.isnan().any()
    torch.testing.assert_close(out.double(), td.decode_reference(q, k, v, lens), atol=1e-5, rtol=1e-5)


def test_whole_capacity_without_lengths_and_a_strided_cache():
    q, k, v = _inputs(L=40)
    kt, vt = k.transpose(1, 2).contiguous().transpose(1, 2), v.transpose(1, 2).contiguous().transpose(1, 2)
    out = td.decode_attention(q, kt, vt, splits=3)
    torch.testing.assert_close(out.double(), td.decode_reference(q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("splits", [2, 5, 11])      # 11: one full unrolled block of 8 splits and a rest
@pytest.mark.parametrize("T", [1, 3])
def test_last_program_combines_like_the_combine_kernel(splits, T):
    q, k, v = _inputs(T=T, seed=splits)
    lens = torch.tensor([37, 3], dtype=torch.int32)      # the second sequence leaves splits without a key
    ref = td.decode_reference(q, k, v, lens)
    for _ in range(2):                                   # twice: the counts must be back at 0 after a launch
        out = td.decode_attention(q, k, v, lens, splits=splits, poison=True, last_combines=True)
        assert not out.isnan().any()
        torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    assert not td._zero_counts(1, q.device).any()
    kp, vp, table = td.paged_cache(k, v, 8, lens, generator=torch.Generator().manual_seed(1))
    out = td.paged_decode_attention(q, kp, vp, table, lens, splits=splits, poison=True, last_combines=True)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


def test_reference_is_causal_among_the_new_tokens():
    q, k, v = (t.double() for t in _inputs(B=1, HQ=2, HKV=2, T=2, L=5))
    ref = td.decode_reference(q, k, v)
    first = torch.softmax(q[0, :, :1] @ k[0, :, :4].transpose(-2, -1) / 4, -1) @ v[0, :, :4]   # token 0 sees 4 keys
    torch.testing.assert_close(ref[0, :, :1], first)


@pytest.mark.parametrize("page", [4, 8, 24])       # smaller than the block, equal to half of it, not a power of 2
@pytest.mark.parametrize("splits", [1, 3])
def test_paged_reads_through_the_table(page, splits):
    q, k, v = _inputs(L=50)
    lens = torch.tensor([50, 21], dtype=torch.int32)
    kp, vp, table = td.paged_cache(k, v, page, lens, generator=torch.Generator().manual_seed(page), spare=2)
    assert kp.isnan().any()                          # the rows no sequence owns are poisoned
    out = td.paged_decode_attention(q, kp, vp, table, lens, splits=splits, poison=True)
    torch.testing.assert_close(out.double(), td.decode_reference(q, k, v, lens), atol=1e-5, rtol=1e-5)


def test_paged_cache_fast_is_a_permutation_of_the_cache():
    q, k, v = _inputs(L=48)
    kp, vp, table = td.paged_cache_fast(k, v, 16, generator=torch.Generator().manual_seed(3))
    assert sorted(table.flatten().tolist()) == list(range(6))
    out = td.paged_decode_attention(q, kp, vp, table, td.full_lengths(2, 48, "cpu"), splits=2)
    torch.testing.assert_close(out.double(), td.decode_reference(q, k, v), atol=1e-5, rtol=1e-5)


def test_combine_kernel_weighs_empty_splits_zero():
    o, lse = dl.fresh_partials(4, 6, 16, empty=2, seed=1)
    out = torch.empty(4, 16)
    td.decode_combine_kernel[(4,)](o, lse, out, 6, HEAD_DIM=16, BLOCK_S=8)
    torch.testing.assert_close(out.double(), dl.combine_reference(o, lse), atol=1e-5, rtol=1e-5)
    assert (lse == float("-inf")).sum() == 8 and lse.max() > 89      # exp(lse) alone would overflow fp32


def test_split_rule():
    assert td.choose_splits(8, 8, 32768, 132) == 4                   # 264 // 64: one round of 256 programs
    assert td.choose_splits(1, 8, 4096, 132) == 32                   # 128 keys a split at least
    assert td.choose_splits(1, 8, 100, 132) == 1
    assert td.choose_splits(64, 8, 32768, 132) == 1                  # the batch fills the GPU
    for b, n in ((1, 4096), (2, 70000), (16, 8192)):
        s = td.choose_splits(b, 8, n, 132)
        assert s == 1 or (n // s >= td.MIN_KEYS and b * 8 * s <= td.PER_SM * 132 < b * 8 * (s + 1)
                          or n // (s + 1) < td.MIN_KEYS)


def test_bytes_flops_and_tokens_per_s():
    assert td.kv_bytes(8, 8, 32768, 128, 2) == 2**30
    p = dl.roofline_point(8, 32, 8, 1, 32768, 128)
    assert p["intensity"] == 4.0
    tps = dl.decode_tokens_per_s(8, 32, 8, 128, 32768, 2, 16e9, 4000.0)
    assert tps == pytest.approx(8 / ((32 * 2**30 + 16e9) / 4e12))


def test_clear_errors():
    q, k, v = _inputs()
    with pytest.raises(ValueError, match="shape"):
        td.decode_attention(q[0], k, v)
    with pytest.raises(ValueError, match="multiple of the KV heads"):
        td.decode_attention(q[:, :3], k, v)
    with pytest.raises(ValueError, match="one shape"):
        td.decode_attention(q, k, v.half())
    with pytest.raises(TypeError, match="dtype"):
        td.decode_attention(q.int(), k, v)
    kp, vp, table = td.paged_cache(k, v, 8)
    with pytest.raises(ValueError, match="block_table"):
        td.paged_decode_attention(q, kp, vp, table.long(), torch.tensor([37, 37], dtype=torch.int32))


def test_sdpa_ways_agree_on_the_cpu():
    q, k, v = _inputs(B=1, HQ=8, HKV=2, L=30)
    ref = td.decode_reference(q, k, v)
    fns, skipped = dl.sdpa_variants(q, k, v, ref=ref, atol=1e-5)
    assert set(fns) == {("MATH", w) for w in dl.GQA_WAYS}


def test_fresh_paged_problem_poisons_what_no_sequence_owns():
    q, (kp, vp, table), lens, (k, v) = dl.fresh_paged_problem(seed=4)
    assert (lens % 8 != 0).all() and (table == -1).any() or (lens % 8 != 0).all()
    used = set(table[table >= 0].tolist())
    unused = [p for p in range(kp.shape[0]) if p not in used]
    assert unused and all(kp[p].isnan().all() for p in unused)
    ref = dl.paged_problem_reference(q, (k, v), lens)
    out = td.paged_decode_attention(q[:, :, None], kp, vp, table, lens, splits=1)[:, :, 0]
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


def test_nhd_pages_hold_each_sequence_in_order():
    k = torch.randn(3, 2, 37, 8)
    p = dl.nhd_pages(k, 16)                        # 3 pages a sequence, the last holding 5 tokens
    assert p.shape == (9, 16, 2, 8)
    for b in range(3):
        seq = p[3 * b:3 * b + 3].reshape(48, 2, 8).transpose(0, 1)
        assert torch.equal(seq[:, :37], k[b]) and not seq[:, 37:].any()


def test_flashinfer_left_out_with_its_reason_where_it_cannot_run(capsys):
    q, k, v = (t.to(utils.DEVICE, dl.half_dtype()) for t in _inputs(B=2, HQ=8, HKV=2, L=300, D=128))
    fn, why = dl.flashinfer_decode(q, k, v)
    if fn is None:                                 # cpu mode, or a GPU without FlashInfer
        assert why.startswith("FlashInfer")
        assert dl.flashinfer_racers(q, k, v) == {}
        assert "not compared: FlashInfer, CUDA cores" in capsys.readouterr().out
    else:                                          # a GPU with FlashInfer: it matches the reference
        torch.testing.assert_close(fn().double(), td.decode_reference(q, k, v).double(), atol=2e-2, rtol=0)
