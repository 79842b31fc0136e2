"""What notebook 11 measures its FlashAttention kernels (:mod:`gpu_course.kernels.triton_attention`) with, one job a
module, and every public name of them here, as the notebook calls them (``lesson.speed_table``):

* :mod:`.sdpa`: PyTorch's attentions as baselines, the fp32 reference, errors against it, what a caller gets
  (autograd included, or a forward's launch paths);
* :mod:`.tables`: the speed tables, the results recorded, the closing summary;
* :mod:`.ladder`: the forward and backward ladders, a step at a time, their registers and PTX census;
* :mod:`.anatomy`: matmuls in the source, tensor-core instructions in the PTX, kernels launched, tuned configs;
* :mod:`.memory`: the forward's peak memory, naive against ours;
* :mod:`.ncu`: what Nsight Compute measured, launched by ``bench/flash_attention_ncu.py``.
"""
from .anatomy import (BACKWARD_MATMULS, config_str, count_dots, distinct_grads, mma_instructions, profiled_kernels,
                      short_kernel_name, tensor_core_instructions, tuned_configs)
from .ladder import (BACKWARD_LADDER, LADDER, PTX_CENSUS, PTX_OPS, REGISTERS, backward_ladder, census_table,
                     check_steps, compiler_dumps_muted, distinct_results, forward_ladder, ladder_table, ptx_census)
from .memory import forward_memory, forward_peak_memory, gib, memory_table
from .ncu import (NCU_FIELDS, NCU_KERNELS, NCU_ORDER, NCU_SHAPE, attention_limiter_rows, limiter_table, limiters_file,
                  ncu_launches)
from .sdpa import (ERROR_FLOORS, SDPA_BACKENDS, accuracy_baseline, errors_like_sdpa, fastest_library, forward_paths,
                   fp32_reference, half_dtypes, max_err, one_line, reference_parts, sdpa_backend, sdpa_baselines,
                   sdpa_flash, sdpa_with, skip_reason, time_attention)
from .tables import (rate_label, ratio_table, record_speed, shape_tag, speed_ratios, speed_table, stored_summary_rows,
                     summary_rows, summary_table)
