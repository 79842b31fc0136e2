"""What limits notebook 11's kernels and cuDNN's: what ``bench/flash_attention_ncu.py`` launches under Nsight Compute,
how its counters become rows, where they are stored, and their table."""
from __future__ import annotations

import torch

from ...kernels.triton_attention import (DKDV_CONFIGS, DQ_CONFIGS, attention_bwd_dkdv_kernel, attention_bwd_dq_kernel,
                                         attention_forward, attention_forward_desc, default_scale, desc_config,
                                         pipe_config)
from ...kernels.triton_matmul import dot_precision
from ...launch import cdiv
from ...mode import DEVICE
from .anatomy import short_kernel_name
from .sdpa import sdpa_with


NCU_SHAPE = (4, 16, 4096)   # B, H, N, fp16: section 5's size
NCU_KERNELS = "regex:attention_fwd_desc_kernel|attention_bwd_dkdv_kernel|attention_bwd_dq_kernel|flash_fprop|flash_bprop"
NCU_FIELDS = ("what", "kernel", "time_us", "tensor_pct", "issue_pct", "warps_pct", "registers", "blocks_per_sm",
              "stalls")


# What bench/flash_attention_ncu.py launches once each under ncu, in order: (what, a piece of the kernel's name).
NCU_ORDER = (("ours forward d=128, step 3 (descriptors)", "attention_fwd_desc_kernel"),
             ("ours forward d=128, step 5 (pipelined)", "attention_fwd_desc_kernel"),
             ("cuDNN forward d=128", "flash_fprop"),
             ("ours forward d=64, step 3 (descriptors)", "attention_fwd_desc_kernel"),
             ("cuDNN forward d=64", "flash_fprop"),
             ("ours dK/dV d=64", "attention_bwd_dkdv_kernel"),
             ("ours dQ d=64", "attention_bwd_dq_kernel"),
             ("cuDNN backward d=64", "flash_bprop"))


def ncu_launches():
    """The functions bench/flash_attention_ncu.py launches once each under ncu, in the order of :data:`NCU_ORDER`:
    our forward at d = 128 (ladder steps 3 and 5) and cuDNN's, our forward at d = 64 (step 3) and cuDNN's (with
    autograd, for its backward), then our two backward kernels at d = 64 (dQ with the 128x64 tile its autotuner keeps at this
    size; dK/dV with ``DKDV_CONFIGS[2]``, 32x128 with 4 warps and 3 stages, not the 32x64 with 4 stages that its
    autotuner keeps) and cuDNN's backward. GPU only."""
    def inputs(d):
        g = torch.Generator(device=DEVICE).manual_seed(d)
        return [torch.randn(*NCU_SHAPE, d, device=DEVICE, dtype=torch.float16, generator=g) for _ in range(4)]
    q1, k1, v1, _ = inputs(128)
    q, k, v, do = inputs(64)
    out, lse = attention_forward(q, k, v, descriptors=False)       # Triton's pointer kernel: not profiled
    delta = (out.float() * do.float()).sum(-1)
    dkdv_cfg, dq_cfg = (dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages) for c in
                        (DKDV_CONFIGS[2], DQ_CONFIGS[0]))
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    lib = {}
    sc, sw = default_scale(64), dict(HEAD_DIM=64, CAUSAL=False, DOT_PRECISION=dot_precision(q.dtype))
    B, H, N = NCU_SHAPE

    def cudnn_forward_with_grad():
        lib["out"] = sdpa_with("SDPA cuDNN")(qg, kg, vg)
    fns = [lambda: attention_forward_desc(q1, k1, v1, cfg=desc_config(128)),
           lambda: attention_forward_desc(q1, k1, v1, cfg=pipe_config(128), pipeline=True),
           lambda: sdpa_with("SDPA cuDNN")(q1, k1, v1),
           lambda: attention_forward_desc(q, k, v, cfg=desc_config(64)),
           cudnn_forward_with_grad,
           lambda: attention_bwd_dkdv_kernel[(cdiv(N, dkdv_cfg["BLOCK_N"]), B * H)](
               q, k, v, do, lse, delta, torch.empty_like(q), torch.empty_like(q), sc, N, **sw, **dkdv_cfg),
           lambda: attention_bwd_dq_kernel[(cdiv(N, dq_cfg["BLOCK_M"]), B * H)](
               q, k, v, do, lse, delta, torch.empty_like(q), sc, N, **sw, **dq_cfg),
           lambda: torch.autograd.grad(lib["out"], (qg, kg, vg), do)]
    return [(what, piece, fn) for (what, piece), fn in zip(NCU_ORDER, fns)]


def attention_limiter_rows(raw_text, order):
    """One dict per profiled kernel from ``ncu --csv --page raw`` text: ``what`` (from ``order``, the
    ``[(what, name piece)]`` of :func:`ncu_launches`), the kernel's name and ``gpu_course.profiling.limiters``.
    Raises ValueError where ncu profiled other kernels than ``order`` says, or in another order."""
    from ...profiling import limiters, ncu_raw_rows
    kernels = ncu_raw_rows(raw_text)
    names = [r["Kernel Name"] for r in kernels]
    if len(kernels) != len(order) or any(piece not in n for (_, piece), n in zip(order, names)):
        raise ValueError(f"attention_limiter_rows: ncu profiled {len(kernels)} kernels, expected {len(order)} "
                         f"in order {[p for _, p in order]}; got {[n[:50] for n in names]}")
    out = []
    for (what, _), row in zip(order, kernels):
        lim = limiters(row)
        out.append(dict(what=what, kernel=short_kernel_name(row["Kernel Name"], 70),
                        **{f: lim[f] for f in NCU_FIELDS[2:]}))
    return out


def limiters_file(device: str = "nvidia-h100-80gb-hbm3"):
    """Where bench/flash_attention_ncu.py stores what it measured on ``device`` (a results file's stem)."""
    from ... import paths
    return paths.RESULTS_DIR / "profiles" / f"ncu_flash_attention_{device}.csv"


def limiter_table(rows):
    """Rows of :func:`attention_limiter_rows` (or read back with ``profiling.read_limiter_csv``) as a table: the
    time under ncu, how busy the tensor pipe and the schedulers were, warps, registers, blocks per SM and the three
    largest stall reasons."""
    width = max(len(r["what"]) for r in rows) + 2
    lines = [f"{'kernel':<{width}}{'µs':>7} {'tc%':>4} {'iss%':>4} {'wrp%':>4} {'regs':>4} {'blk':>3}  "
             "largest stalls (warps per issued instruction)"]
    for r in rows:
        stalls = ", ".join(f"{n} {v:.1f}" for n, v in r["stalls"])
        lines.append(f"{r['what']:<{width}}{r['time_us']:7.0f} {r['tensor_pct']:4.0f} {r['issue_pct']:4.0f} "
                     f"{r['warps_pct']:4.0f} {r['registers']:4.0f} {r['blocks_per_sm']:3.0f}  {stalls}")
    lines.append("µs: time under ncu (clocks locked at base); tc%: tensor pipe busy, % of cycles; iss%: cycles a "
                 "scheduler issued; wrp%: active warps, % of the SM's 64; regs: registers a thread; blk: blocks an SM "
                 "holds")
    return "\n".join(lines)
