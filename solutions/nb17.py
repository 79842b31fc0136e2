"""Reference solutions of notebook 17 (Helion) and the cheats its checks refuse."""

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
def swizzle(x, B, M, S):
    mask = ((1 << B) - 1) << (M + S)     # the B bits that start M + S up
    return x ^ ((x & mask) >> S)          # moved down S bits, onto the B bits that start M up


print("fp8: Swizzle<3,4,3>, fp16: <3,3,3>, fp32: <3,2,3> (16-byte pieces: 2**M elements)")
''',
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
        "a number, not a function": "swizzle = 72",
        "the course's reference, handed in": "swizzle = lang.swizzle",
        "shifted the wrong way": '''
def swizzle(x, B, M, S):
    mask = ((1 << B) - 1) << M
    return x ^ ((x & mask) << S)
''',
        "ORed instead of XORed": '''
def swizzle(x, B, M, S):
    mask = ((1 << B) - 1) << (M + S)
    return x | ((x & mask) >> S)
''',
    },
}
