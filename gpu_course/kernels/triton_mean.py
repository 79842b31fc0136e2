"""Notebook 06's means of a large fp32 tensor in Triton, timed by ``bench/triton_basics_bench.py``:

* ``mean_serial``: one program walking all n elements a block at a time (correct, and slow: one SM);
* ``mean_scalar_loop``: many programs, each summing its chunk of ``SCALAR_CHUNK`` elements with a
  scalar loop (one ``tl.load`` of one element per iteration), then one small program sums the
  partial sums (correct, and slow: too few bytes in flight);
* ``mean_two_pass``: one partial sum per tile of ``BLOCK * TILES`` elements, then one small
  program sums the partial sums (deterministic);
* ``mean_atomic``: every program adds its share into one number with ``tl.atomic_add`` (one
  kernel; the order of the additions, so the last bits, may change from run to run).

The tile size and warps come from :func:`mean_config` (``MEAN_GPU`` was tuned on an H100 with
``bench/triton_basics_bench.py --tune``); the launchers take another ``cfg`` for sweeps. Once
``triton_softmax.build_route()`` has built the C++ route shared with the softmax, a call of ``mean_two_pass`` or
``mean_atomic`` of a kind seen before goes through it (:mod:`gpu_course.triton_route`).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import triton_route
from ..launch import cdiv
from ..mode import by_mode
from ..triton_launch import direct
from . import num_warps_for

MEAN_GPU = dict(BLOCK=4096, TILES=4, num_warps=8)  # 16,384 floats (64 KB) per program
MEAN_CPU = dict(BLOCK=1024, TILES=2, num_warps=4)  # a handful of programs for the interpreter


def mean_config() -> dict:
    """The tile size and warps of mean_two_pass and mean_atomic: MEAN_GPU on a GPU, MEAN_CPU in the
    interpreter."""
    return by_mode(gpu=MEAN_GPU, cpu=MEAN_CPU)


@triton.jit
def mean_serial_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)  # BLOCK running sums, one per lane
    for start in range(0, n, BLOCK):            # ONE program walks all n elements
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)  # other=0: masked lanes add nothing
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


def mean_serial(x, alloc=torch.empty):
    out = alloc(1, device=x.device)
    # direct(kernel)[grid](...): kernel[grid](...) without Triton's per-call Python (notebook 07)
    direct(mean_serial_kernel)[(1,)](x, out, x.numel(), BLOCK=1024)  # a grid of one program
    return out[0]


@triton.jit
def sum_to_mean_kernel(partial_ptr, out_ptr, m, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # BLOCK >= m: all partial sums in one block, one program
    total = tl.sum(tl.load(partial_ptr + offs, mask=offs < m, other=0.0), axis=0)
    tl.store(out_ptr, total / n)


SCALAR_CHUNK = 2048  # elements per program of mean_scalar_loop: 48,829 programs for 1e8 floats


@triton.jit
def mean_scalar_loop_kernel(x_ptr, partial_ptr, n, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    start = pid * CHUNK
    end = tl.minimum(start + CHUNK, n)  # the last chunk may be short
    acc = 0.0                           # ONE running sum: a scalar, not a block
    for i in range(start, end):         # one element per iteration
        acc += tl.load(x_ptr + i)       # a scalar load: one 4-byte value for the whole program
    tl.store(partial_ptr + pid, acc)


def mean_scalar_loop(x, chunk=SCALAR_CHUNK, alloc=torch.empty):
    n = x.numel()
    m = cdiv(n, chunk)  # number of programs = number of partial sums
    m_block = triton.next_power_of_2(m)
    if m_block > 65536:
        raise ValueError(f"mean_scalar_loop: {m:,} partial sums do not fit in one program of pass 2: "
                         f"make the chunks (chunk = {chunk:,}) bigger")
    partial = alloc(m, device=x.device)
    out = alloc(1, device=x.device)
    direct(mean_scalar_loop_kernel)[(m,)](x, partial, n, CHUNK=chunk)  # Triton's default num_warps
    direct(sum_to_mean_kernel)[(1,)](partial, out, m, n, BLOCK=m_block, num_warps=num_warps_for(m_block))
    return out[0]


@triton.jit
def tile_sum(x_ptr, pid, n, BLOCK: tl.constexpr, TILES: tl.constexpr):
    """The sum of program pid's tile: TILES blocks of BLOCK consecutive elements."""
    start = pid * (BLOCK * TILES)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in tl.static_range(TILES):  # unrolled at compile time: all TILES loads in flight together
        offs = start + t * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    return tl.sum(acc, axis=0)  # per thread a chain, then trees across a warp and across warps


@triton.jit
def partial_sums_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr, TILES: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(partial_ptr + pid, tile_sum(x_ptr, pid, n, BLOCK, TILES))  # one number per program


def mean_two_pass(x, cfg=None, alloc=torch.empty):
    cfg = cfg or mean_config()
    BLOCK, TILES, num_warps = cfg["BLOCK"], cfg["TILES"], cfg["num_warps"]
    n = x.numel()
    m = cdiv(n, BLOCK * TILES)  # number of programs = number of partial sums
    m_block = triton.next_power_of_2(m)
    if m_block > 65536:
        raise ValueError(f"mean_two_pass: {m:,} partial sums do not fit in one program of pass 2: "
                         f"make the tiles (BLOCK * TILES = {BLOCK * TILES:,}) bigger")
    partial = alloc(m, device=x.device)
    out = alloc(1, device=x.device)
    direct(partial_sums_kernel)[(m,)](x, partial, n, BLOCK=BLOCK, TILES=TILES, num_warps=num_warps)
    direct(sum_to_mean_kernel)[(1,)](partial, out, m, n, BLOCK=m_block, num_warps=num_warps_for(m_block))
    return out[0]


@triton.jit
def mean_atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, TILES: tl.constexpr):
    pid = tl.program_id(0)
    tl.atomic_add(out_ptr, tile_sum(x_ptr, pid, n, BLOCK, TILES) / n)  # programs add in any order


def mean_atomic(x, cfg=None):
    cfg = cfg or mean_config()
    BLOCK, TILES, num_warps = cfg["BLOCK"], cfg["TILES"], cfg["num_warps"]
    out = torch.zeros(1, device=x.device)  # must start at 0: every program adds into it
    grid = (cdiv(x.numel(), BLOCK * TILES),)
    direct(mean_atomic_kernel)[grid](x, out, x.numel(), BLOCK=BLOCK, TILES=TILES, num_warps=num_warps)
    return out[0]


# ------------------------------------------------- the C++ route (gpu_course/triton_route.py, cuda/triton_route/)
ROUTE = triton_route.route("softmax_mean_route", triton_route.ROUTE_DIR / "softmax_mean.cpp")   # the softmax's too


def route_key(mean, x):
    """The route's key for ``mean(x)`` (the softmax's and the other mean's share its table): which mean, and
    everything its compiled kernels' specialisation depends on: dtype, number of elements, the pointer's 16-byte
    alignment, the devices (the tensor's and the current one) and the outputs' dtype."""
    return (mean, x.dtype, x.numel(), x.data_ptr() % 16, x.device, torch._C._cuda_getDevice(),
            torch.get_default_dtype())


def route_taken(mean, x) -> bool:
    """Whether the next call ``mean(x)`` (``mean`` the launcher's name: ``"mean_two_pass"`` or ``"mean_atomic"``) goes
    through the C++ route: built, on, a launch that may bypass ``kernel[grid]`` here, and this kind of call seen
    before with kernels the route can launch.

    >>> route_taken("mean_two_pass", torch.ones(8))     # not built here
    False
    """
    return ROUTE.taken(route_key, mean, x)


def _routed(launcher, kernels):
    """``launcher`` (a mean) with the C++ route in front (:meth:`~gpu_course.triton_route.Route.front`): a call with
    the default configuration and output is keyed by :func:`route_key`; its entry is ``kernels`` (each
    ``(kernel, runtime arguments)``) as the launcher just launched them, and the tile; the extension's function of
    the launcher's name makes the call."""
    name = launcher.__name__

    def key(x, cfg=None, **alloc):
        plain = cfg is None and alloc.get("alloc", torch.empty) is torch.empty and isinstance(x, torch.Tensor)
        return route_key(name, x) if plain else None

    def entry(*_, **__):
        ids = ROUTE.register(*((direct(k).last, n) for k, n in kernels))
        c = mean_config()
        return ids and (*ids, c["BLOCK"] * c["TILES"])

    return ROUTE.front(launcher, key, lambda mod, hit, x, *_, **__: getattr(mod, name)(x, *hit), entry)


# the route in front of each launcher (their sources above are the launchers')
mean_two_pass = _routed(mean_two_pass, ((partial_sums_kernel, 3), (sum_to_mean_kernel, 4)))
mean_atomic = _routed(mean_atomic, ((mean_atomic_kernel, 3),))
