"""What notebook 12 shows and measures of its tensor-core ladder (:mod:`gpu_course.kernels.tensor_cores`), one job a
module, and every public name of them here, as the notebook calls them (``lesson.time_ladder``):

* :mod:`.fragments`: lane layouts, ``ldmatrix``'s rows and banks, the smallest tile that feeds the tensor cores;
* :mod:`.descriptors`: where ``wgmma`` reads through a swizzled descriptor, and where rung 5's TMA copies write;
* :mod:`.timing`: the ladder timed against cuBLAS fp16, its rows and table;
* :mod:`.ncu`: what Nsight Compute measured of each rung, launched by ``bench/tensor_cores_ncu.py``.
"""
from .descriptors import swizzle_128b, wgmma_address, wgmma_address_cases
from .fragments import banks_of, draw_layouts, layout_grids, ldmatrix_conflicts, ldmatrix_rows, smallest_square_tile
from .ncu import (KERNEL_NAMES, LIMITER_FIELDS, NO_SWIZZLE_FLAGS, PROFILED, limiter_rows, limiter_table,
                  limiters_file, merge_limiters, read_limiters, write_limiters)
from .timing import CUBLAS, INTENSITY, autotune_rungs, ladder_rows, ladder_table, time_ladder
