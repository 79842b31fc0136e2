"""The course's helpers, one module per job; the notebooks reach them through ``utils``.

* ``mode``: the execution mode (gpu / cpu), chosen once at import; ``DEVICE``, ``by_mode``
* ``hardware``: the GPU facts in one table (SMs, shared memory, registers, spec-sheet peaks, links) and
  what this GPU can do (``gpu_supports``, ``gpu_has``, ``shared_memory_per_block``, ``sm_count``,
  ``total_memory``), which ``COURSE_GPU_PROFILE=t4`` answers as Colab's T4 (``COURSE_FAKE_CC=7.5``: only
  its compute capability) to check a notebook's skips and tiles for it
* ``no_triton``: without Triton (macOS, Windows), each cell that needs it prints one line and is skipped
* ``session``: the running notebook's ``banner``, the GPU its stored outputs come from, ``versions``
* ``launch``: ``dim3``, ``cdiv``, ``to_numba``: what a kernel launch needs
* ``checking``: ``check`` against a reference, ``poisoned`` outputs, ``dot_tol``
* ``exercises``: ``exercise``, ``kernel_exercise``, ``formula_exercise``, ``hint``: self-checking
  exercises that never raise; a kernel exercise checks that the learner's kernel ran
* ``launches``: ``launches``: record the Triton, Numba and CUDA C kernel launches of a block
* ``timing``: ``bench`` and ``Timing``: warm-up, repeats, the median; ``cuda_graph``
* ``user_timing``: ``bench_user`` / ``compare``: GPU time, time per step in a loop and CPU time per call
* ``device_ceilings``: the device's measured ceilings, its spec-sheet peaks and the ``throughput``
  a timing achieves
* ``results``: ``report`` and ``save_result``: results/<device>.csv, the README's table
* ``roofline``: recorded matmul results placed under the measured roofs of their precision
* ``claims``: ``claim``: a sentence of the prose about a measurement, checked on a GPU;
  ``claim_everywhere``: one that holds in every mode, checked wherever it runs
* ``display``: ``show_img``, ``capture_printf``, ``show_source``, ``say``
* ``figures``, ``plots`` (imported by name): the legibility check every figure of a notebook passes where it is
  drawn (``notebooks/matplotlibrc`` hooks it into pyplot), and the notebooks' key results drawn
* ``profiling``, ``inductor`` (imported by name: ``from gpu_course import profiling``): reading ncu's
  report and torch.profiler's tables; reading what torch.compile generated
* ``occupancy`` (imported by name): resident blocks per SM from registers, shared memory and the SM's
  limits, and the persistent grid they allow
* ``triton_check``, ``triton_debug``, ``triton_plots`` (imported by name): bounds checks of the Triton
  interpreter, a kernel run by the interpreter on any machine and what a launch printed, sweep plots
* ``interpose``: the one layer that patches Triton's and Numba's internals (``interpose.triton``,
  ``interpose.numba``: version checks, undo) and emits the launch, access, shared-memory and barrier
  events that ``launches``, ``triton_check``, ``simulator_fix`` and the exercise checks subscribe to
* ``distributed``, ``parallel_training`` (imported by name): ranks of a process group kept alive for a
  notebook (NCCL between GPUs, gloo on the CPU; ``shipping``: how a notebook's function reaches them); DDP
  and FSDP on those ranks; ``collectives``: collectives measured as nccl-tests does; ``ring_all_reduce``: a
  ring all-reduce by hand; ``collective_check``: notebook 13's check of a composed all-reduce
* ``timing_exercises`` (imported by name): notebook 01's exercise references and its table of timing tools
* ``cuda``: CUDA C: ``cuda_begin``, ``get_sig``, ``load_cuda`` (GPU build or CPU emulation)
* ``kernels``: the kernels a notebook teaches and a benchmark times, defined once
* ``paths``: where results are kept

``mode`` is imported first, so numba's and triton's simulator switches are set before either
can be imported; in cpu mode the simulators' fixes (``simulator_fix``, ``triton_check``) are then
installed; nothing else happens at import time.

>>> import gpu_course as gc
>>> gc.cdiv(1000, 256)
4
"""
from . import mode  # noqa: F401  first: sets NUMBA_ENABLE_CUDASIM / TRITON_INTERPRET for the mode
if mode.MODE == "cpu":   # then the simulators made to behave as a GPU (the interposition layer's users)
    from . import simulator_fix, triton_check
    simulator_fix.install()
    triton_check.install()

from .claims import ClaimFailed, claim, claim_everywhere
from .device_ceilings import (CEILING_LABELS, CEILINGS_FILE, SPEC_PEAKS, Throughput, ceiling_rounds, ceilings,
                              missing_ceilings, spec_peak, throughput)
from .checking import CheckFailed, Checked, check, dot_tol, poison_, poisoned
from .cuda import CudaBuildError, CudaEmulationError, cuda_begin, get_sig, last_build_log, load_cuda
from .display import capture_printf, say, show_img, show_source, source_of
from .exercises import (aggregated, calls, differs_from, dot_inputs, dot_work, exercise, formula_exercise, grid_is,
                        hint, judge_kernel, kernel_exercise, launches_at_most, only_reads, shared_atomics,
                        shared_tiles, slow_work, splits_work, threads_per_block, uses_shared_memory,
                        watch_calls)
from .launch import cdiv, dim3, to_numba
from .launches import LaunchLog, launches
from .hardware import (compute_capability, fits_shared_memory, gpu_has, gpu_properties, gpu_supports,
                       limit_triton_to_profile, shared_memory_per_block, sm_count, total_memory)
from .mode import DEVICE, MODE, MODE_ENV, ON_GPU, by_mode, device_name, synchronize
from . import no_triton
from .no_triton import without_optional, without_triton
from .no_triton import version as triton_version
from .paths import RESULTS_DIR, ROOT
from .roofline import plot_roofline, reference_ceilings
from .results import (fmt_ratio, report, results_file, results_markdown, save_result, saving_results,
                      stored_results)
from .session import banner, versions
from .timing import Timing, bench, cuda_graph, flush_l2, fmt_ms, fmt_num, spin_gpu
from .user_timing import UserTiming, bench_user, bench_users, compare, cpu_ms_per_call, loop_ms

__all__ = [
    # mode, hardware, session
    "MODE", "MODE_ENV", "ON_GPU", "DEVICE", "by_mode", "device_name", "banner", "versions",
    "gpu_properties", "synchronize", "compute_capability", "gpu_supports", "gpu_has",
    "shared_memory_per_block", "fits_shared_memory", "sm_count", "total_memory",
    "without_optional", "without_triton", "triton_version",
    # launching kernels
    "dim3", "cdiv", "to_numba",
    # CUDA C
    "cuda_begin", "get_sig", "load_cuda", "last_build_log", "CudaBuildError", "CudaEmulationError",
    # checking and exercises
    "check", "Checked", "CheckFailed", "poisoned", "poison_", "dot_tol", "exercise",
    # exercises that prove the method: the learner's kernel ran and wrote the result
    "kernel_exercise", "judge_kernel", "formula_exercise", "hint", "uses_shared_memory",
    "threads_per_block", "grid_is", "calls", "launches_at_most", "only_reads", "differs_from",
    "watch_calls", "slow_work", "shared_tiles", "splits_work", "shared_atomics", "aggregated", "dot_work", "dot_inputs",
    "launches", "LaunchLog",
    # timing, ceilings, results
    "bench", "Timing", "flush_l2", "spin_gpu", "fmt_ms", "fmt_num", "fmt_ratio", "ceilings", "missing_ceilings", "throughput",
    "ceiling_rounds",
    "bench_user", "bench_users", "UserTiming", "compare", "loop_ms", "cpu_ms_per_call", "cuda_graph", "spec_peak", "SPEC_PEAKS",
    "reference_ceilings", "plot_roofline",
    "Throughput", "CEILINGS_FILE", "CEILING_LABELS", "report", "save_result", "saving_results",
    "stored_results", "results_markdown", "results_file", "ROOT", "RESULTS_DIR",
    # claims: the prose's statements about measurements, checked on a GPU
    "claim", "claim_everywhere", "ClaimFailed",
    # display
    "show_img", "capture_printf", "show_source", "source_of", "say",
]

limit_triton_to_profile()   # COURSE_GPU_PROFILE on a GPU: Triton launches see the profile's limits
no_triton.install()         # without Triton (macOS, Windows), in IPython: the cells that need it say so, and skip
