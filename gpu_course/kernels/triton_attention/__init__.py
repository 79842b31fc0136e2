"""Attention for notebook 11 (FlashAttention in Triton), timed by
``bench/flash_attention.py``: three ways to compute ``softmax(scale * q @ k^T) @ v`` over tensors of
shape (batch, heads, N, d).

* :func:`naive_attention`: plain torch, the N x N scores and probabilities written to memory (the
  baseline whose memory grows like N²).
* :func:`online_softmax_attention`: plain torch, one block of keys at a time with a running row
  maximum and row sum (the online softmax): the same result without ever holding N x N.
* :func:`flash_attention`: the online softmax in Triton, one program per (query block, batch x head),
  its tiles of scores living in registers only (FlashAttention's forward), and FlashAttention-2's
  backward split into three kernels: ``delta = rowsum(dO * O)``, then dK/dV (one program per key
  block, looping over query blocks) and dQ (one program per query block, looping over key blocks).
  The forward saves one number per query row, the log-sum-exp (LSE) of its scores, from which the
  backward rebuilds the probabilities instead of storing them.
* :func:`attention_forward_desc`: the same forward reading q, k and v through tensor descriptors (on
  Hopper, TMA bulk copies), optionally warp-specialised or hand-pipelined, or on a persistent grid.

This package holds the kernels, their configurations and their thin wrappers, one job a module, and every
name of them here (``ta.attention_forward``, ``ta._fwd_inner``):

* :mod:`.reference`: the plain-torch attentions, the input checks and the FLOP counts;
* :mod:`.configs`: the tile configurations the autotuners try and the fixed tiles of the ladder;
* :mod:`.forward`: the forward kernel with pointer loads, its autotuner, what both forwards share;
* :mod:`.forward_desc`: the forward with tensor descriptors (warp-specialised, pipelined, persistent);
* :mod:`.backward`: the backward's kernels (delta, dK/dV, dQ, atomic dQ), autotuners and launchers;
* :mod:`.route`: the forward's C++ route (:func:`build_route`), which a call of a kind seen before takes;
* :mod:`.flash`: :func:`attention_forward`, the autograd Function and :func:`flash_attention`.

What notebook 11 and ``bench/flash_attention.py`` measure them with (PyTorch's own attentions, the speed and memory
tables, the forward and backward ladders, PTX and profiler readings, Nsight Compute's counters) is in
:mod:`gpu_course.lessons.attention`.

Inside the Triton kernels exponentials are base 2 (``exp2(x * log2(e)) == exp(x)``, one instruction
cheaper); the LSE handed out is in natural log. Scores and running statistics are fp32 whatever
the input dtype (fp16, bf16; fp32 for the interpreter's tests). Launches are autotuned over
:func:`forward_configs` and :func:`backward_configs` (one configuration on the CPU).

>>> q, k, v = (torch.randn(1, 2, 37, 16, dtype=torch.float64) for _ in range(3))
>>> torch.allclose(online_softmax_attention(q, k, v, causal=True, block=8),
...                naive_attention(q, k, v, causal=True))
True
>>> attention_flops(4, 16, 4096, 64) / 1e12, attention_flops(4, 16, 4096, 64, causal=True, backward=True) / 1e12
(0.274877906944, 0.34359738368)
"""
from __future__ import annotations

import torch

from .backward import (BACKWARD_LOOPS, DELTA_BLOCK, DKDV_CONFIGS, DQ_CONFIGS, _BWD_KEY, _backward_inputs,
                       _dkdv_dq_inner, _dkdv_inner, _dq_inner, _key_block, attention_backward,
                       attention_backward_atomic, attention_bwd_atomic_kernel, attention_bwd_atomic_tuned,
                       attention_bwd_delta_kernel, attention_bwd_dkdv_kernel, attention_bwd_dkdv_tuned,
                       attention_bwd_dq_convert_kernel, attention_bwd_dq_kernel, attention_bwd_dq_tuned)
from .configs import (SMALL_SMEM, _desc_block_shapes, _prune_desc, atomic_configs, backward_configs, bwd_config,
                      desc_config, desc_forward_configs, desc_fwd_config, forward_configs, fwd_config, persist_config,
                      pipe_config, small_configs, small_shared_memory)
from .flash import FlashAttention, attention_forward, flash_attention
from .forward import (_FORWARD_TUNER, _LAST_FORWARD, DTYPES, HEAD_DIMS, LOG2E, _forward_buffers, _fwd_inner,
                      _key_bounds, _store_rows, attention_fwd_kernel, attention_fwd_tuned, check_flash_inputs,
                      last_forward_kernel, last_forward_tuner, registers, resident_blocks)
from .forward_desc import (_desc_grid, _desc_query_block, _descriptors, _fwd_inner_desc, _fwd_inner_pipelined,
                           _online_update, attention_fwd_desc_kernel, attention_fwd_desc_tuned,
                           attention_forward_desc, uses_descriptors)
from .route import ROUTE, build_route, route_key, route_taken
from .reference import (attention_flops, check_inputs, default_scale, naive_attention, online_softmax_attention,
                        tile_flops)
