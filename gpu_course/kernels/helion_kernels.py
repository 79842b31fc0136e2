"""Notebook 17's three kernels in Helion, PyTorch's tile language: a row softmax (memory-bound), a matmul with fp32
accumulation (compute-bound) and the same matmul with a fused bias + GeLU epilogue. They are the kernels the course
writes in Triton (``triton_softmax.softmax_rows_kernel``, ``triton_matmul.matmul_kernel`` with ``HAS_BIAS`` and
``ACTIVATION="gelu"``) and CUDA C, with the same names for the same things: ``tile_m``/``tile_n`` are the output tile a
program owns (Triton's ``pid_m``/``pid_n`` blocks), ``tile_k`` the k-steps, ``acc`` the fp32 accumulator. Each writes
into an ``out`` the caller gives, so that a check can hand it a NaN-poisoned tensor.

A Helion kernel is the PyTorch code of one tile: ``for tile_m, tile_n in hl.tile([m, n])`` is the grid, and Helion
generates the Triton (masks, pointer arithmetic, the launch) and, on a GPU, autotunes the block sizes, warps, stages
and tile order among :data:`GPU_CONFIGS` (a short list: a full autotune takes minutes; notebook 17 times one).
In cpu mode the generated Triton runs in Triton's interpreter, as the course's own Triton kernels do, with one
fixed small config (:data:`CPU_CONFIGS`): the same code path, nothing timed. :func:`triton_code` returns the Triton
Helion generates for a config, on any machine (it compiles nothing).

Helion is optional (``pip install helion``; Linux, with Triton): where it is not installed, importing this module
raises ImportError.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..mode import ON_GPU

import helion
import helion.language as hl

if not ON_GPU:
    from .. import triton_libdevice
    triton_libdevice.install()   # Helion's exact GeLU calls libdevice.erf, a stub in Triton's interpreter

# What Helion chooses among on a GPU (a config names the block size of each hl.tile dimension, in order)
GPU_CONFIGS = {
    "softmax_rows": [helion.Config(block_sizes=[b], num_warps=w) for b, w in ((1, 4), (1, 8), (2, 8), (4, 16))],
    "matmul": [helion.Config(block_sizes=[bm, bn, bk], num_warps=w, num_stages=s, l2_groupings=[8])
               for bm, bn, bk, w, s in ((128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (64, 128, 64, 4, 4),
                                         (128, 128, 32, 4, 4))],
}
GPU_CONFIGS["matmul_bias_gelu"] = GPU_CONFIGS["matmul"]
# cpu mode: one small config each (Triton's interpreter needs tl.dot blocks of at least 16)
CPU_CONFIGS = {"softmax_rows": helion.Config(block_sizes=[4]),
               "matmul": helion.Config(block_sizes=[32, 32, 32]),
               "matmul_bias_gelu": helion.Config(block_sizes=[32, 32, 32])}


def _kernel(fn):
    """``fn`` as a Helion kernel: choosing among its :data:`GPU_CONFIGS` on a GPU, its one :data:`CPU_CONFIGS` entry
    in cpu mode. Shapes are static (Helion's default): each new shape is a new compilation, as with the course's
    Triton kernels' autotuning keys."""
    if ON_GPU:   # the search's log and progress bar off: the notebook prints what it chose
        return helion.kernel(fn, configs=GPU_CONFIGS[fn.__name__], static_shapes=True,
                             autotune_log_level=0, autotune_progress_bar=False)
    return helion.kernel(fn, config=CPU_CONFIGS[fn.__name__], static_shapes=True)


def softmax_rows(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out = softmax(x, dim=1)`` for a 2-D ``x``, a block of whole rows a program, computed in fp32."""
    n, _w = x.size()
    for tile_n in hl.tile(n):                                   # this program's rows
        row = x[tile_n, :].to(torch.float32)
        num = torch.exp(row - torch.amax(row, dim=1, keepdim=True))
        out[tile_n, :] = (num / torch.sum(num, dim=1, keepdim=True)).to(out.dtype)
    return out


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out = a @ b``, an fp32 accumulator per output tile."""
    m, k = a.size()
    _, n = b.size()
    for tile_m, tile_n in hl.tile([m, n]):                      # the output tile this program owns
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):                               # the k-steps: a tl.dot each
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def matmul_bias_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out = gelu(a @ b + bias)`` (GeLU's erf form, torch's default), the epilogue on the fp32 tile."""
    m, k = a.size()
    _, n = b.size()
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        out[tile_m, tile_n] = F.gelu(acc + bias[tile_n].to(torch.float32)).to(out.dtype)
    return out


# A GPU with less shared memory per block than Hopper's 227 KB (Colab's T4: 64 KB) keeps the matmul configs whose
# pipeline fits it, in fp16, the type notebook 17 runs them in; where none does, this small one.
MATMUL_CONFIGS = GPU_CONFIGS["matmul"]   # the list above, for Hopper (227 KB per block)
SMALL_MATMUL = helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=2, l2_groupings=[8])


def fitting_matmul_configs(configs, itemsize=2) -> list:
    """The ``configs`` whose pipeline (``num_stages`` blocks of a, ``block_m x block_k``, and of b,
    ``block_k x block_n``: the course's model, as ``triton_matmul.stages_that_fit``) fits this GPU's shared memory
    per block, or ``[SMALL_MATMUL]`` where none does. All of them in cpu mode, where nothing is compiled for a GPU.

    >>> from gpu_course.hardware import acting_as_profile
    >>> with acting_as_profile("t4"):   # 64 KB: only the 128 x 128 x 32 tile in 4 stages (exactly 64 KB) fits
    ...     [c.block_sizes for c in fitting_matmul_configs(MATMUL_CONFIGS)]
    [[128, 128, 32]]
    """
    from ..hardware import fits_shared_memory
    fit = [c for c in configs
           if fits_shared_memory((c.block_sizes[0] + c.block_sizes[1]) * c.block_sizes[2] * itemsize * c.num_stages,
                                 "a matmul tile")[0]]
    return fit or [SMALL_MATMUL]


GPU_CONFIGS["matmul"] = GPU_CONFIGS["matmul_bias_gelu"] = fitting_matmul_configs(MATMUL_CONFIGS)
softmax_rows = _kernel(softmax_rows)
matmul = _kernel(matmul)
matmul_bias_gelu = _kernel(matmul_bias_gelu)
KERNELS = {"softmax_rows": softmax_rows, "matmul": matmul, "matmul_bias_gelu": matmul_bias_gelu}


def triton_code(kernel, args: tuple, config=None) -> str:
    """The Triton module Helion generates for ``kernel`` on ``args`` (their shapes and dtypes) with ``config`` (default:
    this mode's first config for it): the ``@triton.jit`` kernel and the Python launcher that calls it."""
    name = kernel.fn.__name__
    if config is None:
        config = GPU_CONFIGS[name][0] if ON_GPU else CPU_CONFIGS[name]
    return kernel.bind(args).to_triton_code(config)


def chosen_config(kernel, args: tuple):
    """The config ``kernel`` runs for ``args`` (their shapes and dtypes): the one it was given, or the one its
    search kept on a GPU; None before its first call for such arguments. (Helion keeps it on the bound kernel.)"""
    return kernel.bind(args)._config


def code_lines(code: str, *words: str) -> str:
    """The lines of generated ``code`` that contain any of ``words``, stripped, one per line: a short reading
    (comments and docstrings, which quote the PyTorch source, left out)."""
    lines = (line.strip() for line in code.splitlines())
    return "\n".join(line for line in lines if any(w in line for w in words) and not line.startswith(("#", '"""')))
