"""The attention forward in CUDA C++ on Hopper (``cuda/attention/flash_wgmma.cu``): notebook 11's FlashAttention
forward rebuilt from notebook 12's rung 5 pieces (TMA copies into a ring of stages, mbarriers, a producer warpgroup
and two consumer warpgroups, ``wgmma``), with P kept in registers as the second product's A operand, the next
tile's scores issued together with the previous tile's P v product (FlashAttention-3's order), and optionally
FlashAttention-3's ping-pong between the two consumers. Forward only, not causal, fp16, d of 64 or 128; it needs an
sm_90 GPU (H100, H200) and a build for sm_90a, which the course's GPU build makes there.

>>> FILE, FUNCS
('attention/flash_wgmma.cu', ['flash_wgmma'])
"""
from __future__ import annotations

import torch

from ..cuda import cuda_begin
from ..cuda.files import cuda_files, cuda_source
from . import build_source, ptx_runs_here

FILE = "attention/flash_wgmma.cu"
FUNCS = ["flash_wgmma"]
SCHEDULES = {0: "two consumers, each on its own", 1: "ping-pong between the two consumers"}


def source() -> str:
    """The CUDA C to build: ``cuda_begin``, then every file ``FILE`` includes (notebook 12's rung 5 first)."""
    return cuda_begin + cuda_source(*[f for f in cuda_files(FILE) if f != "common.cuh"])


def runs_here() -> tuple:
    """``(True, "")`` where the kernel runs here, else ``(False, reason)``, the reason one line: on a GPU by the
    course's feature gate "sm90a" (:data:`gpu_course.hardware.FEATURES`; ``COURSE_FAKE_CC`` pretends); never in cpu
    mode, whose emulation runs CUDA C, not PTX."""
    return ptx_runs_here("sm90a", "flash_wgmma", "wgmma and TMA (inline PTX) need an sm_90 GPU (H100, H200)")


def build(**load_cuda_kwargs):
    """Build (or load from the cache) the module with :data:`FUNCS`."""
    return build_source(source(), FUNCS, **load_cuda_kwargs)


def forward(mod, q, k, v, pingpong: int = 1, out=None):
    """softmax(q kᵀ / √d) v for q (batch, heads, n_q, d), k and v (batch, heads, n_k, d), fp16, contiguous, d 64
    or 128, by the module ``mod`` of :func:`build`; ``out`` (like q) is written and returned (a new tensor if None).
    ``pingpong``: a key of :data:`SCHEDULES`."""
    if pingpong not in SCHEDULES:
        raise ValueError(f"forward: pingpong must be one of {sorted(SCHEDULES)} ({SCHEDULES}), got {pingpong!r}")
    out = torch.empty_like(q) if out is None else out
    return mod.flash_wgmma(q, k, v, out, pingpong)
