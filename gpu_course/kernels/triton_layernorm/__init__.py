"""Kernels for notebook 10 (autograd, custom ops and ``torch.compile``), timed by
``bench/layernorm.py``: a row LayerNorm with its backward, and a GeLU with its backward, each in
Triton, each wrapped two ways:

* a ``torch.autograd.Function`` (:class:`LayerNorm`, :class:`GeLU`; called through
  :func:`layer_norm` and :func:`gelu`): enough for eager autograd; under ``torch.compile`` Dynamo
  must trace through the Python launchers and the Triton launches themselves (on a GPU it has
  support for user-written Triton kernels; under the CPU interpreter it fails, tracing the
  interpreter's own code);
* a custom operator (``torch.ops.gpu_course.layer_norm`` and ``torch.ops.gpu_course.gelu``, called
  through :func:`layer_norm_op` and :func:`gelu_op`): ``torch.library.custom_op`` declares it,
  ``register_fake`` tells the compiler the shapes and dtypes of its outputs without running it, and
  ``register_autograd`` gives it the Triton backward (itself a custom op), so that
  ``torch.compile(fullgraph=True)`` keeps it in the graph as one opaque call.

LayerNorm over the last dimension, ``w`` features per row (``h`` rows, any row stride):

* forward, one program per row: mean and variance in fp32 (fp64 for fp64 input), ``y = (x - mean)
  * rstd * weight + bias``; the mean and ``rstd = 1 / sqrt(var + eps)`` of each row are saved;
* backward, ``GROUPS`` programs, program ``g`` owning rows ``g, g + GROUPS, ...``: for each row,
  ``dx = rstd * (wdy - mean(wdy) - xhat * mean(wdy * xhat))`` with ``xhat = (x - mean) * rstd`` and
  ``wdy = weight * dy``, while it adds the row's ``dy * xhat`` and ``dy`` to its own fp32 partial
  ``dweight`` and ``dbias`` rows; it writes them once, to row ``g`` of each half of a
  ``[2, GROUPS, w]`` buffer (no locks, no atomics: the result does not depend on timing); a second
  kernel sums each half over the groups.

The launchers call each kernel through a ``gpu_course.triton_launch.Launcher``: after a shape's first
call, the compiled kernel is launched without ``kernel[grid]``'s per-call binding and hashing (a
training step calls them on every step, and their GPU time is a few tens of µs).

This package holds them one job a module, and every name of them here (``ln.layer_norm_op``, ``ln._fwd_launch``):

* :mod:`.kernels`: the five Triton kernels;
* :mod:`.launch`: the input checks, configurations and launchers;
* :mod:`.function`: wrapper 1, the ``torch.autograd.Function`` s;
* :mod:`.op`: wrapper 2, the custom ops and the functions a model calls;
* :mod:`.node`: wrapper 3, the C++ autograd node (``cuda/layer_norm/node.cpp``) launching the same kernels.

What notebook 10 and ``bench/layernorm.py`` compare these with (eager torch, ``torch.compile``, CUDA graphs,
autograd's threads, the launchers' CPU layers) is in :mod:`gpu_course.lessons.layernorm`.

Inputs are fp32, fp16 or bf16 (fp64 too, for ``gradcheck``); statistics and sums are in fp32 (fp64
for fp64), outputs in the input's dtype. Rows longer than :data:`MAX_W` are refused (a row lives in
one program's registers).

>>> layer_norm_config(777, groups=8)
{'BLOCK_W': 1024, 'num_warps': 4, 'GROUPS': 8}
>>> x = torch.randn(5, 300, device=DEVICE)
>>> wt, b = torch.ones(300, device=DEVICE), torch.zeros(300, device=DEVICE)
>>> torch.allclose(layer_norm(x, wt, b), torch.nn.functional.layer_norm(x, (300,), wt, b), atol=1e-5)
True
"""
from __future__ import annotations

import torch

from ...mode import DEVICE  # noqa: F401  (the example above)
from .function import GeLU, LayerNorm, gelu, layer_norm
from .kernels import (gelu_bwd_kernel, gelu_erf, gelu_fwd_kernel, layer_norm_bwd_dwdb_kernel, layer_norm_bwd_dx_kernel,
                      layer_norm_fwd_kernel)
from .launch import (_ACC, _BLOCK_N, _CONFIGS, DTYPES, GELU_BLOCK, MAX_W, _acc, _backward, _backward_dx,
                     _check_elementwise, _check_inputs, _check_width, _config, _default_groups, _dwdb_consts,
                     _dwdb_key, _dwdb_launch, _dx_consts, _dx_key, _dx_launch, _forward, _fwd_consts, _fwd_key,
                     _fwd_launch, _rows, _shaped, _stats_dtype, gelu_backward, gelu_forward, layer_norm_backward,
                     layer_norm_backward_partials, layer_norm_config, layer_norm_forward)
from .node import (_NODE, _NODE_IDS, _NODE_SIGS, NODE_SOURCE, _node_ids, _node_kernel, build_node, layer_norm_node,
                   node_status)
from .op import _ROUTE, OPS, _defined, gelu_op, layer_norm_op, layer_norm_python, layer_norm_route, register_ops
