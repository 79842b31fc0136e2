"""What notebook 04 measures and shows of its fp32 matmul ladder (:mod:`gpu_course.kernels.matmul_ladder`), one job a
module, and every public name of them here, as the notebook calls them (``lesson.time_ladder``):

* :mod:`.timing`: this run's ceilings, lecture 5's kernels and the ladder timed against cuBLAS, and their claims;
* :mod:`.views`: the ladder's rows, table, bar plot, roofline and closing lines;
* :mod:`.resources`: the kernel each rung launches, as ``-Xptxas -v`` names it, for the occupancy cells;
* :mod:`.race`: ``compute-sanitizer --tool racecheck`` on a kernel, and a racy kernel's match rate without it;
* :mod:`.ncu`: the shared-memory counters and warp-stall reasons of rungs 6 to 8 under Nsight Compute.
"""
from .ncu import METRICS, RungCounters, counter_table, counters_from_raw, profile_rungs
from .race import Racecheck, find_sanitizer, match_rate, parse_racecheck, racecheck
from .resources import DYNAMIC_SMEM, KERNEL_OF, async_kernel, occupancy_lines, warp_kernel
from .timing import (CUBLAS, LadderRun, flops, ladder_claims, ratio_rounds, round_medians, run_ceilings,
                     time_kernels, time_ladder)
from .views import (closing_lines, ladder_rows, ladder_table, last_rung_ratio, plot_ladder, plot_roofline,
                    roofline_points, short_name)
