"""Wrapper 3: LayerNorm as a C++ autograd node (``cuda/layer_norm/node.cpp``) that launches the kernels the
Python path compiled, with ``cuLaunchKernel``, so that no Python runs on autograd's worker thread:
:func:`build_node` builds it, :func:`layer_norm_node` calls it (or :func:`~.op.layer_norm_python` where it cannot), and so does
:func:`~.op.layer_norm_op` once it is built;
:func:`node_status` says why not.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ... import triton_route
from ...mode import ON_GPU
from ...triton_launch import direct_allowed
from .function import LayerNorm
from .launch import (_BLOCK_N, _check_inputs, _config, _dwdb_consts, _dwdb_key, _dwdb_launch, _dx_consts, _dx_key,
                     _dx_launch, _fwd_consts, _fwd_key, _fwd_launch, _rows, _shaped)
from .op import _ROUTE, layer_norm_python


# ------------------------------------------- wrapper 3: a C++ autograd node launching the same kernels
# Autograd runs a CUDA backward on a worker thread of its own. A Python backward there costs that thread
# the interpreter and Triton's Python launcher on every step: ~116 µs for ours' backward on an H100 host,
# against ~57 µs for the same Python on the calling thread. The node (cuda/layer_norm/node.cpp) is a
# C++ autograd Function whose forward and backward launch the kernels the Python path compiled, with
# cuLaunchKernel: no Python runs on the worker thread at all.
NODE_SOURCE = Path(__file__).parent.parent / "cuda" / "layer_norm" / "node.cpp"
_NODE = {"mod": None, "why": "not built yet: ln.build_node() builds it"}
_NODE_IDS = {}   # (device, the three keys, config) -> the node's kernel ids, or None where it cannot launch them
_NODE_SIGS = {}  # a matrix call's argument kinds (layer_norm_node) -> the node's kernel ids, once checked


def build_node(verbose=False):
    """Build the C++ node's extension from :data:`NODE_SOURCE` with torch's ``cpp_extension`` (about a
    minute the first time; later sessions load it from the course's build cache) and turn
    :func:`layer_norm_node` on, and with it :func:`~.op.layer_norm_op`'s route through the node. Returns True
    when it is ready; otherwise False, and
    :func:`node_status` says why (cpu mode: the node launches compiled GPU kernels through the CUDA
    driver; a failed build: its first error lines). Never raises for a failed build."""
    if _NODE["mod"] is not None:
        return True
    if not ON_GPU:
        _NODE["why"] = ("cpu mode: the node launches compiled GPU kernels through the CUDA driver; "
                        "layer_norm_node and layer_norm_op run the Python launchers here")
        return False
    mod, why = triton_route.build("layer_norm_node", NODE_SOURCE, verbose)
    if mod is None:
        _NODE["why"] = why
        return False
    _NODE["mod"] = mod
    _NODE["why"] = None
    _ROUTE["node"] = layer_norm_node   # from now on layer_norm_op, what a model calls, goes through the node
    return True


def node_status():
    """None when :func:`layer_norm_node` launches through the C++ node, else why it does not."""
    return _NODE["why"]


def _node_kernel(ck, nargs):
    """Register compiled kernel ``ck`` (``nargs`` runtime arguments) with the node: its id, or None where
    a launch through ``cuLaunchKernel`` would not be the launch Triton makes (an argument type other
    than a pointer, i32, i64 or fp32; scratch memory; a cluster of programs)."""
    return triton_route.register(_NODE["mod"], ck, nargs)


def _node_ids(x2, weight, bias, cfg):
    """The node's ids of the three kernels this call needs (forward storing the statistics; the backward's
    two for a contiguous, aligned dy, which the node makes sure of), or None until the Python path has
    compiled all three for these keys (a shape's first step) or where the node cannot launch them."""
    groups, dt = cfg["GROUPS"], x2.dtype
    keys = (_fwd_key(x2, weight, bias), _dx_key(dt, True, x2.shape[1], x2, weight, True, True, groups),
            _dwdb_key(dt, weight.dtype, groups, x2.shape[1]))
    full = (torch._C._cuda_getDevice(), keys, cfg["BLOCK_W"], cfg["num_warps"], groups)
    if full in _NODE_IDS:
        return _NODE_IDS[full]
    cks = (_fwd_launch.compiled(keys[0], **_fwd_consts(cfg, dt, True)), _dx_launch.compiled(keys[1], **_dx_consts(cfg, dt)),
           _dwdb_launch.compiled(keys[2], **_dwdb_consts(dt)))
    if None in cks:
        return None          # not compiled yet: no entry, so a later call looks again
    ids = tuple(_node_kernel(ck, n) for ck, n in zip(cks, (10, 13, 5)))
    _NODE_IDS[full] = None if None in ids else (*ids, groups, _BLOCK_N)
    return _NODE_IDS[full]


def layer_norm_node(x, weight, bias, eps=1e-5):
    """LayerNorm for a model's training step, through the C++ autograd node once :func:`build_node` has
    built it: the same kernels as :func:`layer_norm_python`, launched from C++ forward and backward. Where
    the node cannot take a call it is :func:`layer_norm_python`: before the build (and in cpu mode), while
    ``torch.compile`` traces, without gradients, while launches are recorded or hooked
    (``utils.launches``, profilers' hooks), and on a shape's first step (its kernels compile through
    the Python path)."""
    mod = _NODE["mod"]
    if (mod is None or not torch.is_grad_enabled() or not (x.requires_grad or weight.requires_grad or bias.requires_grad)
            or not direct_allowed()):
        return layer_norm_python(x, weight, bias, eps)
    # A training step calls with the same kinds of arguments every time: one look-up of everything the
    # checks and the three launch keys depend on gives the kernel ids (~5 µs; checks and keys: ~25).
    sig = None
    if x.dim() == 2 and x.stride(1) == 1 and weight.is_contiguous() and bias.is_contiguous():
        sig = (x.dtype, weight.dtype, bias.dtype, x.shape, x.stride(0), weight.shape, bias.shape, x.device,
               weight.device, bias.device, x.data_ptr() % 16, weight.data_ptr() % 16, bias.data_ptr() % 16)
        ids = _NODE_SIGS.get(sig)
        if ids is not None:
            return mod.layer_norm(x, weight, bias, eps, *ids)
    _check_inputs("layer_norm", x, weight, bias)
    x2 = _rows(x)
    h, w = x2.shape
    cfg = _config(w, h, x2.device)
    weight, bias = weight.contiguous(), bias.contiguous()
    ids = _node_ids(x2, weight, bias, cfg)
    if ids is None:
        return LayerNorm.apply(x, weight, bias, eps)
    if sig is not None:
        _NODE_SIGS[sig] = ids
    return _shaped(mod.layer_norm(x2, weight, bias, eps, *ids), x)
