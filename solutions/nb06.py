"""Reference solutions of notebook 06 (Triton basics) and the cheats its checks refuse."""

_ADD_RELU_LAUNCHER = '''

def add_relu(x, y, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    n = x.numel()
    add_relu_kernel[(utils.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out
'''

_ROW_MAX_LAUNCHER = '''

def row_max(x):
    h, w = x.shape
    assert x.stride(1) == 1, "columns must be contiguous"
    out = utils.poisoned(h, device=x.device)
    row_max_kernel[(h,)](x, out, x.stride(0), w, BLOCK_W=triton.next_power_of_2(w))
    return out
'''

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

SOLUTIONS = {
    "ex06-1-answer": '''
@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=mask)
''' + _ADD_RELU_LAUNCHER,
    "ex06-2-answer": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    x = tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf"))  # -inf never wins
    tl.store(out_ptr + r, tl.max(x, axis=0))
''' + _ROW_MAX_LAUNCHER,
    "ex06-3-answer": '''
@triton.jit
def layer_norm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, x_row_stride, out_row_stride, w, eps,
                      BLOCK_W: tl.constexpr):
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
    "ex06-4-answer": '''
def programs(n, cfg):
    return utils.cdiv(n, cfg["BLOCK"] * cfg["TILES"])  # one program per tile of BLOCK * TILES elements
''',
}

CHEATS = {
    "ex06-1-answer": {
        "torch's result in out before a kernel that never stores": '''
@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)


def add_relu(x, y, BLOCK=1024):
    out = torch.relu(x + y)
    add_relu_kernel[(utils.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out
''',
        "a torch one-liner": "add_relu = lambda x, y: torch.relu(x + y)",
        "torch's result, copied by a kernel": '''
@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def add_relu(x, y, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    done = torch.relu(x + y)
    add_relu_kernel[(utils.cdiv(x.numel(), BLOCK),)](done, y, out, x.numel(), BLOCK=BLOCK)
    return out
''',
        "not fused: the add, then the ReLU in a second launch": '''
@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, RELU: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if RELU:  # pass 2: out = max(out, 0), in place
        tl.store(out_ptr + offs, tl.maximum(tl.load(out_ptr + offs, mask=mask), 0.0), mask=mask)
    else:  # pass 1: out = x + y
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add_relu(x, y, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    grid = (utils.cdiv(x.numel(), BLOCK),)
    add_relu_kernel[grid](x, y, out, x.numel(), BLOCK=BLOCK)
    add_relu_kernel[grid](x, y, out, x.numel(), BLOCK=BLOCK, RELU=True)
    return out
''',
        "the kernel adds, torch applies the ReLU afterwards": '''
@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
''' + _ADD_RELU_LAUNCHER.replace("    return out", "    return out.relu_()"),
        "the notebook's square kernel": '''
def add_relu(x, y, BLOCK=1024):
    out = utils.poisoned(x.shape, device=x.device)
    square_kernel_1d[(utils.cdiv(x.numel(), BLOCK),)](torch.relu(x + y).sqrt(), out, x.numel(), BLOCK=BLOCK)
    return out
''',
    },
    "ex06-2-answer": {
        "a torch one-liner": "row_max = lambda x: x.amax(dim=1)",
        "other=0.0 for the masked-off lanes": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    x = tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=0.0)
    tl.store(out_ptr + r, tl.max(x, axis=0))
''' + _ROW_MAX_LAUNCHER,
        "rows taken as w floats apart (the stride ignored)": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_W)
    x = tl.load(x_ptr + r * w + c, mask=c < w, other=-float("inf"))
    tl.store(out_ptr + r, tl.max(x, axis=0))
''' + _ROW_MAX_LAUNCHER,
        "one program walking every row": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, h, BLOCK_W: tl.constexpr):
    c = tl.arange(0, BLOCK_W)
    for r in range(h):
        x = tl.load(x_ptr + r * x_row_stride + c, mask=c < w, other=-float("inf"))
        tl.store(out_ptr + r, tl.max(x, axis=0))


def row_max(x):
    h, w = x.shape
    out = utils.poisoned(h, device=x.device)
    row_max_kernel[(1,)](x, out, x.stride(0), w, h, BLOCK_W=triton.next_power_of_2(w))
    return out
''',
    },
    "ex06-3-answer": {
        "a torch one-liner": ("layer_norm = lambda x, weight, bias, eps=1e-5: "
                              "torch.nn.functional.layer_norm(x, x.shape[1:], weight, bias, eps)"),
        "the masked-off lanes left in the variance": '''
@triton.jit
def layer_norm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, x_row_stride, out_row_stride, w, eps,
                      BLOCK_W: tl.constexpr):
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
        "a number, not a function": "programs = utils.cdiv(10**8, MEAN_GPU['BLOCK'] * MEAN_GPU['TILES'])",
        "rounded down": "programs = lambda n, cfg: n // (cfg['BLOCK'] * cfg['TILES'])",
        "one program per BLOCK, the tiles forgotten": "programs = lambda n, cfg: utils.cdiv(n, cfg['BLOCK'])",
        "measured with mean_two_pass instead of worked out": '''
def programs(n, cfg):
    with utils.launches() as seen:
        mean_two_pass(torch.rand(n, device=utils.DEVICE), cfg=cfg)
    return seen.of("triton")[0].grid[0]
''',
    },
}

# Refused in cpu mode only: the interpreter counts what each program stored. On a GPU the compiled kernel cannot
# say which program stored what, and a single-program relaunch does not show it either (tl.num_programs is then 1,
# so program 0 stores one row, as a correct kernel does).
CPU_CHEATS = {
    "ex06-2-answer": {
        "program 0 loops over every row, the others idle": '''
@triton.jit
def row_max_kernel(x_ptr, out_ptr, x_row_stride, w, BLOCK_W: tl.constexpr):
    if tl.program_id(0) == 0:
        cols = tl.arange(0, BLOCK_W)
        for r in range(tl.num_programs(0)):
            v = tl.load(x_ptr + r * x_row_stride + cols, mask=cols < w, other=float("-inf"))
            tl.store(out_ptr + r, tl.max(v, axis=0))


def row_max(x):
    h, w = x.shape
    out = utils.poisoned(h, device=x.device)
    row_max_kernel[(h,)](x, out, x.stride(0), w, BLOCK_W=triton.next_power_of_2(w))
    return out
''',
    },
}
