"""Notebook 15's measurements: the FP8 GEMM against ``torch._scaled_mm`` (cuBLASLt) and the bf16 GEMM, the
cost of a row-major second operand, and the weight-only GEMVs against torch's int4 and int8 kernels and the
bf16 GEMV, over the batch. Every comparison goes through :func:`gpu_course.user_timing.compare` (GPU time,
time per step of a loop, CPU time per call); on the CPU the same calls run, and their figures say nothing about
a GPU.

>>> round(crossover_batch(8192, 8192, 4, 2, 2, 989.0, 4258.0), 1)
61.6
"""
from __future__ import annotations

import math
import re

import torch

from ...device_ceilings import ceilings, spec_peak
from ...hardware import gpu_has, gpu_supports
from ...kernels import fp8_matmul as F
from ...kernels import int4_mma as I
from ...kernels import quant_gemv as G
from ...kernels import quant_gemv_kmajor as KM
from ...kernels import quant_gemv_strided as S
from ...mode import DEVICE, ON_GPU
from ...user_timing import compare
from . import quantize as Q


# ------------------------------------------------------------------------------------------- FP8 GEMM
def fp8_ready() -> tuple:
    """``(ok, why)``: whether this device runs FP8 tensor-core GEMMs (compute capability 8.9 or newer); the CPU
    runs them too (Triton's interpreter, torch's CPU kernels)."""
    return gpu_supports("fp8") if ON_GPU else (True, "")


def fp8_operands(h, k, w, scaling="tensor", seed=0):
    """``(qa, qw, sa, sw)``: a (h x k) activation and a (w x k) weight in e4m3fn with their scales, per tensor
    (``scaling="tensor"``: one fp32 scale each) or in DeepSeek-V3's blocks (``"block"``: 1 x 128 for the
    activation, 128 x 128 for the weight). The GEMM's b is ``qw.t()``: K-major."""
    g = torch.Generator().manual_seed(seed)
    a, wt = torch.randn(h, k, generator=g).to(DEVICE), (torch.randn(w, k, generator=g) * 0.05).to(DEVICE)
    if scaling == "tensor":
        (qa, sa), (qw, sw) = Q.quantize(a, "e4m3"), Q.quantize(wt, "e4m3")
        return qa, qw, sa.reshape(1).contiguous(), sw.reshape(1).contiguous()
    (qa, sa), (qw, sw) = Q.quantize(a, "e4m3", (1, 128)), Q.quantize(wt, "e4m3", (128, 128))
    return qa, qw, sa.contiguous(), sw.contiguous()


def fp8_reference(qa, qw, sa, sw, scaling="tensor"):
    """The product the scaled GEMM stands for, in float64 (the dequantised operands multiplied)."""
    ba, bw = ((-1, -1), (-1, -1)) if scaling == "tensor" else ((1, 128), (128, 128))
    sa, sw = (sa.reshape(1, 1), sw.reshape(1, 1)) if scaling == "tensor" else (sa, sw)
    return Q.dequantize(qa, sa, ba) @ Q.dequantize(qw, sw, bw).T


def scaled_mm(qa, qw, sa, sw):
    """``torch._scaled_mm`` per tensor: a row-major, b = ``qw.t()`` column-major (the layout it requires), out in
    the kernels' dtype."""
    return torch._scaled_mm(qa, qw.t(), sa.reshape(()), sw.reshape(()), out_dtype=F.out_dtype())


def scaled_mm_blocks(qa, qw, sa, sw):
    """``torch._scaled_mm`` with DeepSeek-V3's blocks (1 x 128 for a, 128 x 128 for b), as a function of
    nothing; None where this torch has no such mode here (on the CPU, or an older torch). cuBLASLt wants the
    activation's scales column-major (``sa.t().contiguous().t()``) and the weight's as ``sw.t()``."""
    sa_cm, sw_t = sa.t().contiguous().t(), sw.t()
    fn = lambda: torch._scaled_mm(qa, qw.t(), sa_cm, sw_t, out_dtype=F.out_dtype())   # noqa: E731
    if not ON_GPU:
        return None
    try:
        fn()
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return None
    return fn


def fp8_gemm_compare(n: int, seed: int = 0) -> tuple:
    """Time torch._scaled_mm, the Triton FP8 GEMM per tensor and block-scaled, and the bf16 (fp16 where there is
    no bf16) torch.matmul at n³; print the table. Returns ``(times, tflops)``: ``{name: UserTiming}`` and
    ``{name: TFLOP/s of the GPU time}``."""
    qa, qw, sa, sw = fp8_operands(n, n, n, "tensor", seed)
    qb, qwb, sab, swb = fp8_operands(n, n, n, "block", seed + 1)
    a16, w16 = (torch.randn(n, n, device=DEVICE).to(F.out_dtype()) for _ in range(2))
    fns = {"torch._scaled_mm": lambda: scaled_mm(qa, qw, sa, sw),
           "Triton, per tensor": lambda: F.fp8_matmul(qa, qw.t(), sa, sw, "tensor"),
           "Triton, 128-blocks": lambda: F.fp8_matmul(qb, qwb.t(), sab, swb, "block"),
           f"{'bf16' if F.out_dtype() == torch.bfloat16 else 'fp16'} torch.matmul": lambda: a16 @ w16.t()}
    blocked = scaled_mm_blocks(qb, qwb, sab, swb)
    if blocked is not None:
        fns["_scaled_mm, 128-blocks"] = blocked
    times = compare(fns, baseline="torch._scaled_mm")
    return times, {name: 2 * n ** 3 / (t.median * 1e-3) / 1e12 for name, t in times.items()}


def show_rates(tflops: dict) -> str:
    """Each rate with its share of the spec-sheet peak of its precision (fp8 dense; bf16 for the bf16 GEMM)."""
    lines = []
    for name, r in tflops.items():
        kind = "bf16" if "bf16" in name else "fp16" if "fp16" in name else "fp8"
        peak = spec_peak(kind)
        share = f" = {100 * r / peak:4.1f} % of the spec-sheet {kind} peak ({peak:,.0f})" if peak else ""
        lines.append(f"{name:<22}{r:9.1f} TFLOP/s{share}")
    return "\n".join(lines)


def layout_compare(n: int, seed: int = 0) -> dict:
    """The Triton FP8 GEMM with b K-major (``qw.t()``) and row-major (``qw.t().contiguous()``), and the cost of
    making one from the other (a transposing copy of b); prints the table."""
    qa, qw, sa, sw = fp8_operands(n, n, n, "tensor", seed)
    b_rows = qw.t().contiguous()                     # k x w, w contiguous: N-major
    fns = {"b K-major (TN)": lambda: F.fp8_matmul(qa, qw.t(), sa, sw),
           "b row-major (NN)": lambda: F.fp8_matmul(qa, b_rows, sa, sw),
           "transpose b (copy)": lambda: b_rows.t().contiguous()}
    return compare(fns, baseline="b K-major (TN)")


_FP8_ARGS = ("a_ptr", "b_ptr", "out_ptr", "sa_ptr", "sb_ptr", "h", "w", "k", "a_stride_r", "a_stride_k", "b_stride_k",
             "b_stride_c", "out_stride_r", "out_stride_c", "sa_stride_r", "sb_stride_c")
# what each counted PTX instruction does: the copy of a tile to shared memory, and what is done to it on the way
CENSUS = {"cp.async": "global -> shared, no registers (async copy)", "ld.global": "global -> registers",
          "prmt": "byte permute in registers", "st.shared": "registers -> shared",
          "wgmma.mma_async": "tensor-core product (Hopper)"}


def _fp8_ptx(scaling: str, cfg: dict, layout: str = "TN") -> str:
    """The PTX of :func:`fp8_matmul_kernel` compiled for sm_90 with ``scaling``, the tile ``cfg`` (BLOCK_M, BLOCK_N,
    BLOCK_K, GROUP_M, num_warps, num_stages) and b K-major (``layout`` TN: its k stride 1) or row-major (NN: its
    column stride 1), the strides and sizes a launch on multiples of 16 would see; in a fresh Python, without
    launching, so on a machine without a GPU too (a few seconds)."""
    from ...triton_ptx import compiled_ptx
    cfg = dict(cfg)
    warps, stages = cfg.pop("num_warps"), cfg.pop("num_stages")
    unit = "b_stride_k" if layout == "TN" else "b_stride_c"       # the stride of 1 along b's fast index
    ce = dict(cfg, SCALING=scaling, a_stride_k=1, out_stride_c=1, **{unit: 1})
    sig = {a: "i32" for a in _FP8_ARGS}
    sig.update(a_ptr="*fp8e4nv", b_ptr="*fp8e4nv", out_ptr="*bf16", sa_ptr="*fp32", sb_ptr="*fp32",
               **{c: "constexpr" for c in ce})
    aligned = [i for i, a in enumerate(_FP8_ARGS) if sig[a] != "constexpr" and a not in ("sa_stride_r", "sb_stride_c")]
    return compiled_ptx("gpu_course.kernels.fp8_matmul", "fp8_matmul_kernel", sig, ce, num_warps=warps,
                        num_stages=stages, aligned=aligned)


def _opcodes(lines) -> list:
    """The instruction names of PTX ``lines`` (comments, directives, labels and braces skipped; a predicate such as
    ``@%p1`` is not the instruction).

    >>> _opcodes(["// x", ".reg .b32 %r<4>;", "$L__BB0_2:", " @%p1 bra $L__BB0_2;", "bar.sync 0;", "}"])
    ['bra', 'bar.sync']
    """
    return [ln.split()[1 if ln.startswith("@") else 0] for ln in (x.strip() for x in lines)
            if ln and not ln.startswith(("//", ".", "$", "{", "}", ")"))]


def layout_census(cfg: dict | None = None) -> dict:
    """``{"TN": counts, "NN": counts}``: how often each instruction of :data:`CENSUS` appears in the PTX of
    :func:`fp8_matmul_kernel` (per-tensor scaling, the GPU's default tile) compiled for sm_90 with b K-major (TN:
    its k stride 1) and row-major (NN: its column stride 1). Compiled without launching (:func:`_fp8_ptx`)."""
    out = {}
    for name in ("TN", "NN"):
        ptx = _fp8_ptx("tensor", cfg or F.GPU_DEFAULT_CONFIG, name)
        ops = [o for o in _opcodes(ptx.splitlines())
               if not o.endswith(("commit_group", "wait_group"))]   # the async copies' bookkeeping
        out[name] = {op: sum(o.startswith(op) for o in ops) for op in CENSUS}
    return out


def _inner_loop(lines: list) -> tuple:
    """``(head, back)``: the line of the label LLVM marks as the innermost loop's header and of the last branch back
    to it (``(None, None)`` where there is no such loop)."""
    head = next((i for i, ln in enumerate(lines) if "Inner Loop Header" in ln), None)
    label = lines[head].split(":")[0].strip() if head is not None else None
    back = max((i for i, ln in enumerate(lines) if label and re.search(rf"\bbra(\.uni)?\s+{re.escape(label)};", ln)),
               default=None)
    return (head, back) if back is not None else (None, None)


def wgmma_waits(ptx: str) -> dict:
    """The ``N`` of every ``wgmma.wait_group N`` in ``ptx``, in order, split into those in the (innermost) loop, from
    the label LLVM marks as the loop's header to the branch back to it, and the rest: a wait until at most N groups
    of tensor-core products are still running (0: all finished; 1: the last group issued may go on running while
    the code after the wait runs).

    >>> wgmma_waits("$L__BB0_2:  // =>This Inner Loop Header: Depth=1\\n wgmma.wait_group.sync.aligned 1;\\n"
    ...             " cp.async.wait_group 2;\\n @%p1 bra $L__BB0_2;\\n wgmma.wait_group.sync.aligned 0;")
    {'in the loop': [1], 'after': [0]}
    """
    lines = ptx.splitlines()
    head, back = _inner_loop(lines)
    out = {"in the loop": [], "after": []}
    for i, ln in enumerate(lines):
        m = re.search(r"\bwgmma\.wait_group(?:\.\w+)*\s+(\d+)", ln)
        if m:
            inside = head is not None and head < i < back
            out["in the loop" if inside else "after"].append(int(m.group(1)))
    return out


# a barrier of the whole program; stores to and loads from shared memory
LOOP_OPS = ("bar.sync", "st.shared", "ld.shared")


def loop_ops(ptx: str, ops=LOOP_OPS) -> dict:
    """How many instructions of the (innermost) loop of ``ptx`` (as :func:`wgmma_waits` finds it) begin with each of
    ``ops``: what one iteration does besides the products.

    >>> loop_ops("$L__BB0_2:  // =>This Inner Loop Header: Depth=1\\n bar.sync 0;\\n st.shared.b32 [%r1], %r2;\\n"
    ...          " ld.shared.v4.b32 {%r3, %r4, %r5, %r6}, [%r1];\\n @%p1 bra $L__BB0_2;\\n bar.sync 0;")
    {'bar.sync': 1, 'st.shared': 1, 'ld.shared': 1}
    """
    lines = ptx.splitlines()
    head, back = _inner_loop(lines)
    body = _opcodes(lines[head + 1:back]) if head is not None else []
    return {op: sum(o.startswith(op) for o in body) for op in ops}


def scaling_waits() -> dict:
    """``{(scaling, tile): waits}``: :func:`wgmma_waits` of :func:`fp8_matmul_kernel`'s PTX for sm_90, b K-major,
    for both scalings ("per tensor", "128-blocks") on both GPU tiles (128 x 128, the per-tensor kernel's
    :data:`~gpu_course.kernels.fp8_matmul.GPU_DEFAULT_CONFIG`, and 64 x 128, the block-scaled kernel's
    :data:`~gpu_course.kernels.fp8_matmul.GPU_BLOCK_CONFIG`): four compilations, so that the waits can be told
    apart by scaling and by tile. Each entry also counts the loop's barriers and shared-memory instructions
    (:func:`loop_ops`, under ``"loop ops"``)."""
    out = {}
    for scaling, name in (("tensor", "per tensor"), ("block", "128-blocks")):
        for cfg in (F.GPU_DEFAULT_CONFIG, F.GPU_BLOCK_CONFIG):
            ptx = _fp8_ptx(scaling, cfg)
            out[name, f"{cfg['BLOCK_M']} x {cfg['BLOCK_N']}"] = dict(wgmma_waits(ptx), **{"loop ops": loop_ops(ptx)})
    return out


def show_census(census: dict) -> str:
    """The census as a table: one row per instruction, one column per layout, and what the instruction does."""
    names = list(census)
    lines = [f"{'PTX instruction':<18}" + "".join(f"{n:>6}" for n in names) + "   what it does"]
    for op, what in CENSUS.items():
        lines.append(f"{op:<18}" + "".join(f"{census[n][op]:>6}" for n in names) + f"   {what}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- the GEMV
STRIDED = "Triton int4, strided"   # gemv_functions' name for the kernel on repacked words (batch 1)
KMAJOR = "Triton int4, k-major"    # the kernel on k-major words, split over k (batch 1)
MMA = "CUDA int4, mma"             # the CUDA C tensor-core kernel (batch 1 to 16)
LINEAR = {torch.bfloat16: "bf16 F.linear", torch.float16: "fp16 F.linear"}   # the 16-bit layer, by activation dtype
MMA_CFG = None                     # its launch shape (int4_mma.CONFIGS; None: int4_mma.pick_config's)
_MMA_MODULE = []


def mma_module():
    """The CUDA C tensor-core GEMV's module, built once (None where it cannot run here)."""
    if not _MMA_MODULE:
        _MMA_MODULE.append(I.build() if I.runs_here()[0] else None)
    return _MMA_MODULE[0]


def act_dtype() -> torch.dtype:
    """The activations' dtype: bf16 where the GPU has it, fp16 elsewhere (and in the interpreter)."""
    return F.out_dtype()


def torch_int4(W: torch.Tensor, group: int = 128):
    """torch's own int4 weight-only matmul for ``W`` quantised as :func:`~.quantize.quantize_int4_groups` does:
    ``(fn, why)``, ``fn(x)`` computing ``x @ W_q.T`` with ``torch._weight_int4pack_mm`` (GPU: W packed by
    ``torch._convert_weight_to_int4pack`` from bytes holding column 2j in the *high* nibble, bf16 activations and
    scales) or ``torch._weight_int4pack_mm_for_cpu`` (CPU: packed from int32 values 0..15); ``fn`` is None where
    torch has no such kernel here, and ``why`` says why. Both take ``scales_and_zeros`` (k/group x n x 2):
    W = (q + 8 - 8) · scale + zero, zero 0 here."""
    packed, scales = Q.quantize_int4_groups(W, group, act_dtype())
    u = (Q.unpack_int4(packed).to(torch.int16) + 8)                           # 0 .. 15
    sz = torch.stack([scales, torch.zeros_like(scales)], -1).contiguous()
    if not ON_GPU:
        tp = torch._convert_weight_to_int4pack_for_cpu(u.to(torch.int32), 8)
        return (lambda x: torch._weight_int4pack_mm_for_cpu(x, tp, group, sz)), ""
    if not gpu_has("bf16"):
        return None, "torch's int4 kernel (tinygemm) needs compute capability 8.0 or newer"
    u8 = u.to(torch.uint8)
    tp = torch._convert_weight_to_int4pack((u8[:, 0::2] << 4 | u8[:, 1::2]).contiguous(), 8)
    return (lambda x: torch._weight_int4pack_mm(x, tp, group, sz)), ""


def gemv_fixture(N: int, K: int, M: int = 1, seed: int = 0) -> dict:
    """A weight-like W (N x K) in every form the GEMV section compares, and M rows of activations."""
    W = Q.weight_like(N, K, seed=seed, device=DEVICE)
    g = torch.Generator().manual_seed(seed + 1)
    packed, scales = Q.quantize_int4_groups(W, G.GROUP, act_dtype())
    q8, s8 = Q.quantize_int8_rows(W, act_dtype())
    words = S.repack_strided(packed) if K % G.GROUP == 0 else None   # the strided kernel's layout, made once
    words_mma = I.repack(packed) if K % G.GROUP == 0 else None       # the CUDA C kernel's nibble order
    words_k = KM.repack_kmajor(packed) if K % G.GROUP == 0 else None  # k-major words
    return dict(W=W, x=torch.randn(M, K, generator=g).to(DEVICE, act_dtype()), packed=packed, scales=scales,
                words=words, words_mma=words_mma, words_k=words_k, q8=q8, s8=s8, w16=W.to(act_dtype()))


def gemv_functions(f: dict, mma: bool = False) -> tuple:
    """``({name: function of x}, {name: bytes of weights (and scales) it reads}, notes)``: the Triton int4 GEMVs
    (the strided and k-major ones at batch 1, on their repacked words), with ``mma`` the CUDA C tensor-core one (:data:`MMA`, batch
    1 to 16, where it runs: a GPU of compute capability 8.0 or newer), the int8 one, torch's int4 and int8 kernels where they
    run here, and the bf16 (fp16) ``F.linear``; ``notes`` says why one that cannot run here is missing."""
    fns = {"Triton int4": lambda x: G.int4_gemv(x, f["packed"], f["scales"])}
    nbytes = {"Triton int4": f["packed"].nbytes + f["scales"].nbytes}
    if f["x"].shape[0] == 1 and f["words"] is not None:
        fns[STRIDED] = lambda x: S.int4_gemv_strided(x, f["words"], f["scales"])
        nbytes[STRIDED] = f["words"].nbytes + f["scales"].nbytes
        fns[KMAJOR] = lambda x: KM.int4_gemv_kmajor(x, f["words_k"], f["scales"])
        nbytes[KMAJOR] = f["words_k"].nbytes + f["scales"].nbytes
    ok, why = I.runs_here() if mma else (False, "")
    if ok and f["words_mma"] is not None and f["x"].shape[0] <= 16 and act_dtype() == torch.bfloat16:
        fns[MMA] = lambda x: I.int4_mma_gemv(mma_module(), x, f["words_mma"], f["scales"], MMA_CFG)
        nbytes[MMA] = f["words_mma"].nbytes + f["scales"].nbytes
    fns["Triton int8"] = lambda x: G.int8_gemv(x, f["q8"], f["s8"])
    nbytes["Triton int8"] = f["q8"].nbytes + f["s8"].nbytes
    notes = [f"{MMA}: {why}"] if why else []
    t4, why = torch_int4(f["W"])
    if t4 is not None:
        fns["torch int4"], nbytes["torch int4"] = t4, nbytes["Triton int4"]
    else:
        notes.append(why)
    try:
        torch._weight_int8pack_mm(f["x"], f["q8"], f["s8"])
        fns["torch int8"] = lambda x: torch._weight_int8pack_mm(x, f["q8"], f["s8"])
        nbytes["torch int8"] = nbytes["Triton int8"]
    except (RuntimeError, NotImplementedError) as e:
        notes.append(f"torch._weight_int8pack_mm does not run here ({str(e).splitlines()[0][:80]})")
    name = LINEAR[act_dtype()]
    fns[name], nbytes[name] = (lambda x: torch.nn.functional.linear(x, f["w16"])), f["w16"].nbytes
    return fns, nbytes, notes


def gemv_compare(N: int, K: int, M: int = 1, seed: int = 0, mma: bool = False, names=None) -> tuple:
    """Time every :func:`gemv_functions` at batch M with the L2 cache flushed before each timing (the weights
    must come from HBM, as in a model too large for L2); print the table, then each one's GB/s of weights read
    and its share of the measured copy ceiling. ``mma``: with the CUDA C tensor-core kernel; ``names``: only these
    kernels, beside torch's int4 one (the baseline) and the bf16 (fp16) ``F.linear``. Returns ``(times, gbs)``."""
    f = gemv_fixture(N, K, M, seed)
    fns, nbytes, notes = gemv_functions(f, mma)
    if names is not None:   # only these, beside the baseline and the bf16 (fp16) F.linear
        fns = {k: v for k, v in fns.items() if k in names or k == "torch int4" or "F.linear" in k}
    for n in notes:
        print(n)
    base = "torch int4" if "torch int4" in fns else next(iter(fns))
    x = f["x"]
    times = compare({k: (lambda fn=fn: fn(x)) for k, fn in fns.items()}, baseline=base, l2_flush=True)
    gbs = {k: nbytes[k] / (t.median * 1e-3) / 1e9 for k, t in times.items()}
    copy = ceilings().get("copy")
    for k, v in gbs.items():
        share = f" = {100 * v / copy:3.0f} % of the measured copy ceiling ({copy:,.0f} GB/s)" if copy and ON_GPU else ""
        print(f"{k:<15} reads {nbytes[k] / 1e6:6.2f} MB of weights: {v:7.0f} GB/s{share}")
    return times, gbs


def batch_sweep(N: int, K: int, batches, seed: int = 0) -> dict:
    """GPU time (ms, L2 flushed) of the int4 GEMVs (the CUDA C one where it runs, NaN past its 16 rows) and the bf16
    ``F.linear`` for each batch: ``{name: [ms]}``."""
    f = gemv_fixture(N, K, 1, seed)
    fns, _, _ = gemv_functions(f, mma=True)
    fns = {k: v for k, v in fns.items() if "int8" not in k and k not in (STRIDED, KMAJOR)}   # batch 1 only
    out = {k: [] for k in fns}
    g = torch.Generator().manual_seed(seed + 2)
    for M in batches:
        x = torch.randn(M, K, generator=g).to(DEVICE, act_dtype())
        for k, fn in fns.items():
            if k == MMA and M > 16:      # one tile of 16 rows: the CUDA C kernel's limit
                out[k].append(float("nan"))
                continue
            out[k].append(_flushed_ms(fn, x))
    return out


def _flushed_ms(fn, *args) -> float:
    """The median GPU time (ms) of ``fn(*args)`` with the L2 cache flushed before each run, as the GEMV sweeps time
    it (on the CPU one run: its figure says nothing about a GPU)."""
    from ...timing import bench
    return bench(fn, *args, l2_flush=True, budget_ms=30 if ON_GPU else 1, reps=None if ON_GPU else 1).median


def crossover_batch(n: int, k: int, weight_bits: int, act_bytes: int, out_bytes: int, tflops: float,
                    gbs: float) -> float:
    """The batch M at which an (M x k) @ (k x n) product with weights of ``weight_bits`` bits stops being
    memory-bound on a machine of ``tflops`` (TFLOP/s) and ``gbs`` (GB/s): where its FLOPs' time 2·M·n·k / rate
    equals its bytes' time (n·k·bits/8 + M·k·act_bytes + M·n·out_bytes) / bandwidth (a roofline model: scales
    and caches left out). ``math.inf`` where it never does: each row of the batch then adds at least as much time
    for its bytes as for its FLOPs.

    >>> crossover_batch(1024, 1024, 4, 2, 4, 121.0, 300.0)   # 2nk/F = 17.3 ns a row < (2k + 4n)/B = 20.5 ns
    inf
    """
    flop_s, byte_s = tflops * 1e12, gbs * 1e9
    # 2 M n k / F = (W + M (k a + n o)) / B  ->  M (2 n k / F - (k a + n o) / B) = W / B
    w = n * k * weight_bits / 8
    per_row = 2 * n * k / flop_s - (k * act_bytes + n * out_bytes) / byte_s
    return (w / byte_s) / per_row if per_row > 0 else math.inf


# ------------------------------------------------------------------------------------------- fixed cost and rate
def fixed_and_rate(points) -> tuple:
    """The least-squares line ``time = fixed + bytes / rate`` through ``points`` ``[(bytes, ms)]``: ``(fixed in µs,
    rate in GB/s)`` — what a kernel costs whatever its size, and what each further byte costs.

    >>> fixed_and_rate([(1e6, 0.0105), (2e6, 0.0110), (4e6, 0.0120)])   # 10 µs + 1 MB per 0.5 µs
    (10.0, 2000.0)
    """
    n = len(points)
    mx, my = sum(b for b, _ in points) / n, sum(t for _, t in points) / n
    slope = sum((b - mx) * (t - my) for b, t in points) / sum((b - mx) ** 2 for b, _ in points)   # ms a byte
    return round((my - slope * mx) * 1e3, 6), round(1e-6 / slope, 6)


def size_sweep(K: int, rows, seed: int = 0) -> dict:
    """GPU time (ms, L2 flushed before each timing) at batch 1 of the k-major int4 GEMV, torch's int4 kernel (where
    it runs) and the bf16 (fp16) ``F.linear`` on W (n x K) for each n of ``rows`` (:func:`gemv_fixture` and
    :func:`gemv_functions`, so the names and bytes of the GEMV tables), and of a device copy that moves as many bytes
    (read + written) as the int4 weights: ``{name: [(bytes moved, ms)]}``."""
    out = {}
    for n in rows:
        f = gemv_fixture(n, K, 1, seed)
        fns, nbytes, _ = gemv_functions(f)
        src = torch.empty(f["packed"].numel() // 2, dtype=torch.uint8, device=DEVICE)
        dst = torch.empty_like(src)
        fns["copy, as many bytes"], nbytes["copy, as many bytes"] = (lambda _: dst.copy_(src)), 2 * src.nbytes
        for name in (KMAJOR, "copy, as many bytes", LINEAR[act_dtype()], "torch int4"):
            if name in fns:       # torch's int4 kernel where it runs here
                out.setdefault(name, []).append((nbytes[name], _flushed_ms(fns[name], f["x"])))
    return out


def steps_sweep(K: int, rows, steps=(4, 8, 16, 32), seed: int = 0) -> dict:
    """GPU time (ms, L2 flushed before each timing) at batch 1 of the k-major int4 GEMV with ``STEPS`` (the rows of
    words a program streams, one after another) set to each of ``steps``, the rest of its default configuration kept,
    on W (n x K) for each n of ``rows``: ``{"STEPS=s": [(bytes of weights and scales read, ms)]}``, for
    :func:`fixed_and_rate`. Each configuration's result is checked against the default one's before it is timed."""
    out = {}
    for n in rows:
        f = gemv_fixture(n, K, 1, seed)
        args = (f["x"], f["words_k"], f["scales"])
        ref = KM.int4_gemv_kmajor(*args).float()
        for s in steps:
            cfg = dict(KM.CONFIG, STEPS=s)
            got = KM.int4_gemv_kmajor(*args, cfg=cfg).float()
            if not torch.allclose(got, ref, atol=2e-2, rtol=1e-2):
                raise AssertionError(f"steps_sweep: STEPS={s} on {n} x {K} differs from the default configuration")
            ms = _flushed_ms(lambda c=cfg: KM.int4_gemv_kmajor(*args, cfg=c))
            out.setdefault(f"STEPS={s}", []).append((f["words_k"].nbytes + f["scales"].nbytes, ms))
    return out


def size_sweep_table(sweep: dict, K: int, rows) -> str:
    """:func:`size_sweep` (of W: n x ``K`` for each n of ``rows``) as lines: each kernel's time at each size, then
    its :func:`fixed_and_rate` line."""
    names = list(sweep)
    lines = [f"{'W':>12}" + "".join(f"{name:>22}" for name in names) + "   (µs, L2 flushed)"]
    for i, n in enumerate(rows):
        lines.append(f"{f'{n} x {K}':>12}" + "".join(f"{sweep[name][i][1] * 1e3:22.1f}" for name in names))
    for name in names:
        fixed, rate = fixed_and_rate(sweep[name])
        lines.append(f"{name:<22} time = {fixed:5.1f} µs + bytes at {rate:6,.0f} GB/s")
    return "\n".join(lines)
