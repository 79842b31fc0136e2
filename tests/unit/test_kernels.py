"""The kernels of gpu_course/kernels (what notebooks teach and bench/ times), on the CPU: Triton through
its interpreter, CUDA C through the emulation, each against torch at small odd sizes with poisoned
outputs; and the rule that each kernel is defined once (not again in a notebook or a bench script).

Grids stay small: the Triton interpreter costs a few ms per program; each CUDA C build takes a few
seconds in the emulation, once per module.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import utils
from gpu_course import kernels
from gpu_course.cuda import files, launch_counts, reset_launches
from gpu_course.kernels import (elementwise, flash_wgmma, int4_mma, matmul_ladder, reductions, tensor_cores,
                                triton_matmul, triton_mean, triton_softmax)

ROOT = Path(__file__).resolve().parents[2]
KERNEL_MODULES = sorted((ROOT / "gpu_course" / "kernels").glob("*.py"))


# ------------------------------------------------------------------------------------------ Triton
SMALL_MEAN = dict(BLOCK=128, TILES=2, num_warps=4)  # 256 floats per program: a few dozen programs


@pytest.mark.parametrize("n", [1, 1000, 5003])
def test_means_match_float64(n):
    x = torch.rand(n)
    ref = x.double().mean()
    utils.check(triton_mean.mean_serial(x, alloc=utils.poisoned), ref, atol=0, rtol=1e-5, name="serial")
    utils.check(triton_mean.mean_two_pass(x, SMALL_MEAN, alloc=utils.poisoned), ref, atol=0, rtol=1e-5,
                name="two-pass")
    utils.check(triton_mean.mean_atomic(x, SMALL_MEAN), ref, atol=0, rtol=1e-5, name="atomic")


@pytest.mark.parametrize("n, chunk", [(1, 16), (1000, 64), (5003, 256)])
def test_mean_scalar_loop_matches_float64(n, chunk):
    x = torch.rand(n)  # chunks that do not divide n: the last program's loop is short
    utils.check(triton_mean.mean_scalar_loop(x, chunk, alloc=utils.poisoned), x.double().mean(), atol=0,
                rtol=1e-5, name="scalar loop")


def test_mean_scalar_loop_refuses_too_many_partial_sums():
    with pytest.raises(ValueError, match="partial sums do not fit"):  # refused before any launch
        triton_mean.mean_scalar_loop(torch.empty(65537), chunk=1)


def test_mean_two_pass_default_config_and_refusal():
    x = torch.rand(3001)
    utils.check(triton_mean.mean_two_pass(x), x.double().mean(), atol=0, rtol=1e-5)
    assert triton_mean.mean_config() == triton_mean.MEAN_CPU
    with pytest.raises(ValueError, match="partial sums do not fit"):  # refused before any launch
        triton_mean.mean_two_pass(torch.empty(65537), dict(BLOCK=1, TILES=1, num_warps=1))


@pytest.mark.parametrize("w", [1, 100, 777])
def test_softmax_matches_torch(w):
    x = torch.randn(7, w) * 10  # 7 rows: not a multiple of ROWS
    ref = torch.softmax(x.double(), dim=1)
    utils.check(triton_softmax.softmax(x, alloc=utils.poisoned), ref, atol=1e-6, rtol=1e-5, name=f"w={w}")
    cfg = dict(triton_softmax.softmax_config(w), ROWS=2)  # a config a sweep would pass
    utils.check(triton_softmax.softmax(x, cfg, alloc=utils.poisoned), ref, atol=1e-6, rtol=1e-5)


def test_softmax_strided_view_and_refusal():
    view = torch.randn(5, 300)[:, 10:233]
    utils.check(triton_softmax.softmax(view, alloc=utils.poisoned), torch.softmax(view.double(), dim=1),
                atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="online softmax"):
        triton_softmax.softmax(torch.empty(1, triton_softmax.MAX_W + 1))


H, K, W = 45, 40, 37  # 2 x 2 tiles of 32 x 32, two steps along k, none of them full


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.float16, 1e-2)])
def test_triton_matmul_plain_and_fused(dtype, tol):
    a, b = torch.randn(H, K, dtype=dtype), torch.randn(K, W, dtype=dtype)
    bias = torch.randn(W, dtype=dtype)
    ref = a.double() @ b.double()
    utils.check(triton_matmul.matmul(a, b, alloc=utils.poisoned), ref, atol=tol, rtol=tol, name="plain")
    utils.check(triton_matmul.matmul(a, b, bias, alloc=utils.poisoned), ref + bias.double(), atol=tol, rtol=tol,
                name="bias")
    utils.check(triton_matmul.matmul(a, b, bias, activation="gelu", alloc=utils.poisoned),
                F.gelu(ref + bias.double()), atol=tol, rtol=tol, name="bias + gelu")
    utils.check(triton_matmul.matmul(a, b, activation="gelu", alloc=utils.poisoned), F.gelu(ref),
                atol=tol, rtol=tol, name="gelu")


def test_tensor_core_instruction_refuses_the_cpu():
    if utils.ON_GPU:
        pytest.skip("cpu mode only: on a GPU tests/gpu/test_triton_matmul_gpu.py runs it")
    with pytest.raises(RuntimeError, match="needs a GPU"):
        triton_matmul.tensor_core_instruction(torch.randn(32, 32), torch.randn(32, 32))


@pytest.mark.parametrize("group", [1, 2, 8])
def test_triton_matmul_fixed_config_and_views(group):
    cfg = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=16, GROUP_M=group, num_warps=4, num_stages=1)
    a, bt = torch.randn(H, K), torch.randn(W, K)
    utils.check(triton_matmul.matmul(a, bt.t(), cfg=cfg, alloc=utils.poisoned), a.double() @ bt.t().double(),
                atol=1e-4, rtol=1e-4, name=f"GROUP_M={group}, b a transposed view")


def test_triton_matmul_refuses_bad_input():
    a = torch.randn(4, 3)
    with pytest.raises(AssertionError, match="do not match"):
        triton_matmul.matmul(a, torch.randn(4, 3))
    with pytest.raises(AssertionError, match="bias must have shape"):
        triton_matmul.matmul(a, torch.randn(3, 5), torch.randn(4))
    with pytest.raises(AssertionError, match="activation must be one of"):
        triton_matmul.matmul(a, torch.randn(3, 5), activation="relu")
    assert triton_matmul.matmul_tuned.configs == triton_matmul.matmul_configs()  # one list, from one place


# ------------------------------------------------------------------------------------------- CUDA C
@pytest.fixture(scope="module")
def ladder():
    return matmul_ladder.build()


def test_every_rung_and_tile_shape_matches_torch(ladder):
    h, k, w = 70, 50, 90  # no dimension a multiple of 4, of 16 or of any tile
    m, n = torch.randn(h, k), torch.randn(k, w)
    ref = m.double() @ n.double()
    for rung, name in matmul_ladder.RUNGS.items():
        utils.check(ladder.matmul_rung(m, n, utils.poisoned(h, w), rung), ref, **utils.dot_tol(k), name=name)
        for cfg, shape in enumerate(matmul_ladder.RUNG_CONFIGS[rung]):
            utils.check(ladder.matmul_rung_cfg(m, n, utils.poisoned(h, w), rung, cfg), ref, **utils.dot_tol(k),
                        name=f"{name}, {shape}")
        with pytest.raises(RuntimeError, match=f"rung {rung} has tile shapes"):  # RUNG_CONFIGS matches the .cu
            ladder.matmul_rung_cfg(m, n, utils.poisoned(h, w), rung, len(matmul_ladder.RUNG_CONFIGS[rung]))
    for tw in (8, 16, 32):
        utils.check(ladder.matmul_tiled(m, n, utils.poisoned(h, w), tw), ref, **utils.dot_tol(k), name=f"tw={tw}")


def test_wrong_shapes_raise_a_readable_error(ladder):
    """Every check of the ladder's host functions raises (never writes out of bounds) with a message built as
    one C string, numbers included."""
    m, n, out = torch.randn(10, 7), torch.randn(7, 9), torch.empty(10, 9)
    for call, message in [
            (lambda: ladder.matmul_rung(m, torch.randn(6, 9), out, 5), "do not fit: 10x7 and 6x9"),
            (lambda: ladder.matmul_rung(m, n, torch.empty(10), 8), "out must be h x w = 10x9, got 10"),
            (lambda: ladder.matmul_rung(m, n, out, 11), "rung must be 1..10, got 11"),
            (lambda: ladder.matmul_tiled(m, n, torch.empty(9, 9), 16), "matmul_tiled: out must be 10x9"),
            (lambda: ladder.matmul_tiled(m, n, out, 64), "tw must be 8, 16 or 32, got 64"),
            (lambda: ladder.matmul_rung10_order(m, n, out, 5000), "group must be 0..1024 rows of blocks, got 5000")]:
        with pytest.raises(RuntimeError, match=message):
            call()


def test_float4_rungs_with_aligned_rows(ladder):
    h, k, w = 36, 68, 92  # k and w multiples of 4 (the float4 path) but of no tile
    m, n = torch.randn(h, k), torch.randn(k, w)
    for rung in (6, 7):
        utils.check(ladder.matmul_rung(m, n, utils.poisoned(h, w), rung), m.double() @ n.double(),
                    **utils.dot_tol(k), name=f"rung {rung}")


def _misaligned(*size):
    """A contiguous tensor whose data starts 4 bytes past a 16-byte boundary (no float4 access)."""
    t = torch.randn(torch.Size(size).numel() + 1)[1:].view(*size)
    assert t.is_contiguous() and t.data_ptr() % 16 != 0
    return t


@pytest.mark.parametrize("h, k, w", [(100, 70, 90), (257, 131, 67), (36, 68, 92), (129, 260, 132)])
def test_warptiling_rungs_match_float64(ladder, h, k, w):
    """Rung 8 and every tile shape of rungs 9 and 10, on sizes that are no multiple of a tile (the
    scalar fallback, partial tiles, k not a multiple of BK; rung 10: h and w padded to quads) and with
    k and w multiples of 4 (the float4 path)."""
    m, n = torch.randn(h, k), torch.randn(k, w)
    ref = m.double() @ n.double()
    utils.check(ladder.matmul_rung(m, n, utils.poisoned(h, w), 8), ref, **utils.dot_tol(k), name="rung 8")
    for rung in (9, 10):
        for cfg, shape in enumerate(matmul_ladder.RUNG_CONFIGS[rung]):
            utils.check(ladder.matmul_rung_cfg(m, n, utils.poisoned(h, w), rung, cfg), ref, **utils.dot_tol(k),
                        name=f"rung {rung} cfg {cfg} ({shape}) at {h}x{k}x{w}")


def test_warptiling_rungs_without_float4(ladder):
    """Rows a multiple of 4 floats long but bases not 16-byte aligned: the kernels must not use float4."""
    h, k, w = 66, 68, 72
    m, n = _misaligned(h, k), _misaligned(k, w)
    ref = m.double() @ n.double()
    for rung in (9, 10):   # rung 10 copies n to aligned rows, and stores to out without float4
        for cfg in range(len(matmul_ladder.RUNG_CONFIGS[rung])):
            utils.check(ladder.matmul_rung_cfg(m, n, utils.poisoned(h, w), rung, cfg), ref, **utils.dot_tol(k),
                        name=f"rung {rung} cfg {cfg}, misaligned m and n")
            out = _misaligned(h, w)
            utils.poison_(out)
            utils.check(ladder.matmul_rung_cfg(m.contiguous().clone(), n.clone(), out, rung, cfg), ref,
                        **utils.dot_tol(k), name=f"rung {rung} cfg {cfg}, misaligned out")


def test_rung9_shapes_are_the_instantiations():
    """RUNG9_SHAPES (read by matmul_ladder.launches) lists 09_autotuned.cu's cases in order, as a plain
    regex reads them too; the count RUNG9_CFGS agrees; rung 8 is cfg 0."""
    text = matmul_ladder.rung_source(9)
    found = [tuple(int(x) for x in args.split(","))
             for args in re.findall(r"mm_warp_k<([\d,\s]+)>", text)]
    assert found == [tuple(s) for s in matmul_ladder.RUNG9_SHAPES]
    assert f"RUNG9_CFGS = {len(found)};" in text
    rung8 = re.search(r"case 8: mm_warp_k<([\d,\s]+)>", kernels.cuda_source(matmul_ladder.DISPATCHER)).group(1)
    assert tuple(int(x) for x in rung8.split(",")) == tuple(matmul_ladder.RUNG9_SHAPES[0])
    assert matmul_ladder.RUNG_CONFIGS[8] == [matmul_ladder.RUNG9_SHAPES[0].name]
    for s in matmul_ladder.RUNG9_SHAPES:  # the kernel's static_asserts, in Python: one warp tile per warp ...
        assert (s.BM // s.WM) * (s.BN // s.WN) * 32 == s.NT
        assert (s.WM // s.WMITER // s.TM) * (s.WN // s.WNITER // s.TN) == 32   # ... 32 lanes per sub-tile


class _FakeLadder:
    """A stand-in for the built ladder: rung 9 cfg `wrong` adds 1 to every output."""
    def __init__(self, wrong=None):
        self.wrong = wrong

    def matmul_rung_cfg(self, m, n, out, rung, cfg):
        assert rung == 9
        out.copy_(m @ n + (1.0 if cfg == self.wrong else 0.0))
        return out


def _fake_bench(fast_cfg):
    def bench(fn, *args):
        fn(*args)
        return utils.Timing([0.5 if args[-1] == fast_cfg else 1.0], "fake", "test", on_gpu=False)
    return bench


def test_autotune_rung9_picks_the_fastest_and_caches_it():
    m, n = torch.randn(13, 7), torch.randn(7, 11)
    tuned = matmul_ladder.autotune_rung9(m, n, mod=_FakeLadder(), bench=_fake_bench(5))
    assert tuned.best == 5 and tuned.size == (13, 11, 7)
    assert [row[0] for row in tuned.table] == list(range(len(matmul_ladder.RUNG9_SHAPES)))
    assert matmul_ladder.autotune_rung9(m, n, mod=None, bench=None) is tuned       # cached: nothing runs
    again = matmul_ladder.autotune_rung9(m, n, mod=_FakeLadder(), bench=_fake_bench(2), retune=True)
    assert again.best == 2
    text = str(again)
    assert "* cfg  2" in text and "best: cfg 2" in text and "says nothing about a GPU" in text
    with pytest.raises(utils.CheckFailed, match="rung 9 cfg 3"):                       # a wrong kernel never wins
        matmul_ladder.autotune_rung9(torch.randn(5, 3), torch.randn(3, 4), mod=_FakeLadder(wrong=3),
                                     bench=_fake_bench(3))
    with pytest.raises(ValueError, match="do not fit"):
        matmul_ladder.autotune_rung9(m, torch.randn(6, 11), mod=_FakeLadder())


def test_autotune_rung9_runs_the_emulated_kernels(ladder):
    m, n = torch.randn(40, 24), torch.randn(24, 36)
    tuned = matmul_ladder.autotune_rung9(m, n, mod=ladder)
    assert 0 <= tuned.best < len(matmul_ladder.RUNG9_SHAPES)
    assert all(t.n == 1 for _, _, t in tuned.table)          # cpu mode: one run each, times mean nothing
    assert "cpu mode" in str(tuned)


def test_rung10_shapes_are_the_instantiations():
    """RUNG10_SHAPES (read by matmul_ladder.launches) lists 10_async_pipeline.cu's cases in order (warp
    tile, stages), as a plain regex reads them too, and the shared memory of each fits an H100 block (227 KB)."""
    text = matmul_ladder.rung_source(10)
    found = [tuple(int(x) for x in args.split(","))
             for args in re.findall(r"mm_async_k<([\d,\s]+)><<<", text)]
    assert [f[:9] for f in found] == [tuple(s) for s, _ in matmul_ladder.RUNG10_SHAPES]
    assert [f[9] for f in found] == [stages for _, stages in matmul_ladder.RUNG10_SHAPES]
    assert f"RUNG10_CFGS = {len(found)};" in text
    for s, stages in matmul_ladder.RUNG10_SHAPES:
        assert stages * s.BK * (s.BM + s.BN) * 4 <= 227 * 1024
        assert (s.BM // s.WM) * (s.BN // s.WN) * 32 == s.NT


def test_launches_reads_tile_shapes_from_the_cuda_c(tmp_path, monkeypatch):
    assert matmul_ladder.launches(matmul_ladder.DISPATCHER, "mm_tile1d_k") == [((64, 64, 8, 8), None)]  # 64 * 64 / 8
    with pytest.raises(ValueError, match="launches no kernel 'mm_nope_k'"):
        matmul_ladder.launches(matmul_ladder.DISPATCHER, "mm_nope_k")
    (tmp_path / "t.cu").write_text("template <int T> void go(float* x) {\n"
                                   "    k<T><<<1, dim3(8, 4)>>>(x); j<2, 3><<<1, 32>>>(x); j<4, 5><<<2, dim3(8, 4)>>>(x);\n}\n")
    monkeypatch.setattr(files, "CUDA_DIR", tmp_path)
    matmul_ladder._all_launches.cache_clear()
    try:
        assert matmul_ladder.launches("t.cu", "j") == [((2, 3), (32,)), ((4, 5), (8, 4))]
        with pytest.raises(ValueError, match="t.cu launches k with template arguments that are not numbers"):
            matmul_ladder.launches("t.cu", "k")
    finally:
        matmul_ladder._all_launches.cache_clear()


@pytest.mark.parametrize("group", [0, 1, 2, 8])
def test_rung10_launch_orders_cover_every_tile(ladder, group):
    """Every launch order computes every tile of out exactly once: 3 x 3 blocks of 256 x 128, so group 2
    leaves a last group of one row of blocks and group 8 is taller than the grid (a tile no block computes
    stays NaN)."""
    h, k, w = 700, 24, 260
    m, n = torch.randn(h, k), torch.randn(k, w)
    utils.check(ladder.matmul_rung10_order(m, n, utils.poisoned(h, w), group), m.double() @ n.double(),
                **utils.dot_tol(k), name=f"rung 10, group {group}")


def test_rung10_writes_an_out_that_is_not_16_byte_aligned(ladder):
    """The kernel stores float4s when w % 4 == 0; an out starting 4 bytes past a boundary gets an aligned copy."""
    h, k, w = 40, 12, 36
    m, n = torch.randn(h, k), torch.randn(k, w)
    out = torch.full((h * w + 1,), float("nan"))[1:].view(h, w)
    utils.check(ladder.matmul_rung(m, n, out, 10), m.double() @ n.double(), **utils.dot_tol(k), name="rung 10")


def test_rung10_order_refuses_bad_input(ladder):
    m, n = torch.randn(8, 5), torch.randn(5, 6)
    with pytest.raises(RuntimeError, match="group must be 0..1024"):
        ladder.matmul_rung10_order(m, n, torch.empty(8, 6), -1)
    with pytest.raises(RuntimeError, match="do not fit"):
        ladder.matmul_rung10_order(m, torch.randn(4, 6), torch.empty(8, 6), 8)


def test_ladder_refuses_bad_input(ladder):
    m, n = torch.randn(8, 5), torch.randn(5, 6)
    with pytest.raises(RuntimeError, match="rung must be 1..10, got 11"):
        ladder.matmul_rung(m, n, torch.empty(8, 6), 11)
    with pytest.raises(RuntimeError, match="do not fit"):
        ladder.matmul_rung(m, torch.randn(4, 6), torch.empty(8, 6), 2)
    with pytest.raises(RuntimeError, match="tw must be 8, 16 or 32"):
        ladder.matmul_tiled(m, n, torch.empty(8, 6), 12)


def test_rung_files_and_names_agree():
    numbered = sorted(p.name for p in (kernels.CUDA_DIR / "matmul").glob("[0-9][0-9]_*.cu"))
    assert [int(name[:2]) for name in numbered] == sorted(matmul_ladder.RUNGS) == sorted(matmul_ladder.RUNG_CONFIGS)
    assert all(matmul_ladder.RUNGS[r].startswith(f"rung {r} ") for r in matmul_ladder.RUNGS)
    for rung in matmul_ladder.RUNGS:
        assert f"// rung {rung}:" in matmul_ladder.rung_source(rung).splitlines()[0]
    with pytest.raises(ValueError, match="no rung 11"):
        matmul_ladder.rung_file(11)
    assert "matmul_tiled" in matmul_ladder.source(rungs=[3]) and "matmul_rung" not in matmul_ladder.source([3])


@pytest.fixture(scope="module")
def elementwise_mod():
    return elementwise.build()


def test_elementwise_steps_match_torch(elementwise_mod):
    refs = {"square": torch.square, "gelu": lambda t: F.gelu(t.double(), approximate="tanh")}
    for n in (1, 3, 4, 257, 4099):
        x = torch.randn(n)
        for op, ref in refs.items():
            for step, extra in (("naive", ()), ("vec", ()), *(("fast", (3, 64, u)) for u in (1, 2, 4, 8))):
                out = utils.poisoned(n)
                getattr(elementwise_mod, f"{op}_{step}")(x, out, *extra)
                utils.check(out, ref(x), atol=1e-6, rtol=1e-5, name=f"{op}_{step}{extra} at n={n}")


def test_elementwise_refuses_bad_input(elementwise_mod):
    x = torch.randn(1001)
    with pytest.raises(RuntimeError, match="16-byte aligned"):
        elementwise_mod.gelu_vec(x[1:], utils.poisoned(1000))
    with pytest.raises(RuntimeError, match="unroll must be 1, 2, 4 or 8"):
        elementwise_mod.square_fast(x, utils.poisoned(1001), 2, 64, 3)
    with pytest.raises(ValueError, match="no step 'v9'"):
        elementwise.source("v9")
    steps = list(elementwise.STEPS)
    assert elementwise.functions() == [f for s in steps[:steps.index("fast") + 1]
                                       for f in (f"square_{s}", f"gelu_{s}", *elementwise.EXTRA.get(s, []))]


def test_cuda_source_reads_every_named_file():
    """Every .cu file is one the modules name; cuda_source gives it without its include guard and its
    includes, which is all it leaves out."""
    named = [matmul_ladder.rung_file(r) for r in matmul_ladder.RUNGS] + [matmul_ladder.DISPATCHER]
    named += list(elementwise.STEPS.values()) + ["memory/pointer_chase.cu"] + reductions.files()
    named += sorted({f for r in tensor_cores.RUNGS for f in tensor_cores.files(r) if f.endswith(".cu")})
    named += [flash_wgmma.FILE, int4_mma.FILE]
    for name in named:
        head, tail = (kernels.CUDA_DIR / name).read_text().split(kernels.cuda_source(name))
        assert all(line.startswith(("#ifndef ", "#define ", '#include "')) for line in head.splitlines()), name
        assert tail.startswith("#endif") and tail.count("\n") == 1, name
    assert sorted(named) == sorted(str(p.relative_to(kernels.CUDA_DIR)) for p in kernels.CUDA_DIR.rglob("*.cu"))
    with pytest.raises(FileNotFoundError, match="there are: attention/flash_wgmma.cu, common.cuh, elementwise/01_naive.cu"):
        kernels.cuda_source("matmul/99_missing.cu")


# ------------------------------------------------------------- notebook 09: sums, scans, histograms, images
@pytest.fixture(scope="module")
def reduce_mod():
    return reductions.build()


def test_every_sum_rung_matches_float64(reduce_mod):
    for n in (0, 1, 3, 1000, 4099, 70_001):  # 70,001: several grid-stride passes of 3 blocks, a float4 tail
        x = torch.randn(n)
        for rung, name in reductions.RUNGS.items():
            out = utils.poisoned(1)
            reduce_mod.sum_rung(x, out, rung, 3)
            utils.check(out, x.double().sum().reshape(1), atol=1e-6 * max(n, 1), rtol=1e-6, name=f"{name}, n={n}")


def test_tree_rungs_write_partials_and_run_again_on_them(reduce_mod):
    # Rungs 2-4: one launch per level of partials (70,001 -> 274 -> 2 -> 1), rungs 5-6: a second launch
    # of one block; none of rungs 2-6 adds with a float atomic (each block's partial goes to an array).
    x = torch.randn(70_001)
    for rung in (2, 3, 4, 5, 6):
        for blocks in (3, 1):
            reset_launches(reduce_mod)
            out = utils.poisoned(1)
            reduce_mod.sum_rung(x, out, rung, blocks)
            utils.check(out, x.double().sum().reshape(1), atol=1e-6 * x.numel(), rtol=1e-6, name=f"rung {rung}")
            got = {k: v for k, v in launch_counts(reduce_mod).items() if v}
            assert got == reductions.launches(rung, x.numel(), blocks), (rung, blocks, got)
        assert "atomicAdd" not in reductions.rung_source(rung)
    assert reductions.tree_grids(100_000_000) == [390_625, 1_526, 6, 1]
    assert reductions.tree_grids(256) == [1] and reductions.tree_grids(257) == [2, 1] and reductions.tree_grids(0) == []


def test_lookback_walk_publishes_the_running_totals_in_any_order():
    import itertools
    sums = [3, 5, 4, 7]
    for order in itertools.permutations(range(4)):
        events = [("scan", t) for t in order] + [("look", t) for t in (3, 2, 1)] * 3
        final = reductions.lookback_walk(sums, events)[-1][1]
        assert final == [("PREFIX", v) for v in (3, 8, 12, 19)], (order, final)
    steps = reductions.lookback_walk([3, 5, 4])
    assert "waits" in steps[0][0] and steps[0][1] == [("-", 0), ("AGG", 5), ("-", 0)]
    assert steps[3][1][2] == ("PREFIX", 12) and steps[3][1][1] == ("AGG", 5)   # tile 2 used tile 1's AGG
    with pytest.raises(ValueError, match="bad event"):
        reductions.lookback_walk([1, 2], [("scan", 2)])


def test_last_block_rung_resets_its_counter_and_repeats_its_bits(reduce_mod):
    x = torch.randn(50_001)
    bits = set()
    for blocks in (3, 1, 7, 3, 3):  # a counter left non-zero would leave out unwritten (NaN) next time
        out = utils.poisoned(1)
        reduce_mod.sum_rung(x, out, 8, blocks)
        utils.check(out, x.double().sum().reshape(1), atol=0.05, rtol=1e-6, name=f"rung 8, {blocks} blocks")
        if blocks == 3:
            bits.add(out.numpy().tobytes())
    assert len(bits) == 1


def test_scans_match_float64(reduce_mod):
    def check(fn, n):
        x = torch.randn(n)
        out = utils.poisoned(n)
        fn(x, out)
        ref = torch.cumsum(x.double(), 0)
        utils.check(out, ref, atol=1e-5 * ref.abs().max().item() + 1e-5, rtol=1e-5, name=f"{fn.__name__}, n={n}")
    for n in (1, 2, 31, 33, 1000, 1024):
        check(reduce_mod.scan_kogge_stone, n)
    for n in (1, 2, 63, 65, 1025, 2048):
        check(reduce_mod.scan_brent_kung, n)
    for n in (1, 3, 4095, 4096, 4097, 3 * 4096 + 5, 70_001):  # tiles of 4096: partial first, last and tail float4
        check(reduce_mod.scan_three_pass, n)
        check(reduce_mod.scan_lookback, n)


def test_histograms_count_like_histc(reduce_mod):
    for n in (1, 7, 1000, 70_001):
        x = torch.rand(n) * 1.2 - 0.1  # some values outside [0, 1]: not counted
        x[0] = 1.0                     # the upper end: in the last bin
        for bins in (1, 256, 1000):
            for privatized in (False, True):
                counts = utils.poisoned(bins, dtype=torch.int32)
                reduce_mod.histogram(x, counts, 0.0, 1.0, privatized, 3)
                utils.check(counts, torch.histc(x, bins=bins, min=0, max=1), atol=0, rtol=0,
                            name=f"{bins} bins, privatized={privatized}, n={n}")


def test_image_kernels_match_torch(reduce_mod):
    rgb = torch.randint(0, 256, (37, 45, 3), dtype=torch.uint8)  # no side a multiple of 16
    grey = torch.full((37, 45), 255, dtype=torch.uint8)
    reduce_mod.rgb_to_grey(rgb, grey)
    ref = (0.2989 * rgb[..., 0] + 0.5870 * rgb[..., 1] + 0.1140 * rgb[..., 2]).floor()
    utils.check(grey.float(), ref, atol=1, rtol=0, name="rgb_to_grey")
    for radius in (0, 1, 4):
        out = torch.full_like(grey, 255)
        reduce_mod.blur(grey, out, radius)
        ref = F.avg_pool2d(grey.float()[None, None], 2 * radius + 1, stride=1, padding=radius,
                           count_include_pad=False)[0, 0].floor()
        utils.check(out.float(), ref, atol=1, rtol=0, name=f"blur radius {radius}")


def test_rung_3_padded_control_sums_like_rung_3(reduce_mod):
    # sum_tree_padded: rung 3's tree on a padded shared array, in rung 3's passes (70,001 -> 274 -> 2 -> 1).
    for n in (0, 1, 3, 1000, 4099, 70_001):
        x = reductions.exact_sum_input(n)
        out = utils.poisoned(1)
        reset_launches(reduce_mod)
        reduce_mod.sum_tree_padded(x, out)
        utils.check(out, x.double().sum().reshape(1), atol=0, rtol=0, name=f"rung 3 padded, n={n}")
        got = {k: v for k, v in launch_counts(reduce_mod).items() if v}
        assert got == ({"sum_tree_padded_k": len(reductions.tree_grids(n))} if n else {}), (n, got)
    with pytest.raises(RuntimeError, match="out must have exactly one element"):
        reduce_mod.sum_tree_padded(torch.randn(10), torch.empty(2))
    assert "sum_tree_padded_k" not in kernels.listing(reductions.rung_file(3), [("// rung", "__global__"),
                                                                                 ("for (int s",)])


def test_reductions_refuse_bad_input(reduce_mod):
    x = torch.randn(1001)
    with pytest.raises(RuntimeError, match="rung must be 1..8, got 9"):
        reduce_mod.sum_rung(x, torch.empty(1), 9, 3)
    with pytest.raises(RuntimeError, match="out must have exactly one element"):
        reduce_mod.sum_rung(x, torch.empty(2), 4, 3)
    with pytest.raises(RuntimeError, match="16-byte aligned"):
        reduce_mod.sum_rung(x[1:], torch.empty(1), 7, 3)
    with pytest.raises(RuntimeError, match="at most 1024 elements"):
        reduce_mod.scan_kogge_stone(torch.randn(1025), torch.empty(1025))
    with pytest.raises(RuntimeError, match="16-byte aligned"):
        reduce_mod.scan_lookback(x[1:], torch.empty(1000))
    with pytest.raises(RuntimeError, match="need lo < hi"):
        reduce_mod.histogram(x, torch.empty(8, dtype=torch.int32), 1.0, 1.0, True, 3)
    with pytest.raises(RuntimeError, match="counts must be int32"):
        reduce_mod.histogram(x, torch.empty(8), 0.0, 1.0, True, 3)
    with pytest.raises(RuntimeError, match="h x w x 3 uint8"):
        reduce_mod.rgb_to_grey(torch.zeros(4, 4, 4, dtype=torch.uint8), torch.zeros(4, 4, dtype=torch.uint8))


def test_reduction_rung_files_and_names_agree():
    numbered = sorted(p.name for p in (kernels.CUDA_DIR / "reduce").glob("[0-9][0-9]_*.cu"))
    assert [int(name[:2]) for name in numbered] == sorted(reductions.RUNGS)
    for rung, name in reductions.RUNGS.items():
        assert name.startswith(f"rung {rung} ")
        assert reductions.rung_source(rung).startswith(f"// rung {rung}")
    with pytest.raises(ValueError, match="no rung 9"):
        reductions.rung_file(9)
    assert reductions.cpp_source().count(";") == len(reductions.FUNCS)


def test_dot_tol():
    assert utils.dot_tol(1000) == dict(atol=1e-6 * 1000 + 1e-5, rtol=1e-5)
    with pytest.raises(utils.CheckFailed):  # an error of order 1 in one element fails
        utils.check(torch.ones(3) + torch.tensor([0, 0, 1.0]), torch.ones(3), **utils.dot_tol(4096))
    with pytest.raises(ValueError, match="at least 1"):
        utils.dot_tol(0)


# ------------------------------------------------------------------------------ defined only once
def _notebook_code() -> dict:
    """{notebook file name: the text of its code cells}."""
    return {p.name: "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"]
                              if c["cell_type"] == "code")
            for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}


def _bench_code() -> dict:
    return {f"bench/{p.name}": p.read_text() for p in sorted((ROOT / "bench").glob("*.py"))}


def test_module_kernels_are_not_defined_again_in_notebooks_or_bench():
    triton_kernels = set()
    for path in KERNEL_MODULES:
        triton_kernels |= set(re.findall(r"@triton\.jit\s*\ndef (\w+)\(", path.read_text()))
    cuda_kernels = set()
    for path in kernels.CUDA_DIR.rglob("*.cu"):
        cuda_kernels |= set(re.findall(r"__global__\s+void\s+(?:__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s*)?(\w+)\s*\(",
                                       path.read_text()))
    assert {"matmul_kernel", "softmax_rows_kernel", "partial_sums_kernel"} <= triton_kernels
    assert {"mm_rows_k", "matmul_tiled_k", "mm_pipe_k", "gelu_fast_k"} <= cuda_kernels
    again = []
    for where, code in {**_notebook_code(), **_bench_code()}.items():
        again += [f"{where}: @triton.jit {k}" for k in triton_kernels
                  if re.search(rf"@triton\.jit\s*\ndef {k}\(", code)]
        again += [f"{where}: __global__ {k}" for k in cuda_kernels
                  if re.search(rf"__global__\s+void\s+(?:__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s*)?{k}\s*\(", code)]
    assert not again, "defined in gpu_course/kernels and again here: " + ", ".join(sorted(again))


def test_bench_scripts_import_kernels_instead_of_reading_notebooks():
    for where, code in _bench_code().items():
        assert ".ipynb" not in code and "exec(" not in code, f"{where} reads or runs notebook code"


def test_exact_sum_input_is_summed_exactly_in_any_order():
    import numpy as np
    torch.manual_seed(0)
    v = reductions.exact_sum_input(10_000_019)        # notebook 09's largest checked size
    assert v.dtype == torch.float32 and not (v == 0).any() and set(v.abs().unique().tolist()) == {1.0, 2.0, 3.0}
    exact = int(v.double().sum())
    a = v.numpy()
    assert float(np.cumsum(a, dtype=np.float32)[-1]) == exact                 # serial, rung 1's order
    acc = np.float32(0)
    for k in range(97):                                                       # grid-stride partials, then a serial end
        acc = np.float32(acc + a[k::97].sum(dtype=np.float32))
    assert float(acc) == exact
    assert float(a[::-1].cumsum(dtype=np.float32)[-1]) == exact               # reversed
    assert float(a[1:].astype(np.float64).sum()) != exact                     # a lost element shows
    with pytest.raises(ValueError, match="2\\*\\*24"):
        reductions.exact_sum_input(20_000_000)


def test_check_refuses_an_element_left_at_the_poison():
    ref = torch.full((4,), 254.0)
    out = torch.tensor([254, 254, 255, 254], dtype=torch.uint8)
    utils.check(out.float(), ref, atol=1, rtol=0)                              # the tolerance alone lets it pass
    with pytest.raises(utils.CheckFailed, match="(?s)first bad index 2.*1 elements still hold the poison 255"):
        utils.check(out.float(), ref, atol=1, rtol=0, poison=255)
    utils.check(out[[0, 1, 3]].float(), ref[:3], atol=1, rtol=0, poison=255)
