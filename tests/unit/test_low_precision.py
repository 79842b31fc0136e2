"""Notebook 15: the quantisers, the error tables, the FP8 GEMM and the int4/int8 GEMVs (in the interpreter on the
CPU) against float64, on sizes that are no multiple of the blocks, into poisoned outputs."""
import pytest
import torch

import utils  # noqa: F401  first: the mode
from gpu_course.lessons.low_precision import errors as E, quantize as Q

triton = pytest.importorskip("triton")
from gpu_course.kernels import fp8_matmul as F, quant_gemv as G  # noqa: E402
from gpu_course.lessons.low_precision import measure as M  # noqa: E402


def test_pack_int4_roundtrips_and_puts_even_columns_low():
    q = torch.randint(-8, 8, (5, 12), dtype=torch.int8)
    p = Q.pack_int4(q)
    assert p.shape == (5, 6) and p.dtype == torch.uint8
    assert torch.equal(Q.unpack_int4(p), q)
    assert (p[0, 0] & 0xF).item() == q[0, 0].item() + 8


def test_int4_groups_dequantise_within_half_a_step():
    w = Q.weight_like(7, 300, seed=3)
    p, s = Q.quantize_int4_groups(w, 128, torch.float32)
    assert s.shape == (3, 7)
    wd = Q.dequantize_int4_groups(p, s)
    step = s.t().double().repeat_interleave(128, 1)[:, :300]
    assert ((wd - w.double()).abs() <= 0.5 * step + 1e-7).all()


def test_quantize_clamps_fp8_and_scales_blocks():
    q, s = Q.quantize(torch.tensor([[1.0, -1000.0, 3.0, 4.0]]), "e4m3", (1, 2))
    assert s.shape == (1, 2) and torch.isfinite(q.float()).all()
    assert Q.to_format(torch.tensor([1e6, float("inf")]), "e4m3").float().tolist() == [448.0, 448.0]
    assert Q.to_format(torch.tensor([1e6]), "e5m2").float().item() == 57344.0


def test_block_scales_beat_per_tensor_on_outliers():
    x, _ = Q.outlier_activations(64, 512, seed=5)
    w = Q.weight_like(64, 512, seed=6)
    t = E.error_table(x, w, fmts=("int8",), grans=("per tensor", "1x128 / 128x128"))
    assert t[("int8", "1x128 / 128x128")][1] * 5 < t[("int8", "per tensor")][1]


def test_cheapest_within_takes_the_first_that_fits():
    x, _ = Q.outlier_activations(32, 256, seed=7, factor=1.0, massive=1.0)
    w = Q.weight_like(32, 256, seed=8)
    assert E.cheapest_within(x, w, "e4m3", 1.0) == "per tensor"
    assert E.cheapest_within(x, w, "int4", 1e-6) is None


@pytest.mark.parametrize("scaling", F.SCALINGS)
def test_fp8_matmul_matches_float64(scaling):
    qa, qw, sa, sw = M.fp8_operands(40, 256, 24, scaling, seed=1)
    out = F.fp8_matmul(qa, qw.t(), sa, sw, scaling, alloc=lambda *s, **k: utils.poisoned(*s, **k))
    assert utils.check(out, M.fp8_reference(qa, qw, sa, sw, scaling), atol=2e-2, rtol=1e-2)


def test_fp8_matmul_refuses_wrong_scales():
    qa, qw, sa, sw = M.fp8_operands(32, 256, 32, "tensor")
    with pytest.raises(AssertionError, match="block scaling wants sa"):
        F.fp8_matmul(qa, qw.t(), sa, sw, "block")


@pytest.mark.parametrize("m", [1, 5, 17])
def test_int4_and_int8_gemv_match_float64(m):
    w = Q.weight_like(37, 384, seed=2).to(utils.DEVICE)     # the course's device: a GPU runs these tests too
    x = torch.randn(m, 384).half().to(utils.DEVICE)
    p, s = Q.quantize_int4_groups(w, 128, torch.float16)
    assert utils.check(G.int4_gemv(x, p, s), x.double() @ Q.dequantize_int4_groups(p, s).T, atol=2e-2, rtol=1e-2)
    q8, s8 = Q.quantize_int8_rows(w, torch.float16)
    assert utils.check(G.int8_gemv(x, q8, s8), x.double() @ (q8.double() * s8.double()[:, None]).T,
                       atol=2e-2, rtol=1e-2)


def test_int4_gemv_split_k_and_wide_blocks():
    w = Q.weight_like(20, 512, seed=4).to(utils.DEVICE)
    x = torch.randn(2, 512).half().to(utils.DEVICE)
    p, s = Q.quantize_int4_groups(w, 128, torch.float16)
    out = G.int4_gemv(x, p, s, cfg=dict(BLOCK_N=16, BLOCK_K=256, SPLIT_K=2, num_warps=4, num_stages=1))
    assert utils.check(out, x.double() @ Q.dequantize_int4_groups(p, s).T, atol=2e-2, rtol=1e-2)


def test_int4_gemv_refuses_unpacked_weights():
    with pytest.raises(AssertionError, match="two weights a byte"):
        G.int4_gemv(torch.randn(1, 256).half(), torch.zeros(8, 256, dtype=torch.uint8), torch.ones(2, 8).half())


def test_torch_int4_on_the_cpu_matches_our_format():
    w = Q.weight_like(16, 256, seed=9)
    fn, _ = M.torch_int4(w)
    x = torch.randn(2, 256).to(M.act_dtype())
    p, s = Q.quantize_int4_groups(w, 128, M.act_dtype())
    assert utils.check(fn(x), x.double() @ Q.dequantize_int4_groups(p, s).T, atol=2e-2, rtol=1e-2)


def test_crossover_batch_balances_the_two_times():
    m = M.crossover_batch(4096, 4096, 4, 2, 2, 100.0, 1000.0)
    flops = 2 * m * 4096 * 4096 / 100e12
    nbytes = (4096 * 4096 / 2 + m * 4096 * 4) / 1000e9
    assert abs(flops - nbytes) < 1e-12


def formula_only(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):   # a learner's cell: no "never"
    flop_s, byte_s = tflops * 1e12, gbs * 1e9
    return (n * k * weight_bits / 8 / byte_s) / (2 * n * k / flop_s - (k * act_bytes + n * out_bytes) / byte_s)


def test_a_layer_that_never_turns_compute_bound_has_no_crossover(capsys):
    # each row adds 17.3 ns of FLOPs and 20.5 ns of bytes: the formula's -555 is no batch at all
    assert M.crossover_batch(1024, 1024, 4, 2, 4, 121.0, 300.0) == float("inf")
    utils.formula_exercise("crossover", formula_only, M.crossover_batch,
                           [(8192, 8192, 4, 2, 2, 989.0, 4258.0), (1024, 1024, 4, 2, 4, 121.0, 300.0)], rtol=1e-6)
    assert "it gives -555.1254480286738, expected inf" in capsys.readouterr().out


def test_check_scale_choice_accepts_the_rule_and_refuses_a_constant():
    right = lambda x, w, fmt, budget: E.GRANULARITIES and next(   # noqa: E731
        (g for g in E.GRANULARITIES
         if (Q.row_errors(Q.roundtrip(x, fmt, E.GRANULARITIES[g][0]) @ Q.roundtrip(w, fmt, E.GRANULARITIES[g][1]).T,
                          x.double() @ w.double().T).max().item() <= budget)), None)
    assert E.check_scale_choice(right, seed=1)
    with pytest.raises(AssertionError, match="on fresh data it chose"):
        E.check_scale_choice(lambda x, w, fmt, budget: "1x128 / 128x128", seed=1)


def test_int4_tuned_choice_is_kept_and_launched_directly(monkeypatch):
    """On a GPU the autotuner chooses once per shape; every later call launches that choice with no tuner and no
    zeroing: a stand-in tuner counts its calls."""
    calls = []

    class Tuner:
        best_config = triton.Config(dict(BLOCK_N=16, BLOCK_K=256, SPLIT_K=1), num_warps=4, num_stages=1)

        def __getitem__(self, grid):
            return lambda *a, **k: calls.append(k)
    monkeypatch.setattr(G, "_int4_tuned", Tuner())
    monkeypatch.setattr(G, "INT4_CONFIG", None)
    monkeypatch.setattr(G, "_TUNED", {})
    w = Q.weight_like(24, 256, seed=9).to(utils.DEVICE)
    x = torch.randn(1, 256).half().to(utils.DEVICE)
    p, s = Q.quantize_int4_groups(w, 128, torch.float16)
    for _ in range(3):
        assert utils.check(G.int4_gemv(x, p, s), x.double() @ Q.dequantize_int4_groups(p, s).T, atol=2e-2, rtol=1e-2)
    assert len(calls) == 1 and list(G._TUNED.values()) == [dict(BLOCK_N=16, BLOCK_K=256, SPLIT_K=1, num_warps=4,
                                                                  num_stages=1)]


def test_fixed_and_rate_recovers_a_line_and_the_sweep_names_every_kernel():
    pts = [(b, 0.012 + b / 3e9) for b in (1e6, 5e6, 3e7)]          # ms: 12 µs + bytes at 3,000 GB/s (3e9 B a ms)
    fixed, rate = M.fixed_and_rate(pts)
    assert fixed == pytest.approx(12.0, abs=1e-6) and rate == pytest.approx(3000.0, rel=1e-9)
    sweep = M.size_sweep(256, (32, 64))
    assert {M.KMAJOR, "copy, as many bytes", M.LINEAR[M.act_dtype()]} <= set(sweep)
    assert all(len(points) == 2 and points[1][0] == 2 * points[0][0] for points in sweep.values())  # bytes grow with n
    table = M.size_sweep_table(sweep, 256, (32, 64)).splitlines()
    assert table[1].split()[:3] == ["32", "x", "256"] and table[-len(sweep)].startswith(next(iter(sweep)))


def test_steps_sweep_times_each_steps_on_the_same_bytes():
    sweep = M.steps_sweep(256, (32, 64), steps=(4, 32))
    assert list(sweep) == ["STEPS=4", "STEPS=32"]
    assert all(len(p) == 2 and p[1][0] == 2 * p[0][0] for p in sweep.values())     # bytes grow with n, alike
    assert sweep["STEPS=4"][0][0] == sweep["STEPS=32"][0][0]
    assert M.size_sweep_table(sweep, 256, (32, 64)).splitlines()[-1].startswith("STEPS=32")


def test_block_scaling_waits_for_every_product_in_its_loop():
    """The fp8 GEMM compiled for sm_90 without a GPU, each scaling on the other's tile (notebook 15 compiles all four
    pairs): per tensor the k loop leaves one group of wgmma products running (wait_group 1), with 128-block scaling
    it waits for all of them (wait_group 0) every k-block."""
    ptx_tensor, ptx_block = M._fp8_ptx("tensor", F.GPU_BLOCK_CONFIG), M._fp8_ptx("block", F.GPU_DEFAULT_CONFIG)
    assert M.wgmma_waits(ptx_tensor) == {"in the loop": [1], "after": [0]}
    assert M.wgmma_waits(ptx_block) == {"in the loop": [0], "after": []}
    # b's block scales go through shared memory in the block-scaled loop only, which has no fewer barriers
    per_tensor, blocks = M.loop_ops(ptx_tensor), M.loop_ops(ptx_block)
    assert per_tensor["st.shared"] == per_tensor["ld.shared"] == 0 < blocks["st.shared"] <= blocks["ld.shared"]
    assert 0 < per_tensor["bar.sync"] <= blocks["bar.sync"]
