"""Unit tests of ``shared_tiles`` (gpu_course/exercises.py) in cpu mode: the tile shapes a Numba
kernel stages in shared memory (notebook 05's rectangular tiles): right shapes pass, whether written
as numbers, module-level constants or keywords; tiles declared but not read, or square tiles where
rectangular ones are asked, are refused."""
import utils  # first: it sets the simulator switches that numba reads at import

import numba
import pytest
import torch
from numba import cuda

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu-mode launch paths (simulator)"),
              pytest.mark.usefixtures("without_nvcc_check")]   # builds that test other things

TH, TW = 8, 16


@cuda.jit
def rect_tiles(m, n, out):  # the reference: an 8 x 16 tile of m, a 16 x 16 tile of n
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array(shape=(TW, TW), dtype=numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = m[r, ph + tc] if r < h and ph + tc < k else 0.0
        for i in (tr, tr + TH):
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else 0.0
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p


@cuda.jit
def unused_tiles(m, n, out):  # declares the right tiles, then computes from global memory
    ms = cuda.shared.array((8, 16), numba.float32)
    ns = cuda.shared.array((16, 16), numba.float32)
    ms[cuda.threadIdx.y, cuda.threadIdx.x] = 0.0  # written, never read
    ns[cuda.threadIdx.y, cuda.threadIdx.x] = 0.0
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        p = numba.float32(0.0)
        for i in range(m.shape[1]):
            p += m[r, i] * n[i, c]
        out[r, c] = p


@cuda.jit
def square_tiles(m, n, out):  # 16 x 16 tiles for both, launched on 16 x 8 threads: a loop of two rows
    ms = cuda.shared.array((TW, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        for i in (tr, tr + TH):
            ms[i, tc] = m[cuda.blockIdx.y * TH + i, ph + tc] if cuda.blockIdx.y * TH + i < h and ph + tc < k else 0.0
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else 0.0
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p


HH, KK, WW = 11, 19, 13
MA, MB = torch.randn(HH, KK), torch.randn(KK, WW)


def run_rect(kernel):
    o = utils.poisoned(HH, WW)
    kernel[(utils.cdiv(WW, TW), utils.cdiv(HH, TH)), (TW, TH)](utils.to_numba(MA), utils.to_numba(MB),
                                                               utils.to_numba(o))
    return o


def check_rect(kernel, *shapes):
    utils.kernel_exercise("rect", kernel, kind="numba", run=run_rect,
                          reference=lambda: MA.double() @ MB.double(), atol=1e-4, rtol=1e-4,
                          evidence=[utils.shared_tiles(*shapes)])


def test_shared_tiles_accepts_the_asked_shapes_written_as_constants_or_keywords(capsys):
    check_rect(rect_tiles, (8, 16), (16, 16))
    check_rect(rect_tiles, (16, 16))  # one of the two asked
    assert capsys.readouterr().out.splitlines() == [
        "✅ rect: correct (your Numba kernel rect_tiles wrote the result)"] * 2


def test_shared_tiles_refuses_unused_and_other_shapes(capsys):
    check_rect(unused_tiles, (8, 16), (16, 16))  # right values, right shapes, tiles never read
    check_rect(square_tiles, (8, 16), (16, 16))  # right values, square tiles
    unused, square = capsys.readouterr().out.splitlines()
    assert unused.endswith("unused_tiles stages no 8 × 16 tile in shared memory that every thread writes "
                           "and reads (in the check's launch, 256 (block, thread) pairs wrote the shared array "
                           "and 0 read it, of 256: every thread of a block loads its part of the tile and reads "
                           "the tile back): the exercise asks for tiles of 8 × 16, 16 × 16"), unused
    assert "square_tiles stages no 8 × 16 tile in shared memory" in square, square


def test_shared_tiles_is_for_numba_kernels():
    from types import SimpleNamespace

    from gpu_course.exercises.evidence import SetupError
    with pytest.raises(SetupError, match="shared_tiles applies to Numba kernels"):
        utils.shared_tiles((8, 16))(SimpleNamespace(kind="triton"))


def test_shape_constants():
    import ast
    from gpu_course.exercises.kinds.numba import constant as _constant
    names = {"TH": 8, "TW": 16, "flag": True}
    value = lambda src: _constant(ast.parse(src, mode="eval").body, names)
    assert value("(TH, TW)") == (8, 16)
    assert value("(2 * TH, TW // 2 + 1)") == (16, 9)
    assert value("TW") == 16
    assert value("(TH, unknown)") is None and value("flag") is None and value("f(3)") is None
