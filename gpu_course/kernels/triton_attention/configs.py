"""The tile configurations every FlashAttention launch chooses from, in one place: the forward's
(:func:`forward_configs`), the descriptor forward's (:func:`desc_forward_configs`, its pruning and the fixed tiles of
the ladder's steps: :func:`desc_config`, :func:`pipe_config`, :func:`persist_config`), the backward's
(:func:`backward_configs`, :func:`atomic_configs`), the small tiles of the correctness checks
(:func:`small_configs`), and the extra small tiles of a GPU with little shared memory
(:func:`small_shared_memory`). The autotuners that use them sit beside their kernels.
"""
from __future__ import annotations

import triton

from ...hardware import shared_memory_per_block
from ...mode import ON_GPU, by_mode


def fwd_config(BM, BN, stages, warps):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN), num_stages=stages, num_warps=warps)


# A GPU whose blocks get less shared memory than this (Colab's T4: 64 KB) also tries one smaller tile in each
# autotuner's list (the `small` entries below): compiled for sm_75 at d = 128 in fp16, every other tile needs 64 KB
# or more of it in one kernel or another (the backward's 80 to 160 KB), the small ones 48 KB.
SMALL_SMEM = 96 * 1024


def small_shared_memory() -> bool:
    """Whether this GPU gives a block less than :data:`SMALL_SMEM` of shared memory (a T4, or
    ``COURSE_FAKE_CC=7.5``); False in cpu mode.

    >>> from gpu_course.hardware import acting_as
    >>> with acting_as("7.5"):       # a T4's 64 KB a block: small on a GPU; cpu mode limits nothing
    ...     small_shared_memory() == ON_GPU
    True
    """
    limit = shared_memory_per_block()
    return ON_GPU and limit is not None and limit < SMALL_SMEM


def forward_configs():
    """What the forward's autotuner tries. GPU: query blocks of 64 or 128 rows (BLOCK_M a multiple
    of BLOCK_N, which the causal split needs), key blocks of 64 or 128. On the H100 (bench/flash_attention.py,
    fp16, B4 H16 N4096) 128x64 with 8 warps and 4 stages won at d = 64 and 128, causal or not; the
    list keeps it, two neighbours, and 64x64 for small shared memory (configs that overflow it are
    skipped by the autotuner); with :func:`small_shared_memory` also 64x32. CPU: one small block,
    never timed (tl.dot in the interpreter needs blocks of at least 16)."""
    small = [fwd_config(64, 32, 1, 4)] if small_shared_memory() else []
    return by_mode(gpu=[fwd_config(128, 64, 4, 8), fwd_config(128, 64, 3, 4), fwd_config(128, 128, 3, 8),
                        fwd_config(64, 64, 4, 4)] + small,
                   cpu=[fwd_config(16, 16, 1, 4)])


def small_configs():
    """``(forward cfg, (dkdv cfg, dq cfg))``: one small tile shape, for correctness checks at small N and
    in fp32. The autotuners' lists are meant for fp16/bf16 at large N; in fp32 (an ``ieee`` dot) their
    large tiles overflow shared memory or take minutes to compile, once per tuning key."""
    cfg = by_mode(gpu=dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=2),
                  cpu=dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1))
    return cfg, (cfg, cfg)


def _desc_block_shapes(nargs):
    """The autotuner's pre-hook: give the descriptors the block shape of the configuration being run."""
    bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    nargs["desc_q"].block_shape = [bm, d]
    nargs["desc_k"].block_shape = nargs["desc_v"].block_shape = [bn, d]


def desc_fwd_config(BM, BN, stages, warps, pipe=False, persist=0):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN, PIPE=pipe, PERSIST=persist), num_stages=stages,
                         num_warps=warps, pre_hook=_desc_block_shapes)


def desc_forward_configs():
    """What the descriptor forward's autotuner tries (the forward of :func:`flash_attention` where
    :func:`uses_descriptors`). On the H100 (fp16, B4 H16 N4096, 3 stages) it kept 128x128 with 4 warps at
    d = 64, 128x128 with 8 warps at d = 128, and 128x64 (or 128x128 at d = 128) with 8 warps where causal.
    The two hand-pipelined tiles (``PIPE``) won no shape there; one led the causal d = 64 case in an earlier
    sweep by a few %. The persistent 128x128 tile of 4 warps (two programs per SM) was 3 % faster than the best grid
    of query blocks causal at d = 64 on an H200 (5 % than the same tile's grid), and equal elsewhere; persistent tiles of 8 warps were not faster
    in any case. A 128x128 tile of 4 warps is skipped at d = 128 (it spills: see the pruning)."""
    return by_mode(gpu=[desc_fwd_config(128, 128, 3, 4), desc_fwd_config(128, 128, 3, 8),
                        desc_fwd_config(128, 64, 3, 8), desc_fwd_config(128, 64, 3, 4),
                        desc_fwd_config(128, 64, 4, 8, pipe=True),
                        desc_fwd_config(128, 128, 2, 8, pipe=True),
                        desc_fwd_config(128, 128, 3, 4, persist=2)],
                   cpu=[desc_fwd_config(16, 16, 1, 4)])


def _prune_desc(configs, named_args, **kwargs):
    """At d > 64 a 128x128 tile of 4 warps holds 128 x 128 fp32 scores and as many accumulators in 128 threads'
    registers: more than 255 a thread, it spills. Not worth compiling."""
    d = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM"))
    return [c for c in configs if not (d > 64 and c.num_warps == 4 and c.kwargs["BLOCK_N"] == 128)] or configs


def desc_config(d):
    """The tile of :func:`attention_forward_desc` by head dimension: on the H100 (fp16, B4 H16 N4096, not
    causal) 128 x 128 with 3 stages was fastest, with 4 warps at d = 64 and 8 at d = 128 (4 stages of
    128 x 128 need more shared memory than a block gets at d = 128); blocks of 16 on the CPU."""
    if not ON_GPU:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    return dict(BLOCK_M=128, BLOCK_N=128, num_warps=4 if d <= 64 else 8, num_stages=3)


def persist_config(d):
    """The configuration of ladder step 6 (the persistent grid): :func:`desc_config`'s tile, with as many
    programs per SM as that kernel has resident blocks on Hopper: 2 at d <= 64 (4 warps of at most 255
    registers and 113 KB of shared memory each), 1 at d = 128 (8 warps, 225 KB). Fewer would leave an SM
    half empty, more would queue. Blocks of 16 on the CPU."""
    return dict(desc_config(d), PERSIST=2 if d <= 64 else 1)


def pipe_config(d):
    """The tile of ladder step 5 (:func:`_fwd_inner_pipelined`), which holds two blocks of scores at once: on the
    H100 (fp16, B4 H16 N4096) 128 x 64 with 8 warps and 4 stages at d <= 64, 128 x 128 with 8 warps and 2 stages
    at d = 128 (3 stages of it overflow shared memory); blocks of 16 on the CPU."""
    if not ON_GPU:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    if d <= 64:
        return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)
    return dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)


def bwd_config(BM, BN, stages, warps):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN), num_stages=stages, num_warps=warps)


def backward_configs():
    """What the backward's autotuners try: ``(dkdv, dq)``, lists of one length. The dK/dV kernel
    holds a key block and streams query blocks (wide BLOCK_N, narrow BLOCK_M); the dQ kernel the
    reverse. On the H100 (bench/flash_attention.py, fp16, B4 H16 N4096) dK/dV won with 32x64, 4 warps,
    4 stages at d = 64 and 64x128, 8 warps, 3 stages at d = 128, dQ with 128x64, 8 warps, 3 stages at
    both; each list keeps its winners and one smaller tile, and with :func:`small_shared_memory` a 32x32
    tile (on a T4 none of the others fits at d = 128). The causal split needs BLOCK_M a multiple
    of BLOCK_N in the dQ kernel (as in the forward). CPU: one small block each."""
    small = [bwd_config(32, 32, 1, 4)] if small_shared_memory() else []
    dkdv = by_mode(gpu=[bwd_config(32, 64, 4, 4), bwd_config(64, 128, 3, 8), bwd_config(32, 128, 3, 4)] + small,
                   cpu=[bwd_config(16, 16, 1, 4)])
    dq = by_mode(gpu=[bwd_config(128, 64, 3, 8), bwd_config(128, 32, 3, 4), bwd_config(64, 32, 4, 4)] + small,
                 cpu=[bwd_config(16, 16, 1, 4)])
    return dkdv, dq


def atomic_configs():
    """What the atomic backward's autotuner tries: on the H100 (fp16, B4 H16 N4096) 64x128 with 8 warps led at
    d = 64 and 128, 64x64 with 4 warps where causal at d = 64; 32x64 with small shared memory. CPU: one small
    block."""
    small = [bwd_config(32, 64, 2, 4)] if small_shared_memory() else []
    return by_mode(gpu=[bwd_config(64, 128, 3, 8), bwd_config(64, 64, 3, 4), bwd_config(32, 128, 3, 4)] + small,
                   cpu=[bwd_config(16, 16, 1, 4)])
