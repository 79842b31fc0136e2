"""What notebook 10 measures its LayerNorm and GeLU (:mod:`gpu_course.kernels.triton_layernorm`) with, one job a
module, and every public name of them here, as the notebook calls them (``lesson.compare_with_torch``):

* :mod:`.compare`: the variants compared with torch (eager, ``torch.compile``, ours through each wrapper), their
  inputs and check against float64, how they are timed, the table;
* :mod:`.overheads`: where the CPU time goes (CUDA graphs, autograd's threads, the C++ node, a Python backward's
  floor, the launcher's layers, the kernels a call launches);
* :mod:`.model_route`: what a model gets from ``layer_norm_op`` (through the C++ node once built), in rounds;
* :mod:`.traffic`: the bytes moved and the time they predict, errors in units in the last place.
"""
from .compare import (EAGER, EPS, NODE, OP_DIRECT, OURS, OURS_COMPILED, check_variants, compare_with_torch,
                      dtypes_here, fwd_bwd, inputs, table, time_it, time_user, time_users, variants)
from .overheads import (TIMES1_CPP, TIMES1_PY, Times1, cpu_layers, kernels_launched, node_comparison, on_each_thread,
                        on_the_calling_thread, python_backward_floor, under_cuda_graph)
from .model_route import MODEL, loop_speedups, stacked, what_a_model_calls
from .traffic import (backward_dram_bytes, backward_time_from_bytes, bytes_moved, groups_explained_by_bytes,
                      ulps_per_element)
