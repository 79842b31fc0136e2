"""Reference solutions of notebook 15's exercises, and answers its checks must refuse."""

_KERNEL_HEAD = '''
@triton.jit
def int4_gemv_ex_kernel(x_ptr, w_ptr, s_ptr, out_ptr, N, K,
                        GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
'''

_LAUNCHER = '''

def int4_gemv_ex(x, packed, scales, BLOCK_N=16):
    N, K = packed.shape[0], x.shape[0]
    out = utils.poisoned(N, device=x.device)
    int4_gemv_ex_kernel[(utils.cdiv(N, BLOCK_N),)](x, packed, scales, out, N, K,
                                                   GROUP=128, BLOCK_N=BLOCK_N, BLOCK_K=128)
    return out
'''

# {lo} and {hi}: the nibbles' columns; {scale}: how the scale enters
_BODY = '''    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    j = tl.arange(0, BLOCK_K // 2)                     # byte j of the block: columns 2j and 2j + 1
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        b = tl.load(w_ptr + rows[:, None] * (K // 2) + (k0 // 2 + j)[None, :],
                    mask=(rows[:, None] < N) & (k0 + 2 * j[None, :] < K), other=0x88).to(tl.int32)
        lo = ((b & 0xF) - 8).to(tl.float32)
        hi = ((b >> 4) - 8).to(tl.float32)
        x_even = tl.load(x_ptr + k0 + 2 * j, mask=k0 + 2 * j < K, other=0.0)
        x_odd = tl.load(x_ptr + k0 + 2 * j + 1, mask=k0 + 2 * j + 1 < K, other=0.0)
        part = tl.sum(lo * x_{lo}[None, :] + hi * x_{hi}[None, :], axis=1)
        s = tl.load(s_ptr + (k0 // GROUP) * N + rows, mask=rows < N, other=0.0)
        acc += {scale}
    tl.store(out_ptr + rows, acc, mask=rows < N)
'''

SOLUTIONS = {
    "ex1-answer-15": _KERNEL_HEAD + _BODY.format(lo="even", hi="odd", scale="part * s") + _LAUNCHER,
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
def crossover(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):
    flop_s, byte_s = tflops * 1e12, gbs * 1e9
    weights = n * k * weight_bits / 8
    per_row = k * act_bytes + n * out_bytes                 # bytes each row of the batch adds
    return (weights / byte_s) / (2 * n * k / flop_s - per_row / byte_s)
''',
}

CHEATS = {
    "ex1-answer-15": {
        "W dequantised in torch, then a plain GEMV kernel": '''
@triton.jit
def int4_gemv_ex_kernel(x_ptr, w_ptr, s_ptr, out_ptr, N, K,
                        GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        wt = tl.load(w_ptr + rows[:, None] * K + (k0 + cols)[None, :],
                     mask=(rows[:, None] < N) & (k0 + cols[None, :] < K), other=0.0)
        acc += tl.sum(wt * tl.load(x_ptr + k0 + cols, mask=k0 + cols < K, other=0.0)[None, :], axis=1)
    tl.store(out_ptr + rows, acc, mask=rows < N)


def int4_gemv_ex(x, packed, scales, BLOCK_N=16):
    N, K = packed.shape[0], x.shape[0]
    w = Q.dequantize_int4_groups(packed, scales, dtype=torch.float32).to(x.device)
    out = utils.poisoned(N, device=x.device)
    int4_gemv_ex_kernel[(utils.cdiv(N, BLOCK_N),)](x, w, scales, out, N, K,
                                                   GROUP=128, BLOCK_N=BLOCK_N, BLOCK_K=128)
    return out
''',
        "the nibbles swapped": _KERNEL_HEAD + _BODY.format(lo="odd", hi="even", scale="part * s") + _LAUNCHER,
        "the scales left out": _KERNEL_HEAD + _BODY.format(lo="even", hi="odd", scale="part + 0.0 * s") + _LAUNCHER,
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
        "one FLOP per multiply-add": '''
def crossover(n, k, weight_bits, act_bytes, out_bytes, tflops, gbs):
    flop_s, byte_s = tflops * 1e12, gbs * 1e9
    return (n * k * weight_bits / 8 / byte_s) / (n * k / flop_s - (k * act_bytes + n * out_bytes) / byte_s)
''',
    },
}
