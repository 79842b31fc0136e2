"""Notebook 12's tensor-core ladder on a real GPU: every rung and every compiled shape against float64 at sizes no
tile divides, the preconditions each rung states (a clear error, no crash), and the fragment layouts: the GPU's
own against the CPU emulation's (tests/unit/test_tensor_cores.py runs rungs 1 and 2, and rungs 3 and 4 with their
PTX emulated, on the CPU). Rung 5 needs an sm_90 GPU (an H100); elsewhere it is skipped with the reason.
Skipped on the CPU."""
import pytest
import torch

import utils
from gpu_course.kernels import tensor_cores as tc
from gpu_course.lessons import tensor_cores as lesson

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")

HERE = tc.rungs_here(quiet=True) if utils.ON_GPU else {}


@pytest.fixture(scope="module")
def mod():
    return tc.build()


def _operands(h, w, k):
    return (torch.randn(h, k, device="cuda").half(), torch.randn(k, w, device="cuda").half())


@pytest.mark.parametrize("rung", sorted(tc.RUNGS))
@pytest.mark.parametrize("h, w, k", [(1000, 552, 776), (257, 136, 72), (128, 256, 64), (4096, 4096, 4096),
                                     (5120, 5120, 256), (33, 8, 8)])
def test_every_rung_and_shape_matches_float64(mod, rung, h, w, k):
    ok, why = tc.runs_here(rung)
    if not ok:
        pytest.skip(why)
    if rung == 1 and (h % 16 or w % 16 or k % 16):
        h, w, k = (h + 15) // 16 * 16, (w + 15) // 16 * 16, (k + 15) // 16 * 16   # rung 1: multiples of 16
    m, n = _operands(h, w, k)
    ref = m.double() @ n.double()
    for cfg in range(len(tc.CONFIGS.get(rung, [None]))):
        out = tc.run(mod, rung, m, n, utils.poisoned(h, w, dtype=torch.float16), cfg)
        utils.check(out, ref, **tc.tol(k), name=f"rung {rung} cfg {cfg} at h={h}, w={w}, k={k}")


def test_cublas_fp16_is_within_the_tolerance():
    """The tolerance is not tighter than what the library itself achieves."""
    for h, w, k in [(4096, 4096, 4096), (1000, 552, 776), (5120, 5120, 256)]:
        m, n = _operands(h, w, k)
        utils.check(m @ n, m.double() @ n.double(), **tc.tol(k), name=f"cuBLAS fp16 at {h}x{w}x{k}")


def test_preconditions_give_clear_errors(mod):
    m, n = _operands(20, 16, 16)
    with pytest.raises(RuntimeError, match="multiples of 16"):
        tc.run(mod, 1, m, n, torch.empty(20, 16, device="cuda", dtype=torch.float16))
    for rung in (3, 4, 5):
        if rung not in HERE:
            continue
        m, n = _operands(64, 64, 20)
        with pytest.raises(RuntimeError, match="multiples of 8"):
            tc.run(mod, rung, m, n, torch.empty(64, 64, device="cuda", dtype=torch.float16))
        with pytest.raises(RuntimeError, match="float16"):
            tc.run(mod, rung, m.float(), n, torch.empty(64, 64, device="cuda", dtype=torch.float16))
    torch.cuda.synchronize()   # no launch failed


def test_rung5_refuses_other_gpus_clearly():
    if 5 in HERE:
        pytest.skip("this GPU (sm_90) runs rung 5")
    mod5 = tc.build([5])          # compiles anywhere (the wgmma code only for sm_90a); refuses to launch elsewhere
    m, n = _operands(64, 64, 64)
    with pytest.raises(RuntimeError, match="sm_90"):
        mod5.tc_wgmma(m, n, torch.empty(64, 64, device="cuda", dtype=torch.float16), 0)


def test_fragment_layouts_are_what_the_emulation_and_the_notebook_say(mod):
    """fragment_layouts on the GPU: the WMMA accumulator is mma.m16n8k16's C layout twice (what emu_wmma.h
    emulates), and the mma.sync grids follow the PTX ISA's formulas."""
    grids = lesson.layout_grids(mod, torch.empty(1, device="cuda"))
    lanes, elems = grids["WMMA accumulator 16x16 (float)"]
    for r in range(16):
        for c in range(16):
            g, t = r % 8, (c % 8) // 2
            assert int(lanes[r, c]) == 4 * g + t, f"WMMA accumulator ({r}, {c}) is held by lane {int(lanes[r, c])}"
            assert int(elems[r, c]) == 4 * (c // 8) + 2 * (r // 8) + c % 2, f"WMMA accumulator ({r}, {c})"


WMMA_AB = utils.cuda_begin + r"""
#include <cuda_fp16.h>
#include <mma.h>
// lane l, element i of a matrix_a / matrix_b fragment loaded from a 16x16 tile whose element (r, c) is r * 16 + c
__global__ void wmma_ab_k(const __half* __restrict__ tile, float* __restrict__ a, float* __restrict__ b) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, tile, 16);
    wmma::load_matrix_sync(fb, tile, 16);
    for (int i = 0; i < fa.num_elements; ++i) a[threadIdx.x * fa.num_elements + i] = __half2float(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) b[threadIdx.x * fb.num_elements + i] = __half2float(fb.x[i]);
}
std::vector<torch::Tensor> wmma_ab(torch::Tensor tile) {
    auto a = torch::full({32, 16}, -1.0, tile.options().dtype(torch::kFloat));
    auto b = torch::full({32, 16}, -1.0, tile.options().dtype(torch::kFloat));
    wmma_ab_k<<<1, 32>>>(reinterpret_cast<const __half*>(tile.data_ptr<at::Half>()), a.data_ptr<float>(),
                         b.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {a, b};
}
"""


def test_wmma_a_and_b_layouts_match_the_emulation():
    """Where the GPU keeps the elements of WMMA's matrix_a and matrix_b fragments (CUDA leaves it unspecified);
    emu_wmma.h's wmma_rc assumes mma.m16n8k16's A and B operands, x[8..15] repeating x[0..7]. On a mismatch the
    message prints the GPU's layout, to put into wmma_rc."""
    m = utils.load_cuda(WMMA_AB, utils.get_sig("wmma_ab", WMMA_AB), ["wmma_ab"])
    tile = torch.arange(256, device="cuda", dtype=torch.float32).view(16, 16).half()
    a, b = (x.cpu().long() for x in m.wmma_ab(tile))
    gpu = {"matrix_a": a, "matrix_b": b}
    expect = {"matrix_a": torch.zeros(32, 16, dtype=torch.long), "matrix_b": torch.zeros(32, 16, dtype=torch.long)}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(16):
            j = i % 8
            expect["matrix_a"][lane, i] = (g + 8 * ((j // 2) % 2)) * 16 + 2 * t + j % 2 + 8 * (j // 4)
            expect["matrix_b"][lane, i] = (2 * t + j % 2 + 8 * ((j // 2) % 2)) * 16 + 8 * (j // 4) + g
    for name in gpu:
        shown = "\n".join(f"lane {l:2d}: " + " ".join(f"({v // 16},{v % 16})" for v in gpu[name][l].tolist())
                          for l in range(32))
        assert torch.equal(gpu[name], expect[name]), f"{name} on this GPU, (row, col) of x[0..15] per lane:\n{shown}"


@pytest.mark.parametrize("variant", range(len(tc.P6_VARIANTS)))
def test_rung6_blocks_that_walk_many_tiles(mod, variant):
    """Rung 6 with 2 and 6 blocks (one or three clusters), so that each walks many tiles and its mbarriers go
    through many phases; k = 520 (9 stages of 64, the last part-filled), sizes no tile divides, every order."""
    if 6 not in HERE:
        pytest.skip(tc.runs_here(6)[1])
    cfg = next(c for c, (v, _) in enumerate(tc.P6_CONFIGS) if v == variant)
    h, w, k = 1000, 776, 520
    m, n = _operands(h, w, k)
    ref = m.double() @ n.double()
    for kind in ("raster", "grouped", "hilbert"):
        for blocks in (2, 6):
            out = mod.tc_persistent(m, n, utils.poisoned(h, w, dtype=torch.float16), variant,
                                    tc.unit_table(h, w, cfg, kind, m.device), blocks)
            utils.check(out, ref, **tc.tol(k), name=f"rung 6 {tc.P6_VARIANTS[variant]} {kind}, {blocks} blocks")
