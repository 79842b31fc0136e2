"""Exercises that check themselves and never raise, so a notebook with open exercises still
runs top to bottom.

* :func:`exercise`: any answer, checked by a function (a number, a string, a timer...).
* :func:`kernel_exercise`: a kernel, checked for the method, not only the numbers: the learner's
  kernel of the asked kind ran (recorded by :mod:`.launches`), the result is memory it wrote,
  the result matches a reference, the course's own launch of the kernel on fresh memory computes
  it too (:mod:`.replay` for Triton and Numba, :mod:`.cuda_launch` for CUDA C), and optional
  evidence of the technique holds, read from what that launch executed
  (:func:`uses_shared_memory`, :func:`shared_tiles`, :func:`threads_per_block`,
  :func:`grid_is`, :func:`calls`, :func:`launches_at_most`, :func:`only_reads`,
  :func:`splits_work`, :func:`shared_atomics`, :func:`dot_work`, :func:`dot_inputs`).
* :func:`formula_exercise`: a number the learner works out, asked as a function of the
  question's parameters and tried on several of them, so a number copied from a stored output
  cannot pass.
* :func:`hint`: hints are opt-in: a check registers its hint and prints how to ask for it.

Put the learner's code and the check in different cells: anything defined inside the cell that
calls the check (or inside the function that calls it) is refused as an answer.

The modules: :mod:`.runner` (``exercise``, ``hint``), :mod:`.provenance` (where an answer comes
from), :mod:`.problem` (a kernel exercise as an object, :class:`KernelProblem`), :mod:`.judging`
(``kernel_exercise``: the judging as a list of steps), :mod:`.kinds` (one module per kind of kernel:
Triton, Numba, CUDA C), :mod:`.evidence` (the evidence checks),
:mod:`.formulas` (``formula_exercise``), :mod:`.watching` (``watch_calls``, ``slow_work``); under
them :mod:`.replay` and :mod:`.cuda_launch` (the course's own launch), :mod:`.cuda_evidence` and
:mod:`.compiled` (what it executed, what was compiled) and :mod:`.guard` (what a check relies on).
"""
from __future__ import annotations

from . import guard
from .evidence import (aggregated, calls, differs_from, dot_inputs, dot_work, grid_is, launches_at_most, only_reads, shared_atomics, shared_tiles,
                       splits_work, threads_per_block, uses_shared_memory)
from .formulas import formula_exercise
from .judging import Attempt, Verdict, judge_kernel, kernel_exercise
from .problem import KernelProblem
from .runner import exercise, hint
from .watching import Call, slow_work, watch_calls

__all__ = ["exercise", "kernel_exercise", "judge_kernel", "KernelProblem", "formula_exercise", "hint", "Verdict",
           "Attempt", "uses_shared_memory", "threads_per_block", "grid_is", "calls",
           "launches_at_most", "only_reads", "differs_from", "watch_calls", "slow_work", "Call",
           "shared_tiles", "splits_work", "shared_atomics", "aggregated", "dot_work", "dot_inputs"]

guard.remember()  # torch's and the course's functions as they are at import
