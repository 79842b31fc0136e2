"""Reference solutions of notebook 11 (FlashAttention in Triton) and the cheats its checks refuse."""

_WINDOW_SIGNATURE = '''
@triton.jit
def attention_window_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, W, scale,
                            D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
'''

_ALIBI_SIGNATURE = '''
@triton.jit
def attention_alibi_kernel(q_ptr, k_ptr, v_ptr, slopes_ptr, o_ptr, N, H, scale,
                           D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
'''

# attention_small_kernel's body, cut where the scores are masked: {mask} is replaced by each variant, {m} is the
# maximum the exponentials subtract ({safe} defines a finite one where needed)
_BODY = '''    pid_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * N * D
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
{before}    for start in range({lo}, {hi}, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
{mask}
        m_new = tl.maximum(m_i, tl.max(s, 1))
{safe}        p = tl.exp(s - {m}[:, None])
        alpha = tl.exp(m_i - {m})
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], acc / l_i[:, None], mask=rows[:, None] < N)
'''

_NO_MASK = '''        s = tl.where(cols[None, :] < N, s, float("-inf"))'''
_CAUSAL_MASK = '''        s = tl.where((cols[None, :] < N) & (cols[None, :] <= rows[:, None]), s, float("-inf"))'''
_WINDOW_MASK = ('''        ok = (cols[None, :] < N) & (cols[None, :] <= rows[:, None]) & (cols[None, :] > rows[:, None] - W)'''
                '''\n        s = tl.where(ok, s, float("-inf"))''')
# a row whose visited keys are all masked has m_new = -inf: exp(-inf - -inf) is NaN, so subtract 0 there
_SAFE = '''        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)\n'''
# the bonus: only the key blocks that hold some key of the block's windows
_WINDOW_LO = "tl.maximum(pid_m * BLOCK_M - W + 1, 0) // BLOCK_N * BLOCK_N"
_ALIBI = '''        s = s - slope * (rows[:, None] - cols[None, :]).to(tl.float32)
''' + _CAUSAL_MASK
# the bonus: no key block right of the diagonal is visited
_CAUSAL_HI = "tl.minimum(N, (pid_m + 1) * BLOCK_M)"
_SLOPE = "    slope = tl.load(slopes_ptr + bh % H)\n"


def _body(mask, hi="N", before="", lo="0", safe=False):
    return _BODY.format(mask=mask, hi=hi, before=before, lo=lo, safe=_SAFE if safe else "",
                        m="m_safe" if safe else "m_new")


_WINDOW_LAUNCHER = '''

def attention_window(q, k, v, W, BLOCK=16):
    B, H, N, D = q.shape
    out = utils.poisoned(B, H, N, D, device=q.device)
    attention_window_kernel[(utils.cdiv(N, BLOCK), B * H)](q, k, v, out, N, W, D ** -0.5,
                                                           D=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK)
    return out
'''

_ALIBI_LAUNCHER = '''

def attention_alibi(q, k, v, slopes, BLOCK=16):
    B, H, N, D = q.shape
    out = utils.poisoned(B, H, N, D, device=q.device)
    attention_alibi_kernel[(utils.cdiv(N, BLOCK), B * H)](q, k, v, slopes, out, N, H, D ** -0.5,
                                                          D=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK)
    return out
'''

_TILE_FLOPS = '''
def tile_flops(batch, heads, n, d, causal, block_m, block_n):
    visits = 0
    for i in range(-(-n // block_m)):                        # query blocks, the last one padded
        hi = min((i + 1) * block_m, n) if causal else n      # its keys end with its own rows (causal)
        visits += -(-hi // block_n)                          # key blocks starting below hi, each whole
    return batch * heads * visits * 2 * (2 * block_m * block_n * d)
'''

_DSLOPE_SIGNATURE = '''
@triton.jit
def attention_dslope_kernel(q_ptr, k_ptr, v_ptr, slopes_ptr, o_ptr, lse_ptr, do_ptr, dslope_ptr, N, H, scale,
                            D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
'''

# one program per (batch, head); {delta}, {bias}, {ds} and {weight} are replaced by the cheats
_DSLOPE_BODY = '''    bh = tl.program_id(0)
    base = bh * N * D
    slope = tl.load(slopes_ptr + bh % H)
    dims = tl.arange(0, D)
    total = tl.zeros((BLOCK_M,), tl.float32)
    for row0 in range(0, N, BLOCK_M):
        rows = row0 + tl.arange(0, BLOCK_M)
        offs = base + rows[:, None] * D + dims[None, :]
        q = tl.load(q_ptr + offs, mask=rows[:, None] < N, other=0.0)
        do = tl.load(do_ptr + offs, mask=rows[:, None] < N, other=0.0)
        lse = tl.load(lse_ptr + bh * N + rows, mask=rows < N, other=0.0)
{delta}
        for start in range(0, row0 + BLOCK_M, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
            v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
            dist = (rows[:, None] - cols[None, :]).to(tl.float32)
            s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale{bias}
            ok = (rows[:, None] < N) & (cols[None, :] < N) & (cols[None, :] <= rows[:, None])
            p = tl.where(ok, tl.exp(s - lse[:, None]), 0.0)
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
            ds = {ds}
            total += tl.sum(ds * {weight}, 1)
    tl.store(dslope_ptr + bh, tl.sum(total, 0))
'''
_DELTA = '''        o = tl.load(o_ptr + offs, mask=rows[:, None] < N, other=0.0)
        delta = tl.sum(do * o, 1)'''
_DS = "p * (dp - delta[:, None])"

_DSLOPE_LAUNCHER = '''

def attention_dslope(q, k, v, slopes, o, lse, do, BLOCK=16):
    B, H, N, D = q.shape
    dslope = utils.poisoned(B, H, device=q.device)
    attention_dslope_kernel[(B * H,)](q, k, v, slopes, o, lse, do, dslope, N, H, D ** -0.5,
                                      D=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK)
    return dslope
'''


def _dslope(delta=_DELTA, ds=_DS, weight="-dist", bias=" - slope * dist", launcher=_DSLOPE_LAUNCHER):
    return _DSLOPE_SIGNATURE + _DSLOPE_BODY.format(delta=delta, ds=ds, weight=weight, bias=bias) + launcher


SOLUTIONS = {
    "ex11-1-answer": _TILE_FLOPS,
    "ex11-2-answer": _WINDOW_SIGNATURE + _body(_WINDOW_MASK, lo=_WINDOW_LO, hi=_CAUSAL_HI, safe=True) + _WINDOW_LAUNCHER,
    "ex11-3-answer": _ALIBI_SIGNATURE + _body(_ALIBI, hi=_CAUSAL_HI, before=_SLOPE) + _ALIBI_LAUNCHER,
    "ex11-4-answer": _dslope(),
}

_WINDOW_REF = """
    n = q.shape[2]
    i = torch.arange(n, device=q.device)
    keep = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - W)
"""

CHEATS = {
    "ex11-1-answer": {
        "a number, not a function": "tile_flops = 4 * 4 * 16 * 4096**2 * 128 // 2",
        "the course's tile_flops": "tile_flops = lambda b, h, n, d, causal, bm, bn: ta.tile_flops(b, h, n, d, causal, bm, bn)",
        "the usual count": "tile_flops = lambda b, h, n, d, causal, bm, bn: ta.attention_flops(b, h, n, d, causal)",
        "causal, only the key blocks left of the diagonal (floor)": _TILE_FLOPS.replace("-(-hi // block_n)", "hi // block_n"),
        "causal, every key block visited": _TILE_FLOPS.replace("if causal else n", "if False else n"),
        "one FLOP per multiply-add": _TILE_FLOPS.replace("* 2 * (2 * block_m", "* 2 * (block_m"),
    },
    "ex11-2-answer": {
        "SDPA with the window as a boolean mask": "\ndef attention_window(q, k, v, W):" + _WINDOW_REF
        + "    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)\n",
        "the course's causal flash_attention (no window)":
            "attention_window = lambda q, k, v, W: flash_attention(q, k, v, causal=True)",
        "the causal mask alone, in the kernel": _WINDOW_SIGNATURE + _body(_CAUSAL_MASK, safe=True) + _WINDOW_LAUNCHER,
        "the window mask with no finite maximum (a row whose first blocks are all masked gives NaN)":
            _WINDOW_SIGNATURE + _body(_WINDOW_MASK) + _WINDOW_LAUNCHER,
        "a window one key too wide (j >= i - W)": _WINDOW_SIGNATURE
        + _body(_WINDOW_MASK.replace("> rows[:, None] - W", ">= rows[:, None] - W"), safe=True) + _WINDOW_LAUNCHER,
        "the causal kernel, the window applied afterwards in torch": _WINDOW_SIGNATURE + _body(_CAUSAL_MASK, safe=True)
        + _WINDOW_LAUNCHER.replace("    return out\n", "    return out.copy_(torch.softmax((q @ k.transpose(-2, -1) * D ** -0.5)"
                                   ".masked_fill(~keep, float('-inf')), -1) @ v)\n").replace(
            "    B, H, N, D = q.shape\n", "    B, H, N, D = q.shape" + _WINDOW_REF),
        "masked scores set to 0 instead of -inf": _WINDOW_SIGNATURE
        + _body(_WINDOW_MASK.replace('float("-inf")', "0.0"), safe=True) + _WINDOW_LAUNCHER,
    },
    "ex11-3-answer": {
        "SDPA with the bias as a mask": '''
def attention_alibi(q, k, v, slopes):
    n = q.shape[2]
    i = torch.arange(n, device=q.device)
    bias = -slopes[:, None, None] * (i[:, None] - i[None, :])
    bias = bias.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
''',
        "an N x N bias built in torch and added in the kernel": _ALIBI_SIGNATURE
        + _body(_CAUSAL_MASK.replace("        s = tl.where", '''        s = s + tl.load(slopes_ptr + (bh % H) * N * N + rows[:, None] * N + cols[None, :],
                        mask=(rows[:, None] < N) & (cols[None, :] < N), other=0.0)
        s = tl.where''')) + _ALIBI_LAUNCHER.replace("(q, k, v, slopes, out,", '''(q, k, v, -slopes[:, None, None] * (
        torch.arange(N, device=q.device)[:, None] - torch.arange(N, device=q.device)[None, :]).contiguous(), out,'''),
        "the causal kernel without the bias": _ALIBI_SIGNATURE + _body(_CAUSAL_MASK) + _ALIBI_LAUNCHER,
        "the bias with the wrong sign": _ALIBI_SIGNATURE + _body(_ALIBI.replace("s = s - slope", "s = s + slope"),
                                                                 before=_SLOPE) + _ALIBI_LAUNCHER,
    },
    "ex11-4-answer": {
        "torch autograd": '''
def attention_dslope(q, k, v, slopes, o, lse, do):
    sl = slopes.expand(q.shape[0], -1).clone().requires_grad_()
    n = q.shape[2]
    i = torch.arange(n, device=q.device)
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5 - sl[..., None, None] * (i[:, None] - i[None, :])
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.autograd.grad(torch.softmax(s, -1) @ v, sl, do)[0]
''',
        "delta computed in torch and handed over in O's place": _dslope(
            delta="        delta = tl.load(o_ptr + bh * N + rows, mask=rows < N, other=0.0)",
            launcher=_DSLOPE_LAUNCHER.replace("](q, k, v, slopes, o, lse,",
                                              "](q, k, v, slopes, (do * o).sum(-1).contiguous(), lse,")),
        "delta left out (dS = P dP)": _dslope(ds="p * dp"),
        "P without the bias (exp(scale q k - LSE))": _dslope(bias=""),
        "the slope's derivative with the wrong sign (+(i - j))": _dslope(weight="dist"),
        "dS summed without the derivative of the bias": _dslope(weight="1.0"),
    },
}


# exercise 5: the dQ kernel of causal attention, computing its rows' delta itself
_DQ_SIGNATURE = '''
@triton.jit
def attention_dq_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, do_ptr, dq_ptr, N, scale,
                        D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
'''

# {delta}, {hi}, {ok}, {p}, {ds} and {scale} are replaced by the cheats
_DQ_BODY = '''    pid_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * N * D
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    offs = base + rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offs, mask=rows[:, None] < N, other=0.0)
    do = tl.load(do_ptr + offs, mask=rows[:, None] < N, other=0.0)
    lse = tl.load(lse_ptr + bh * N + rows, mask=rows < N, other=0.0)
{delta}
    dq = tl.zeros((BLOCK_M, D), tl.float32)
    for start in range(0, {hi}, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        ok = {ok}
        p = tl.where(ok, {p}, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")
        dq += tl.dot({ds}, k, input_precision="ieee")
    tl.store(dq_ptr + offs, dq{scale}, mask=rows[:, None] < N)
'''
_DQ_DELTA = '''    o = tl.load(o_ptr + offs, mask=rows[:, None] < N, other=0.0)
    delta = tl.sum(do * o, 1)'''
_DQ_OK = "(cols[None, :] < N) & (cols[None, :] <= rows[:, None])"

_DQ_LAUNCHER = '''

def attention_dq(q, k, v, o, lse, do, BLOCK=16):
    B, H, N, D = q.shape
    dq = utils.poisoned(B, H, N, D, device=q.device)
    attention_dq_kernel[(utils.cdiv(N, BLOCK), B * H)](q, k, v, o, lse, do, dq, N, D ** -0.5,
                                                       D=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK)
    return dq
'''


def _dq(delta=_DQ_DELTA, hi="tl.minimum(N, (pid_m + 1) * BLOCK_M)", ok=_DQ_OK, p="tl.exp(s - lse[:, None])",
        ds="p * (dp - delta[:, None])", scale=" * scale", launcher=_DQ_LAUNCHER):
    return _DQ_SIGNATURE + _DQ_BODY.format(delta=delta, hi=hi, ok=ok, p=p, ds=ds, scale=scale) + launcher


SOLUTIONS["ex11-5-answer"] = _dq()
CHEATS["ex11-5-answer"] = {
    "torch autograd": '''
def attention_dq(q, k, v, o, lse, do):
    q64 = q.double().requires_grad_()
    i = torch.arange(q.shape[2], device=q.device)
    s = (q64 @ k.double().transpose(-2, -1) * q.shape[-1] ** -0.5).masked_fill(i[None, :] > i[:, None], float("-inf"))
    return torch.autograd.grad(torch.softmax(s, -1) @ v.double(), q64, do.double())[0].float()
''',
    "the course's backward (its own delta kernel, then its dQ kernel)":
        "attention_dq = lambda q, k, v, o, lse, do: ta.attention_backward(q, k, v, o, lse, do, True, cfg=SMALL_BWD)[0]",
    "delta computed in torch and handed over in O's place": _dq(
        delta="    delta = tl.load(o_ptr + bh * N + rows, mask=rows < N, other=0.0)",
        launcher=_DQ_LAUNCHER.replace("](q, k, v, o, lse,", "](q, k, v, (do * o).sum(-1).contiguous(), lse,")),
    "delta left out (dS = P dP)": _dq(ds="p * dp"),
    "delta from each key block's own P and dP": _dq(ds="p * (dp - tl.sum(p * dp, 1)[:, None])"),
    "P in base 2, as section 4's loop, with the natural-log LSE": _dq(p="tl.exp2(s * 1.4426950408889634 - lse[:, None])"),
    "no causal mask (every key block, keys past N masked only)": _dq(hi="N", ok="cols[None, :] < N"),
    "dQ without the final scale": _dq(scale=""),
}

# Refused in cpu mode only: the interpreter follows loaded data into tl.dot's operands; on a GPU the compiled kernel
# holds a dot either way (the Q·Kᵀ one).
_PV = 'tl.dot(p, v, input_precision="ieee")'
_EYE_V = ('tl.dot(tl.where(tl.arange(0, BLOCK_N)[:, None] == tl.arange(0, BLOCK_N)[None, :], 1.0, 0.0), v, '
          'input_precision="ieee")')
assert _PV in SOLUTIONS["ex11-2-answer"] and _PV in SOLUTIONS["ex11-3-answer"]
CPU_CHEATS = {
    "ex11-2-answer": {
        "Q·Kᵀ by tl.dot, P·V by a broadcast sum": SOLUTIONS["ex11-2-answer"].replace(
            _PV, "tl.sum(p[:, :, None] * v[None, :, :], 1)"),
        "V moved through tl.dot with an identity, P·V by a broadcast sum": SOLUTIONS["ex11-2-answer"].replace(
            _PV, f"tl.sum(p[:, :, None] * {_EYE_V}[None, :, :], 1)"),
    },
    "ex11-3-answer": {
        "Q·Kᵀ by tl.dot, P·V by a broadcast sum": SOLUTIONS["ex11-3-answer"].replace(
            _PV, "tl.sum(p[:, :, None] * v[None, :, :], 1)"),
    },
}

# right answers written otherwise than the solutions: each must be accepted
UNUSUAL = {
    "ex11-1-answer": {
        "every pair of blocks counted, causal ones kept if the key block starts below the query block's end": '''
def tile_flops(batch, heads, n, d, causal, block_m, block_n):
    pairs = 0
    for i in range(0, n, block_m):
        for j in range(0, n, block_n):
            pairs += (not causal) or j < min(i + block_m, n)
    return 4 * batch * heads * pairs * block_m * block_n * d
''',
    },
    "ex11-2-answer": {
        "every key block visited, the window left to the mask": _WINDOW_SIGNATURE + _body(_WINDOW_MASK, safe=True)
        + _WINDOW_LAUNCHER,
        "blocks of 32": SOLUTIONS["ex11-2-answer"].replace("BLOCK=16", "BLOCK=32"),
    },
    "ex11-3-answer": {
        "every key block visited, the causal mask doing the rest": _ALIBI_SIGNATURE + _body(_ALIBI, before=_SLOPE)
        + _ALIBI_LAUNCHER,
        "the bias as slope times (key - query)": SOLUTIONS["ex11-3-answer"].replace(
            "s = s - slope * (rows[:, None] - cols[None, :]).to(tl.float32)",
            "s = s + slope * (cols[None, :] - rows[:, None]).to(tl.float32)"),
    },
    "ex11-4-answer": {
        "the distance's sign applied once, to the total": _dslope(weight="dist").replace(
            "tl.store(dslope_ptr + bh, tl.sum(total, 0))", "tl.store(dslope_ptr + bh, -tl.sum(total, 0))"),
        "blocks of 32": _dslope().replace("BLOCK=16", "BLOCK=32"),
    },
    "ex11-5-answer": {
        "every key block visited, the causal mask doing the rest": _dq(hi="N"),
        "the scale folded into K's product instead of dQ's end": _dq(
            ds="p * (dp - delta[:, None]) * scale", scale=""),
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer


def _one_program_does_every_block(solution: str) -> str:
    """``solution`` (a kernel of _BODY's shape, then its launcher) rewritten so that program 0 of each (batch,
    head) computes every block of query rows, and the other programs re-store one element of theirs."""
    head, rest = solution.split("    pid_m, bh = tl.program_id(0), tl.program_id(1)\n", 1)
    body, launcher = rest.split("\n\n\ndef ", 1)
    looped = "\n".join("        " + line if line else line for line in body.splitlines())
    return (head + "    bh = tl.program_id(1)\n    if tl.program_id(0) == 0:\n"
            "        for pid_m in range(0, tl.num_programs(0)):\n" + looped + "\n    else:\n"
            "        first = bh * N * D + tl.program_id(0) * BLOCK_M * D\n"
            "        tl.store(o_ptr + first, tl.load(o_ptr + first))\n\n\ndef " + launcher)


# cpu mode only: the interpreter counts what each program loads and stores; on a GPU the other programs' re-stores
# race with program 0's stores, and the compiled kernel cannot show which program did the work
CPU_CHEATS["ex11-2-answer"]["program 0 of each head computes every block of rows, the others re-store one element"] = \
    _one_program_does_every_block(SOLUTIONS["ex11-2-answer"])
