"""Which compiled kernel each rung of notebook 04's ladder launches, named as ``-Xptxas -v`` reports it (demangled,
``void name<...>`` for a template), and the dynamic shared memory ptxas does not count: what the notebook's
occupancy cells look up in the resource report."""
from __future__ import annotations

from ...kernels import matmul_ladder


def warp_kernel(shape) -> str:
    """The demangled name of rung 8's kernel in one tile shape (a ``matmul_ladder.WarpTile``).

    >>> warp_kernel(matmul_ladder.RUNG9_SHAPES[0])
    'void mm_warp_k<128, 128, 16, 64, 64, 2, 4, 4, 128>'
    """
    return f"void mm_warp_k<{', '.join(map(str, shape))}>"


def async_kernel(shape, stages: int) -> tuple:
    """The demangled name of rung 10's kernel in ``shape`` with ``stages`` buffers, and its dynamic shared memory
    per block in bytes (its ``__launch_bounds__`` minimum: 2 blocks for 128 threads, else 1, as in the .cu).

    >>> async_kernel(*matmul_ladder.RUNG10_SHAPES[0])
    ('void mm_async_k<256, 128, 16, 64, 64, 2, 4, 4, 256, 5, 1>', 122880)
    """
    blocks_per_sm = 2 if shape.NT == 128 else 1
    return (f"void mm_async_k<{', '.join(map(str, shape))}, {stages}, {blocks_per_sm}>",
            stages * shape.BK * (shape.BM + shape.BN) * 4)


# rung (or a variant's label) -> the kernel it launches; rung 9 is one of rung 8's shapes, chosen per size
KERNEL_OF = {1: "mm_rows_k", 2: "mm_cols_k", 3: "void matmul_tiled_k<32>", 4: "void mm_tile1d_k<64, 64, 8, 8>",
             5: "void mm_tile2d_k<128, 128, 8, 8, 8, 1>", 6: "void mm_vec_k<128, 128, 8, 8, 8>",
             7: "void mm_pipe_k<128, 128, 8>", 8: warp_kernel(matmul_ladder.RUNG9_SHAPES[0]),
             10: async_kernel(*matmul_ladder.RUNG10_SHAPES[0])[0],
             "rung 5, launch bounds (256, 2)": "void mm_tile2d_k<128, 128, 8, 8, 8, 2>"}
THREADS_OF = {"rung 5, launch bounds (256, 2)": 256}
DYNAMIC_SMEM = {10: async_kernel(*matmul_ladder.RUNG10_SHAPES[0])[1]}   # not in ptxas' static count


def occupancy_lines(usage: dict, rungs: dict, threads: dict, occupancy) -> list:
    """One line per rung of ``rungs`` (and per variant of :data:`KERNEL_OF`) found in ``usage`` (kernel ->
    (registers, static shared memory, spilled)): registers, shared memory, threads, and the blocks and fraction of
    warps per SM from ``occupancy(regs, smem, threads)``; ``threads``: rung -> threads per block."""
    lines = []
    for key in [*rungs, *(k for k in KERNEL_OF if isinstance(k, str))]:
        kname = KERNEL_OF.get(key)
        if kname not in usage:
            continue
        regs, smem, _ = usage[kname]
        smem += DYNAMIC_SMEM.get(key, 0)
        nt = threads[key] if key in threads else THREADS_OF[key]
        blocks, occ = occupancy(regs, smem, nt)
        label = rungs[key] if key in rungs else key
        lines.append(f"{label:32s} {regs:4d} regs, {smem:7,d} B smem, {nt:5d} threads -> {blocks} blocks/SM, "
                     f"occupancy {occ:.0%}")
    return lines
