"""Reference solutions of notebook 07 (Triton matmul) and the cheats its checks refuse."""

_SIGNATURE = '''
@triton.jit
def matmul_relu_res_kernel(a_ptr, b_ptr, res_ptr, out_ptr, h, w, k,
                           a_stride_r, a_stride_k, b_stride_k, b_stride_c, out_stride_r, out_stride_c,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           GROUP_M: tl.constexpr, DOT_PRECISION: tl.constexpr):
'''

_MAINLOOP = '''    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(h, BLOCK_M), tl.cdiv(w, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    r = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % h
    c = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % w
    kk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + r[:, None] * a_stride_r + kk[None, :] * a_stride_k
    b_ptrs = b_ptr + kk[:, None] * b_stride_k + c[None, :] * b_stride_c
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        a = tl.load(a_ptrs, mask=kk[None, :] < k - k0, other=0.0)
        b = tl.load(b_ptrs, mask=kk[:, None] < k - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * a_stride_k
        b_ptrs += BLOCK_K * b_stride_k
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = r[:, None] * out_stride_r + c[None, :] * out_stride_c
    mask = (r[:, None] < h) & (c[None, :] < w)
'''

_EPILOGUE = '''    res = tl.load(res_ptr + offs, mask=mask, other=0.0)
    acc = tl.maximum(acc, 0.0) + res.to(tl.float32)  # the epilogue, on the tile in registers
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
'''

_LAUNCHER = '''

def matmul_relu_res(a, b, res, cfg=FIXED):
    h, w, k = check_shapes(a, b)
    out = utils.poisoned(h, w, dtype=a.dtype, device=a.device)
    assert res.shape == out.shape and res.stride() == out.stride(), "res: h x w, with the strides of out"
    grid = (utils.cdiv(h, cfg["BLOCK_M"]) * utils.cdiv(w, cfg["BLOCK_N"]),)
    matmul_relu_res_kernel[grid](a, b, res, out, h, w, k, *a.stride(), *b.stride(), *out.stride(),
                                 GROUP_M=8, DOT_PRECISION=dot_precision(a.dtype), **cfg)
    return out
'''

SOLUTIONS = {
    "ex07-1-answer": '''
def last_round(h, w, BLOCK_M, BLOCK_N, sms, per_sm):
    programs = utils.cdiv(h, BLOCK_M) * utils.cdiv(w, BLOCK_N)  # one program per tile, edges included
    slots = sms * per_sm                                         # programs running at once
    rounds = utils.cdiv(programs, slots)
    return (programs - (rounds - 1) * slots) / slots             # what the last round holds


for tile, per_sm in (((128, 128), 1), ((128, 128), 2), ((128, 256), 1)):
    print(f"3072^3, {tile[0]}x{tile[1]} tiles, {per_sm} a SM: last round {last_round(3072, 3072, *tile, 132, per_sm):.0%}")
''',
    "ex07-2-answer": '''
def max_stages(BLOCK_M, BLOCK_N, BLOCK_K, dtype, smem):
    stage = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * dtype.itemsize  # a block of a and a block of b
    return smem // stage                                               # whole stages only


print("128x256x64 fp16: H100", max_stages(128, 256, 64, torch.float16, 232448),
      "stages, T4", max_stages(128, 256, 64, torch.float16, 65536))
''',
    "ex07-3-answer": '''
def program_of(pid_m, pid_n, tiles_m, tiles_n, GROUP_M):
    first_m = (pid_m // GROUP_M) * GROUP_M        # the first tile row of the tile's group
    group_m = min(tiles_m - first_m, GROUP_M)     # rows in that group (the last one may be shorter)
    return first_m * tiles_n + pid_n * group_m + (pid_m - first_m)
''',
    "ex07-4-answer": _SIGNATURE + _MAINLOOP + _EPILOGUE + _LAUNCHER,
}

CHEATS = {
    "ex07-1-answer": {
        "a number, not a function": "last_round = 0.36",
        "the rounds' average fill, as the claim under the sweep": '''
def last_round(h, w, BLOCK_M, BLOCK_N, sms, per_sm):
    waves = utils.cdiv(h, BLOCK_M) * utils.cdiv(w, BLOCK_N) / (sms * per_sm)
    return waves / -(-waves // 1)
''',
        "a remainder: 0 when the last round is full": '''
def last_round(h, w, BLOCK_M, BLOCK_N, sms, per_sm):
    return (utils.cdiv(h, BLOCK_M) * utils.cdiv(w, BLOCK_N)) % (sms * per_sm) / (sms * per_sm)
''',
        "tiles rounded down": '''
def last_round(h, w, BLOCK_M, BLOCK_N, sms, per_sm):
    programs, slots = (h // BLOCK_M) * (w // BLOCK_N), sms * per_sm
    return (programs - (utils.cdiv(programs, slots) - 1) * slots) / slots
''',
        "one program per SM, per_sm ignored": '''
def last_round(h, w, BLOCK_M, BLOCK_N, sms, per_sm):
    programs = utils.cdiv(h, BLOCK_M) * utils.cdiv(w, BLOCK_N)
    return (programs - (utils.cdiv(programs, sms) - 1) * sms) / sms
''',
        "the package's reference, called": '''
from gpu_course.kernels.triton_matmul import last_round_fill as last_round
''',
        "the package's reference, wrapped": '''
from gpu_course.kernels import triton_matmul


def last_round(h, w, BLOCK_M, BLOCK_N, sms, per_sm):
    return triton_matmul.last_round_fill(h, w, BLOCK_M, BLOCK_N, sms, per_sm)
''',
    },
    "ex07-2-answer": {
        "a number, not a function": "max_stages = 4",
        "the bytes per element forgotten": "max_stages = lambda bm, bn, bk, dtype, smem: smem // ((bm + bn) * bk)",
        "rounded to the nearest stage": "max_stages = lambda bm, bn, bk, dtype, smem: round(smem / ((bm + bn) * bk * dtype.itemsize))",
        "the block of b forgotten": "max_stages = lambda bm, bn, bk, dtype, smem: smem // (bm * bk * dtype.itemsize)",
        "the package's reference, wrapped": '''
def max_stages(BLOCK_M, BLOCK_N, BLOCK_K, dtype, smem):
    from gpu_course.kernels.triton_matmul import stages_that_fit
    return stages_that_fit(BLOCK_M, BLOCK_N, BLOCK_K, dtype, smem)
''',
    },
    "ex07-3-answer": {
        "a number, not a function": "program_of = 26",
        "the notebook's tile_of, searched": '''
def program_of(pid_m, pid_n, tiles_m, tiles_n, GROUP_M):
    return next(p for p in range(tiles_m * tiles_n) if tile_of(p, tiles_m, tiles_n, GROUP_M) == (pid_m, pid_n))
''',
        "the notebook's order_grid": '''
def program_of(pid_m, pid_n, tiles_m, tiles_n, GROUP_M):
    return order_grid(tiles_m, tiles_n, GROUP_M)[pid_m][pid_n]
''',
        "row by row, the groups ignored": "program_of = lambda pid_m, pid_n, tiles_m, tiles_n, GROUP_M: pid_m * tiles_n + pid_n",
        "the last, shorter group taken as full": '''
def program_of(pid_m, pid_n, tiles_m, tiles_n, GROUP_M):
    first_m = (pid_m // GROUP_M) * GROUP_M
    return first_m * tiles_n + pid_n * GROUP_M + (pid_m - first_m)
''',
    },
    "ex07-4-answer": {
        "a torch one-liner": "matmul_relu_res = lambda a, b, res: torch.relu(a @ b) + res",
        "the course's matmul, then torch": '''
def matmul_relu_res(a, b, res):
    return torch.relu(matmul(a, b, cfg={**FIXED, "GROUP_M": 8})) + res
''',
        "the course's matmul_kernel launched, the epilogue in torch": '''
def matmul_relu_res(a, b, res):
    h, w, k = check_shapes(a, b)
    out = utils.poisoned(h, w, dtype=a.dtype, device=a.device)
    grid = (utils.cdiv(h, FIXED["BLOCK_M"]) * utils.cdiv(w, FIXED["BLOCK_N"]),)
    matmul_kernel[grid](a, b, out, out, h, w, k, *a.stride(), *b.stride(), *out.stride(), GROUP_M=8,
                        DOT_PRECISION=dot_precision(a.dtype), HAS_BIAS=False, ACTIVATION="", **FIXED)
    return out.relu_().add_(res)
''',
        "my kernel does the matmul, torch the epilogue": _SIGNATURE + _MAINLOOP
        + "    tl.store(out_ptr + offs, acc, mask=mask)\n"
        + _LAUNCHER.replace("    return out\n", "    return torch.relu(out) + res\n"),
        "not fused: a second kernel for the epilogue": _SIGNATURE + _MAINLOOP
        + "    tl.store(out_ptr + offs, acc, mask=mask)\n" + '''

@triton.jit
def relu_add_kernel(out_ptr, res_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    o = tl.load(out_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(o, 0.0) + tl.load(res_ptr + offs, mask=mask), mask=mask)
''' + _LAUNCHER.replace("    return out\n", '''    relu_add_kernel[(utils.cdiv(out.numel(), 1024),)](out, res, out.numel(), BLOCK=1024)
    return out
'''),
        "the result computed by torch, stored by the kernel": _SIGNATURE + _MAINLOOP + '''    acc += tl.load(res_ptr + offs, mask=mask, other=0.0) - acc
    tl.store(out_ptr + offs, acc, mask=mask)
''' + _LAUNCHER.replace("matmul_relu_res_kernel[grid](a, b, res,",
                        "matmul_relu_res_kernel[grid](a, b, torch.relu(a @ b) + res,"),
    },
}

# Refused in cpu mode only: the interpreter counts the multiply-adds of tl.dot and sees which operands were loaded;
# on a GPU the compiled kernel holds a dot either way.
_BROADCAST_K_LOOP = _MAINLOOP.replace("        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)\n",
                                      "        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)\n")
CPU_CHEATS = {
    "ex07-4-answer": {
        "the product by broadcast sums, then a tl.dot with an identity tile": _SIGNATURE + _BROADCAST_K_LOOP
        + '''    eye = tl.where(tl.arange(0, BLOCK_N)[:, None] == tl.arange(0, BLOCK_N)[None, :], 1.0, 0.0)
    acc = tl.dot(acc, eye, input_precision="ieee")
''' + _EPILOGUE + _LAUNCHER,
        "the loaded tiles moved through tl.dot with an identity (a @ I, I @ b), the product by broadcast sums":
        _SIGNATURE + _MAINLOOP.replace(
            "        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)\n",
            "        eye = tl.where(kk[:, None] == kk[None, :], 1.0, 0.0)\n"
            "        a = tl.dot(a, eye.to(a.dtype), input_precision=DOT_PRECISION)\n"
            "        b = tl.dot(eye.to(b.dtype), b, input_precision=DOT_PRECISION)\n"
            "        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)\n") + _EPILOGUE + _LAUNCHER,
        "the first k-step by tl.dot, the others by broadcast sums": _SIGNATURE + _MAINLOOP.replace(
            "        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)\n",
            "        if k0 == 0:\n            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)\n"
            "        else:\n            acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)\n") + _EPILOGUE + _LAUNCHER,
    },
}

# right answers written otherwise than the solutions: each must be accepted
UNUSUAL = {
    "ex07-1-answer": {
        "what is left over after the full rounds, a full round where nothing is": '''
def last_round(h, w, BLOCK_M, BLOCK_N, sms, per_sm):
    programs, slots = -(-h // BLOCK_M) * -(-w // BLOCK_N), sms * per_sm
    return (programs % slots or slots) / slots
''',
    },
    "ex07-2-answer": {
        "the element size asked of a tensor of the dtype": '''
def max_stages(BLOCK_M, BLOCK_N, BLOCK_K, dtype, smem):
    item = torch.empty(0, dtype=dtype).element_size()
    return int(smem / (item * BLOCK_K * (BLOCK_M + BLOCK_N)))
''',
    },
    "ex07-3-answer": {
        "a search through the kernel's own mapping from program to tile": '''
def program_of(pid_m, pid_n, tiles_m, tiles_n, GROUP_M):
    in_group = GROUP_M * tiles_n
    for pid in range(tiles_m * tiles_n):
        first_m = (pid // in_group) * GROUP_M
        group_m = min(tiles_m - first_m, GROUP_M)
        if (first_m + (pid % in_group) % group_m, (pid % in_group) // group_m) == (pid_m, pid_n):
            return pid
''',
    },
    "ex07-4-answer": {
        "tiles in row-major order, no grouping": _SIGNATURE + _MAINLOOP.replace(
            """    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
""", "    pid_m, pid_n = pid // tiles_n, pid % tiles_n\n") + _EPILOGUE + _LAUNCHER,
        "the epilogue in a @triton.jit helper": '''
@triton.jit
def relu_plus(acc, res):
    return tl.maximum(acc, 0.0) + res.to(tl.float32)
''' + _SIGNATURE + _MAINLOOP + _EPILOGUE.replace(
            "acc = tl.maximum(acc, 0.0) + res.to(tl.float32)", "acc = relu_plus(acc, res)") + _LAUNCHER,
    },
}
