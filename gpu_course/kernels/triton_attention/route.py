"""The attention forward's C++ route (``cuda/triton_route/attention.cpp``, :mod:`gpu_course.triton_route`): once
:func:`build_route` has built it, a call of :func:`~.flash.attention_forward` whose kind was seen before (dtypes,
shapes, strides, alignment, causal, device) goes from Python straight into C++, which allocates the output and the
LSE, fills the tensor maps of the descriptor kernel (``cuTensorMapEncodeTiled``, as Triton's launcher does per call)
and launches the kernel the autotuner chose, through ``cuLaunchKernel``. The first call of a kind takes the Python
path, which tunes, compiles and launches, and then registers its kernel for that kind.
"""
from __future__ import annotations

import torch

from ... import triton_route
from ...hardware import sm_count
from ...mode import DEVICE
from ...triton_launch import direct
from .forward import _LAST_FORWARD, attention_fwd_tuned, last_forward_tuner
from .forward_desc import attention_fwd_desc_tuned
from .reference import default_scale

ROUTE = triton_route.route("attention_route", triton_route.ROUTE_DIR / "attention.cpp")

try:   # Triton's TMA element types -> CUDA's CUtensorMapDataType, as Triton's launcher maps them
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST as _TMA_DTYPE
except ImportError:   # the same table, where this Triton does not name it (the interpreter never needs it)
    _TMA_DTYPE = {**{i: i for i in range(16)}, 8: 10, 9: 8, 10: 9}


def build_route(verbose=False) -> bool:
    """Build the attention forward's C++ route (about a minute the first time) and turn it on for
    :func:`~.flash.attention_forward` (and so for ``flash_attention``'s forward): True when it is ready, else False
    and ``ROUTE.why`` says why."""
    return ROUTE.build(verbose)


def route_key(q, k, v, causal):
    """The route's key for ``attention_forward(q, k, v, causal)``: everything the compiled kernel's choice and
    specialisation depend on (dtypes, shapes and strides, each pointer's 16-byte alignment, causal, the devices:
    the tensors' and the current one)."""
    return (q.dtype, k.dtype, v.dtype, q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(),
            q.data_ptr() % 16, k.data_ptr() % 16, v.data_ptr() % 16, q.device, k.device, v.device, bool(causal),
            torch._C._cuda_getDevice())


def route_taken(q, k, v, causal=False) -> bool:
    """Whether the next ``attention_forward(q, k, v, causal)`` goes through the C++ route."""
    return ROUTE.taken(route_key, q, k, v, causal)


def entry_for(ck, config, descriptors: bool):
    """The route's arguments for calls like the one that just launched compiled kernel ``ck`` with the autotuner's
    ``config`` (its ``kwargs``): ``(kernel id, BLOCK_M, persistent programs or 0, tensor-map numbers)``, or None
    where the route cannot launch it (then every such call keeps the Python path)."""
    ids = ROUTE.register((ck, 8 if descriptors else 7)) if ck is not None and config is not None else None
    if ids is None:
        return None
    maps = []
    if descriptors:
        metas = list(ck.metadata.tensordesc_meta)
        for m in metas:   # q's, k's, v's: element type and swizzle as CUDA numbers them, the box's rows and columns
            rows, cols = m["block_size"]
            maps += [_TMA_DTYPE[m["elem_type"]], m["swizzle"], rows, cols]
    persist = config.get("PERSIST", 0) if descriptors else 0
    return ids[0], config["BLOCK_M"], sm_count(DEVICE) * persist if persist else 0, maps


def _key(q, k, v, causal=False, scale=None, cfg=None, alloc=torch.empty, descriptors=None):
    """:func:`route_key` of an autotuned call (no ``cfg``, ``descriptors`` left to the default, plain outputs), else
    None (the Python path)."""
    plain = (cfg is None and descriptors is None and alloc is torch.empty and isinstance(q, torch.Tensor)
             and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor))
    return route_key(q, k, v, causal) if plain else None


def _call(mod, hit, q, k, v, causal=False, scale=None, *_, **__):
    out, lse = mod.forward(q, k, v, default_scale(q.shape[-1], scale), *hit)
    return out, lse


def _entry(*_, **__):
    """The entry for the call the launcher just made: its compiled kernel and the autotuner's choice."""
    desc = last_forward_tuner() is attention_fwd_desc_tuned
    tuner = attention_fwd_desc_tuned if desc else direct(attention_fwd_tuned).kernel   # what launched
    best = getattr(tuner, "best_config", None)
    return entry_for(_LAST_FORWARD[0], best and best.kwargs, descriptors=desc)


def route_first(launcher):
    """``launcher`` (:func:`~.flash.attention_forward`) with the C++ route in front
    (:meth:`~gpu_course.triton_route.Route.front`): where the route is ready, an autotuned call whose key was seen
    before goes through it; any other call is ``launcher``'s (which checks the arguments), after which the kernel it
    launched is registered for that key (once)."""
    return ROUTE.front(launcher, _key, _call, _entry)
