"""Reference solutions of notebook 15's exercises, and answers its checks must refuse."""

_KERNEL_HEAD = '''
@triton.jit
def q4_0_gemv_kernel(x_ptr, qs_ptr, d_ptr, out_ptr, N, K, BLOCK_N: tl.constexpr):
'''

_LAUNCHER = '''

def q4_0_gemv(x, qs, d, BLOCK_N=16):
    N, K = qs.shape[0], x.shape[0]
    out = utils.poisoned(N, device=x.device)
    q4_0_gemv_kernel[(utils.cdiv(N, BLOCK_N),)](x, qs, d, out, N, K, BLOCK_N=BLOCK_N)
    return out
'''

# {lo} and {hi}: the x vector each nibble multiplies; {scale}: how the block's scale enters
_BODY = '''    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    j = tl.arange(0, 16)                                  # byte j of a block: its columns j and j + 16
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, 32):                            # one block of 32 columns a step
        b = tl.load(qs_ptr + rows[:, None] * (K // 2) + (k0 // 2 + j)[None, :],
                    mask=rows[:, None] < N, other=0x88).to(tl.int32)
        lo = ((b & 0xF) - 8).to(tl.float32)
        hi = ((b >> 4) - 8).to(tl.float32)
        x_first = tl.load(x_ptr + k0 + j)                 # the block's columns 0-15
        x_second = tl.load(x_ptr + k0 + 16 + j)           # and 16-31
        part = tl.sum(lo * x_{lo}[None, :] + hi * x_{hi}[None, :], axis=1)
        d = tl.load(d_ptr + rows * (K // 32) + k0 // 32, mask=rows < N, other=0.0).to(tl.float32)
        acc += {scale}
    tl.store(out_ptr + rows, acc, mask=rows < N)
'''

# section 4's interleaved pairing (columns 2j and 2j + 1) applied to Q4_0's bytes
_INTERLEAVED = '''    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    j = tl.arange(0, 16)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, 32):
        b = tl.load(qs_ptr + rows[:, None] * (K // 2) + (k0 // 2 + j)[None, :],
                    mask=rows[:, None] < N, other=0x88).to(tl.int32)
        lo = ((b & 0xF) - 8).to(tl.float32)
        hi = ((b >> 4) - 8).to(tl.float32)
        part = tl.sum(lo * tl.load(x_ptr + k0 + 2 * j)[None, :] + hi * tl.load(x_ptr + k0 + 2 * j + 1)[None, :], axis=1)
        d = tl.load(d_ptr + rows * (K // 32) + k0 // 32, mask=rows < N, other=0.0).to(tl.float32)
        acc += part * d
    tl.store(out_ptr + rows, acc, mask=rows < N)
'''

SOLUTIONS = {
    "ex1-answer-15": _KERNEL_HEAD + _BODY.format(lo="first", hi="second", scale="part * d") + _LAUNCHER,
    "ex2-answer-15": '''
def choose_scales(x, w, fmt, budget):
    ref = x.double() @ w.double().T
    for name, (block_x, block_w, _) in E.GRANULARITIES.items():
        y = Q.roundtrip(x, fmt, block_x) @ Q.roundtrip(w, fmt, block_w).T
        worst = ((y - ref).norm(dim=1) / ref.norm(dim=1)).max().item()
        if worst <= budget:
            return name
    return None
''',
    "ex3-answer-15": '''
import math


def crossover(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):
    flop_s, byte_s = tflops * 1e12, gbs * 1e9
    weights = n * k * weight_bits / 8
    per_row = k * act_bytes + n * out_bytes                 # bytes each row of the batch adds
    gain = 2 * n * k / flop_s - per_row / byte_s            # what each row adds to FLOP time over byte time
    return (weights / byte_s) / gain if gain > 0 else math.inf
''',
}

CHEATS = {
    "ex1-answer-15": {
        "W dequantised in torch, then a plain GEMV kernel": '''
@triton.jit
def q4_0_gemv_kernel(x_ptr, qs_ptr, d_ptr, out_ptr, N, K, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, 32)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, 32):
        wt = tl.load(qs_ptr + rows[:, None] * K + (k0 + cols)[None, :], mask=rows[:, None] < N, other=0.0)
        acc += tl.sum(wt * tl.load(x_ptr + k0 + cols)[None, :], axis=1)
    tl.store(out_ptr + rows, acc, mask=rows < N)


def q4_0_gemv(x, qs, d, BLOCK_N=16):
    N, K = qs.shape[0], x.shape[0]
    w = Q.dequantize_q4_0(qs, d, dtype=torch.float32).to(x.device)
    out = utils.poisoned(N, device=x.device)
    q4_0_gemv_kernel[(utils.cdiv(N, BLOCK_N),)](x, w, d, out, N, K, BLOCK_N=BLOCK_N)
    return out
''',
        "section 4's interleaved columns": _KERNEL_HEAD + _INTERLEAVED + _LAUNCHER,
        "the nibbles swapped": _KERNEL_HEAD + _BODY.format(lo="second", hi="first", scale="part * d") + _LAUNCHER,
        "the scales left out": _KERNEL_HEAD + _BODY.format(lo="first", hi="second", scale="part + 0.0 * d") + _LAUNCHER,
    },
    "ex2-answer-15": {
        "always the finest tiles": '''
def choose_scales(x, w, fmt, budget):
    return "1x128 / 128x128"
''',
        "the notebook's own function": "choose_scales = lambda x, w, fmt, budget: E.cheapest_within(x, w, fmt, budget)",
        "the error of the activations alone": '''
def choose_scales(x, w, fmt, budget):
    for name, (block_x, _, _) in E.GRANULARITIES.items():
        err = ((Q.roundtrip(x, fmt, block_x) - x.double()).norm(dim=1) / x.double().norm(dim=1)).max().item()
        if err <= budget:
            return name
    return None
''',
    },
    "ex3-answer-15": {
        "the weights' bytes only": '''
def crossover(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):
    return (n * k * weight_bits / 8 / (gbs * 1e9)) / (2 * n * k / (tflops * 1e12))
''',
        "the formula alone: a negative batch where the layer never turns compute-bound": '''
def crossover(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):
    flop_s, byte_s = tflops * 1e12, gbs * 1e9
    return (n * k * weight_bits / 8 / byte_s) / (2 * n * k / flop_s - (k * act_bytes + n * out_bytes) / byte_s)
''',
        "one FLOP per multiply-add": '''
def crossover(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):
    flop_s, byte_s = tflops * 1e12, gbs * 1e9
    return (n * k * weight_bits / 8 / byte_s) / (n * k / flop_s - (k * act_bytes + n * out_bytes) / byte_s)
''',
    },
}

# right answers written otherwise than the solutions: each must be accepted
UNUSUAL = {
    "ex1-answer-15": {
        "the scale applied to each nibble before the sum": _KERNEL_HEAD + _BODY.format(
            lo="first", hi="second", scale="part").replace(
            "        part = tl.sum(lo * x_first[None, :] + hi * x_second[None, :], axis=1)\n"
            "        d = tl.load(d_ptr + rows * (K // 32) + k0 // 32, mask=rows < N, other=0.0).to(tl.float32)\n",
            "        d = tl.load(d_ptr + rows * (K // 32) + k0 // 32, mask=rows < N, other=0.0).to(tl.float32)\n"
            "        part = tl.sum((lo * x_first[None, :] + hi * x_second[None, :]) * d[:, None], axis=1)\n")
        + _LAUNCHER,
        "rows in blocks of 64": _KERNEL_HEAD + _BODY.format(lo="first", hi="second", scale="part * d")
        + _LAUNCHER.replace("BLOCK_N=16):", "BLOCK_N=64):"),
    },
    "ex3-answer-15": {
        "found by bisection on the batch, where the time for the FLOPs meets the time for the bytes": '''
import math


def crossover(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):
    def compute_bound(b):   # at batch b, do the FLOPs take longer than the bytes?
        nbytes = n * k * weight_bits / 8 + b * (k * act_bytes + n * out_bytes)
        return 2 * n * k * b / (tflops * 1e12) >= nbytes / (gbs * 1e9)
    if 2 * n * k / (tflops * 1e12) <= (k * act_bytes + n * out_bytes) / (gbs * 1e9):
        return math.inf   # a row adds as much time for its bytes as for its FLOPs: never compute-bound
    lo, hi = 0.0, 1.0
    while not compute_bound(hi):
        lo, hi = hi, 2 * hi
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return (lo + hi) / 2
''',
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer
