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
def row_lanes_used(w):
    lanes = 1 << (w - 1).bit_length()   # the next power of two (1 for w = 1)
    return w / lanes


print(f"4096: {row_lanes_used(4096):.0%}, 4097: {row_lanes_used(4097):.0%}, 2049: {row_lanes_used(2049):.0%}")
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
        "a number, not a function": "row_lanes_used = 300 / 512",
        "the padding's share instead": '''
def row_lanes_used(w):
    return 1 - w / (1 << (w - 1).bit_length())
''',
        "padded to a multiple of 128 instead of a power of two": '''
def row_lanes_used(w):
    return w / (-(-w // 128) * 128)
''',
    },
}
