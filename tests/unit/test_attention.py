"""gpu_course/kernels/triton_attention/ (notebook 11): the plain-torch attentions and the Triton
FlashAttention forward and backward, on the CPU through Triton's interpreter, against float64 torch
(scaled_dot_product_attention, logsumexp, autograd) with poisoned outputs, at tiny sizes whose N is
not a multiple of the blocks. The interpreter costs milliseconds per program: few cases, small grids.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import utils
from gpu_course import hardware
from gpu_course.kernels import triton_attention as ta
from gpu_course.lessons import attention as lesson
from gpu_course.lessons.attention import ladder as lesson_ladder, sdpa as lesson_sdpa

# (batch, heads, N, d): N = 1 (one row), 17 and 100 (ragged last blocks), 64 (a multiple of every block)
SHAPES = [(1, 2, 1, 16), (1, 2, 17, 16), (2, 2, 64, 16), (1, 2, 100, 64)]


def qkv(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(utils.DEVICE, dtype) for _ in range(3)]


def reference(q, k, v, do, causal, scale=None):
    """float64 output, LSE and gradients from torch."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal, scale=scale)
    s = q64 @ k64.transpose(-2, -1) * ta.default_scale(q.shape[-1], scale)
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    grads = torch.autograd.grad(out, (q64, k64, v64), do.double())
    return out.detach(), torch.logsumexp(s, dim=-1).detach(), grads


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_forward_lse_and_backward_match_float64(shape, causal):
    q, k, v = qkv(shape, seed=shape[2])
    do = qkv(shape, seed=99)[0]
    out, lse = ta.attention_forward(q, k, v, causal, alloc=utils.poisoned)
    ref_out, ref_lse, ref_grads = reference(q, k, v, do, causal)
    utils.check(out, ref_out, atol=1e-5, rtol=1e-4, name="out")
    utils.check(lse, ref_lse, atol=1e-5, rtol=1e-5, name="lse")
    grads = ta.attention_backward(q, k, v, out, lse, do, causal, alloc=utils.poisoned)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-4, rtol=1e-4, name=name)


@pytest.mark.parametrize("causal", [False, True])
def test_blocks_of_different_sizes(causal):
    """The GPU's configurations have BLOCK_M != BLOCK_N: the causal split into unmasked and masked
    stages must then still visit each block once (here with 32 x 16 and 16 x 32 blocks)."""
    shape = (1, 2, 83, 16)
    q, k, v = qkv(shape, seed=3)
    do = qkv(shape, seed=4)[0]
    ref_out, ref_lse, ref_grads = reference(q, k, v, do, causal, scale=0.3)
    out, lse = ta.attention_forward(q, k, v, causal, scale=0.3, alloc=utils.poisoned,
                                    cfg=dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1))
    utils.check(out, ref_out, atol=1e-5, rtol=1e-4, name="out")
    utils.check(lse, ref_lse, atol=1e-5, rtol=1e-5, name="lse")
    cfg = (dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1),   # dK/dV: a wide key block
           dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1))   # dQ: a tall query block
    grads = ta.attention_backward(q, k, v, out, lse, do, causal, scale=0.3, cfg=cfg, alloc=utils.poisoned)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-4, rtol=1e-4, name=name)


def test_flash_attention_autograd_fp16_and_non_contiguous_inputs():
    # q, k, v as a model makes them: (B, N, H, d) transposed to (B, H, N, d), not contiguous
    q, k, v = (t.transpose(1, 2) for t in qkv((2, 40, 2, 32), dtype=torch.float16, seed=5))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    do = qkv((2, 2, 40, 32), seed=6)[0].half()
    out = ta.flash_attention(q, k, v, causal=True)
    out.backward(do)
    ref_out, _, ref_grads = reference(q, k, v, do, True)
    utils.check(out, ref_out, atol=2e-3, rtol=1e-2, name="fp16 out")
    for g, r, name in zip((q.grad, k.grad, v.grad), ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-2, rtol=1e-2, name=f"fp16 {name}")


def test_bf16_on_the_gpu():
    if not utils.ON_GPU:
        pytest.skip("tl.dot on bf16 is wrong in Triton's interpreter (3.9: a 16x16 dot is off by ~1e10)")
    q, k, v = (t.requires_grad_() for t in qkv((2, 2, 300, 64), dtype=torch.bfloat16, seed=7))
    out = ta.flash_attention(q, k, v)
    out.backward(torch.ones_like(out))
    ref_out, _, ref_grads = reference(q, k, v, torch.ones_like(out), False)
    utils.check(out, ref_out, atol=2e-2, rtol=2e-2, name="bf16 out")
    utils.check(q.grad, ref_grads[0], atol=5e-2, rtol=5e-2, name="bf16 dq")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block", [1, 16, 33, 1000])
def test_online_softmax_matches_naive_and_sdpa(causal, block):
    q, k, v = (t.double() for t in qkv((2, 3, 50, 8), seed=8))
    naive = ta.naive_attention(q, k, v, causal)
    utils.check(naive, F.scaled_dot_product_attention(q, k, v, is_causal=causal), atol=1e-12, rtol=1e-10,
                name="naive vs sdpa")
    utils.check(ta.online_softmax_attention(q, k, v, causal, block), naive, atol=1e-12, rtol=1e-10,
                name=f"online, block {block}")
    q32, k32, v32 = (t.float() for t in (q, k, v))  # fp32 inputs: fp32 statistics
    utils.check(ta.online_softmax_attention(q32, k32, v32, causal, block, scale=0.5),
                ta.naive_attention(q, k, v, causal, scale=0.5), atol=1e-5, rtol=1e-4, name="online fp32")


def test_flop_counts():
    assert ta.attention_flops(1, 1, 10, 4) == 1600
    assert ta.attention_flops(1, 1, 10, 4, causal=True) == 800
    assert ta.attention_flops(1, 1, 10, 4, causal=True, backward=True) == 2000


@pytest.mark.parametrize("args, error, match", [
    ((torch.zeros(2, 8, 16),) * 3, ValueError, "shape \\(batch, heads, N, d\\)"),
    ((torch.zeros(1, 1, 8, 16), torch.zeros(1, 1, 9, 16), torch.zeros(1, 1, 8, 16)), ValueError, "one shape"),
    ((torch.zeros(1, 1, 8, 48),) * 3, ValueError, "head dimension d must be one of"),
    ((torch.zeros(1, 1, 0, 16),) * 3, ValueError, "at least 1"),
    ((torch.zeros(1, 1, 8, 16, dtype=torch.float64),) * 3, TypeError, "dtype must be one of"),
    ((torch.zeros(1, 1, 8, 16), torch.zeros(1, 1, 8, 16).half(), torch.zeros(1, 1, 8, 16)), TypeError,
     "one dtype"),
    ((torch.zeros(1, 1, 8, 16).numpy(),) * 3, TypeError, "must be a torch.Tensor"),
])
def test_bad_inputs_get_clear_errors(args, error, match):
    with pytest.raises(error, match=match):  # refused before any launch
        ta.flash_attention(*args)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("warp_specialize", [False, True])
def test_the_tensor_descriptor_forward_matches_float64_across_heads(causal, warp_specialize):
    """The descriptors view q, k, v as one (B*H*N, d) matrix: a block past N reads the next head's rows,
    which the mask must drop, and the output's last block must not spill into the next head (N = 37 with
    blocks of 16: ragged, and two heads and two batches after one another)."""
    shape = (2, 2, 37, 16)
    half = utils.ON_GPU   # on a GPU the descriptor kernel takes fp16 and bf16 only
    q, k, v = qkv(shape, torch.float16 if half else torch.float32, seed=5)
    do = qkv(shape, seed=6)[0]
    ref_out, ref_lse, _ = reference(q, k, v, do, causal, scale=0.4)
    try:
        out, lse = ta.attention_forward_desc(q, k, v, causal, scale=0.4, alloc=utils.poisoned,
                                             cfg=dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1),
                                             warp_specialize=warp_specialize)
    except RuntimeError as e:   # Triton 3.6's warp-specialisation pass refuses some Hopper kernels
        if utils.ON_GPU and warp_specialize and "PassManager" in str(e):
            pytest.skip(f"this Triton could not warp-specialise the kernel here: {str(e).splitlines()[0]}")
        raise
    tol = 2e-3 if half else 1e-5
    utils.check(out, ref_out, atol=tol, rtol=1e-3 if half else 1e-4, name="out")
    utils.check(lse, ref_lse, atol=tol, rtol=1e-5, name="lse")
    with pytest.raises(ValueError, match="BLOCK_M must be a multiple of BLOCK_N"):
        ta.attention_forward_desc(q, k, v, cfg=dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1))


def test_forward_ladder_checks_each_step_and_reports_the_ones_that_fail(monkeypatch):
    """Causal, every step is checked against causal float64 and runs; then (not causal) a step that does not
    compile and one that is wrong are reported and left out."""
    dtype = torch.float16 if utils.ON_GPU else torch.float32
    times, failed = lesson.forward_ladder((1, 2, 20), 16, dtype, causal=True)
    ok = [n for n in lesson.LADDER if n not in failed]   # on a GPU step 4 may fail to compile (said in `failed`)
    assert [n for n in times if n in lesson.LADDER] == ok and set(lesson.REGISTERS) == set(ok)
    assert set(failed) <= ({lesson.LADDER[3]} if utils.ON_GPU else set())
    assert "TFLOP/s" in lesson.ladder_table(times, ta.attention_flops(1, 2, 20, 16))
    assert set(lesson.PTX_CENSUS) == (set(ok) if utils.ON_GPU else set())
    real = ta.attention_forward_desc

    def broken(q, k, v, *a, warp_specialize=False, **kw):
        """Step 4 "fails to compile"; step 3 (desc_config's 32-row blocks below) is wrong on the ladder's
        check length (not the timed length, 20)."""
        if warp_specialize:
            raise RuntimeError("PassManager::run failed\nand a long dump")
        out, lse = real(q, k, v, *a, **kw)
        cfg = kw.get("cfg")
        return (out + 1 if isinstance(cfg, dict) and cfg["BLOCK_M"] == ta.desc_config(16)["BLOCK_M"]
                and not cfg.get("PERSIST") and q.shape[2] != 20 else out), lse

    monkeypatch.setattr(lesson_ladder, "attention_forward_desc", broken)
    for module in (ta, lesson_ladder):   # the ladder's step 3, and persist_config's tile (step 6)
        monkeypatch.setattr(module, "desc_config", lambda d: dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1))
    times, failed = lesson.forward_ladder((1, 2, 20), 16, dtype)
    assert [n for n in times if n in lesson.LADDER] == [lesson.LADDER[i] for i in (0, 1, 4, 5, 6)]
    assert failed[lesson.LADDER[3]].endswith("(RuntimeError: PassManager::run failed)")
    assert "wrong result here" in failed[lesson.LADDER[2]]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n, pipeline", [(16, False), (37, False), (53, False), (53, True)])
def test_the_persistent_descriptor_forward_matches_float64(n, pipeline, causal):
    """The persistent grid (step 6): fewer programs than units of work (pairs of query blocks of a head), so that
    each program loops over several; one query block (no pair), an odd number (the middle block alone) and an
    even number of blocks of 16 rows, ragged N, several heads and batches; with the pipelined loop too."""
    half = utils.ON_GPU
    shape = (utils.by_mode(gpu=4, cpu=2), utils.by_mode(gpu=40, cpu=2), n, 16)   # GPU: more units than SMs
    q, k, v = qkv(shape, torch.float16 if half else torch.float32, seed=11)
    ref_out, ref_lse, _ = reference(q, k, v, q, causal)
    cfg = dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=2, PERSIST=1)
    units = shape[0] * shape[1] * -(-n // 32)
    programs = ta._desc_grid(n, shape[0] * shape[1], cfg)[0]
    assert programs < units or n == 16 and not utils.ON_GPU
    out, lse = ta.attention_forward_desc(q, k, v, causal, alloc=utils.poisoned, cfg=cfg, pipeline=pipeline)
    tol = 2e-3 if half else 1e-5
    utils.check(out, ref_out, atol=tol, rtol=1e-3 if half else 1e-4, name="out")
    utils.check(lse, ref_lse, atol=tol, rtol=1e-5, name="lse")
    with pytest.raises(ValueError, match="PERSIST is programs per SM"):
        ta.attention_forward_desc(q, k, v, cfg=dict(cfg, PERSIST=-1))


def test_the_descriptor_grid():
    """One program per query block and head, or a persistent grid: never more programs than units of work
    (pairs of query blocks: 3 blocks make 2 units), nor more than SMs x PERSIST (4 in cpu mode)."""
    assert ta._desc_grid(100, 6, dict(BLOCK_M=32, PERSIST=0)) == (4, 6)
    assert ta._desc_grid(70, 2, dict(BLOCK_M=32, PERSIST=1)) == (4, 1)           # 2 heads x 2 units
    assert ta._desc_grid(70, 1, dict(BLOCK_M=32, PERSIST=1)) == (2, 1)
    most = hardware.sm_count(utils.DEVICE) * 2 if utils.ON_GPU else 4
    assert ta._desc_grid(1 << 16, 64, dict(BLOCK_M=128, PERSIST=2)) == (most, 1)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("how", ["pipelined", "tuned"])
def test_the_pipelined_and_the_tuned_descriptor_forwards_match_float64(causal, how):
    """Step 5's loop (the next block's scores before this block's softmax) and the descriptor autotuner (which
    tries it): ragged N across two heads and two batches, as above; in causal mode the first query block has no
    unmasked key block (the pipelined loop is skipped) and the others have several."""
    shape = (2, 2, 53, 16)
    half = utils.ON_GPU
    q, k, v = qkv(shape, torch.float16 if half else torch.float32, seed=7)
    ref_out, ref_lse, _ = reference(q, k, v, q, causal)
    opts = dict(cfg=dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=2), pipeline=True) if how == "pipelined" \
        else dict(cfg="tuned")
    out, lse = ta.attention_forward_desc(q, k, v, causal, alloc=utils.poisoned, **opts)
    tol = 2e-3 if half else 1e-5
    utils.check(out, ref_out, atol=tol, rtol=1e-3 if half else 1e-4, name="out")
    utils.check(lse, ref_lse, atol=tol, rtol=1e-5, name="lse")
    with pytest.raises(ValueError, match="warp_specialize or pipeline, not both"):
        ta.attention_forward_desc(q, k, v, warp_specialize=True, pipeline=True)


@pytest.mark.parametrize("causal", [False, True])
def test_the_atomic_backward_matches_float64_and_the_deterministic_one(causal):
    """dQ summed with atomic adds (one kernel, five matmuls): ragged N, poisoned outputs, against float64;
    through flash_attention(deterministic=False) too."""
    shape = (2, 2, 37, 16)
    q, k, v = qkv(shape, seed=8)
    do = qkv(shape, seed=9)[0]
    _, _, ref_grads = reference(q, k, v, do, causal)
    out, lse = ta.attention_forward(q, k, v, causal)
    grads = ta.attention_backward(q, k, v, out, lse, do, causal, alloc=utils.poisoned, deterministic=False)
    for g, r, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-4, rtol=1e-4, name=name)
    ins = [t.clone().requires_grad_() for t in (q, k, v)]
    auto = torch.autograd.grad(ta.flash_attention(*ins, causal, deterministic=False), ins, do)
    for g, r, name in zip(auto, ref_grads, ("dq", "dk", "dv")):
        utils.check(g, r, atol=1e-4, rtol=1e-4, name=name)


def test_backward_ladder_checks_each_way_and_counts_distinct_results():
    dtype = torch.float16 if utils.ON_GPU else torch.float32
    times, failed, distinct = lesson.backward_ladder((1, 2, 20), 16, causal=True, dtype=dtype)
    assert failed == {} and list(distinct) == list(lesson.BACKWARD_LADDER)
    assert [n for n in times if n in lesson.BACKWARD_LADDER] == list(lesson.BACKWARD_LADDER)
    assert distinct[lesson.BACKWARD_LADDER[0]] == 1   # the deterministic backward; the atomic one may give several
    assert lesson.distinct_results(iter([torch.ones(2), torch.ones(2), torch.zeros(2)]).__next__, runs=3) == 2
    table = lesson.ladder_table(times, ta.attention_flops(1, 2, 20, 16, backward=True), phase="backward")
    assert table.splitlines()[0].startswith("backward") and "regs" not in table


def test_the_ptx_census_counts_each_family_once_per_line():
    ptx = ("\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {a};\n  wgmma.wait_group.sync.aligned 0;\n"
           "  @%p7 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [x];\n"
           "  cp.async.cg.shared.global [y], [z], 16;\n  setmaxnreg.inc.sync.aligned.u32 240;\n"
           "  mbarrier.try_wait.parity.shared::cta.b64 p, [b], 0;\n  ld.global.v4.b32 {r}, [g];")
    assert lesson.ptx_census(ptx) == {"wgmma": 1, "wgmma waits": 1, "TMA copies": 1, "cp.async": 1, "setmaxnreg": 1,
                                  "mbarrier waits": 1}
    table = lesson.census_table({"step": lesson.ptx_census(ptx)})
    assert table.splitlines()[1].split() == ["step", "1", "1", "1", "1", "1", "1"]
    assert table.splitlines()[-1].startswith("wgmma: ")                  # the legend, unless asked to leave it out
    assert lesson.census_table({"step": lesson.ptx_census(ptx)}, legend=False).splitlines() == table.splitlines()[:-1]


def _ncu_raw(names):
    """A tiny `ncu --csv --page raw` export: one kernel per name, with the metrics limiters() reads."""
    cols = ["ID", "Kernel Name", "gpu__time_duration.sum",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
            "launch__registers_per_thread", "launch__occupancy_limit_registers",
            "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
            "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"]
    units = ["", "", "us", "%", "%", "%", "register/thread", "block", "ratio", "ratio"]
    lines = [",".join(f'"{c}"' for c in cols), ",".join(f'"{u}"' for u in units)]
    for i, n in enumerate(names):
        vals = [str(i), n, "1,111.5", "55.5", "40", "12.4", "168", "1", "1.5", "0.7"]
        lines.append(",".join(f'"{v}"' for v in vals))
    return "\n".join(lines) + "\n"


def test_attention_limiter_rows_round_trip_and_refuse_other_kernels(tmp_path):
    from gpu_course import profiling
    names = [piece + "_x" for _, piece in lesson.NCU_ORDER]
    rows = lesson.attention_limiter_rows(_ncu_raw(names), lesson.NCU_ORDER)
    assert [r["what"] for r in rows] == [w for w, _ in lesson.NCU_ORDER] and rows[0]["tensor_pct"] == 55.5
    profiling.write_limiter_csv(rows, lesson.NCU_FIELDS, tmp_path / "a.csv", "made by a test")
    back, about = profiling.read_limiter_csv(tmp_path / "a.csv", texts=("what", "kernel"))
    assert about == "made by a test" and back[2]["stalls"] == [("wait", 1.5), ("math_pipe_throttle", 0.7)]
    assert back[0]["kernel"] == names[0] and "cuDNN backward d=64" in lesson.limiter_table(back)
    with pytest.raises(ValueError, match="expected 8 in order"):
        lesson.attention_limiter_rows(_ncu_raw(names[::-1]), lesson.NCU_ORDER)
    with pytest.raises(ValueError, match="ncu profiled 7 kernels"):
        lesson.attention_limiter_rows(_ncu_raw(names[:7]), lesson.NCU_ORDER)


def test_a_failed_compile_s_dump_on_standard_error_is_muted(capfd):
    import os
    with lesson.compiler_dumps_muted():
        os.write(2, b"a page of MLIR\n")
    with pytest.raises(RuntimeError), lesson.compiler_dumps_muted():
        raise RuntimeError("PassManager::run failed")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_bad_configurations_and_blocks_are_refused():
    q = torch.zeros(1, 1, 8, 16)
    with pytest.raises(ValueError, match="BLOCK_M must be a multiple of BLOCK_N"):
        ta.attention_forward(q, q, q, cfg=dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1))
    with pytest.raises(ValueError, match="block must be at least 1"):
        ta.online_softmax_attention(q, q, q, block=0)
    with pytest.raises(ValueError, match="out and dout must have q's shape"):
        ta.attention_backward(q, q, q, q, torch.zeros(1, 1, 7), q)
    with pytest.raises(ValueError, match="out and dout must have q's shape"):   # the atomic backward too
        ta.attention_backward(q, q, q, q, torch.zeros(1, 1, 7), q, deterministic=False)


# ----------------------------------------------- the comparison with SDPA that notebook 11 and the bench share
def test_errors_like_sdpa_reports_both_and_refuses_a_wrong_attention(monkeypatch):
    # fp16: SDPA's flash backend (used on a GPU) takes no fp32
    q, k, v = (t.requires_grad_() for t in qkv((1, 2, 20, 16), dtype=torch.float16, seed=10))
    do = qkv((1, 2, 20, 16), dtype=torch.float16, seed=11)[0]
    errors = lesson.errors_like_sdpa(q, k, v, do, causal=True)
    assert list(errors) == ["out", "dq", "dk", "dv"]
    assert all(0 <= ours < 1e-2 and 0 <= theirs < 1e-2 for ours, theirs in errors.values())
    # an attention that forgets the causal mask must be caught
    monkeypatch.setattr(lesson_sdpa, "flash_attention", lambda q, k, v, causal: ta.naive_attention(q, k, v, not causal))
    with pytest.raises(utils.CheckFailed, match="causal=True: out errs by"):
        lesson.errors_like_sdpa(q, k, v, do, causal=True)


def small_grad_inputs(n=17, seed=12):
    q, k, v = (t.requires_grad_() for t in qkv((1, 1, n, 16), dtype=torch.float16, seed=seed))
    return q, k, v, torch.ones_like(q)


def test_time_attention_gives_what_a_user_gets_for_ours_and_each_baseline():
    q, k, v, do = small_grad_inputs()
    times = lesson.time_attention(q, k, v, do, causal=False, baselines={"SDPA flash": lesson.sdpa_flash})
    assert set(times) == {(n, p) for n in ("ours", "SDPA flash") for p in ("forward", "backward")}
    assert all(isinstance(t, utils.UserTiming) and t.median > 0 and t.loop_ms > 0 and t.cpu_ms > 0
               for t in times.values())
    table = lesson.speed_table(times, "backward", flops=10**6)
    assert table.splitlines()[0].split()[:4] == ["backward", "GPU", "time", "loop/step"]
    assert [line.split()[0] for line in table.splitlines()[1:3]] == ["ours", "SDPA"]
    # the library's time over ours, GPU and loop, per shape; a baseline that did not run has no entry
    speed = {(16, False): times}
    (g, lp), = lesson.speed_ratios(speed, "SDPA flash", "forward").values()
    assert g == pytest.approx(times["SDPA flash", "forward"].median / times["ours", "forward"].median)
    assert lp == pytest.approx(times["SDPA flash", "forward"].loop_ms / times["ours", "forward"].loop_ms)
    assert lesson.speed_ratios(speed, "SDPA cuDNN", "forward") == {}
    assert "nan" in lesson.ratio_table({**speed, (16, True): {k: t for k, t in times.items() if k[0] == "ours"}})
    rows = lesson.summary_rows(speed, (1, 1, 17))
    assert [r["what"] for r in rows] == ["flash attention forward, d=16", "flash attention backward, d=16"]
    assert rows[0]["vs_flash"] == pytest.approx(g) and rows[0]["vs_cudnn"] is None
    assert "vs cuDNN" in lesson.summary_table(rows)


def test_record_speed_names_ours_against_flash_and_cudnn_and_prints_nothing(capsys):
    q, k, v, do = small_grad_inputs()
    times = lesson.time_attention(q, k, v, do, baselines={"SDPA flash": lesson.sdpa_flash, "SDPA cuDNN": lesson.sdpa_flash})
    capsys.readouterr()
    kernels = lesson.record_speed("nb", "d=16", "tiny", times, "forward", flops=10**6)
    assert kernels == ["flash attention forward, d=16", "flash attention forward, d=16 vs cuDNN"]
    assert capsys.readouterr().out == ""


def test_stored_summary_rows_pair_the_flash_and_cudnn_rows(tmp_path, monkeypatch):
    from gpu_course import results
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    rows = [{"when": "t", "notebook": "nbx", "kernel": k, "size": "s", "device": "NVIDIA H100 80GB HBM3", "ms": "2",
             "rate": "494.7", "unit": "TFLOP/s", "pct_of_ceiling": "", "ceiling": "fp16", "baseline": b,
             "baseline_ms": "", "vs_baseline": vs} for k, b, vs in
            [("SDPA flash forward, d=64", "", ""), ("flash attention forward, d=64", "SDPA flash", "1.3"),
             ("flash attention forward, d=64 vs cuDNN", "SDPA cuDNN", "0.9")]]
    import csv
    with (tmp_path / "nvidia-h100-80gb-hbm3.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=results.RESULT_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    got, device = lesson.stored_summary_rows("nbx")
    assert device == "NVIDIA H100 80GB HBM3"
    assert got == [dict(what="flash attention forward, d=64", ms=2.0, tflops=494.7, pct_spec=pytest.approx(50.0),
                        vs_flash=1.3, vs_cudnn=0.9)]
    later = [dict(r, when="u", device="NVIDIA H200", ms="1", vs_baseline=r["vs_baseline"] and "1.1") for r in rows]
    with (tmp_path / "nvidia-h200.csv").open("w", newline="") as f:   # a later run on another GPU: its rows only
        w = csv.DictWriter(f, fieldnames=results.RESULT_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(later)
    got, device = lesson.stored_summary_rows("nbx")
    assert device == "NVIDIA H200" and [(r["ms"], r["vs_flash"], r["vs_cudnn"]) for r in got] == [(1.0, 1.1, 1.1)]


def test_sdpa_baselines_skip_with_one_line_reasons(monkeypatch):
    q, k, v, do = small_grad_inputs()
    fns, skipped = lesson.sdpa_baselines(q, k, v, do)
    if not utils.ON_GPU:  # SDPA's CPU kernel stands in for flash; the GPU backends are skipped, and say so
        assert list(fns) == ["SDPA flash"] and set(skipped) == {"SDPA cuDNN", "SDPA efficient"}
    assert all("\n" not in why and why.startswith(name) for name, why in skipped.items())
    # a backend that raises is tried once and skipped with the exception's first line
    def broken(name):
        def fn(q, k, v, causal=False):
            raise RuntimeError("No available kernel. Aborting execution.\nsecond line")
        return fn
    monkeypatch.setattr(lesson_sdpa, "sdpa_with", broken)
    fns, skipped = lesson.sdpa_baselines(q, k, v, do, names=("SDPA flash",))
    assert fns == {} and skipped == {
        "SDPA flash": "SDPA flash: skipped, it raised RuntimeError: No available kernel. Aborting execution."}
    with pytest.raises(ValueError, match="unknown backend"):
        lesson.sdpa_baselines(q, k, v, do, names=("SDPA math",))


def test_colab_t4_guards(monkeypatch):
    """A T4 (sm_75) has no flash or cuDNN SDPA and no bf16: they are skipped with the reason, and the
    accuracy check falls back on SDPA's memory-efficient backend."""
    monkeypatch.setenv("COURSE_FAKE_CC", "7.5")
    q, k, v, do = small_grad_inputs()
    fns, skipped = lesson.sdpa_baselines(q, k, v, do, names=("SDPA cuDNN", "SDPA flash"))
    assert fns == {}
    assert "sm_75" in skipped["SDPA flash"] and "flash-attention backend needs compute capability 8.0" in \
        skipped["SDPA flash"]
    assert "sm_75" in skipped["SDPA cuDNN"]
    assert lesson.accuracy_baseline()[0] == "SDPA efficient"
    dtypes, no = lesson.half_dtypes()
    assert dtypes == [torch.float16] and "sm_75" in no[torch.bfloat16]
    if not utils.ON_GPU:  # the memory-efficient stand-in is SDPA's CPU kernel here: the check still runs
        assert set(lesson.errors_like_sdpa(q, k, v, do)) == {"out", "dq", "dk", "dv"}
    monkeypatch.setenv("COURSE_FAKE_CC", "9.0")
    assert lesson.accuracy_baseline()[0] == "SDPA flash" and lesson.half_dtypes()[1] == {}


def test_backward_matmuls_are_counted_from_the_source():
    assert lesson.count_dots(ta._dkdv_inner, ta._dq_inner) == {"_dkdv_inner": 4, "_dq_inner": 3}
    assert lesson.count_dots(ta._fwd_inner) == {"_fwd_inner": 2}
    assert lesson.BACKWARD_MATMULS == {"counted": 5, "ours": 7}
    # the usual count: 2.5 forwards = 5 matmuls of N x N x d, 2 flops per multiply-add
    assert ta.attention_flops(1, 1, 8, 16, backward=True) == 5 * 2 * 8 * 8 * 16


def test_ptx_and_profiler_helpers():
    ptx = ("  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {a}, b;\n  wgmma.fence.sync.aligned;\n"
           "  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {c}, d;\n  mma.sync.aligned.m16n8k16.row.col x;")
    assert lesson.mma_instructions(ptx) == ["mma.sync.aligned.m16n8k16.row.col",
                                        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"]
    assert lesson.mma_instructions("ld.global.b32 r, [p];") == []
    assert lesson.short_kernel_name("k" * 200, width=20) == "k" * 17 + "..."
    assert lesson.short_kernel_name("attention_fwd_kernel") == "attention_fwd_kernel"
    if not utils.ON_GPU:
        q = torch.zeros(1, 1, 8, 16)
        with pytest.raises(RuntimeError, match="needs a GPU"):
            lesson.tensor_core_instructions(q, q, q, q)
        with pytest.raises(RuntimeError, match="needs a GPU"):
            lesson.profiled_kernels(lambda: None)


def test_our_backward_is_deterministic():
    q, k, v = (t.requires_grad_() for t in qkv((1, 2, 33, 16), seed=13))
    do = qkv((1, 2, 33, 16), seed=14)[0]
    assert lesson.distinct_grads(ta.flash_attention, q, k, v, do, causal=True, runs=2) == 1
    # a backward that changes from run to run is counted as such
    calls = iter(range(10))
    def noisy(q, k, v, causal=False):
        return ta.naive_attention(q, k, v, causal) * (1 + 1e-3 * next(calls))
    assert lesson.distinct_grads(noisy, q, k, v, do, runs=3) == 3


def test_forward_memory_and_configs_in_cpu_mode():
    if utils.ON_GPU:
        pytest.skip("cpu mode: the GPU's numbers are tests/gpu's")
    rows = lesson.forward_memory(1, 2, 16, [5, 33])
    assert [(r["n"], r["scores"], r["naive"], r["ours"]) for r in rows] == [(5, 100, None, None),
                                                                             (33, 4356, None, None)]
    with pytest.raises(RuntimeError, match="GPU only"):
        lesson.forward_peak_memory(lambda: None)
    assert lesson.config_str(None) == "-"
    assert lesson.config_str(ta.fwd_config(128, 64, 4, 8)) == "128x64 w8 s4"
    assert set(lesson.tuned_configs()) == {"forward", "dkdv", "dq"}
