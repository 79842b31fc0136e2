"""Notebook 11's ladders: the forward a step at a time toward Hopper's way of feeding the tensor cores (pointer
loads, tensor descriptors, warp specialisation, pipelining, a persistent grid, autotuning) and the backward's two
ways to get dQ, each step checked against float64, then timed beside SDPA; the registers and a PTX census of what
each forward step ran, and the tables."""
from __future__ import annotations

import contextlib

import torch

from ...kernels.triton_attention import (attention_backward, attention_forward, attention_forward_desc,
                                         attention_fwd_tuned, desc_config, last_forward_kernel, naive_attention,
                                         persist_config, pipe_config, registers)
from ...hardware import gpu_supports
from ...mode import DEVICE, ON_GPU, by_mode
from .sdpa import SDPA_BACKENDS, one_line, sdpa_with
from .tables import rate_label


@contextlib.contextmanager
def compiler_dumps_muted():
    """Within: what C++ code writes to the process's standard error (file descriptor 2) is dropped. A
    Triton compile that fails writes a page of MLIR there (a reproducer for Triton's developers), which
    a notebook would show; :func:`forward_ladder` reports the failure in one line instead."""
    import os
    import sys
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)




def check_steps(steps, small, d, dtype, g, causal=False, backward=False):
    """Run each of ``steps`` (``{name: function(q, k, v, do, alloc) -> tensors}``) once on inputs of ``small``
    (B, H, N) into poisoned outputs and compare with float64 autograd: ``({name: ok}, {name: one-line reason})``;
    a step whose compiler refuses it, or whose largest error exceeds 2e-3 (forward) or 2e-2 (gradients, which
    sum over N), is reported instead."""
    from ...checking import poisoned
    cq, ck, cv, cdo = (torch.randn(*small, d, device=DEVICE, dtype=dtype, generator=g) for _ in range(4))
    ins = [t.double().requires_grad_() for t in (cq, ck, cv)]
    ref = naive_attention(*ins, causal=causal)
    refs = torch.autograd.grad(ref, ins, cdo.double()) if backward else (ref.detach(),)
    tol = 2e-2 if backward else 2e-3
    ok, failed = {}, {}
    for name, fn in steps.items():
        try:
            with compiler_dumps_muted():
                got = fn(cq, ck, cv, cdo, poisoned)
            err = max((a.double() - r).abs().max().item() for a, r in zip(got, refs))
        except Exception as e:  # noqa: BLE001  a compiler that refuses a step: say why, go on
            failed[name] = f"{name}: did not compile or run here ({one_line(e)})"
            continue
        if not err <= tol:   # NaN (an unwritten or wrong element) fails too
            failed[name] = f"{name}: wrong result here (largest error {err:.1e} against float64)"
            continue
        ok[name] = True
    return ok, failed


def forward_ladder(shape, d, dtype=torch.float16, seed=0, causal=False):
    """The forward (``causal`` or not) a step at a time toward Hopper's way of feeding the tensor cores
    (:data:`LADDER`), on inputs of ``shape`` (B, H, N) and head dimension ``d``, timed beside SDPA's cuDNN
    and flash backends (``utils.bench_users``, the functions interleaved). Each step is first checked
    against float64 on a ragged length (N = 1000 on a GPU) into a poisoned output. Returns
    ``({name: UserTiming}, {name: one-line reason})``, the second for steps that did not compile, did not
    run or gave a wrong result here. Step 1 is the pointer kernel (autotuned); step 2 the descriptors with
    step 1's tile; step 3 with :func:`desc_config`'s; step 4 adds ``warp_specialize``; step 5 is the
    hand-pipelined loop with :func:`pipe_config`'s tile; step 6 step 3's tile on the persistent grid
    (:func:`persist_config`); step 7 the descriptor kernel's autotuner over :func:`desc_forward_configs`, among whose
    tiles are steps 3's and 5's (and step 6's at d = 64): the forward :func:`flash_attention` runs here.
    The registers (:data:`REGISTERS`) and an instruction census of the PTX (:data:`PTX_CENSUS`, GPU only) of
    the kernel each step ran are kept."""
    from ...user_timing import bench_users
    REGISTERS.clear()
    PTX_CENSUS.clear()
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q, k, v = (torch.randn(*shape, d, device=DEVICE, dtype=dtype, generator=g) for _ in range(3))
    causal = bool(causal)
    attention_forward(q, k, v, causal, descriptors=False)      # tunes step 1 at this size
    tuned = attention_fwd_tuned.best_config
    same = dict(tuned.kwargs, num_warps=tuned.num_warps, num_stages=tuned.num_stages)
    steps = {LADDER[0]: (attention_forward, dict(descriptors=False)),
             LADDER[1]: (attention_forward_desc, dict(cfg=same)),
             LADDER[2]: (attention_forward_desc, dict(cfg=desc_config(d))),
             LADDER[3]: (attention_forward_desc, dict(cfg=desc_config(d), warp_specialize=True)),
             LADDER[4]: (attention_forward_desc, dict(cfg=pipe_config(d), pipeline=True)),
             LADDER[5]: (attention_forward_desc, dict(cfg=persist_config(d))),
             LADDER[6]: (attention_forward_desc, dict(cfg="tuned"))}
    small = (1, 2, by_mode(gpu=1000, cpu=40))
    checks = {n: (lambda q_, k_, v_, do_, alloc, fwd=fwd, opts=opts: fwd(q_, k_, v_, causal, alloc=alloc, **opts)[:1])
              for n, (fwd, opts) in steps.items()}
    ok, failed = check_steps(checks, small, d, dtype, g, causal=causal)
    ran = {n: (lambda fwd=fwd, opts=opts: fwd(q, k, v, causal, **opts)[0])
           for n, (fwd, opts) in steps.items() if n in ok}
    libs = {n: (lambda f=sdpa_with(n): f(q, k, v, causal)) for n in ("SDPA cuDNN", "SDPA flash")
            if ON_GPU and gpu_supports(SDPA_BACKENDS[n][1])[0]}
    times = bench_users({**ran, **libs})
    for name, fn in ran.items():   # the compiled kernel each step ran at this size: its registers, its PTX
        fn()
        REGISTERS[name] = registers()
        if ON_GPU:
            PTX_CENSUS[name] = ptx_census(last_forward_kernel().asm["ptx"])
    return times, failed


REGISTERS = {}     # forward_ladder's step -> (registers per thread, spills) of its last run
PTX_CENSUS = {}    # forward_ladder's step -> ptx_census of the kernel it ran (GPU only)

# What ptx_census counts: (label, the PTX opcodes it counts, what they are).
PTX_OPS = (("wgmma", ("wgmma.mma_async",), "Hopper's asynchronous warp-group matmul"),
           ("wgmma waits", ("wgmma.wait_group",), "waits for wgmmas issued before"),
           ("TMA copies", ("cp.async.bulk.tensor",), "bulk tensor copies (tensor descriptors)"),
           ("cp.async", ("cp.async.cg", "cp.async.ca"), "per-thread asynchronous copies (pointer loads, pipelined)"),
           ("setmaxnreg", ("setmaxnreg",), "register reallocation between warp groups (warp specialisation)"),
           ("mbarrier waits", ("mbarrier.try_wait",), "waits on a shared-memory barrier (TMA arrivals, producers)"))


def ptx_census(ptx):
    """How many times each opcode family of :data:`PTX_OPS` appears in PTX text (static counts: an
    instruction in a loop counts once): ``{label: count}``.

    >>> c = ptx_census("  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 a;\\n  @%p1 cp.async.bulk.tensor.2d x;")
    >>> c["wgmma"], c["TMA copies"]
    (1, 1)
    """
    ops = []
    for line in ptx.splitlines():
        words = line.split()
        if words and words[0].startswith("@"):   # a predicated instruction: "@%p1 cp.async.bulk.tensor..."
            words = words[1:]
        if words:
            ops.append(words[0])
    return {label: sum(op.startswith(prefixes) for op in ops) for label, prefixes, _ in PTX_OPS}


def census_table(census, legend=True):
    """:data:`PTX_CENSUS` as a table: one row per step, one column per :data:`PTX_OPS` label; ``legend`` adds a
    line saying what each label counts (print it once where several tables follow each other)."""
    labels = [label for label, _, _ in PTX_OPS]
    width = max((len(n) for n in census), default=10) + 2
    lines = [f"{'PTX instructions (static count)':<{width}}" + "".join(f"{lab:>15}" for lab in labels)]
    for name, counts in census.items():
        lines.append(f"{name:<{width}}" + "".join(f"{counts[lab]:>15}" for lab in labels))
    if legend:
        lines.append("; ".join(f"{label}: {what}" for label, _, what in PTX_OPS))
    return "\n".join(lines)


def ladder_table(times, flops, baseline="SDPA cuDNN", phase="forward"):
    """:func:`forward_ladder`'s (or :func:`backward_ladder`'s) timings as a table: GPU time, time per step in a
    loop, CPU time per call, TFLOP/s, its % of :func:`rate_label`'s peak (on a GPU), ``baseline``'s time over
    each, for the GPU time and for the loop (where ``baseline`` ran), and on a GPU each forward step's registers
    per thread and spills (:data:`REGISTERS`)."""
    from ...user_timing import user_cells, user_header, user_ratios
    label, b = rate_label(), times.get(baseline)
    width = max(len(n) for n in times) + 2
    regs = ON_GPU and phase == "forward" and any(REGISTERS.get(n, (None,))[0] for n in times)
    lines = [f"{phase:<{width}}{user_header()}{'TFLOP/s':>9}" + (f"{'% peak':>8}" if label else "")
             + (f"{'× ' + baseline + ' (GPU, loop)':>28}" if b else "") + (f"{'regs, spills':>14}" if regs else "")]
    for name, t in times.items():
        rate = flops / t.median / 1e9
        r = REGISTERS.get(name, (None, None)) if name in LADDER else (None, None)
        lines.append(f"{name:<{width}}{user_cells(t)}{rate:>9.0f}" + (f"{100 * rate / label[1]:>7.0f}%" if label else "")
                     + (f"{user_ratios(t, b):>28}" if b else "")
                     + (f"{f'{r[0]}, {r[1]}' if r[0] is not None else '':>14}" if regs else ""))
    lines.append(f"(% peak: {label[2]})" if label else
                 "(CPU wall clock of the interpreter: these figures say nothing about a GPU)")
    return "\n".join(lines)


LADDER = ("1. pointer loads, autotuned", "2. tensor descriptors, step 1's tile",
          "3. tensor descriptors, desc_config's tile", "4. step 3 + warp specialisation",
          "5. descriptors + next scores before the softmax", "6. step 3 on a persistent grid, blocks in pairs",
          "7. descriptors, the autotuner's pick")
BACKWARD_LADDER = ("1. dK/dV and dQ kernels (7 matmuls)", "2. one kernel, dQ by atomic adds (5 matmuls)")


def distinct_results(fn, runs=5):
    """How many bit-for-bit different results ``runs`` calls of ``fn()`` (a tensor) give, compared where
    they lie (no copy to the host): 1 for a deterministic computation."""
    seen = []
    for _ in range(runs):
        r = fn()
        if not any(torch.equal(r, s) for s in seen):
            seen.append(r)
    return len(seen)


def backward_ladder(shape, d, causal=False, dtype=torch.float16, seed=0):
    """The backward's two ways to get dQ (:data:`BACKWARD_LADDER`) at ``shape`` (B, H, N) and head dimension
    ``d``: the two deterministic kernels, and one kernel summing dQ with atomic adds. Each is first checked
    against float64 autograd on a ragged length into poisoned outputs, then timed with ``utils.bench_users``
    beside SDPA's cuDNN and flash backends (their backward: ``torch.autograd.grad`` of one forward's output).
    Returns ``(times, failed, distinct)``: ``{name: UserTiming}``, ``{name: one-line reason}``, and for each
    of ours that ran the number of different dQ (bit for bit) in five backwards of the same inputs."""
    from ...user_timing import bench_users
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q, k, v, do = (torch.randn(*shape, d, device=DEVICE, dtype=dtype, generator=g) for _ in range(4))
    out, lse = attention_forward(q, k, v, causal)
    steps = {name: dict(deterministic=det) for name, det in zip(BACKWARD_LADDER, (True, False))}

    def checked(opts):
        def run(q_, k_, v_, do_, alloc):
            o_, l_ = attention_forward(q_, k_, v_, causal)
            return attention_backward(q_, k_, v_, o_, l_, do_, causal, alloc=alloc, **opts)
        return run
    ok, failed = check_steps({n: checked(o) for n, o in steps.items()}, (1, 2, by_mode(gpu=1000, cpu=40)),
                              d, dtype, g, causal=causal, backward=True)
    ran = {n: (lambda o=o: attention_backward(q, k, v, out, lse, do, causal, **o)[0]) for n, o in steps.items()
           if n in ok}
    libs = {}
    for name in ("SDPA cuDNN", "SDPA flash"):
        if ON_GPU and gpu_supports(SDPA_BACKENDS[name][1])[0]:
            qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
            o_lib = sdpa_with(name)(qg, kg, vg, causal)
            libs[name] = (lambda o_lib=o_lib, ins=(qg, kg, vg): torch.autograd.grad(o_lib, ins, do, retain_graph=True))
    times = bench_users({**ran, **libs})
    distinct = {n: distinct_results(fn) for n, fn in ran.items()}
    return times, failed, distinct
