"""Tensor cores on the CPU: the emulation's __half (emu_fp16.h) and nvcuda::wmma (emu_wmma.h) against torch, their
errors, and notebook 12's ladder (gpu_course/kernels/tensor_cores.py): rungs 1 and 2 through the emulation, rungs 3
and 4 with their inline PTX replaced by CUDA C that does what the PTX ISA says each instruction does
(tests/fixtures/tc_ptx_emulated.cuh), so that their indexing, swizzle, pipeline and epilogue are checked without a GPU.
tests/gpu/test_tensor_cores_gpu.py checks the same on a GPU, with the real instructions."""
from pathlib import Path

from types import SimpleNamespace

import pytest
import torch

import utils
from gpu_course.cuda import CudaEmulationError
from gpu_course.kernels import cuda_source
from gpu_course.kernels import tensor_cores as tc
from gpu_course.lessons import tensor_cores as lesson

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="the CPU emulation (tests/gpu covers the GPU)")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tc_ptx_emulated.cuh"


def load(src, funcs, **kw):
    return utils.load_cuda(src, "\n".join(utils.get_sig(f, src) for f in funcs), funcs, **kw)


HALF = utils.cuda_begin + r"""
#include <cuda_fp16.h>
__global__ void half_k(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const __half a = __float2half(x[i]), b = y[i];          // implicit conversion, as nvcc allows
    out[0 * n + i] = __half2float(a);                        // float -> fp16 -> float: the rounding
    out[1 * n + i] = __half2float(__hadd(a, b));
    out[2 * n + i] = a * b;                                  // operator* on __half, then to float
    out[3 * n + i] = __half2float(__hfma(a, b, a));
    const __half2 p = __halves2half2(a, b), q = __hmul2(p, p) + p;
    out[4 * n + i] = __low2float(q);
    out[5 * n + i] = __high2float(q);
    out[6 * n + i] = (a < b) ? 1.0f : 0.0f;
    out[7 * n + i] = __half2float(-a) + __half2float(__habs(a));
}
torch::Tensor half_ops(torch::Tensor x, torch::Tensor y) {
    const int n = x.numel();
    auto out = torch::empty({8, n}, x.options());
    half_k<<<cdiv(n, 128), 128>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""


@pytest.mark.slow   # an emulated build of the __half operations, checked on 2,518 values: ~15 s cold
def test_half_conversions_and_arithmetic_round_like_torch():
    mod = load(HALF, ["half_ops"])
    special = torch.tensor([0.0, -0.0, 1.0, 65504.0, 65520.0, 1e6, -1e6, 6e-8, 3e-8, 2.98e-8, 1e-9, 6.1e-5,
                            1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 2049.0, 2051.0, float("inf"), float("-inf")])
    x = torch.cat([special, torch.randn(2000) * 10, torch.randn(500) * 1e-5])
    y = torch.cat([special.flip(0), torch.randn(2000) * 10, torch.randn(500) * 1e-5])
    got = mod.half_ops(x, y)
    a, b = x.half().float(), y.half().float()
    want = torch.stack([a, (a + b).half().float(), (a * b).half().float(), torch.addcmul(a, a, b).half().float(),
                        ((a * a).half().float() + a).half().float(),
                        ((b * b).half().float() + b).half().float(), (a < b).float(), -a + a.abs()])
    assert torch.equal(got[0], a), "float -> fp16 must round to nearest even, as torch (and a GPU) do"
    for i in range(1, 8):
        ok = torch.isclose(got[i], want[i], rtol=0, atol=0, equal_nan=True)
        assert bool(ok.all()), f"op {i}: {got[i][~ok][:5]} vs {want[i][~ok][:5]}"
    nan = mod.half_ops(torch.tensor([float("nan")]), torch.tensor([1.0]))
    assert torch.isnan(nan[0]).all()


WMMA = utils.cuda_begin + r"""
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
// D = A B + C for one 16x16x16 tile: A and B in the given layouts, C loaded and D stored in the given memory layout
template <class LA, class LB, class TC>
__global__ void tile_k(const __half* a, const __half* b, const TC* c, TC* d, bool c_col, bool d_col) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, TC> fc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(fc, c, 16, c_col ? wmma::mem_col_major : wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, 16, d_col ? wmma::mem_col_major : wmma::mem_row_major);
}
torch::Tensor tile(torch::Tensor a, torch::Tensor b, torch::Tensor c, bool a_col, bool b_col, bool c_col, bool d_col) {
    auto d = torch::empty_like(c);
    const __half* pa = reinterpret_cast<const __half*>(a.data_ptr<at::Half>());
    const __half* pb = reinterpret_cast<const __half*>(b.data_ptr<at::Half>());
    if (c.scalar_type() == torch::kFloat) {
        if (!a_col && !b_col) tile_k<wmma::row_major, wmma::row_major, float><<<1, 32>>>(pa, pb, c.data_ptr<float>(), d.data_ptr<float>(), c_col, d_col);
        else if (a_col && !b_col) tile_k<wmma::col_major, wmma::row_major, float><<<1, 32>>>(pa, pb, c.data_ptr<float>(), d.data_ptr<float>(), c_col, d_col);
        else if (!a_col && b_col) tile_k<wmma::row_major, wmma::col_major, float><<<1, 32>>>(pa, pb, c.data_ptr<float>(), d.data_ptr<float>(), c_col, d_col);
        else tile_k<wmma::col_major, wmma::col_major, float><<<1, 32>>>(pa, pb, c.data_ptr<float>(), d.data_ptr<float>(), c_col, d_col);
    } else {
        tile_k<wmma::row_major, wmma::row_major, __half><<<1, 32>>>(pa, pb, reinterpret_cast<const __half*>(c.data_ptr<at::Half>()),
            reinterpret_cast<__half*>(d.data_ptr<at::Half>()), c_col, d_col);
    }
    return d;
}
"""


@pytest.fixture(scope="module")
def wmma_mod():
    return load(WMMA, ["tile"])


@pytest.mark.parametrize("a_col, b_col, c_col, d_col", [(False, False, False, False), (True, False, True, False),
                                                        (False, True, False, True), (True, True, True, True)])
def test_wmma_tile_product_in_every_layout(wmma_mod, a_col, b_col, c_col, d_col):
    a, b, c = torch.randn(16, 16).half(), torch.randn(16, 16).half(), torch.randn(16, 16)
    mem = lambda t, col: t.t().contiguous() if col else t            # noqa: E731  (how the kernel reads it)
    d = wmma_mod.tile(mem(a, a_col), mem(b, b_col), mem(c, c_col), a_col, b_col, c_col, d_col)
    d = d.t() if d_col else d
    utils.check(d, a.double() @ b.double() + c.double(), **tc.tol(16), name="wmma tile")


def test_wmma_half_accumulator(wmma_mod):
    a, b, c = torch.randn(16, 16).half(), torch.randn(16, 16).half(), torch.randn(16, 16).half()
    d = wmma_mod.tile(a, b, c, False, False, False, False)
    assert d.dtype == torch.float16
    utils.check(d, a.double() @ b.double() + c.double(), **tc.tol(16), name="wmma tile, fp16 accumulator")


WRONG = utils.cuda_begin + r"""
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
// how: 0 fine, 1 only lanes < 16 multiply, 2 ldm of 12 halves, 3 a tile reaching past the end, 4 a shared tile
// read back by other lanes without __syncwarp
__global__ void wrong_k(const __half* a, float* d, int how) {
    __shared__ float st[16 * 16];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a + (how == 3 ? 8 : 0), how == 2 ? 12 : 16);
    wmma::load_matrix_sync(fb, a, 16);
    if (how != 1 || threadIdx.x % 32 < 16) wmma::mma_sync(acc, fa, fb, acc);
    if (how == 4) {
        wmma::store_matrix_sync(st, acc, 16, wmma::mem_row_major);
        d[threadIdx.x] = st[(threadIdx.x * 7) % 256];
        return;
    }
    wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}
torch::Tensor wrong(torch::Tensor a, int64_t how, int64_t threads) {
    auto d = torch::zeros({256}, a.options().dtype(torch::kFloat));
    wrong_k<<<1, threads>>>(reinterpret_cast<const __half*>(a.data_ptr<at::Half>()), d.data_ptr<float>(), how);
    return d;
}
"""


@pytest.mark.parametrize("how, threads, message", [
    (1, 32, r"wmma::mma_sync\(\.\.\.\) at cuda_src line \d+.*All 32 lanes of a warp must reach the same wmma call"),
    (2, 32, r"misaligned address: wmma::load_matrix_sync at cuda_src line \d+ .*ldm = 12 elements is 24 bytes, "
            r"not a multiple of 16"),
    (3, 32, r"out-of-bounds access by wmma::load_matrix_sync at cuda_src line \d+ .*element \(row 15, column \d+\) of "
            r"the 16x16 tile is a\[\d+\], past the end of a"),
    (0, 48, r"warp 1 has only lanes 0-15 \(the block has 48 threads\)\. A wmma operation is done by all 32 lanes"),
    (4, 32, r"race"),
])
def test_wmma_mistakes_are_errors_that_name_the_line(how, threads, message):
    mod = load(WRONG, ["wrong"])
    assert mod.wrong(torch.randn(16, 16).half(), 0, 32).abs().sum() > 0   # the correct use runs
    with pytest.raises(CudaEmulationError, match=message):
        mod.wrong(torch.randn(16, 16).half(), how, threads)


def test_mma_sync_calls_are_counted_per_lane():
    mod = load(WRONG, ["wrong"])
    mod._cuda_emu_count(True)
    try:
        mod.wrong(torch.randn(16, 16).half(), 0, 32)
        fields, counted = mod._cuda_emu_counts()
    finally:
        mod._cuda_emu_count(False)
    fields = fields.split(",")
    counts = torch.frombuffer(bytearray(counted[0][3]), dtype=torch.int32).view(32, len(fields))
    assert counts[:, fields.index("mma")].tolist() == [1] * 32
    assert counts[:, fields.index("warp_other")].sum() == 0     # wmma's rendezvous are not other warp-level calls


# ---- notebook 12's ladder ----------------------------------------------------------------------------------------

def test_ladder_sources_and_what_runs_on_the_cpu():
    assert tc.rungs_here(quiet=True) == {1: tc.RUNGS[1], 2: tc.RUNGS[2]}
    assert "asm" not in tc.source([1, 2])
    for rung in (3, 4, 5, 6):
        ok, why = tc.runs_here(rung)
        assert not ok and "inline PTX" in why and "runs on a GPU only" in why
    src = tc.source([3])
    with pytest.raises(CudaEmulationError, match=r"inline PTX \(ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16\) is not "
                                                 r"supported by the CPU emulation; run on a GPU"):
        load(src, ["tc_mma"])
    assert tc.funcs([4]) == ["tc_async", "tc_async_order", "fragment_layouts"]
    assert tc.files(6)[-2:] == ["tensor_cores/05_wgmma_tma.cu", "tensor_cores/06_persistent.cu"]
    with pytest.raises(ValueError, match="no rung 7"):
        tc.files(7)


@pytest.fixture(scope="module")
def ladder():
    return tc.build()


def test_rungs_1_and_2_match_float64(ladder):
    h, w, k = 48, 32, 64
    m, n = torch.randn(h, k).half(), torch.randn(k, w).half()
    utils.check(tc.run(ladder, 1, m, n, utils.poisoned(h, w, dtype=torch.float16)), m.double() @ n.double(),
                **tc.tol(k), name="rung 1")
    for h, w, k in [(100, 70, 90), (130, 129, 40), (1, 1, 1)]:
        m, n = torch.randn(h, k).half(), torch.randn(k, w).half()
        utils.check(tc.run(ladder, 2, m, n, utils.poisoned(h, w, dtype=torch.float16)), m.double() @ n.double(),
                    **tc.tol(k), name=f"rung 2 at {h}x{w}x{k}")


def test_rung_preconditions_are_clear_errors(ladder):
    m, n = torch.randn(20, 16).half(), torch.randn(16, 16).half()
    with pytest.raises(RuntimeError, match="must be multiples of 16; got h = 20"):
        tc.run(ladder, 1, m, n, torch.empty(20, 16).half())
    with pytest.raises(RuntimeError, match="must be float16 tensors"):
        tc.run(ladder, 2, m.float(), n, torch.empty(20, 16).half())
    with pytest.raises(RuntimeError, match=r"do not fit"):
        tc.run(ladder, 2, m, n[:8], torch.empty(20, 16).half())
    with pytest.raises(ValueError, match="one shape only"):
        tc.run(ladder, 2, m, n, torch.empty(20, 16).half(), cfg=1)


def test_fragment_layouts_in_the_emulation_are_the_documented_ones(ladder):
    grids = lesson.layout_grids(ladder, torch.empty(1))
    lanes, elems = grids["WMMA accumulator 16x16 (float)"]
    a_lanes, a_elems = grids["mma.sync m16n8k16: A 16x16"]
    b_lanes, b_elems = grids["mma.sync m16n8k16: B 16x8"]
    for r in range(16):
        for c in range(16):
            assert int(lanes[r, c]) == 4 * (r % 8) + (c % 8) // 2
            assert int(elems[r, c]) == 4 * (c // 8) + 2 * (r // 8) + c % 2
            assert int(a_lanes[r, c]) == 4 * (r % 8) + (c % 8) // 2          # PTX ISA: row groupID (+8), col 2t (+8)
            assert int(a_elems[r, c]) == 4 * (c // 8) + 2 * (r // 8) + c % 2
        for c in range(8):
            assert int(b_lanes[r, c]) == 4 * c + (r % 8) // 2                 # col groupID, row 2t + i%2 (+8)
            assert int(b_elems[r, c]) == 2 * (r // 8) + r % 2


def ptx_emulated(src):
    """``src`` with tc_ptx.cuh replaced by the CUDA C stand-in (tests/fixtures/tc_ptx_emulated.cuh)."""
    ptx = cuda_source("tensor_cores/tc_ptx.cuh")
    assert ptx in src
    return src.replace(ptx, "#include <cuda_pipeline.h>\n" + FIXTURE.read_text())


def test_rung3_with_its_ptx_emulated_matches_float64():
    src = ptx_emulated(tc.source([3]))
    mod = load(src, ["tc_mma"])
    for h, w, k in [(40, 24, 72), (130, 136, 80), (129, 8, 8)]:
        m, n = torch.randn(h, k).half(), torch.randn(k, w).half()
        utils.check(mod.tc_mma(m, n, utils.poisoned(h, w, dtype=torch.float16)), m.double() @ n.double(),
                    **tc.tol(k), name=f"rung 3 (PTX emulated) at {h}x{w}x{k}")
    with pytest.raises(RuntimeError, match="k and w must be multiples of 8"):
        mod.tc_mma(torch.randn(8, 12).half(), torch.randn(12, 8).half(), torch.empty(8, 8).half())


RUNG4_TWO_SHAPES = r"""
// rung 4's kernel in two of its shapes (building all five through the emulation takes minutes): 8 warps of 64x32
// with 4 stages in groups of 2 rows of tiles, and 4 warps of 64x64 with 3 stages in row order
torch::Tensor async_two(torch::Tensor m, torch::Tensor n, torch::Tensor out, int64_t cfg) {
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
    if (cfg == 0) {
        const int smem = 4 * (128 + 128) * TC_BK * 2;
        C10_CUDA_CHECK(cudaFuncSetAttribute(mma_async_k<128, 128, 64, 32, 4>, attr, smem));
        mma_async_k<128, 128, 64, 32, 4><<<dim3(cdiv(w, 128), cdiv(h, 128)), 256, smem>>>(
            half_ptr(m), half_ptr(n), half_ptr_mut(out), h, w, k, 2);
    } else {
        const int smem = 3 * (128 + 128) * TC_BK * 2;
        C10_CUDA_CHECK(cudaFuncSetAttribute(mma_async_k<128, 128, 64, 64, 3>, attr, smem));
        mma_async_k<128, 128, 64, 64, 3><<<dim3(cdiv(w, 128), cdiv(h, 128)), 128, smem>>>(
            half_ptr(m), half_ptr(n), half_ptr_mut(out), h, w, k, 0);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


@pytest.mark.slow   # emulates rung 4's PTX (cp.async, ldmatrix, mma.sync): ~20 s cold
def test_rung4_pipeline_with_its_ptx_emulated_matches_float64():
    src = ptx_emulated(tc.source([4]))
    src = src[:src.index("// The launch order tc_async uses")] + RUNG4_TWO_SHAPES
    mod = load(src, ["async_two"])
    for h, w, k in [(300, 264, 200), (40, 8, 264)]:   # 3 x 3 blocks, k over several stages and a partial tile
        m, n = torch.randn(h, k).half(), torch.randn(k, w).half()
        for cfg in (0, 1):
            utils.check(mod.async_two(m, n, utils.poisoned(h, w, dtype=torch.float16), cfg), m.double() @ n.double(),
                        **tc.tol(k), name=f"rung 4 shape {cfg} (PTX emulated) at {h}x{w}x{k}")


def test_swizzle_helpers():
    assert lesson.ldmatrix_conflicts(lambda r, p: p ^ (r % 8), 16, 6) == []
    clash = lesson.ldmatrix_conflicts(lambda r, p: p ^ (r % 4))
    assert clash and clash[0][1:3] == (0, 4)            # rows 0 and 4 put piece 0 in the same place
    assert tc.shared_bytes(4, 1) == 3 * 256 * 64 * 2


@pytest.mark.parametrize("fake, runs", [("7.5", {1, 2}), ("8.0", {1, 2}), ("9.0", {1, 2}), ("10.0", {1, 2})])
def test_what_runs_on_older_and_newer_gpus(monkeypatch, fake, runs):
    """COURSE_FAKE_CC: the reason for each rung left out, in one line; PTX rungs never run in the emulation."""
    from gpu_course import hardware
    monkeypatch.setenv(hardware.CC_ENV, fake)
    assert set(tc.rungs_here(quiet=True)) == runs
    why = {r: tc.runs_here(r)[1] for r in (3, 4, 5)}
    if fake == "7.5":
        assert why[3].endswith("needs compute capability 8.0 (Ampere) or newer") and "sm_75" in why[3]
    if fake in ("7.5", "8.0", "10.0"):
        assert "wgmma and TMA exist on Hopper (sm_90) only" in why[5]
    if fake == "9.0":
        assert all("inline PTX" in w for w in why.values())
    assert all("\n" not in w for w in why.values())


# ---- the stored Nsight Compute measurement and its readers ----------------------------------------------------------

def _raw_csv(names):
    """A tiny `ncu --csv --page raw` export: one kernel per name, with the metrics limiters() reads."""
    cols = ["ID", "Kernel Name", "gpu__time_duration.sum",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
            "launch__registers_per_thread", "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
            "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
            "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"]
    units = ["", "", "us", "%", "%", "%", "register/thread", "block", "block", "", "", "", "ratio", "ratio"]
    lines = [",".join(f'"{c}"' for c in cols), ",".join(f'"{u}"' for u in units)]
    for i, n in enumerate(names):
        vals = [str(i), f"{n}(const __half *)", "1,234.5", "61.5", "30", "12.5", "240", "2", "1", "47,911", "0",
                "33,602,343", "2.24", "0.33"]
        lines.append(",".join(f'"{v}"' for v in vals))
    return "\n".join(lines) + "\n"


def test_limiters_reads_a_raw_row():
    from gpu_course import profiling
    row = profiling.ncu_raw_rows(_raw_csv(["mma_async_k"]))[0]
    lim = profiling.limiters(row)
    assert lim["time_us"] == 1234.5 and lim["tensor_pct"] == 61.5 and lim["blocks_per_sm"] == 1
    assert lim["ld_conflicts"] == 47911 and lim["ld_wavefronts"] == 33602343
    assert lim["stalls"] == [("wait", 2.24), ("barrier", 0.33)]


def test_limiter_rows_round_trip_and_refuse_a_wrong_order(tmp_path):
    names = {2: "wmma_shared_k", 3: "mma_ldmatrix_k", 4: "void mma_async_k<128, 256>", 5: "void wgmma_tma_k<256>",
             6: "void persistent_k<256, 4, 2, 2>"}
    raw = {v: _raw_csv([names[r] for r, _ in order]) for v, order in lesson.PROFILED.items()}
    rows = lesson.limiter_rows(raw)
    assert len(rows) == sum(len(o) for o in lesson.PROFILED.values())
    lesson.write_limiters(rows, tmp_path / "x.csv", "made by a test")
    back, about = lesson.read_limiters(tmp_path / "x.csv")
    assert about == "made by a test" and back[0]["stalls"] == [("wait", 2.24), ("barrier", 0.33)]
    assert "rung 4 cfg 1" in lesson.limiter_table(back)
    swapped = dict(raw, swizzled=_raw_csv([names[5]] + [names[r] for r, _ in lesson.PROFILED["swizzled"][1:]]))
    with pytest.raises(ValueError, match="expected wmma_shared_k"):
        lesson.limiter_rows(swapped)


def test_the_stored_h100_measurement_has_every_profiled_kernel():
    rows, about = lesson.read_limiters(lesson.limiters_file())
    assert "H100" in about
    assert [(r["variant"], r["rung"], r["cfg"]) for r in rows] == \
        [(v, r, c) for v, order in lesson.PROFILED.items() for r, c in order]


def test_smallest_square_tile_does_the_flop_per_byte_the_rates_ask():
    assert lesson.smallest_square_tile(4096, 64) == 128             # b / 2 = 64 FLOP per byte, exactly
    assert lesson.smallest_square_tile(4096, 48) == 176             # 170.7 rounded up to a multiple of 16
    assert lesson.smallest_square_tile(4096, 10_000) == 16          # never below one tile of 16
    assert lesson.smallest_square_tile(2048, 128) / 2 >= 2048 / 128 > (lesson.smallest_square_tile(2048, 128) - 16) / 2


def test_configs_here_are_every_shape_in_cpu_mode_and_one_for_single_shape_rungs():
    assert tc.configs_here(2) == [0]
    assert tc.configs_here(4) == list(range(len(tc.CONFIGS[4])))


def test_ldmatrix_conflicts_for_64_byte_rows():
    assert lesson.ldmatrix_conflicts(lambda r, p: p, row_bytes=64)                      # rows 0, 2, 4, 6 share banks
    assert lesson.ldmatrix_conflicts(lambda r, p: p ^ (r % 4), row_bytes=64)
    assert all(lesson.ldmatrix_conflicts(lambda r, p: p ^ ((r // 2) % 4), r0, c0, row_bytes=64) == []
               for r0 in range(0, 64, 16) for c0 in (0, 2))


def test_listing_shows_the_named_definitions_in_order_and_counts_the_rest():
    text = tc.listing("05_wgmma_tma.cu", ["wgmma_tma_k", "wg_desc"])
    assert text.index("wg_desc(const void* tile") < text.index("wgmma_tma_k(const __grid_constant__")
    assert "inline void mbar_init" not in text and "lines left out)" in text
    assert text.rstrip().endswith("lines left out)")                              # the host code after the kernel
    whole = tc.cuda_source(tc.DIR + "05_wgmma_tma.cu").rstrip().splitlines()
    shown = [l for l in text.splitlines() if not l.startswith("// ... (")]
    left = sum(int(l.split("(")[1].split(" ")[0]) for l in text.splitlines() if l.startswith("// ... ("))
    assert len(shown) + left == len(whole)
    with pytest.raises(ValueError, match="defines no nothing_here"):
        tc.listing("tc_ptx.cuh", ["nothing_here"])


def test_ladder_table_formats_rows_and_leaves_missing_cells_empty():
    sizes = {"4096³": (4096, 4096, 4096), "8192³": (8192, 8192, 8192)}
    rows = [dict(kernel=tc.RUNGS[5], size="4096³", tflops=635.0, vs=0.85),
            dict(kernel=lesson.CUBLAS, size="4096³", tflops=747.0, vs=1.0)]
    table = lesson.ladder_table(rows, "test", sizes, 989.4).splitlines()
    assert table[0].startswith("fp16 tensor-core ladder: test;")
    r5 = next(l for l in table if l.startswith(tc.RUNGS[5]))
    assert "635 TFLOP/s  64 %  0.85×" in r5 and r5.split()[-1] == "0.85×"


def test_configs_here_leave_out_shapes_too_large_for_this_gpu(monkeypatch):
    monkeypatch.setattr(tc, "fits_shared_memory", lambda nbytes, what: (nbytes <= 163 * 1024, ""))   # an A100
    assert tc.configs_here(4) == [0, 1, 2, 4]        # cfg 3 needs 192 KB


def test_ladder_table_without_a_spec_sheet_leaves_the_percentages_out():
    rows = [dict(kernel=lesson.CUBLAS, size="4096³", tflops=100.0, vs=1.0)]
    table = lesson.ladder_table(rows, "test", {"4096³": (1, 1, 1)}, None)
    assert "no spec sheet" in table and "100 TFLOP/s   - %  1.00×" in table


def test_wgmma_address_finds_every_element_where_rung_5s_tma_copies_wrote_it():
    from gpu_course.lessons.tensor_cores import descriptors
    reads = descriptors.rung5_reads()
    assert len(reads) == 4 * (2 * 64 * 16 + 2 * 256 * 16)          # per k-step: A of two consumers, B both majors
    assert all(lesson.wgmma_address(*args) == wrote for args, wrote, _ in reads)
    # one element each, by hand: row 1 of A at k-step 1 (32 bytes in), piece 2 ^ 1 = 3 of its 128-byte row
    assert lesson.wgmma_address(0x8400 + 32, 16, 1024, False, 0, 1) == 0x8400 + 128 + 3 * 16
    # B MN-major: k = 9 is row 1 of the second group of 8 (sbo), i = 70 is column 6 of the second box (lbo)
    assert lesson.wgmma_address(0, 8192, 1024, True, 9, 70) == 8192 + 1024 + 128 + (0 ^ 1) * 16 + 12
    # swizzling the offset from the start, not the address, misses some of them
    shifted = [(a, w) for a, w, _ in reads if a[0] % 1024]
    assert any(a[0] + lesson.swizzle_128b(lesson.wgmma_address(0, *a[1:])) != w for a, w in shifted)


def test_wgmma_address_cases_mix_rung_5s_descriptors_with_unseen_ones():
    cases, labels = lesson.wgmma_address_cases()
    assert len(cases) == len(labels) == 108 and len(set(cases)) > 100
    assert {c[3] for c in cases} == {True, False} and any(c[0] % 1024 for c in cases)   # both majors, starts inside a group
    assert sum(lb.startswith("rung 5's") for lb in labels) == 48
    assert len({lesson.wgmma_address(*c) for c in cases}) > 90


def test_rung6_units_cover_every_tile_once():
    """Rung 6's order tables: each (tile row, column) of out in exactly one unit, a unit being CLUSTER tiles one above
    the other, in every shape and order, at sizes no tile divides."""
    for cfg, (variant, _) in enumerate(tc.P6_CONFIGS):
        bn, _, cluster = tc.P6_VARIANTS[variant]
        for h, w in [(1000, 776), (4096, 4096), (5120, 5120), (128, 8), (300, 512)]:
            for kind in ("raster", "grouped", "hilbert"):
                tiles = [(r + q, c) for r, c in tc.units(h, w, cfg, kind) for q in range(cluster)]
                rows, cols = -(-h // 128), -(-w // bn)
                inside = sorted(t for t in tiles if t[0] < rows)
                assert inside == [(r, c) for r in range(rows) for c in range(cols)], (cfg, h, w, kind)
                assert len(tiles) - len(inside) == (rows % cluster and cols)   # an odd row's unit runs past h
    last = len(tc.P6_CONFIGS) - 1
    with pytest.raises(ValueError, match=f"cfg 0..{last}"):
        tc.run(SimpleNamespace(tc_persistent=print), 6, torch.zeros(8, 8), torch.zeros(8, 8), torch.zeros(8, 8),
               cfg=last + 1)
