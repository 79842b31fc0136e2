"""Reference solutions of notebook 16 (attention for inference) and the cheats its checks refuse."""

_COMBINE_LAUNCHER = '''

def combine(o_part, lse):
    R, S, D = o_part.shape
    out = utils.poisoned(R, D, device=o_part.device)
    combine_kernel[(R,)](o_part, lse, out, S, D=D, BLOCK_S=triton.next_power_of_2(S))
    return out
'''

_COMBINE_HEAD = '''
@triton.jit
def combine_kernel(o_part_ptr, lse_ptr, out_ptr, S, D: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, D)
    lse = tl.load(lse_ptr + row * S + s, mask=s < S, other=float("-inf"))
    o = tl.load(o_part_ptr + (row * S + s)[:, None] * D + dims[None, :], mask=(s < S)[:, None], other=0.0)
'''

def _course_combine_renamed() -> str:
    """The course's own combine kernel, its source copied under the exercise's name, with a launcher."""
    import inspect
    from gpu_course.kernels import triton_decode
    src = inspect.getsource(getattr(triton_decode.decode_combine_kernel, "fn", triton_decode.decode_combine_kernel))
    return src.replace("def decode_combine_kernel(", "def combine_kernel(") + \
        _COMBINE_LAUNCHER.replace("D=D, BLOCK_S", "HEAD_DIM=D, BLOCK_S")


_PAGED_LAUNCHER = '''

def paged_attention(q, k_pages, v_pages, table, lens):
    B, H, D = q.shape
    out = utils.poisoned(B, H, D, device=q.device)
    paged_kernel[(B, H)](q, k_pages, v_pages, table, lens, out, D ** -0.5, H, table.shape[1],
                         PAGE=k_pages.shape[1], D=D, BLOCK_N=k_pages.shape[1])
    return out
'''

# the paged kernel's body; {page} is how a block's physical page is found, {vmask} the mask of the value load
_PAGED = '''
@triton.jit
def paged_kernel(q_ptr, k_pages_ptr, v_pages_ptr, table_ptr, lens_ptr, o_ptr, scale, H, max_pages,
                 PAGE: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    b, h = tl.program_id(0), tl.program_id(1)
    dims = tl.arange(0, D)
    rows = tl.arange(0, BLOCK_N)
    L = tl.load(lens_ptr + b)
    q = tl.load(q_ptr + (b * H + h) * D + dims)
    m_i = tl.max(tl.full((BLOCK_N,), float("-inf"), tl.float32), 0)   # fp32 scalars, as the loop makes them
    l_i = tl.sum(tl.zeros((BLOCK_N,), tl.float32), 0)
    acc = tl.zeros((D,), tl.float32)
    for i in range(0, tl.cdiv(L, PAGE)):
        page = {page}
        ok = i * PAGE + rows < L
        offs = page * PAGE * H * D + rows[:, None] * H * D + h * D + dims[None, :]
        k = tl.load(k_pages_ptr + offs, mask=ok[:, None], other=0.0)
        v = tl.load(v_pages_ptr + offs, mask={vmask}, other=0.0)
        s = tl.where(ok, tl.sum(k * q[None, :], 1) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m_i = m_new
    tl.store(o_ptr + (b * H + h) * D + dims, acc / l_i)
'''

SOLUTIONS = {
    "ex16-1-answer": _COMBINE_HEAD + '''    m = tl.max(lse, 0)
    w = tl.exp(lse - m)
    tl.store(out_ptr + row * D + dims, tl.sum(w[:, None] * o, 0) / tl.sum(w, 0))
''' + _COMBINE_LAUNCHER,
    "ex16-2-answer": _PAGED.format(page="tl.load(table_ptr + b * max_pages + i)", vmask="ok[:, None]")
    + _PAGED_LAUNCHER,
    "ex16-3-answer": '''
def tokens_per_s(batch, layers, kv_heads, head_dim, context, itemsize, weight_bytes, copy_gbs):
    kv = 2 * layers * batch * kv_heads * context * head_dim * itemsize      # K and V of every layer and sequence
    return batch * copy_gbs * 1e9 / (kv + weight_bytes)                     # one token per sequence a step
''',
}

CHEATS = {
    "ex16-1-answer": {
        "the combine in torch": '''
def combine(o_part, lse):
    w = torch.softmax(lse, dim=-1)
    return (w[..., None] * o_part).sum(1)
''',
        "the course's own combine kernel": '''
def combine(o_part, lse):
    R, S, D = o_part.shape
    out = utils.poisoned(R, D, device=o_part.device)
    td.decode_combine_kernel[(R,)](o_part, lse, out, S, HEAD_DIM=D, BLOCK_S=triton.next_power_of_2(S))
    return out
''',
        "a copy of the course's combine kernel under the exercise's name": _course_combine_renamed(),
        "exp(lse) without the maximum (overflows)": _COMBINE_HEAD + '''    w = tl.exp(lse)
    tl.store(out_ptr + row * D + dims, tl.sum(w[:, None] * o, 0) / tl.sum(w, 0))
''' + _COMBINE_LAUNCHER,
        "the partials averaged, their weights ignored": _COMBINE_HEAD + '''    w = tl.where(lse > float("-inf"), 1.0, 0.0)
    tl.store(out_ptr + row * D + dims, tl.sum(w[:, None] * o, 0) / tl.sum(w, 0))
''' + _COMBINE_LAUNCHER,
    },
    "ex16-2-answer": {
        "the pages gathered in torch, then the course's contiguous kernel": '''
def paged_attention(q, k_pages, v_pages, table, lens):
    B, H, D = q.shape
    n = table.shape[1] * k_pages.shape[1]
    k = k_pages[table.clamp(min=0).long()].reshape(B, n, H, D).transpose(1, 2)
    v = v_pages[table.clamp(min=0).long()].reshape(B, n, H, D).transpose(1, 2)
    return td.decode_attention(q[:, :, None], k, v, lens, splits=1)[:, :, 0]
''',
        "the table ignored (sequence b's pages taken as b * max_pages + i)": _PAGED.format(
            page="b * max_pages + i", vmask="ok[:, None]") + _PAGED_LAUNCHER,
        "the course's key-block loop (td._decode_blocks) called from the kernel": '''
@triton.jit
def paged_kernel(q_ptr, k_pages_ptr, v_pages_ptr, table_ptr, lens_ptr, o_ptr, scale, H, max_pages,
                 PAGE: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    b, h = tl.program_id(0), tl.program_id(1)
    dims, rows = tl.arange(0, D), tl.arange(0, 16)
    L = tl.load(lens_ptr + b)
    q = tl.load(q_ptr + (b * H + h) * D + rows[:, None] * 0 + dims[None, :])   # the row, 16 times
    m_i = tl.full((16,), float("-inf"), tl.float32)
    l_i = tl.zeros((16,), tl.float32)
    acc = tl.zeros((16, D), tl.float32)
    last = tl.zeros((16,), tl.int32) + L - 1
    acc, m_i, l_i = td._decode_blocks(acc, m_i, l_i, q, k_pages_ptr + h * D, v_pages_ptr + h * D,
                                      table_ptr + b * max_pages, last, 0, L, scale * 1.4426950408889634,
                                      PAGE * H * D, H * D, PAGE * H * D, H * D, D, 16, PAGE, True, "ieee")
    tl.store(o_ptr + (b * H + h) * D + rows[:, None] * 0 + dims[None, :], acc / l_i[:, None],
             mask=rows[:, None] == 0)
''' + _PAGED_LAUNCHER,
        "the course's page look-up (td._page_and_row) called from the kernel": _PAGED.format(
            page="td._page_and_row(table_ptr + b * max_pages, i * PAGE, i * PAGE + rows, L, BLOCK_N, PAGE, False)[0]",
            vmask="ok[:, None]") + _PAGED_LAUNCHER,
        "values past the length read without a mask": _PAGED.format(
            page="tl.load(table_ptr + b * max_pages + i)", vmask="rows[:, None] < PAGE") + _PAGED_LAUNCHER,
    },
    "ex16-3-answer": {
        "the number for the first case": "tokens_per_s = lambda *a: 241.9",
        "the KV cache left out": '''
def tokens_per_s(batch, layers, kv_heads, head_dim, context, itemsize, weight_bytes, copy_gbs):
    return batch * copy_gbs * 1e9 / weight_bytes
''',
        "the weights read once per sequence": '''
def tokens_per_s(batch, layers, kv_heads, head_dim, context, itemsize, weight_bytes, copy_gbs):
    kv = 2 * layers * batch * kv_heads * context * head_dim * itemsize
    return batch * copy_gbs * 1e9 / (kv + batch * weight_bytes)
''',
    },
}

# right answers written otherwise than the solutions: each must be accepted
UNUSUAL = {
    "ex16-1-answer": {
        "the weights by exp2, log2(e) folded in": _COMBINE_HEAD + '''    m = tl.max(lse, 0)
    w = tl.exp2((lse - m) * 1.4426950408889634)
    tl.store(out_ptr + row * D + dims, tl.sum(w[:, None] * o, 0) / tl.sum(w, 0))
''' + _COMBINE_LAUNCHER,
        "one split at a time, with a running maximum (the online softmax)": '''
@triton.jit
def combine_kernel(o_part_ptr, lse_ptr, out_ptr, S, D: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(0)
    dims = tl.arange(0, D)
    m = tl.max(tl.full((BLOCK_S,), float("-inf"), tl.float32), 0)
    total = tl.sum(tl.zeros((BLOCK_S,), tl.float32), 0)
    acc = tl.zeros((D,), tl.float32)
    for s in range(0, S):
        lse = tl.load(lse_ptr + row * S + s)
        m_new = tl.maximum(m, lse)
        alpha = tl.where(m_new == float("-inf"), 1.0, tl.exp(m - m_new))   # nothing seen yet: nothing to rescale
        w = tl.where(lse == float("-inf"), 0.0, tl.exp(lse - m_new))      # an empty split weighs nothing
        acc = acc * alpha + w * tl.load(o_part_ptr + (row * S + s) * D + dims)
        total = total * alpha + w
        m = m_new
    tl.store(out_ptr + row * D + dims, acc / total)
''' + _COMBINE_LAUNCHER,
    },
    "ex16-2-answer": {
        "the softmax in base 2, log2(e) folded into the scale": _PAGED.format(
            page="tl.load(table_ptr + b * max_pages + i)", vmask="ok[:, None]").replace(
            "* scale, float", "* (scale * 1.4426950408889634), float").replace(
            "p = tl.exp(s - m_new)", "p = tl.exp2(s - m_new)").replace(
            "alpha = tl.exp(m_i - m_new)", "alpha = tl.exp2(m_i - m_new)") + _PAGED_LAUNCHER,
        "the page number widened to 64 bits before the offsets": _PAGED.format(
            page="tl.load(table_ptr + b * max_pages + i).to(tl.int64)", vmask="ok[:, None]") + _PAGED_LAUNCHER,
    },
    "ex16-3-answer": {
        "from the time of one step": '''
def tokens_per_s(batch, layers, kv_heads, head_dim, context, itemsize, weight_bytes, copy_gbs):
    bytes_per_step = weight_bytes + 2 * itemsize * head_dim * context * kv_heads * batch * layers
    step_s = bytes_per_step / (copy_gbs * 1e9)
    return batch / step_s
''',
    },
}
