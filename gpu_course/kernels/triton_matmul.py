"""Notebook 07's Triton matmul, timed by ``bench/triton_matmul.py``: one program per
``BLOCK_M x BLOCK_N`` tile of ``out``, programs taken in groups of ``GROUP_M`` tile rows (L2 reuse),
fp32 accumulation, and an epilogue switched by two ``constexpr`` arguments, ``HAS_BIAS`` and
``ACTIVATION``, as in Triton's matmul tutorial: the plain matmul and the fused
``gelu(a @ b + bias)`` are one kernel, compiled once per value of the switches.

:func:`matmul` launches it autotuned over :func:`matmul_configs` (one configuration on the CPU,
where the autotuner cannot time anything), or with a fixed ``cfg`` for sweeps.

>>> dot_precision(torch.float16), dot_precision(torch.float32), dot_precision(torch.float32, tf32=True)
('tf32', 'ieee', 'tf32')
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..launch import cdiv
from ..hardware import fits_shared_memory
from ..mode import ON_GPU, by_mode
from ..tile_order import tile_of
from .. import triton_route
from ..triton_launch import direct

ACTIVATIONS = ("", "gelu")

tile_of_jit = triton.jit(tile_of)   # the grouped tile order (gpu_course/tile_order.py), compiled into the kernels


@triton.jit
def gelu(x):
    """GeLU in its erf form, torch.nn.functional.gelu's default."""
    return 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, bias_ptr, out_ptr, h, w, k,
                  a_stride_r, a_stride_k, b_stride_k, b_stride_c, out_stride_r, out_stride_c,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, DOT_PRECISION: tl.constexpr,
                  HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(0)                            # a 1D grid: tile_of picks this program's tile
    pid_m, pid_n = tile_of_jit(pid, tl.cdiv(h, BLOCK_M), tl.cdiv(w, BLOCK_N), GROUP_M)
    # --- from here on, the same as matmul_kernel_2d ---
    r = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % h
    c = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % w
    kk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + r[:, None] * a_stride_r + kk[None, :] * a_stride_k
    b_ptrs = b_ptr + kk[:, None] * b_stride_k + c[None, :] * b_stride_c
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        a = tl.load(a_ptrs, mask=kk[None, :] < k - k0, other=0.0)
        b = tl.load(b_ptrs, mask=kk[:, None] < k - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * a_stride_k
        b_ptrs += BLOCK_K * b_stride_k
    # --- the epilogue (section 5): on the fp32 tile in registers; compiled only when switched on ---
    if HAS_BIAS:
        acc += tl.load(bias_ptr + c)[None, :].to(tl.float32)  # c is wrapped: always in bounds
    if ACTIVATION == "gelu":
        acc = gelu(acc)
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out_ptrs = out_ptr + r[:, None] * out_stride_r + c[None, :] * out_stride_c
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(r[:, None] < h) & (c[None, :] < w))


def config(BM, BN, BK, stages, warps, group=8):
    return triton.Config(dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=group),
                         num_stages=stages, num_warps=warps)


def matmul_configs():
    """What the autotuner tries. GPU: Hopper-sized tiles for fp16 at 2048³ and up, narrower ones that
    fill 132 SMs at 1024³, 32-deep tiles for fp32 and TF32 (fp32 operands take twice the shared
    memory); chosen by timing each on an H100. CPU: one small tile, never timed
    (tl.dot in the interpreter needs blocks of at least 16)."""
    return by_mode(gpu=[config(128, 256, 64, 3, 8), config(256, 128, 64, 3, 8), config(128, 256, 64, 4, 8),
                        config(128, 128, 64, 4, 8), config(128, 128, 64, 3, 4),
                        config(64, 128, 128, 3, 4), config(64, 128, 64, 4, 4),   # 1024³: 128 tiles
                        config(128, 256, 32, 4, 8), config(128, 256, 32, 3, 8),  # TF32, k-major b
                        config(128, 128, 32, 4, 8), config(64, 128, 32, 4, 4), config(128, 64, 32, 4, 4)],
                   cpu=[config(32, 32, 32, 1, 4, group=2)])


# The fixed tile of notebook 07's first sections, largest first: a GPU takes the first one whose pipeline
# (num_stages blocks of a and of b) fits the shared memory it gives one block, in fp32, the widest type the
# notebook runs it on. An H100 (227 KB) takes the first (192 KB in fp32, 96 KB in fp16); an A100 or an L4
# the second (96 KB); Colab's T4 (64 KB) the third (32 KB). The CPU's interpreter takes CPU_FIXED.
FIXED_CONFIGS = (dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3),
                 dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3),
                 dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=2))
CPU_FIXED = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=1)


def gpu_fixed_config(itemsize=4, quiet=False):
    """The first of :data:`FIXED_CONFIGS` whose pipeline fits this GPU's shared memory per block for inputs
    of ``itemsize`` bytes (``COURSE_FAKE_CC=7.5`` answers as a T4); where it is not the first, one line says
    why, unless ``quiet``.

    >>> gpu_fixed_config(quiet=True)["BLOCK_M"] in (64, 128)
    True
    """
    def tile(cfg):
        return "{BLOCK_M}x{BLOCK_N}x{BLOCK_K}, {num_stages} stages".format(**cfg)

    reasons = []
    for cfg in FIXED_CONFIGS:
        nbytes = cfg["num_stages"] * _stage_bytes(cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], itemsize)
        ok, why = fits_shared_memory(nbytes, tile(cfg))
        if ok:
            if reasons and not quiet:
                print(f"{reasons[0]}; FIXED is {tile(cfg)} instead")
            return dict(cfg)
        reasons.append(why)
    raise RuntimeError(f"gpu_fixed_config: no tile of FIXED_CONFIGS fits: {reasons[-1]}")


def fixed_config():
    """Notebook 07's ``FIXED``: :func:`gpu_fixed_config` on a GPU, :data:`CPU_FIXED` in the interpreter
    (``tl.dot`` there needs blocks of at least 16; small tiles keep the grid at a handful of programs).

    >>> fixed_config() == (gpu_fixed_config(quiet=True) if ON_GPU else CPU_FIXED)
    True
    """
    return gpu_fixed_config() if ON_GPU else dict(CPU_FIXED)


# Where no configuration of matmul_configs() fits the GPU's shared memory per block for the operands' type
# (fp32 on a T4: 64 KB, and the smallest needs 96 KB), the autotuner tries these instead, the smallest first.
SMALL_CONFIGS = (config(64, 64, 32, 2, 4), config(128, 64, 32, 2, 4), config(64, 128, 32, 2, 4))


def fitting_configs(configs, named_args, **kwargs):
    """The autotuner's early prune: ``configs`` as they are where one of them fits this GPU's shared memory per
    block in the course's model (:func:`_stage_bytes` per stage, 2 KB left for the compiler's own scratch), else
    those of :data:`SMALL_CONFIGS` that fit (a T4 in fp32). Triton times every config it is given, and one it
    cannot launch counts as infinitely slow; with none launchable it raised out of resources at the first call.

    >>> len(fitting_configs(matmul_configs(), {"a_ptr": torch.empty(0)})) == len(matmul_configs())
    True
    """
    itemsize = named_args["a_ptr"].element_size()

    def fits(c):
        kw = c.kwargs
        need = c.num_stages * _stage_bytes(kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], itemsize) + 2048
        return fits_shared_memory(need, "a matmul tile")[0]
    if any(fits(c) for c in configs):
        return configs
    return [c for c in SMALL_CONFIGS if fits(c)] or [SMALL_CONFIGS[0]]


# The strides are in the key: a b stored k-major (as nn.Linear's weight, used as w.T) tunes apart
# from a row-major b, because TF32 tensor cores on Hopper read both operands k-major.
matmul_tuned = triton.autotune(configs=matmul_configs(),
                               key=["h", "w", "k", "b_stride_k", "b_stride_c", "DOT_PRECISION", "HAS_BIAS",
                                    "ACTIVATION"],
                               prune_configs_by={"early_config_prune": fitting_configs})(matmul_kernel)


def dot_precision(dtype, tf32=False):
    """tl.dot's input_precision: exact fp32 ("ieee") for fp32 inputs unless TF32 is asked for."""
    return "tf32" if dtype != torch.float32 or tf32 else "ieee"


def last_round_fill(h, w, BLOCK_M, BLOCK_N, sms, per_sm=1):
    """Notebook 07's exercise 1: the share of the GPU's program slots (``sms`` SMs, ``per_sm`` programs
    resident on each at once) that the last round of an ``h x w`` output's tiles fills: one program per tile,
    rounds of ``sms * per_sm`` programs; a last round that is full gives 1.0.

    >>> last_round_fill(3072, 3072, 128, 128, 132), last_round_fill(4096, 4096, 128, 256, 128)
    (0.36363636363636365, 1.0)
    """
    programs, slots = cdiv(h, BLOCK_M) * cdiv(w, BLOCK_N), sms * per_sm
    return (programs - (cdiv(programs, slots) - 1) * slots) / slots


def stages_that_fit(BLOCK_M, BLOCK_N, BLOCK_K, dtype, smem):
    """Notebook 07's exercise 2, with the course's model of a pipeline's shared memory (each stage one
    ``BLOCK_M x BLOCK_K`` block of a and one ``BLOCK_K x BLOCK_N`` block of b): the most stages that fit
    in ``smem`` bytes, 0 when not even one does. A model: the compiler may keep fewer buffers, and adds
    scratch of its own.

    >>> stages_that_fit(128, 256, 64, torch.float16, 232448), stages_that_fit(128, 128, 64, torch.float32, 232448)
    (4, 3)
    """
    return smem // _stage_bytes(BLOCK_M, BLOCK_N, BLOCK_K, dtype.itemsize)


def _stage_bytes(BLOCK_M, BLOCK_N, BLOCK_K, itemsize) -> int:
    """Shared memory of one pipeline stage in the course's model: a ``BLOCK_M x BLOCK_K`` block of a and a
    ``BLOCK_K x BLOCK_N`` block of b."""
    return (BLOCK_M + BLOCK_N) * BLOCK_K * itemsize


def check_shapes(a, b):
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0], \
        f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not match (a is h x k, b is k x w)"
    assert a.dtype == b.dtype, f"matmul: a is {a.dtype} but b is {b.dtype}"
    return a.shape[0], b.shape[1], a.shape[1]


def matmul(a, b, bias=None, activation="", tf32=False, cfg=None, alloc=torch.empty):
    """activation(a @ b + bias) in one kernel; autotuned, or with ``cfg`` (BLOCK_M, BLOCK_N, BLOCK_K,
    GROUP_M, num_warps, num_stages) fixed."""
    h, w, k = check_shapes(a, b)
    assert activation in ACTIVATIONS, f"matmul: activation must be one of {ACTIVATIONS}, got {activation!r}"
    assert bias is None or bias.shape == (w,), f"matmul: bias must have shape ({w},), got {tuple(bias.shape)}"
    out = alloc(h, w, dtype=a.dtype, device=a.device)
    args = (a, b, out if bias is None else bias, out, h, w, k,  # without a bias, bias_ptr is never read
            *a.stride(), *b.stride(), *out.stride())
    switches = dict(DOT_PRECISION=dot_precision(a.dtype, tf32), HAS_BIAS=bias is not None, ACTIVATION=activation)
    if cfg is None:
        grid = lambda meta: (cdiv(h, meta["BLOCK_M"]) * cdiv(w, meta["BLOCK_N"]),)  # noqa: E731
        direct(matmul_tuned)[grid](*args, **switches)  # after a key's first call: the compiled kernel itself
    else:
        direct(matmul_kernel)[(cdiv(h, cfg["BLOCK_M"]) * cdiv(w, cfg["BLOCK_N"]),)](*args, **switches, **cfg)
    return out


# ------------------------------------------------- the C++ route (gpu_course/triton_route.py, cuda/triton_route/)
ROUTE_SOURCE = triton_route.ROUTE_DIR / "matmul.cpp"
ROUTE = triton_route.route("matmul_route", ROUTE_SOURCE)   # its entries: (kernel id, BLOCK_M, BLOCK_N) per key


def build_route(verbose=False) -> bool:
    """Build the matmul's C++ route (``cuda/triton_route/matmul.cpp``; about a minute the first time) and
    turn it on for :func:`matmul`: True when it is ready, else False and :func:`route_status` says why."""
    return ROUTE.build(verbose)


def route_status():
    """None when :func:`matmul`'s later calls go through the C++ route, else why they do not."""
    return ROUTE.why


def without_route():
    """``with without_route():`` :func:`matmul` takes the Python launch path even where the route is built:
    what a call costs without it, for comparisons.

    >>> with without_route():
    ...     ROUTE.on
    False
    """
    return ROUTE.off()


def route_sig(a, b, bias, activation, tf32):
    """Everything the compiled kernel's choice and its specialisation depend on, for one call: dtypes, shapes
    and strides (which fix each int's kind and the autotuner's key), each pointer's 16-byte alignment, the
    devices (the tensors' and the current one, where Triton compiled), the epilogue and the precision.

    >>> a = torch.zeros(4, 8); route_sig(a, a.T, None, "", False) == route_sig(a + 1, a.T, None, "", False)
    True
    """
    return (a.dtype, b.dtype, a.shape, b.shape, a.stride(), b.stride(), a.data_ptr() % 16, b.data_ptr() % 16,
            a.device, b.device, torch._C._cuda_getDevice() if a.is_cuda else None, activation, tf32,
            None if bias is None else (bias.dtype, bias.shape, bias.stride(), bias.data_ptr() % 16, bias.device))


def route_taken(a, b, bias=None, activation="", tf32=False) -> bool:
    """Whether :func:`matmul`'s next call with these arguments goes through the C++ route (built, on, and
    this call's kinds seen before with a kernel the route can launch)."""
    return ROUTE.taken(_route_key, a, b, bias, activation, tf32)


def _route_key(a, b, bias=None, activation="", tf32=False, cfg=None, alloc=torch.empty):
    """:func:`route_sig` of an autotuned call with a plain output and tensors, else None (the Python path)."""
    if (cfg is not None or alloc is not torch.empty or not isinstance(a, torch.Tensor)
            or not isinstance(b, torch.Tensor) or not (bias is None or isinstance(bias, torch.Tensor))):
        return None
    return route_sig(a, b, bias, activation, tf32)


def _route_call(mod, hit, a, b, bias=None, *_, **__):
    """The call through the extension with the key's entry ``hit`` (kernel id, BLOCK_M, BLOCK_N)."""
    return mod.matmul(a, b, *hit) if bias is None else mod.matmul_bias(a, b, bias, *hit)


def _route_entry(*_, **__):
    """The route's arguments for calls like the one the launcher just made: the kernel the autotuner chose and
    launched, with its tile, or None where the route cannot launch it (then every such call keeps the Python
    path)."""
    ids = ROUTE.register((direct(matmul_tuned).last, 13))
    if ids is None:
        return None
    kw = direct(matmul_tuned).kernel.best_config.kwargs     # the autotuner's choice, which the launcher launched
    return ids[0], kw["BLOCK_M"], kw["BLOCK_N"]


# the route in front of the launcher (matmul's source above is the launcher's)
matmul = ROUTE.front(matmul, _route_key, _route_call, _route_entry)


def tensor_core_instruction(a, b, tf32=False):
    """The tensor-core instruction (PTX opcode, e.g. ``wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32``)
    in the kernel that :func:`matmul` runs for ``a @ b``: the autotuned configuration for these operands is
    compiled again, and its PTX searched. GPU only: the interpreter compiles nothing."""
    if a.device.type != "cuda":
        raise RuntimeError("tensor_core_instruction needs a GPU: in cpu mode Triton interprets and compiles no PTX")
    matmul(a, b, tf32=tf32)  # makes sure the autotuner has chosen for this shape, layout and precision
    cfg = matmul_tuned.best_config
    h, w, k = check_shapes(a, b)
    out = torch.empty(h, w, dtype=a.dtype, device=a.device)
    compiled = matmul_kernel[(cdiv(h, cfg.kwargs["BLOCK_M"]) * cdiv(w, cfg.kwargs["BLOCK_N"]),)](
        a, b, out, out, h, w, k, *a.stride(), *b.stride(), *out.stride(),
        DOT_PRECISION=dot_precision(a.dtype, tf32), HAS_BIAS=False, ACTIVATION="",
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **cfg.kwargs)
    for line in compiled.asm["ptx"].splitlines():
        op = line.strip().split(" ")[0]
        if op.startswith(("wgmma.mma_async", "mma.sync")):
            return op
    return "none (no tensor-core instruction in the PTX)"
