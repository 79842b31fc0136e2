"""Reference solutions of notebook 06 (Triton basics) and the cheats its checks refuse."""

_ADD_RELU_LAUNCHER = '''

def add_relu(x, b, BLOCK=1024):
    assert x.is_contiguous() and b.shape == (x.shape[-1],), "x contiguous, b one value per column"
    out = utils.poisoned(x.shape, device=x.device)
    n, w = x.numel(), x.shape[-1]
    add_relu_kernel[(utils.cdiv(n, BLOCK),)](x, b, out, n, w, BLOCK=BLOCK)
    return out
'''

_ADD_RELU_BIAS_AT = '''
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(b_ptr + {index}, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask) + b, 0.0), mask=mask)
'''

_ROW_MAX_LAUNCHER = '''

def row_max(x):
    h, w = x.shape
    assert x.stride(1) == 1, "columns must be contiguous"
    out = utils.poisoned(h, device=x.device)
    row_max_kernel[(h,)](x, out, x.stride(0), w, BLOCK_W=triton.next_power_of_2(w))
    return out
'''

_LAYER_NORM_HEAD = '''
@triton.jit
def layer_norm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, x_row_stride, out_row_stride, w, eps,
                      BLOCK_W: tl.constexpr):'''

_LAYER_NORM_LAUNCHER = '''

def layer_norm(x, weight, bias, eps=1e-5):
    h, w = x.shape
    assert x.stride(1) == 1, "columns must be contiguous"
    out = utils.poisoned(h, w, device=x.device)
    BLOCK_W = triton.next_power_of_2(w)
    layer_norm_kernel[(h,)](x, weight, bias, out, x.stride(0), out.stride(0), w, eps,
                            BLOCK_W=BLOCK_W, num_warps=num_warps_for(BLOCK_W))
    return out
'''

_MAX_KERNEL = '''
@triton.jit
def max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))  # -inf never wins the max
    tl.store(out_ptr + tl.program_id(0), tl.max(x, axis=0))
'''

_MAX_TWO_PASS = '''

def max_two_pass(x, BLOCK=1024):
    n = x.numel()
    m = utils.cdiv(n, BLOCK)
    partial = utils.poisoned(m, device=x.device)
    out = utils.poisoned(1, device=x.device)
    max_kernel[(m,)](x, partial, n, BLOCK=BLOCK)                         # pass 1: one max per block
    max_kernel[(1,)](partial, out, m, BLOCK=triton.next_power_of_2(m))  # pass 2: one program
    return out
'''

_ROW_MAX_LOOP = '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    best = tl.full((BLOCK_W,), -float("inf"), tl.float32)  # a running block of maxima
    for start in range(0, w, BLOCK_W):                     # the row, one block of columns at a time
        c = start + tl.arange(0, BLOCK_W)
        x = tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf"))  # -inf never wins
        best = tl.maximum(best, x)
    tl.store(out_ptr + r, tl.max(best, axis=0))
'''

SOLUTIONS = {
    "ex06-1-answer": '''
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % w, mask=mask)  # the column of each element picks its bias
    tl.store(out_ptr + offs, tl.maximum(x + b, 0.0), mask=mask)
''' + _ADD_RELU_LAUNCHER,
    "ex06-2-answer": _ROW_MAX_LOOP,
    "ex06-3-answer": _LAYER_NORM_HEAD + '''
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    mask = c < w
    x = tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / w
    xc = tl.where(mask, x - mean, 0.0)  # the masked-off lanes would add mean**2 each to the variance
    var = tl.sum(xc * xc, axis=0) / w
    weight = tl.load(weight_ptr + c, mask=mask)
    bias = tl.load(bias_ptr + c, mask=mask)
    tl.store(out_ptr + r * out_row_stride + c, xc / tl.sqrt(var + eps) * weight + bias, mask=mask)
''' + _LAYER_NORM_LAUNCHER,
    "ex06-4-answer": _MAX_KERNEL + _MAX_TWO_PASS,
}

CHEATS = {
    "ex06-1-answer": {
        "torch's result in out before a kernel that never stores": """
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)


def add_relu(x, b, BLOCK=1024):
    out = torch.relu(x + b)
    add_relu_kernel[(utils.cdiv(x.numel(), BLOCK),)](x, b, out, x.numel(), x.shape[-1], BLOCK=BLOCK)
    return out
""",
        "a torch one-liner": "add_relu = lambda x, b: torch.relu(x + b)",
        "torch's result, copied by a kernel": """
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def add_relu(x, b, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    done = torch.relu(x + b)
    add_relu_kernel[(utils.cdiv(x.numel(), BLOCK),)](done, b, out, x.numel(), x.shape[-1], BLOCK=BLOCK)
    return out
""",
        "the bias expanded to x's shape by torch, then a flat add of two tensors of one shape": """
@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), 0.0),
             mask=mask)


def add_relu(x, b, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    y = b.expand_as(x).contiguous()   # torch does the broadcast: h x w floats written, then read again
    add_relu_kernel[(utils.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out
""",
        "the bias of the element's row, not of its column": _ADD_RELU_BIAS_AT.format(index="offs // w")
                                                            + _ADD_RELU_LAUNCHER,
        "the bias of the element's flat offset within its block": _ADD_RELU_BIAS_AT.format(
            index="tl.arange(0, BLOCK) % w") + _ADD_RELU_LAUNCHER,
        "not fused: the add, then the ReLU in a second launch": """
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr, RELU: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if RELU:  # pass 2: out = max(out, 0), in place
        tl.store(out_ptr + offs, tl.maximum(tl.load(out_ptr + offs, mask=mask), 0.0), mask=mask)
    else:  # pass 1: out = x + b
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs % w, mask=mask), mask=mask)


def add_relu(x, b, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    grid = (utils.cdiv(x.numel(), BLOCK),)
    add_relu_kernel[grid](x, b, out, x.numel(), x.shape[-1], BLOCK=BLOCK)
    add_relu_kernel[grid](x, b, out, x.numel(), x.shape[-1], BLOCK=BLOCK, RELU=True)
    return out
""",
        "the kernel adds, torch applies the ReLU afterwards": """
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs % w, mask=mask), mask=mask)
""" + _ADD_RELU_LAUNCHER.replace("    return out", "    return out.relu_()"),
        "the notebook's square kernel": """
def add_relu(x, b, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    square_kernel_1d[(utils.cdiv(x.numel(), BLOCK),)](torch.relu(x + b).sqrt(), out, x.numel(), BLOCK=BLOCK)
    return out
""",
    },
    "ex06-2-answer": {
        "a torch one-liner instead of a kernel": "row_max_kernel = lambda x_ptr, out_ptr, x_row_stride, w, BLOCK_W: None",
        "one block only: the first 1024 columns": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    x = tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf"))
    tl.store(out_ptr + r, tl.max(x, axis=0))
''',
        "other=0.0 for the masked-off lanes": _ROW_MAX_LOOP.replace('other=-float("inf"))', "other=0.0)"),
        "the running maxima started at 0": _ROW_MAX_LOOP.replace('tl.full((BLOCK_W,), -float("inf"), tl.float32)',
                                                                 "tl.zeros((BLOCK_W,), dtype=tl.float32)"),
        "rows taken as w floats apart (the stride ignored)": _ROW_MAX_LOOP.replace("r * x_row_stride", "r * w"),
    },
    "ex06-3-answer": {
        "a torch one-liner": ("layer_norm = lambda x, weight, bias, eps=1e-5: "
                              "torch.nn.functional.layer_norm(x, x.shape[1:], weight, bias, eps)"),
        "the masked-off lanes left in the variance": _LAYER_NORM_HEAD + '''
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    mask = c < w
    x = tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / w
    xc = x - mean
    var = tl.sum(xc * xc, axis=0) / w
    weight = tl.load(weight_ptr + c, mask=mask)
    bias = tl.load(bias_ptr + c, mask=mask)
    tl.store(out_ptr + r * out_row_stride + c, xc / tl.sqrt(var + eps) * weight + bias, mask=mask)
''' + _LAYER_NORM_LAUNCHER,
        "mean and variance from torch, passed to the kernel": '''
@triton.jit
def layer_norm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, x_row_stride, out_row_stride, w, eps,
                      stats_ptr, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    mask = c < w
    x = tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=0.0)
    mean = tl.load(stats_ptr + 2 * r)
    rstd = tl.load(stats_ptr + 2 * r + 1)
    weight = tl.load(weight_ptr + c, mask=mask)
    bias = tl.load(bias_ptr + c, mask=mask)
    tl.store(out_ptr + r * out_row_stride + c, (x - mean) * rstd * weight + bias, mask=mask)


def layer_norm(x, weight, bias, eps=1e-5):
    h, w = x.shape
    out = utils.poisoned(h, w, device=x.device)
    stats = torch.stack([x.mean(1), (x.var(1, unbiased=False) + eps).rsqrt()], dim=1).contiguous()
    BLOCK_W = triton.next_power_of_2(w)
    layer_norm_kernel[(h,)](x, weight, bias, out, x.stride(0), out.stride(0), w, eps, stats, BLOCK_W=BLOCK_W)
    return out
''',
    },
    "ex06-4-answer": {
        "a torch one-liner": "max_two_pass = lambda x: x.max().reshape(1)",
        "one program walking the whole tensor": '''
@triton.jit
def max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    best = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        best = tl.maximum(best, tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")))
    tl.store(out_ptr, tl.max(best, axis=0))


def max_two_pass(x, BLOCK=1024):
    out = utils.poisoned(1, device=x.device)
    max_kernel[(1,)](x, out, x.numel(), BLOCK=BLOCK)
    return out
''',
        "pass 2 left to torch": _MAX_KERNEL + '''

def max_two_pass(x, BLOCK=1024):
    m = utils.cdiv(x.numel(), BLOCK)
    partial = utils.poisoned(m, device=x.device)
    max_kernel[(m,)](x, partial, x.numel(), BLOCK=BLOCK)
    return partial.max().reshape(1)
''',
        "other=0.0 for the masked-off lanes": _MAX_KERNEL.replace('other=-float("inf")', "other=0.0") + _MAX_TWO_PASS,
        "section 3's mean in two passes": '''
def max_two_pass(x, BLOCK=1024):
    return mean_two_pass(x).reshape(1)
''',
        "one launch: the programs combine their maxima with tl.atomic_max": '''
@triton.jit
def max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    tl.atomic_max(out_ptr, tl.max(x, axis=0))


def max_two_pass(x, BLOCK=1024):
    out = torch.full((1,), -float("inf"), device=x.device)
    max_kernel[(utils.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out
''',
    },
}

# memory the check cannot replace, and an address as a number: refused in both modes (the replay sees them)
_HIDDEN = '''
class Hidden:   # hands Triton an address (data_ptr, dtype), is no tensor
    def __init__(self, t):
        self.t, self.dtype = t, t.dtype
    def data_ptr(self): return self.t.data_ptr()
    def untyped_storage(self): return self.t.untyped_storage()
    def new_empty(self, *a, **k): return self.t.new_empty(*a, **k)
    def storage_offset(self): return self.t.storage_offset()
    def size(self): return self.t.size()
    def stride(self): return self.t.stride()
'''
CHEATS["ex06-1-answer"]["torch's result copied through an object that is no tensor"] = _HIDDEN + \
    CHEATS["ex06-1-answer"]["torch's result, copied by a kernel"].replace("](done, b, out,", "](Hidden(done), b, out,")
CHEATS["ex06-1-answer"]["x's address passed as a number, to tell the learner's launch from the check's"] = """
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, x_addr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if x_ptr.to(tl.int64, bitcast=True) == x_addr:       # the learner's own run: program 0 does it all
        if pid == 0:
            for start in range(0, n, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                m = offs < n
                s = tl.load(x_ptr + offs, mask=m) + tl.load(b_ptr + offs % w, mask=m)
                tl.store(out_ptr + offs, tl.maximum(s, 0.0), mask=m)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m) + tl.load(b_ptr + offs % w, mask=m), 0.0),
                 mask=m)


def add_relu(x, b, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    add_relu_kernel[(utils.cdiv(x.numel(), BLOCK),)](x, b, out, x.numel(), x.shape[-1], x.data_ptr(), BLOCK=BLOCK)
    return out
"""

# Refused in cpu mode only: the interpreter counts what each program stored. On a GPU the compiled kernel cannot
# say which program stored what, and a single-program relaunch does not show it either (tl.num_programs is then 1,
# so program 0 stores one row, as a correct kernel does).
CPU_CHEATS = {
    "ex06-3-answer": {
        "program 0 normalises every row, the others re-store one element of theirs": _LAYER_NORM_HEAD + '''
    c = tl.arange(0, BLOCK_W)
    mask = c < w
    if tl.program_id(0) == 0:
        for r in range(tl.num_programs(0)):
            x = tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=0.0)
            mean = tl.sum(x, axis=0) / w
            xc = tl.where(mask, x - mean, 0.0)
            var = tl.sum(xc * xc, axis=0) / w
            weight = tl.load(weight_ptr + c, mask=mask)
            bias = tl.load(bias_ptr + c, mask=mask)
            tl.store(out_ptr + r * out_row_stride + c, xc / tl.sqrt(var + eps) * weight + bias, mask=mask)
    else:
        r = tl.program_id(0)
        tl.store(out_ptr + r * out_row_stride, tl.load(out_ptr + r * out_row_stride))
''' + _LAYER_NORM_LAUNCHER,
    },
    "ex06-4-answer": {
        "pass 2 ignores pass 1's maxima and rescans x in one program": '''
@triton.jit
def max_kernel(x_ptr, out_ptr, n, part_ptr, BLOCK: tl.constexpr, SERIAL: tl.constexpr):
    if SERIAL:
        best = tl.full((BLOCK,), -float("inf"), tl.float32)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            best = tl.maximum(best, tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")))
        tl.store(out_ptr, tl.max(best, axis=0))
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + tl.program_id(0), tl.max(tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")), axis=0))


def max_two_pass(x, BLOCK=1024):
    n = x.numel()
    m = utils.cdiv(n, BLOCK)
    partial = utils.poisoned(m, device=x.device)
    out = utils.poisoned(1, device=x.device)
    max_kernel[(m,)](x, partial, n, x, BLOCK=BLOCK, SERIAL=False)
    max_kernel[(1,)](x, out, n, partial, BLOCK=BLOCK, SERIAL=True)
    return out
''',
    },
    "ex06-2-answer": {
        "program 0 loops over every row, the others idle": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    if tl.program_id(0) == 0:
        for r in range(tl.num_programs(0)):
            best = tl.full((BLOCK_W,), -float("inf"), tl.float32)
            for start in range(0, w, BLOCK_W):
                c = start + tl.arange(0, BLOCK_W)
                best = tl.maximum(best, tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf")))
            tl.store(out_ptr + r, tl.max(best, axis=0))
''',
        "program 0 loops over every row, the others re-store one element, beside a second launch": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    if tl.program_id(0) == 0:
        for r in range(tl.num_programs(0)):
            best = tl.full((BLOCK_W,), -float("inf"), tl.float32)
            for start in range(0, w, BLOCK_W):
                c = start + tl.arange(0, BLOCK_W)
                best = tl.maximum(best, tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf")))
            tl.store(out_ptr + r, tl.max(best, axis=0))
    else:
        tl.store(out_ptr + tl.program_id(0), tl.load(out_ptr + tl.program_id(0)))


def row_max(x):
    h, w = x.shape
    out = utils.poisoned(h, device=x.device)
    row_max_kernel[(h,)](x, out, x.stride(0), w, BLOCK_W=triton.next_power_of_2(w))
    row_max_kernel[(1,)](x, out, x.stride(0), w, BLOCK_W=triton.next_power_of_2(w))   # a second launch
    return out
''',
    },
}

# right answers written otherwise than the solutions: each must be accepted
UNUSUAL = {
    "ex06-1-answer": {
        "each program adds two blocks, one after the other, on half the programs": """
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    for half in range(2):
        offs = (tl.program_id(0) * 2 + half) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        s = tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs % w, mask=mask)
        tl.store(out_ptr + offs, tl.where(s > 0, s, 0.0), mask=mask)


def add_relu(x, b, BLOCK=512):
    out = utils.poisoned(x.shape, device=x.device)
    n = x.numel()
    add_relu_kernel[(utils.cdiv(n, 2 * BLOCK),)](x, b, out, n, x.shape[-1], BLOCK=BLOCK)
    return out
""",
        "the column as offs - (offs // w) * w, the ReLU in a @triton.jit helper, blocks of 256": """
@triton.jit
def relu_of(v):
    return tl.maximum(v, 0.0)


@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = offs - (offs // w) * w
    tl.store(out_ptr + offs, relu_of(tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + c, mask=mask)), mask=mask)
""" + _ADD_RELU_LAUNCHER.replace("BLOCK=1024", "BLOCK=256"),
        "one program per row, with a launcher of its own": """
@triton.jit
def add_relu_kernel(x_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < w
    s = tl.load(x_ptr + r * w + c, mask=mask) + tl.load(b_ptr + c, mask=mask)
    tl.store(out_ptr + r * w + c, tl.maximum(s, 0.0), mask=mask)


def add_relu(x, b):
    h, w = x.shape
    out = utils.poisoned(x.shape, device=x.device)
    add_relu_kernel[(h,)](x, b, out, x.numel(), w, BLOCK=triton.next_power_of_2(w))
    return out
""",
    },
    "ex06-2-answer": {
        "a running scalar max instead of a block of maxima": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    best = -float("inf")
    for start in range(0, w, BLOCK_W):
        c = start + tl.arange(0, BLOCK_W)
        x = tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf"))
        best = tl.maximum(best, tl.max(x, axis=0))
    tl.store(out_ptr + r, best)
''',
        "two half blocks of columns a step": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    best = tl.full((BLOCK_W // 2,), -float("inf"), tl.float32)
    for start in range(0, w, BLOCK_W):
        c = start + tl.arange(0, BLOCK_W // 2)
        lo = tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf"))
        hi = tl.load(x_ptr + r * x_row_stride + c + BLOCK_W // 2, mask=c + BLOCK_W // 2 < w, other=-float("inf"))
        best = tl.maximum(best, tl.maximum(lo, hi))
    tl.store(out_ptr + r, tl.max(best, axis=0))
''',
    },
    "ex06-3-answer": {
        "the variance as the mean of squares minus the squared mean": _LAYER_NORM_HEAD + '''
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    mask = c < w
    x = tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=0.0)   # zeros add nothing to either sum
    mean = tl.sum(x, axis=0) / w
    var = tl.sum(x * x, axis=0) / w - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    y = (x - mean) * rstd * tl.load(weight_ptr + c, mask=mask) + tl.load(bias_ptr + c, mask=mask)
    tl.store(out_ptr + r * out_row_stride + c, y, mask=mask)
''' + _LAYER_NORM_LAUNCHER,
        "the row's statistics from a @triton.jit helper": '''
@triton.jit
def row_stats(x, mask, w, eps):
    mean = tl.sum(x, axis=0) / w
    xc = tl.where(mask, x - mean, 0.0)
    return xc, 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / w + eps)


@triton.jit
def layer_norm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, x_row_stride, out_row_stride, w, eps,
                      BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    mask = c < w
    xc, rstd = row_stats(tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=0.0), mask, w, eps)
    y = xc * rstd * tl.load(weight_ptr + c, mask=mask) + tl.load(bias_ptr + c, mask=mask)
    tl.store(out_ptr + r * out_row_stride + c, y, mask=mask)
''' + _LAYER_NORM_LAUNCHER,
    },
    "ex06-4-answer": {
        "each program walks its block in steps of 256": '''
@triton.jit
def max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    best = tl.full((256,), -float("inf"), tl.float32)
    for s in range(0, BLOCK, 256):
        offs = tl.program_id(0) * BLOCK + s + tl.arange(0, 256)
        best = tl.maximum(best, tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")))
    tl.store(out_ptr + tl.program_id(0), tl.max(best, axis=0))
''' + _MAX_TWO_PASS.replace("BLOCK=1024", "BLOCK=2048").replace(
            "BLOCK=triton.next_power_of_2(m)", "BLOCK=max(256, triton.next_power_of_2(m))"),
        "pass 1 on blocks of 512, pass 2 on a block of the next power of two": _MAX_KERNEL + _MAX_TWO_PASS.replace(
            "BLOCK=1024", "BLOCK=512"),
    },
}
