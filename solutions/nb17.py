"""Reference solutions of notebook 17 (Helion) and the cheats its checks refuse."""

_DECORATOR = "\n@helion.kernel(config=helion.Config(block_sizes=[32, 32, 32]), static_shapes=True)"
_SIGNATURE = "\ndef matmul_relu_res(a: torch.Tensor, b: torch.Tensor, res: torch.Tensor, out: torch.Tensor) -> torch.Tensor:"
# exercise 4's kernel in three parts, which the cheats below vary one at a time
_TILES = '''
    m, k = a.size()
    _, n = b.size()
    for tile_m, tile_n in hl.tile([m, n]):
'''
_FP32_SUMS = '''        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])   # fp32 sums: acc is the accumulator
'''
_EPILOGUE = '''        out[tile_m, tile_n] = (torch.relu(acc) + res[tile_m, tile_n].to(torch.float32)).to(out.dtype)
    return out
'''
_KERNEL = _DECORATOR + _SIGNATURE + _TILES + _FP32_SUMS + _EPILOGUE

SOLUTIONS = {
    "ex17-1-answer": '''
def masked_share(m, n, block_m, block_n):
    lanes = utils.cdiv(m, block_m) * block_m * utils.cdiv(n, block_n) * block_n   # every tile, edges included
    return 1 - m * n / lanes                                                      # the lanes no element fills


print(f"45 x 37 in 32 x 32 tiles: {masked_share(45, 37, 32, 32):.0%} masked; "
      f"4096 x 4097 in 128 x 128: {masked_share(4096, 4097, 128, 128):.1%}")
''',
    "ex17-2-answer": '''
def values_per_thread(w, block_rows, num_warps):
    lanes = 1 << (w - 1).bit_length()                  # a row padded to the next power of two (1 for w = 1)
    return block_rows * lanes / (32 * num_warps)       # the program's lanes, shared by its threads


for warps in (4, 8, 16):   # rows of up to 16384 x warps / 4 hold at most 128 values a thread
    print(f"{warps} warps:", values_per_thread(4096, 1, warps), values_per_thread(4097, 1, warps))
''',
    "ex17-3-answer": '''
def swizzled_offset(row, col, width, elem_bytes):
    x = row * width + col                       # the plain row-major offset, in elements
    m = (16 // elem_bytes).bit_length() - 1     # elements of a 16-byte piece: 2**m
    return x ^ ((x >> (m + 3)) & 7) << m        # Swizzle<3, m, 3>: 3 bits from m + 3 up, XORed onto the piece


print("fp8: Swizzle<3,4,3>, fp16: <3,3,3>, fp32: <3,2,3>, fp64: <3,1,3> (in elements; <3,4,3> in bytes for all)")
''',
    "ex17-4-answer": _KERNEL,
}

CHEATS = {
    "ex17-1-answer": {
        "a number, not a function": "masked_share = 0.59",
        "the course's reference, handed in": "masked_share = lang.masked_share",
        "tiles rounded down": '''
def masked_share(m, n, block_m, block_n):
    return 1 - m * n / ((m // block_m or 1) * block_m * (n // block_n or 1) * block_n)
''',
        "the share of lanes used, not thrown away": '''
def masked_share(m, n, block_m, block_n):
    return m * n / (utils.cdiv(m, block_m) * block_m * utils.cdiv(n, block_n) * block_n)
''',
    },
    "ex17-2-answer": {
        "a number, not a function": "values_per_thread = 16.0",
        "the row not padded": '''
def values_per_thread(w, block_rows, num_warps):
    return block_rows * w / (32 * num_warps)
''',
        "the course's reference, handed in": "values_per_thread = lang.values_per_thread",
        "one warp's threads only": '''
def values_per_thread(w, block_rows, num_warps):
    return block_rows * (1 << (w - 1).bit_length()) / 32
''',
    },
    "ex17-3-answer": {
        "a number, not a function": "swizzled_offset = 72",
        "the fp16 parameters for every size": '''
def swizzled_offset(row, col, width, elem_bytes):
    x = row * width + col
    return x ^ ((x >> 6) & 7) << 3
''',
        "the row's index instead of the offset's bits": '''
def swizzled_offset(row, col, width, elem_bytes):
    m = (16 // elem_bytes).bit_length() - 1
    piece, within = divmod(col, 1 << m)
    return row * width + ((piece ^ (row % 8)) << m) + within
''',
        "ORed instead of XORed": '''
def swizzled_offset(row, col, width, elem_bytes):
    x = row * width + col
    m = (16 // elem_bytes).bit_length() - 1
    return x | ((x >> (m + 3)) & 7) << m
''',
    },
    "ex17-4-answer": {
        "a number, not a function": "matmul_relu_res = 42",
        "the course's Helion matmul, then torch": '''
def matmul_relu_res(a, b, res, out):
    hk.matmul(a, b, out)
    return out.relu_().add_(res)
''',
        "a Helion kernel that copies res, and torch computes the rest": _DECORATOR.replace("32, 32, 32", "32, 32")
        + _SIGNATURE + _TILES + '''        out[tile_m, tile_n] = res[tile_m, tile_n]
    return out


_copy = matmul_relu_res


def matmul_relu_res(a, b, res, out):
    _copy(a, b, res, out)
    return out.add_(torch.relu(a @ b))
''',
        "the product made by torch on the host, the kernel only the epilogue": _DECORATOR.replace("32, 32, 32", "32, 32")
        + _SIGNATURE + '''
    m, k = a.size()
    _, n = b.size()
    prod = a @ b                                  # host code: torch, before the kernel
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = (torch.relu(prod[tile_m, tile_n].to(torch.float32)) + res[tile_m, tile_n]).to(out.dtype)
    return out
''',
        "half of k": _KERNEL.replace("hl.tile(k):", "hl.tile(k // 2):"),
    },
}

# Sums in fp16 (the product rounded to fp16 at each k-step, or an fp16 accumulator) are refused by value: at the
# check's k (300 on the CPU, 900 on a GPU) their error is 2 to 3 times the tolerance, fp32 sums' a quarter of it.
CHEATS["ex17-4-answer"]["the product added in fp16 at each k-step"] = _KERNEL.replace(
    "torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])   # fp32 sums: acc is the accumulator",
    "acc + a[tile_m, tile_k] @ b[tile_k, tile_n]   # the fp16 product rounded before it is added")
CHEATS["ex17-4-answer"]["an fp16 accumulator"] = _DECORATOR + _SIGNATURE + _TILES + '''\
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float16)
        for tile_k in hl.tile(k):
            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = torch.relu(acc) + res[tile_m, tile_n]
    return out
'''

# right answers written otherwise than the solutions: each must be accepted
UNUSUAL = {
    "ex17-4-answer": {
        "hl.dot with an fp32 accumulator": _KERNEL.replace(
            "            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])   # fp32 sums: acc is the accumulator",
            "            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)"),
        "tiles of 16 x 64 x 32, the epilogue's addition first": _KERNEL.replace(
            "block_sizes=[32, 32, 32]", "block_sizes=[16, 64, 32]").replace(
            "(torch.relu(acc) + res[tile_m, tile_n].to(torch.float32))",
            "(res[tile_m, tile_n].to(torch.float32) + torch.relu(acc))"),
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer
    assert all(code.count("acc") >= 3 for code in _variants.values()), _answer
