"""Kernel exercises on a real GPU: the course launches the learner's Triton / Numba kernel itself
on fresh memory, and the evidence of the technique is read from the compiled code (Triton's GPU IR,
Numba's PTX), where dead code is gone. Skipped on the CPU. The learner's kernels are at module
level (a learner's cell)."""
import pytest
import torch

import utils

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU (gpu mode)")

if utils.ON_GPU:
    import numba
    import triton
    import triton.language as tl
    from numba import cuda

    @triton.jit
    def mm_dot(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
        r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        k = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + k[None, :])
        b = tl.load(b_ptr + k[:, None] * 32 + c[None, :])
        tl.store(out_ptr + r[:, None] * 32 + c[None, :], tl.dot(a, b))

    @triton.jit
    def mm_dot_unused(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
        r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        k = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + k[None, :])
        b = tl.load(b_ptr + k[:, None] * 32 + c[None, :])
        unused = tl.dot(a, b)  # noqa: F841  removed by the compiler
        # the product as 16 outer products of a column by a row (tl.sum(a[:, :, None] * b[None, :, :], 1)
        # would not do: Triton's compiler recognises that broadcast product and makes it a dot itself)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for i in range(16):
            acc += tl.load(a_ptr + r * 16 + i)[:, None] * tl.load(b_ptr + i * 32 + c)[None, :]
        tl.store(out_ptr + r[:, None] * 32 + c[None, :], acc)

    TW = 16

    @cuda.jit
    def tiled(m, n, out):
        ms = cuda.shared.array((TW, TW), numba.float32)
        ns = cuda.shared.array((TW, TW), numba.float32)
        tr, tc = cuda.threadIdx.y, cuda.threadIdx.x
        r, c = cuda.blockIdx.y * TW + tr, cuda.blockIdx.x * TW + tc
        p = numba.float32(0.0)
        for ph in range(0, m.shape[1], TW):
            ms[tr, tc] = m[r, ph + tc] if r < m.shape[0] and ph + tc < m.shape[1] else 0.0
            ns[tr, tc] = n[ph + tr, c] if ph + tr < n.shape[0] and c < n.shape[1] else 0.0
            cuda.syncthreads()
            for i in range(TW):
                p += ms[tr, i] * ns[i, tc]
            cuda.syncthreads()
        if r < out.shape[0] and c < out.shape[1]:
            out[r, c] = p

    @cuda.jit
    def plain(m, n, out):
        ms = cuda.shared.array((TW, TW), numba.float32)  # noqa: F841  declared, never used
        r, c = cuda.grid(2)[1], cuda.grid(2)[0]
        if r < out.shape[0] and c < out.shape[1]:
            p = numba.float32(0.0)
            for i in range(m.shape[1]):
                p += m[r, i] * n[i, c]
            out[r, c] = p


def _verdicts(capsys):
    """The exercise lines printed (✅ / ❌), without whatever else a library printed."""
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith(("✅", "❌"))]


def mm_with(kernel):
    def f(a, b):
        out = utils.poisoned(32, 32)
        kernel[(2, 2)](a, b, out, BLOCK=16)
        return out
    return f


def test_triton_dot_is_read_from_the_compiled_kernel(capsys):
    a, b = torch.randn(32, 16, device="cuda"), torch.randn(16, 32, device="cuda")
    for kernel in (mm_dot, mm_dot_unused):
        utils.kernel_exercise("tiles", mm_with(kernel), kind="triton", run=lambda f: f(a, b),
                              reference=lambda: a.double() @ b.double(), atol=0.05, rtol=1e-2,
                              evidence=[utils.calls("tl.dot")], inputs=(a, b))
    ok, dead = _verdicts(capsys)
    assert ok.startswith("✅ tiles: correct"), ok
    assert "the compiled mm_dot_unused holds no dot" in dead, dead


def run_tiles(kernel, a, b):
    out = utils.poisoned(a.shape[0], b.shape[1])
    kernel[(utils.cdiv(b.shape[1], TW), utils.cdiv(a.shape[0], TW)), (TW, TW)](
        utils.to_numba(a), utils.to_numba(b), utils.to_numba(out))
    utils.synchronize()
    return out


def test_numba_shared_memory_is_read_from_ptx(capsys):
    a, b = torch.randn(40, 37, device="cuda"), torch.randn(37, 50, device="cuda")
    for kernel in (tiled, plain):
        utils.kernel_exercise("tiled", kernel, kind="numba", run=lambda k: run_tiles(k, a, b),
                              reference=lambda: a.double() @ b.double(), **utils.dot_tol(37),
                              evidence=[utils.uses_shared_memory(), utils.shared_tiles((16, 16))])
    ok, unused = _verdicts(capsys)
    assert ok.startswith("✅ tiled: correct"), ok
    assert unused.startswith("❌ tiled: not yet:") and "shared" in unused, unused
