"""Reference solutions of notebook 11 (FlashAttention in Triton) and the cheats its checks refuse."""

_CAUSAL_SIGNATURE = '''
@triton.jit
def attention_causal_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, scale,
                            D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
'''

_ALIBI_SIGNATURE = '''
@triton.jit
def attention_alibi_kernel(q_ptr, k_ptr, v_ptr, slopes_ptr, o_ptr, N, H, scale,
                           D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
'''

# attention_small_kernel's body, cut where the scores are masked: {mask} is replaced by each variant
_BODY = '''    pid_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * N * D
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
{before}    for start in range(0, {hi}, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
{mask}
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], acc / l_i[:, None], mask=rows[:, None] < N)
'''

_NO_MASK = '''        s = tl.where(cols[None, :] < N, s, float("-inf"))'''
_CAUSAL_MASK = '''        s = tl.where((cols[None, :] < N) & (cols[None, :] <= rows[:, None]), s, float("-inf"))'''
_ALIBI = '''        s = s - slope * (rows[:, None] - cols[None, :]).to(tl.float32)
''' + _CAUSAL_MASK
# the bonus: no key block right of the diagonal is visited
_CAUSAL_HI = "tl.minimum(N, (pid_m + 1) * BLOCK_M)"
_SLOPE = "    slope = tl.load(slopes_ptr + bh % H)\n"


def _body(mask, hi="N", before=""):
    return _BODY.format(mask=mask, hi=hi, before=before)


_CAUSAL_LAUNCHER = '''

def attention_causal(q, k, v, BLOCK=16):
    B, H, N, D = q.shape
    out = utils.poisoned(B, H, N, D, device=q.device)
    attention_causal_kernel[(utils.cdiv(N, BLOCK), B * H)](q, k, v, out, N, D ** -0.5, D=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK)
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

_DQ_SIGNATURE = '''
@triton.jit
def attention_dq_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, do_ptr, dq_ptr, N, scale,
                        D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
'''

# the dQ kernel's body; {delta} and {ds} are replaced by the cheats
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
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        p = tl.where(cols[None, :] < N, tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")
        dq += tl.dot({ds}, k, input_precision="ieee")
    tl.store(dq_ptr + offs, dq * scale, mask=rows[:, None] < N)
'''
_DELTA = """    o = tl.load(o_ptr + offs, mask=rows[:, None] < N, other=0.0)
    delta = tl.sum(do * o, 1)"""
_DS = "p * (dp - delta[:, None])"

_DQ_LAUNCHER = '''

def attention_dq(q, k, v, o, lse, do, BLOCK=16):
    B, H, N, D = q.shape
    dq = utils.poisoned(B, H, N, D, device=q.device)
    attention_dq_kernel[(utils.cdiv(N, BLOCK), B * H)](q, k, v, o, lse, do, dq, N, D ** -0.5,
                                                       D=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK)
    return dq
'''


def _dq(delta=_DELTA, ds=_DS, launcher=_DQ_LAUNCHER):
    return _DQ_SIGNATURE + _DQ_BODY.format(delta=delta, ds=ds) + launcher


SOLUTIONS = {
    "ex11-1-answer": _TILE_FLOPS,
    "ex11-2-answer": _CAUSAL_SIGNATURE + _body(_CAUSAL_MASK, hi=_CAUSAL_HI) + _CAUSAL_LAUNCHER,
    "ex11-3-answer": _ALIBI_SIGNATURE + _body(_ALIBI, hi=_CAUSAL_HI, before=_SLOPE) + _ALIBI_LAUNCHER,
    "ex11-4-answer": _dq(),
}

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
        "SDPA": "attention_causal = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "the course's flash_attention": "attention_causal = lambda q, k, v: flash_attention(q, k, v, causal=True)",
        "the course's kernel launched directly": '''
def attention_causal(q, k, v):
    out, lse = ta.attention_forward(q, k, v, causal=True, alloc=utils.poisoned)
    return out
''',
        "the non-causal kernel, the mask applied afterwards in torch": _CAUSAL_SIGNATURE + _body(_NO_MASK)
        + _CAUSAL_LAUNCHER.replace("    return out\n",
                                   "    return out.copy_(naive_attention(q, k, v, causal=True))\n"),
        "torch's causal result handed to a kernel that copies it": _CAUSAL_SIGNATURE + '''    pid_m, bh = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    offs = bh * N * D + rows[:, None] * D + dims[None, :]
    tl.store(o_ptr + offs, tl.load(v_ptr + offs, mask=rows[:, None] < N) + 0 * tl.sum(tl.dot(tl.load(
        q_ptr + offs, mask=rows[:, None] < N, other=0.0), tl.trans(tl.load(k_ptr + offs, mask=rows[:, None] < N,
        other=0.0))), 1)[:, None], mask=rows[:, None] < N)
''' + _CAUSAL_LAUNCHER.replace("(q, k, v, out, N,", "(q, k, naive_attention(q, k, v, causal=True), out, N,"),
        "masked scores set to 0 instead of -inf": _CAUSAL_SIGNATURE
        + _body(_CAUSAL_MASK.replace('float("-inf")', "0.0")) + _CAUSAL_LAUNCHER,
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
def attention_dq(q, k, v, o, lse, do):
    q = q.clone().requires_grad_()
    return torch.autograd.grad(naive_attention(q, k, v), q, do)[0]
''',
        "the course's backward kernels": '''
def attention_dq(q, k, v, o, lse, do):
    return ta.attention_backward(q, k, v, o, lse, do, False, cfg=SMALL_BWD)[0]
''',
        "delta computed in torch and handed over in O's place": _dq(
            delta="    delta = tl.load(o_ptr + bh * N + rows, mask=rows < N, other=0.0)",
            launcher=_DQ_LAUNCHER.replace("](q, k, v, o, lse,", "](q, k, v, (do * o).sum(-1).contiguous(), lse,")),
        "delta left out (dS = P dP)": _dq(ds="p * dp"),
        "P without the LSE (exp(S) unnormalised)": _dq().replace("tl.exp(s - lse[:, None])", "tl.exp(s)"),
        "the scale forgotten at the end": _dq().replace("dq * scale, mask", "dq, mask"),
    },
}
