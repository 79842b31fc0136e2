"""Reference solutions of notebook 10's exercises, and answers their checks must refuse (see README.md)."""

ADD_RELU = r'''@triton.jit
def add_relu_fwd_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    s = tl.load(a_ptr + i, mask=ok) + tl.load(b_ptr + i, mask=ok)
    tl.store(y_ptr + i, tl.maximum(s, 0.0), mask=ok)


@triton.jit
def add_relu_bwd_kernel(dy_ptr, y_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    dy = tl.load(dy_ptr + i, mask=ok)
    y = tl.load(y_ptr + i, mask=ok)
    tl.store(dx_ptr + i, tl.where(y > 0, dy, 0.0), mask=ok)


class AddReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty_like(a)
        n = a.numel()
        add_relu_fwd_kernel[(triton.cdiv(n, 1024),)](a, b, y, n, BLOCK=1024)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        dx = torch.empty_like(y)
        n = y.numel()
        add_relu_bwd_kernel[(triton.cdiv(n, 1024),)](dy.contiguous(), y, dx, n, BLOCK=1024)
        return dx, dx


def add_relu(a, b):
    return AddReLU.apply(a, b)
'''

FAKE = '''def fake_dx_partials(dy, x, weight, mean, rstd, groups):
    sums = torch.float64 if x.dtype == torch.float64 else torch.float32   # the kernel's ACC dtype
    return x.new_empty(x.shape), x.new_empty(2, groups, x.shape[-1], dtype=sums)
'''

BYTES = '''def backward_bytes(h, w, elt, groups):
    dx_kernel = 3 * h * w * elt + w * elt + 2 * h * 4 + 2 * groups * w * 4   # dy, x, dx; weight; mean, rstd; partials
    reduction = 2 * groups * w * 4 + 2 * w * elt                                 # partials read; dweight, dbias
    return dx_kernel + reduction
'''

PREDICTED = '''def predicted_time(t1, groups):
    rate = backward_bytes(4096, 8192, 2, 132) / t1          # bytes per µs at one program per SM
    return backward_bytes(4096, 8192, 2, groups) / rate    # the same rate with groups programs
'''

EXPLAINED = '''def explained(times, sms):
    rate = backward_bytes(4096, 8192, 2, sms) / times[sms]        # bytes per µs at one program per SM
    return {g for g, t in times.items() if abs(backward_bytes(4096, 8192, 2, g) / rate - t) <= 0.1 * t}
'''

SOLUTIONS = {
    "ex1-answer-10": ADD_RELU,
    "ex2-answer-10": FAKE,
    "ex3-answer-10": BYTES,
    "ex3b-answer-10": PREDICTED,
    "ex3c-answer-10": EXPLAINED,
}

CHEATS = {
    "ex1-answer-10": {
        "torch only: an autograd.Function with no Triton kernel": '''class AddReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        y = torch.relu(a + b)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return dy * (y > 0), dy * (y > 0)


def add_relu(a, b):
    return AddReLU.apply(a, b)
''',
        "the Triton forward, the backward computed by torch": ADD_RELU.replace(
            "        dx = torch.empty_like(y)\n        n = y.numel()\n"
            "        add_relu_bwd_kernel[(triton.cdiv(n, 1024),)](dy.contiguous(), y, dx, n, BLOCK=1024)\n",
            "        dx = dy * (y > 0)\n"),
        "the Triton backward, the forward computed by torch": ADD_RELU.replace(
            "        add_relu_fwd_kernel[(triton.cdiv(n, 1024),)](a, b, y, n, BLOCK=1024)\n",
            "        y = torch.relu(a + b)\n"),
        "a backward kernel that forgets the ReLU's mask": ADD_RELU.replace(
            "tl.where(y > 0, dy, 0.0)", "dy"),
        "kernels that compute in fp32 whatever the input (gradcheck in fp64 fails)": ADD_RELU.replace(
            "tl.store(y_ptr + i, tl.maximum(s, 0.0), mask=ok)",
            "tl.store(y_ptr + i, tl.maximum(s.to(tl.float32), 0.0).to(tl.float16).to(y_ptr.dtype.element_ty), mask=ok)"),
        "no autograd.Function: torch's relu": "add_relu = lambda a, b: torch.relu(a + b)\n",
    },
    "ex2-answer-10": {
        "the partial sums in x's dtype": FAKE.replace("dtype=sums", "dtype=x.dtype"),
        "one half of the buffer only": FAKE.replace("x.new_empty(2, groups,", "x.new_empty(groups,"),
        "dx with x's strides (empty_like of a transposed view)": FAKE.replace("x.new_empty(x.shape),",
                                                                              "torch.empty_like(x),"),
        "the fake runs the real kernel": '''def fake_dx_partials(dy, x, weight, mean, rstd, groups):
    return ln.layer_norm_backward_partials(dy, x, weight, mean, rstd, groups)
''',
        "a fake that returns nothing": '''def fake_dx_partials(dy, x, weight, mean, rstd, groups):
    return None
''',
    },
    "ex3-answer-10": {
        "only the rows (3 h w elt), no partial sums": "backward_bytes = lambda h, w, elt, groups: 3 * h * w * elt\n",
        "partials written but not read back": '''def backward_bytes(h, w, elt, groups):
    return 3 * h * w * elt + w * elt + 2 * h * 4 + 2 * groups * w * 4 + 2 * w * elt
''',
        "the number from the first case": "backward_bytes = 201998336\n",
    },
    "ex3b-answer-10": {
        "the time at one program per SM, whatever GROUPS": "predicted_time = lambda t1, groups: t1\n",
        "time in proportion to the number of programs": "predicted_time = lambda t1, groups: t1 * groups / 132\n",
        "the ratio of the bytes, not a time": '''def predicted_time(t1, groups):
    return backward_bytes(4096, 8192, 2, groups) / backward_bytes(4096, 8192, 2, 132)
''',
        "the rate taken at the wrong GROUPS (t1 as if measured at groups)": '''def predicted_time(t1, groups):
    return t1 * backward_bytes(4096, 8192, 2, 132) / backward_bytes(4096, 8192, 2, groups)
''',
        "the sweep's measured times, copied": (
            "predicted_time = lambda t1, groups: {66: 150.5, 264: 127.4, 528: 162.8}.get(groups, t1)\n"),
        "one number, copied": "predicted_time = lambda t1, groups: 128.1\n",
    },
    "ex3c-answer-10": {
        "every GROUPS of the sweep": "explained = lambda times, sms: set(times)\n",
        "3b's prediction, which takes 132 SMs whatever the GPU": '''def explained(times, sms):
    return {g for g, t in times.items() if abs(predicted_time(times[sms], g) - t) <= 0.1 * t}
''',
        "the times compared with the time at sms, not with the bytes' prediction": '''def explained(times, sms):
    return {g for g, t in times.items() if abs(times[sms] - t) <= 0.1 * t}
''',
        "within 10 % of the prediction rather than of the measured time": '''def explained(times, sms):
    rate = backward_bytes(4096, 8192, 2, sms) / times[sms]
    return {g for g, t in times.items()
            if abs(backward_bytes(4096, 8192, 2, g) / rate - t) <= 0.1 * backward_bytes(4096, 8192, 2, g) / rate}
''',
        "the stored H100 sweep's answer, copied": "explained = lambda times, sms: {132}\n",
    },
}

# refused in cpu mode only: the interpreter counts what each program loads and stores; on a GPU the other programs'
# re-stores race with program 0's stores, and the compiled kernel cannot show which program did the work
CPU_CHEATS = {
    "ex1-answer-10": {
        "program 0 of the forward adds every block, the others re-store one element": ADD_RELU.replace(
            """    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    s = tl.load(a_ptr + i, mask=ok) + tl.load(b_ptr + i, mask=ok)
    tl.store(y_ptr + i, tl.maximum(s, 0.0), mask=ok)""", """    if tl.program_id(0) == 0:
        for p in range(tl.num_programs(0)):
            i = p * BLOCK + tl.arange(0, BLOCK)
            ok = i < n
            s = tl.load(a_ptr + i, mask=ok) + tl.load(b_ptr + i, mask=ok)
            tl.store(y_ptr + i, tl.maximum(s, 0.0), mask=ok)
    else:
        j = tl.program_id(0) * BLOCK
        tl.store(y_ptr + j, tl.load(y_ptr + j))"""),
    },
}

# right answers written otherwise than the solutions: each must be accepted
UNUSUAL = {
    "ex1-answer-10": {
        "the backward recomputes the mask from the saved inputs instead of y": ADD_RELU.replace(
            "def add_relu_bwd_kernel(dy_ptr, y_ptr, dx_ptr, n, BLOCK: tl.constexpr):",
            "def add_relu_bwd_kernel(dy_ptr, a_ptr, b_ptr, dx_ptr, n, BLOCK: tl.constexpr):").replace(
            "    y = tl.load(y_ptr + i, mask=ok)\n    tl.store(dx_ptr + i, tl.where(y > 0, dy, 0.0), mask=ok)",
            "    s = tl.load(a_ptr + i, mask=ok) + tl.load(b_ptr + i, mask=ok)\n"
            "    tl.store(dx_ptr + i, tl.where(s > 0, dy, 0.0), mask=ok)").replace(
            "        ctx.save_for_backward(y)", "        ctx.save_for_backward(a, b)").replace(
            "        (y,) = ctx.saved_tensors\n        dx = torch.empty_like(y)\n        n = y.numel()\n"
            "        add_relu_bwd_kernel[(triton.cdiv(n, 1024),)](dy.contiguous(), y, dx, n, BLOCK=1024)",
            "        a, b = ctx.saved_tensors\n        dx = torch.empty_like(a)\n        n = a.numel()\n"
            "        add_relu_bwd_kernel[(triton.cdiv(n, 1024),)](dy.contiguous(), a, b, dx, n, BLOCK=1024)"),
        "blocks of 256, the grid from the kernel's meta-parameters": ADD_RELU.replace(
            "add_relu_fwd_kernel[(triton.cdiv(n, 1024),)](a, b, y, n, BLOCK=1024)",
            "add_relu_fwd_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](a, b, y, n, BLOCK=256)").replace(
            "add_relu_bwd_kernel[(triton.cdiv(n, 1024),)](dy.contiguous(), y, dx, n, BLOCK=1024)",
            "add_relu_bwd_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](dy.contiguous(), y, dx, n, BLOCK=256)"),
    },
}
