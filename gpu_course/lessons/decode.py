"""What notebook 16 (attention for inference) measures its decode kernels (:mod:`gpu_course.kernels.triton_decode`)
with: the caches of a shape, the bytes a step reads and the roofline point, GB/s of KV read against the measured HBM
copy ceiling, sweeps of splits and tiles (their rounds interleaved), PyTorch's SDPA backends on the decode shape
(with grouped-query attention three ways), a whole decode step of many layers eager and as a CUDA graph, and the
formula of notebook 16's tokens/s exercise."""
from __future__ import annotations

import contextlib
import statistics
import warnings

import torch
import torch.nn.functional as F

from ..device_ceilings import ceilings, spec_peak
from ..hardware import gpu_supports
from ..kernels import triton_decode as td
from ..mode import DEVICE, ON_GPU, synchronize
from ..timing import bench, cuda_graph, fmt_ms
from ..user_timing import bench_users


def half_dtype():
    """The dtype the GPU timings use: bf16 where the GPU computes it, fp16 before Ampere (a T4); fp32 in cpu mode
    (the interpreter computes bf16 ``tl.dot`` wrongly)."""
    if not ON_GPU:
        return torch.float32
    return torch.bfloat16 if gpu_supports("bf16")[0] else torch.float16


def make_cache(batch, q_heads, kv_heads, length, d, tokens=1, dtype=None, seed=0):
    """``(q, k, v)`` of a decode step: q (batch, q_heads, tokens, d), k and v (batch, kv_heads, length, d), normal
    values, on the course's device."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    dtype = dtype or half_dtype()
    mk = lambda *s: torch.randn(*s, generator=g, device=DEVICE, dtype=torch.float32).to(dtype)  # noqa: E731
    return mk(batch, q_heads, tokens, d), mk(batch, kv_heads, length, d), mk(batch, kv_heads, length, d)


def copy_ceiling() -> float:
    """The measured HBM copy ceiling of this GPU in GB/s (bytes read + written by a large device copy); on the CPU
    the CPU's own copy (timings there say nothing about a GPU)."""
    return ceilings()["copy"]


def roofline_point(batch, q_heads, kv_heads, tokens, length, d, itemsize=2) -> dict:
    """A decode step's arithmetic intensity against the machine's balance: ``{"flops", "bytes", "intensity"
    (FLOP/byte), "balance_spec" (spec-sheet fp16 peak over HBM spec, FLOP/byte; None without a spec sheet)}``.
    The bytes are K and V (q and the output are a few KB)."""
    flops = td.decode_flops(batch, q_heads, tokens, length, d)
    nbytes = td.kv_bytes(batch, kv_heads, length, d, itemsize)
    fp16, hbm = spec_peak("fp16"), spec_peak("copy")
    return dict(flops=flops, bytes=nbytes, intensity=flops / nbytes,
                balance_spec=fp16 * 1e12 / (hbm * 1e9) if fp16 and hbm else None)


CPU_NOTE = "(cpu mode: the interpreter's wall clock, on tiny sizes: says nothing about a GPU)"


def gbs(nbytes: int, ms: float) -> float:
    """GB/s of ``nbytes`` in ``ms`` milliseconds (GB = 10⁹ bytes)."""
    return nbytes / (ms * 1e-3) / 1e9


def gpu_times(fns: dict, rounds: int = 3, budget_ms: float = 60.0, l2_flush: bool = True) -> dict:
    """The GPU time (ms, median of its reps) of each of ``fns`` (name -> function of no arguments) in ``rounds``
    interleaved rounds (round r of every function before round r + 1 of any), with the L2 flushed before each
    run (a decode step's cache is not in L2: the layers before it evicted it): ``{name: [ms per round]}``. On the
    CPU one round, one rep: wall clock of the interpreter."""
    out = {name: [] for name in fns}
    for _ in range(rounds if ON_GPU else 1):
        for name, f in fns.items():
            t = bench(f, budget_ms=budget_ms, l2_flush=l2_flush, reps=None if ON_GPU else 1, warmup=None)
            out[name].append(t.median)
    return out


def med(v) -> float:
    return statistics.median(v)


def spread(v) -> str:
    """The rounds of one figure as ``median (min-max)`` in µs."""
    return f"{med(v) * 1e3:.1f} µs ({min(v) * 1e3:.1f}-{max(v) * 1e3:.1f})"


def split_sweep(q, k, v, splits_list, rounds=3, **tile) -> dict:
    """``{splits: [ms per round]}`` of :func:`decode_attention` for each number of splits."""
    return gpu_times({s: (lambda s=s: td.decode_attention(q, k, v, splits=s, **tile)) for s in splits_list},
                     rounds=rounds)


def best_of(sweep: dict):
    """``(key, ms)`` of the fastest entry of a sweep (``{key: [ms per round]}``, by the median)."""
    key = min(sweep, key=lambda s: med(sweep[s]))
    return key, med(sweep[key])


def sweep_table(sweep: dict, nbytes: int, label: str = "splits", ceiling: float | None = None) -> str:
    """A sweep as lines: key, GPU time (median and range of the rounds), GB/s of KV read and, on a GPU, its % of
    the copy ceiling."""
    ceiling = ceiling or (copy_ceiling() if ON_GPU else None)
    w = max([10] + [len(str(key)) for key in sweep])
    lines = [f"{label:>{w}} {'GPU time (rounds)':>28} {'GB/s':>7}" + ("  % copy" if ceiling else "")]
    for key, v in sweep.items():
        rate = gbs(nbytes, med(v))
        lines.append(f"{key!s:>{w}} {spread(v):>28} {rate:7.0f}" + (f" {100 * rate / ceiling:6.0f} %" if ceiling else ""))
    return "\n".join(lines + ([] if ON_GPU else [CPU_NOTE]))


# ------------------------------------------------------------------------------------------- SDPA
SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
GQA_WAYS = ("enable_gqa", "group as query rows", "repeat_interleave")


def _backend(name):
    """SDPA restricted to backend ``name`` on a GPU (:class:`~gpu_course.sdpa_pin.pin`, made once per function and
    entered per call); in cpu mode a context that changes nothing."""
    from ..sdpa_pin import pin
    return pin(name) if ON_GPU else contextlib.nullcontext()


def sdpa_decode(backend: str, way: str, q, k, v):
    """A function of no arguments: SDPA restricted to ``backend`` on the decode step ``q`` (batch, Hq, 1, d)
    against ``k, v`` (batch, Hkv, L, d), grouped-query attention done ``way``:

    * ``"enable_gqa"``: ``scaled_dot_product_attention(..., enable_gqa=True)``, the library's own GQA;
    * ``"group as query rows"``: q viewed as (batch, Hkv, group, d): the group's heads become query rows of
      their KV head (exact for T = 1, no mask), so every backend sees plain attention with a query length of
      the group;
    * ``"repeat_interleave"``: K and V stored expanded to Hq heads (made once, outside the step): the cache
      and the bytes read are ``group`` times larger.
    """
    B, HQ, T, D = q.shape
    HKV = k.shape[1]
    pinned = _backend(backend)   # made once: each call pays only its entry
    if way == "enable_gqa":
        def run():
            with pinned:
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    elif way == "group as query rows":
        if T != 1:
            raise ValueError("group as query rows: exact for one new token only (T = 1)")
        qr = q.view(B, HKV, HQ // HKV, D)

        def run():
            with pinned:
                return F.scaled_dot_product_attention(qr, k, v).reshape(B, HQ, T, D)   # a backend's output may not be contiguous
    elif way == "repeat_interleave":
        ke, ve = k.repeat_interleave(HQ // HKV, 1), v.repeat_interleave(HQ // HKV, 1)

        def run():
            with pinned:
                return F.scaled_dot_product_attention(q, ke, ve)
    else:
        raise ValueError(f"sdpa_decode: unknown way {way!r}; known: {', '.join(GQA_WAYS)}")
    run.__name__ = f"sdpa_{backend.lower()}"
    return run


def sdpa_variants(q, k, v, ref=None, backends=SDPA_BACKENDS, ways=GQA_WAYS, atol=2e-2):
    """The SDPA (backend, GQA way) pairs that run here on this step and match ``ref`` within ``atol``:
    ``(fns, skipped)``, ``fns = {(backend, way): function}``, ``skipped = {(backend, way): one-line reason}``.
    In cpu mode only the math backend (SDPA's CPU kernel) is tried."""
    fns, skipped = {}, {}
    for b in backends:
        for w in ways:
            if not ON_GPU and b != "MATH":
                skipped[b, w] = "a GPU backend"
                continue
            try:
                fn = sdpa_decode(b, w, q, k, v)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = fn()
                    synchronize()
                if ref is not None and not (out.double() - ref).abs().max().item() <= atol:
                    skipped[b, w] = "its result differs from the reference"
                    continue
            except Exception as e:  # noqa: BLE001  a backend that refuses the shape
                skipped[b, w] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:100] if str(e).strip() else ''}"
                continue
            fns[b, w] = fn
    return fns, skipped


def nhd_pages(x, page: int):
    """A contiguous cache ``x`` (batch, heads, L, d) as pages of ``page`` tokens in FlashInfer's NHD layout (pages,
    page, heads, d): sequence b's pages are b·n … b·n + n − 1 (n = ⌈L / page⌉), the last one padded with zeros.

    >>> x = torch.arange(2 * 3 * 5 * 4.).reshape(2, 3, 5, 4)
    >>> p = nhd_pages(x, 2)            # 3 pages a sequence
    >>> p.shape, bool((p[3 + 1, 0, 2] == x[1, 2, 2]).all()), p[3 + 2, 1].abs().sum().item()
    (torch.Size([6, 2, 3, 4]), True, 0.0)
    """
    B, H, L, D = x.shape
    n = -(-L // page)
    return F.pad(x, (0, 0, 0, n * page - L)).transpose(1, 2).reshape(B * n, page, H, D).contiguous()


def flashinfer_decode(q, k, v, page: int = 16, tensor_cores: bool = False):
    """FlashInfer's batch decode (``BatchDecodeWithPagedKVCacheWrapper``) on the step ``q`` (batch, Hq, 1, d) over
    ``k, v`` (batch, Hkv, L, d), copied once into pages of ``page`` tokens (its NHD layout: pages, page, Hkv, d), each
    sequence's pages in order; ``tensor_cores``: its prefill-style kernel, which it advises for larger GQA groups.
    ``(fn, why)``: ``fn()`` returns (batch, Hq, 1, d); ``fn`` is None where FlashInfer is not installed, or does not
    run here or on this step, and ``why`` says why. The first call compiles its kernel (a minute or two)."""
    if not ON_GPU:
        return None, "FlashInfer runs on NVIDIA GPUs only"
    try:
        import flashinfer
    except ImportError as e:
        return None, f"FlashInfer is not installed (pip install flashinfer-python; {type(e).__name__}: {e})"
    B, HQ, T, D = q.shape
    HKV, L = k.shape[1], k.shape[2]
    if T != 1:
        return None, "the batch decode wrapper takes one new token a sequence"
    n = -(-L // page)                                        # pages a sequence
    kp, vp = nhd_pages(k, page), nhd_pages(v, page)
    i32 = dict(dtype=torch.int32, device=q.device)
    indptr, indices = torch.arange(0, B * n + 1, n, **i32), torch.arange(B * n, **i32)
    last = torch.full((B,), L - (n - 1) * page, **i32)      # tokens in each sequence's last page
    q3 = q[:, :, 0].contiguous()
    out = torch.empty_like(q3)
    try:
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(128 << 20, dtype=torch.uint8,
                                                                            device=q.device), "NHD",
                                                                use_tensor_cores=tensor_cores)
        wrapper.plan(indptr, indices, last, HQ, HKV, D, page, q_data_type=q.dtype, kv_data_type=k.dtype,
                     sm_scale=D ** -0.5)
        wrapper.run(q3, (kp, vp), out=out)
        synchronize()
    except Exception as e:  # noqa: BLE001  a build or a shape FlashInfer refuses here
        return None, f"FlashInfer did not run here ({type(e).__name__}: {str(e).strip()[:160]})"
    return (lambda: wrapper.run(q3, (kp, vp), out=out).unsqueeze(2)), ""


def flashinfer_racers(q, k, v, ref=None, atol=2e-2) -> dict:
    """``{name: function}`` of :func:`flashinfer_decode`'s two kernels (CUDA cores, tensor cores) that run here on
    this step and match ``ref`` (the first ``len(ref)`` sequences) within ``atol``; prints one line for each that
    is left out, and why."""
    out = {}
    for name, tc in (("FlashInfer, CUDA cores", False), ("FlashInfer, tensor cores", True)):
        fn, why = flashinfer_decode(q, k, v, tensor_cores=tc)
        if fn is not None and ref is not None and not (fn()[:len(ref)].double() - ref).abs().max().item() <= atol:
            fn, why = None, "its result differs from the reference"
        if fn is None:
            print(f"not compared: {name}: {why}")
            if why.startswith(("FlashInfer runs", "FlashInfer is not")):
                break                                        # the same reason for the second
        else:
            out[name] = fn
    return out


def user_table(times: dict, nbytes: int, ceiling: float | None = None) -> str:
    """:func:`bench_users`'s figures as lines: GPU time, loop/step, CPU/call, GB/s of KV read, % of the copy
    ceiling (on a GPU)."""
    ceiling = ceiling or (copy_ceiling() if ON_GPU else None)
    w = max(len(str(n)) for n in times) + 1
    lines = [f"{'':<{w}}{'GPU time':>10}{'loop/step':>11}{'CPU/call':>10}{'GB/s':>7}" + ("  % copy" if ceiling else "")]
    for name, t in times.items():
        rate = gbs(nbytes, t.median)
        lines.append(f"{name!s:<{w}}{fmt_ms(t.median):>10}{fmt_ms(t.loop_ms):>11}{fmt_ms(t.cpu_ms):>10}{rate:7.0f}"
                     + (f" {100 * rate / ceiling:6.0f} %" if ceiling else ""))
    return "\n".join(lines + ([] if ON_GPU else [CPU_NOTE]))


def time_users(fns: dict, l2_flush: bool = True) -> dict:
    """:func:`bench_users` of ``fns`` (functions of no arguments): GPU time (L2 flushed before each run), time
    per step in a loop and CPU time per call."""
    return bench_users(fns, l2_flush=l2_flush)


# ------------------------------------------------------------------------------------------- a decode step of many layers
def layer_caches(layers, batch, q_heads, kv_heads, length, d, dtype=None):
    """One ``(q, k, v)`` per layer (each layer's own cache, so that no layer finds the one before it in L2)."""
    return [make_cache(batch, q_heads, kv_heads, length, d, dtype=dtype, seed=i) for i in range(layers)]


def step_over_layers(attn, caches):
    """A function of no arguments: ``attn(q, k, v)`` for every layer's cache in turn (the attention of one decode
    step of a model with ``len(caches)`` layers; the rest of each layer left out)."""
    def step():
        for q, k, v in caches:
            attn(q, k, v)
    return step


def step_times(steps: dict) -> dict:
    """For each decode step (name -> function of no arguments): ``{"gpu_ms", "cpu_ms", "loop_ms"}``: its GPU time
    (events), the CPU's time to issue it and its time per step in a back-to-back loop (what the tokens/s is)."""
    t = bench_users(steps)
    return {name: dict(gpu_ms=u.median, cpu_ms=u.cpu_ms, loop_ms=u.loop_ms) for name, u in t.items()}


def graphed(step):
    """``step`` captured as a CUDA graph (:func:`gpu_course.timing.cuda_graph`): one launch replays all its
    kernels. On the CPU the step itself."""
    return cuda_graph(step)


# ------------------------------------------------------------------------------------------- the exercise's formula
def decode_tokens_per_s(batch, layers, kv_heads, head_dim, context, itemsize, weight_bytes, copy_gbs):
    """Tokens per second of decoding at the memory limit: each step reads every layer's K and V of every sequence
    (``2 * layers * batch * kv_heads * context * head_dim * itemsize`` bytes) and the weights once (``weight_bytes``,
    shared by the batch), at ``copy_gbs`` GB/s (10⁹ bytes a second), and yields one token per sequence.

    >>> round(decode_tokens_per_s(1, 32, 8, 128, 4096, 2, 16e9, 4000.0), 1)
    241.9
    """
    step_bytes = 2 * layers * batch * kv_heads * context * head_dim * itemsize + weight_bytes
    return batch / (step_bytes / (copy_gbs * 1e9))


def fresh_partials(rows: int, splits: int, d: int, empty: int = 1, seed: int | None = None):
    """Partials of a split-KV step, made at random when asked (notebook 16's combine exercise): ``(o_part, lse)``,
    o_part (rows, splits, d) fp32 (each split's output normalised by its own sum), lse (rows, splits) fp32, natural
    log, around 100 (3 apart, so the weights differ but none dominates), so that a combine without the maximum overflows
    (exp in fp32 overflows past ~88.7); ``empty`` splits of each row are empty
    (lse = -inf, o = 0), as a split past a short sequence's end is."""
    g = torch.Generator().manual_seed(seed if seed is not None else int(torch.randint(0, 2**31, ()).item()))
    o = torch.randn(rows, splits, d, generator=g)
    lse = torch.randn(rows, splits, generator=g) * 3 + 100   # past exp's fp32 range (~88.7); weights within e^±10
    for r in range(rows):
        idx = torch.randperm(splits, generator=g)[:empty]
        lse[r, idx] = float("-inf")
        o[r, idx] = 0.0
    return o.to(DEVICE), lse.to(DEVICE)


def combine_reference(o_part, lse):
    """Float64 combine of the partials: ``sum_s softmax(lse)_s o_s``."""
    w = torch.softmax(lse.double(), dim=-1)
    return (w[..., None] * o_part.double()).sum(-2)


def fresh_paged_problem(batch: int = 3, heads: int = 2, d: int = 16, page: int = 8, seed: int | None = None):
    """Notebook 16's paged exercise, drawn when asked: ``(q, (k_pages, v_pages, table), lens, (k, v))``: q (batch,
    heads, d) fp32, a pool of pages of ``page`` rows (:func:`~gpu_course.kernels.triton_decode.paged_cache`: placed
    in a random order, three spare pages, every row no sequence owns NaN, unused table entries -1), lengths that are
    no multiple of ``page`` (int32), and the contiguous cache the pool was made from (for the reference only)."""
    g = torch.Generator().manual_seed(seed if seed is not None else int(torch.randint(0, 2**31, ()).item()))
    cap = 5 * page
    choices = [n for n in range(page + 1, cap + 1) if n % page]
    lens = torch.tensor([choices[int(i)] for i in torch.randint(0, len(choices), (batch,), generator=g)],
                        dtype=torch.int32)
    lens[0] = cap - 1                                   # one sequence uses all its pages but the last row
    q, k, v = (torch.randn(*s, generator=g) for s in ((batch, heads, d), (batch, heads, cap, d), (batch, heads, cap, d)))
    kp, vp, table = td.paged_cache(k, v, page, lens, generator=g, spare=3, poison=True)
    to = lambda t: t.to(DEVICE)  # noqa: E731
    return to(q), (to(kp), to(vp), to(table)), to(lens), (to(k), to(v))


def paged_problem_reference(q, kv, lens):
    """Float64 attention of :func:`fresh_paged_problem`'s one new token per (sequence, head): (batch, heads, d)."""
    k, v = kv
    return td.decode_reference(q[:, :, None], k, v, lens)[:, :, 0]
