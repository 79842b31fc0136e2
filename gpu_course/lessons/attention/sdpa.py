"""Notebook 11's baselines: PyTorch's own attentions (``scaled_dot_product_attention`` restricted to one backend),
which of them run here, the fp32 reference, how far ours and theirs are from it, and what a caller gets from each
(GPU time, loop, CPU per call). Shared with ``bench/flash_attention.py``."""
from __future__ import annotations

import contextlib
import functools
import math

import torch
import torch.nn.functional as F

from ...checking import CheckFailed
from ...kernels.triton_attention import flash_attention
from ...hardware import gpu_supports
from ...mode import ON_GPU
from ...sdpa_pin import pin
from ...user_timing import bench_user

ERROR_FLOORS = {"out": 2e-3, "dq": 1e-2, "dk": 1e-2, "dv": 1e-2}  # fp16 outputs round at ~5e-4

# SDPA's fused backends, strongest first on an H100: name -> (SDPBackend member, gpu_supports feature).
# "SDPA flash" is FlashAttention-2 (Ampere's mma.sync), "SDPA cuDNN" NVIDIA's cuDNN attention (Hopper
# kernels on sm_90), "SDPA efficient" the memory-efficient kernel (xFormers'; it runs on older GPUs too).
SDPA_BACKENDS = {
    "SDPA cuDNN": ("CUDNN_ATTENTION", "cudnn_sdpa"),
    "SDPA flash": ("FLASH_ATTENTION", "flash_sdpa"),
    "SDPA efficient": ("EFFICIENT_ATTENTION", None),
}


def sdpa_backend(name="SDPA flash"):
    """A context in which ``scaled_dot_product_attention`` may use only the backend ``name`` (a key of
    :data:`SDPA_BACKENDS`) on a GPU (:class:`~gpu_course.sdpa_pin.pin`: make it once, enter it for each call; an entry
    costs about a tenth of ``torch.nn.attention.sdpa_kernel``'s); in cpu mode a context that changes nothing (SDPA's
    default CPU kernel stands in for every backend there)."""
    if name not in SDPA_BACKENDS:
        raise ValueError(f"sdpa_backend: unknown backend {name!r}; known: {', '.join(SDPA_BACKENDS)}")
    return pin(SDPA_BACKENDS[name][0]) if ON_GPU else contextlib.nullcontext()


def sdpa_with(name):
    """A function ``(q, k, v, causal=False) -> out``: SDPA restricted to the backend ``name`` (its context made
    once, entered in each call)."""
    backend = sdpa_backend(name)

    def sdpa(q, k, v, causal=False):
        with backend:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    sdpa.__name__ = sdpa.__qualname__ = name.replace(" ", "_").lower()
    return sdpa


_FLASH = []   # sdpa_with("SDPA flash"), made on first use


def sdpa_flash(q, k, v, causal=False):
    """PyTorch's attention restricted to its flash backend (FlashAttention-2)."""
    if not _FLASH:
        _FLASH.append(sdpa_with("SDPA flash"))
    return _FLASH[0](q, k, v, causal)


def accuracy_baseline():
    """``(name, function)`` of the SDPA backend ours is held to in :func:`errors_like_sdpa`: the flash
    backend where this GPU has it, else the memory-efficient one (Colab's T4, sm_75, has no flash SDPA).

    >>> accuracy_baseline()[0] in SDPA_BACKENDS
    True
    """
    name = "SDPA flash" if gpu_supports("flash_sdpa")[0] else "SDPA efficient"
    return name, sdpa_with(name)


def half_dtypes():
    """``(dtypes, skipped)``: the half-precision dtypes this GPU computes (fp16 always; bf16 from
    compute capability 8.0) and ``{dtype: one-line reason}`` for the others.

    >>> torch.float16 in half_dtypes()[0]
    True
    """
    ok, why = gpu_supports("bf16")
    return ([torch.float16, torch.bfloat16], {}) if ok else ([torch.float16], {torch.bfloat16: why})


def one_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:140] if text else ''}"


def skip_reason(name):
    """Why SDPA's backend ``name`` cannot run here (``utils.gpu_supports`` says this GPU lacks it; in cpu mode every
    backend but "SDPA flash", for which SDPA's default CPU kernel stands in), or None where it may be tried."""
    if name not in SDPA_BACKENDS:
        raise ValueError(f"unknown backend {name!r} of SDPA; known: {', '.join(SDPA_BACKENDS)}")
    feature = SDPA_BACKENDS[name][1]
    ok, why = gpu_supports(feature) if feature else (True, "")
    if not ok:
        return f"{name}: {why}"
    if not ON_GPU and name != "SDPA flash":
        return f"{name}: skipped in cpu mode (a GPU backend; on the CPU SDPA has its own kernel)"
    return None


def sdpa_baselines(q, k, v, dout, causal=False, names=tuple(SDPA_BACKENDS)):
    """The SDPA backends (of ``names``) that run here for these inputs: ``(fns, skipped)`` with
    ``fns = {name: function(q, k, v, causal)}`` and ``skipped = {name: one-line reason}``. A backend
    is skipped where :func:`skip_reason` gives a reason, or where one forward and backward with it raises
    (the exception's first line is the reason). ``q, k, v`` must require grad."""
    import warnings
    fns, skipped = {}, {}
    for name in names:
        why = skip_reason(name)
        if why:
            skipped[name] = why
            continue
        fn = sdpa_with(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns why a backend refuses, then raises
                out = fn(q, k, v, causal)
                torch.autograd.grad(out, (q, k, v), dout)
        except Exception as e:  # noqa: BLE001 - any failure of the library means: not available here
            skipped[name] = f"{name}: skipped, it raised {one_line(e)}"
            continue
        fns[name] = fn
    return fns, skipped


def forward_paths(q, k, v, causal=False, rounds=5):
    """What one forward call (no autograd) costs through each launch path of ours, beside every SDPA backend that runs
    here: ``(taken, baseline)``. ``taken`` holds, per name, one ``UserTiming`` a round of interleaved rounds (GPU time,
    time per loop step, CPU per call; :func:`~gpu_course.rounds.interleaved_rounds`) for the SDPA backends (each
    chosen outside the timed calls, so that they time the bare ``F.scaled_dot_product_attention``),
    ``"ours, Python path"`` (the C++ route off: our checks, the autotuner, the tensor descriptors and Triton's launch,
    in Python) and, where the route is ready and takes these calls, ``"ours, C++ route"``; ``baseline`` names the SDPA
    backend with the shortest median loop step."""
    import statistics
    import warnings

    from ...kernels import triton_attention as ta
    from ...rounds import interleaved_rounds
    fns, pinned = {}, {}
    with torch.no_grad():
        for name in SDPA_BACKENDS:
            if skip_reason(name):
                continue
            fn = functools.partial(F.scaled_dot_product_attention, q, k, v, is_causal=causal)
            try:
                with warnings.catch_warnings(), sdpa_backend(name):
                    warnings.simplefilter("ignore")
                    fn()
            except Exception:  # noqa: BLE001 - not available for these inputs: left out
                continue
            fns[name], pinned[id(fn)] = fn, name

        def python_path():
            with ta.ROUTE.off():
                return ta.attention_forward(q, k, v, causal)
        fns["ours, Python path"] = python_path
        if ta.ROUTE.ready():
            ta.attention_forward(q, k, v, causal)            # the Python path, which registers the kernel
            if ta.route_taken(q, k, v, causal):
                fns["ours, C++ route"] = functools.partial(ta.attention_forward, q, k, v, causal)

        def timer(fn, **kwargs):   # an SDPA backend is pinned around its timing, not inside each call
            with sdpa_backend(pinned[id(fn)]) if id(fn) in pinned else contextlib.nullcontext():
                fn(), fn()                                   # warm-up (the autotuner's first call tunes)
                return bench_user(fn, **kwargs)
        taken = interleaved_rounds(fns, rounds=rounds, timer=timer)
    libs = [n for n in taken if n in SDPA_BACKENDS]
    best = min(libs, key=lambda n: statistics.median(t.loop_ms for t in taken[n])) if libs else None
    return taken, best


def fastest_library(taken: dict) -> list:
    """Per round of :func:`forward_paths`' ``taken``, the shortest loop step among its SDPA backends (ms)."""
    libs = [n for n in taken if n in SDPA_BACKENDS]
    return [min(taken[n][r].loop_ms for n in libs) for r in range(len(taken[libs[0]]))] if libs else []


def max_err(a, b):
    return (a.detach().double() - b.detach().double()).abs().max().item()


def reference_parts(shape, free_bytes=None) -> int:
    """In how many slices of the batch :func:`fp32_reference` computes attention of ``shape`` (B, H, N, d):
    1 where three fp32 N x N tensors for the whole batch (the most SDPA's math kernel holds at once,
    forward or backward) take at most half of ``free_bytes`` (default: the GPU's free memory; in cpu mode
    always 1), else enough slices for that (at most B). An H100 needs one at B4 H16 N4096, a T4 two.

    >>> reference_parts((4, 16, 4096, 64), free_bytes=75 * 2**30), reference_parts((4, 16, 4096, 64), 14 * 2**30)
    (1, 2)
    """
    if free_bytes is None:
        if not ON_GPU:
            return 1
        from ...hardware import free_memory
        free_bytes = free_memory()
    B, H, N = shape[:3]
    need = 3 * B * H * N * N * 4
    return max(1, min(B, math.ceil(need / (free_bytes / 2))))


def fp32_reference(q, k, v, dout, causal=False):
    """``(out, dq, dk, dv)`` of attention by SDPA's math kernel on fp32 copies of ``q, k, v`` (and
    ``dout``): the reference :func:`errors_like_sdpa` holds ours and SDPA to. It holds N x N tensors, so
    where the GPU's free memory is short (:func:`reference_parts`: a T4 at B4 H16 N4096) it runs one
    slice of the batch at a time, each batch element computed alone."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    parts = reference_parts(q.shape)
    outs = []
    for qs, ks, vs, ds in [(q, k, v, dout)] if parts == 1 else zip(*(t.chunk(parts) for t in (q, k, v, dout))):
        ref_in = [t.detach().float().requires_grad_() for t in (qs, ks, vs)]
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal)
        outs.append((ref.detach(), *torch.autograd.grad(ref, ref_in, ds.float())))
        del ref, ref_in
    return outs[0] if parts == 1 else tuple(torch.cat(t) for t in zip(*outs))


def errors_like_sdpa(q, k, v, dout, causal=False, baseline=None):
    """Max abs errors of the output and of dQ, dK, dV, of ours and of an SDPA backend (``baseline``:
    ``(name, function)``, default :func:`accuracy_baseline`), against an fp32 reference (SDPA's math
    kernel on fp32 copies): ``{"out": (ours, sdpa), "dq": ...}``. Raises :class:`CheckFailed` where
    ours errs more than twice as much as the library plus :data:`ERROR_FLOORS`. ``q, k, v`` must
    require grad."""
    name, sdpa = baseline or accuracy_baseline()
    refs = fp32_reference(q, k, v, dout, causal)
    got = {}
    for who, fn in (("ours", flash_attention), ("sdpa", sdpa)):
        out = fn(q, k, v, causal)
        got[who] = (out, *torch.autograd.grad(out, (q, k, v), dout))
    errors = {}
    for i, what in enumerate(ERROR_FLOORS):
        ours, theirs = max_err(got["ours"][i], refs[i]), max_err(got["sdpa"][i], refs[i])
        errors[what] = (ours, theirs)
        if not ours <= 2 * theirs + ERROR_FLOORS[what]:
            raise CheckFailed(f"flash_attention, causal={causal}: {what} errs by {ours:.2e}, {name} by "
                              f"{theirs:.2e} (allowed: 2x + {ERROR_FLOORS[what]})")
    return errors


def time_attention(q, k, v, dout, causal=False, baselines=None):
    """What a caller gets from ours and from each baseline (``{name: function(q, k, v, causal)}``,
    default: the flash backend alone), forward and backward: ``{(name, "forward"): UserTiming, ...}``
    with name ``"ours"`` or a baseline's (:func:`~gpu_course.user_timing.bench_user`: GPU time, time per
    step in a loop, CPU time per call). The backward is ``torch.autograd.grad`` of one forward's output
    (kept between runs). ``q, k, v`` must require grad."""
    baselines = {"SDPA flash": sdpa_flash} if baselines is None else baselines
    times = {}
    for name, fn in {"ours": flash_attention, **baselines}.items():
        times[name, "forward"] = bench_user(fn, q, k, v, causal)
        out = fn(q, k, v, causal)
        times[name, "backward"] = bench_user(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
        del out
    return times
