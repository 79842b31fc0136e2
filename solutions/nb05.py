"""Reference solutions of notebook 05 (Numba CUDA) and the cheats its checks refuse."""

SOLUTIONS = {
    "ex05-1-answer": '''
def launch_8x32(m, n, out):
    h, w = out.shape
    matmul_k_numba[(utils.cdiv(w, 32), utils.cdiv(h, 8)), (32, 8)](m, n, out)  # (x, y) = (columns, rows)
    return out
''',
    "ex05-2-answer": '''
def smem_bytes(th, tw):
    return (th * tw + tw * tw) * 4  # an m tile and an n tile of 4-byte floats
''',
    "ex05-3-answer": '''
TH = 8


@cuda.jit
def matmul_rect_numba(m, n, out):
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = m[r, ph + tc] if r < h and ph + tc < k else numba.float32(0.0)
        for i in range(tr, TW, TH):  # rows tr and tr + 8 of the n tile (a range: numba types it on a GPU)
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p
''',
    "ex05-4-answer": '''
@cuda.jit
def matmul_bt_numba(m, nt, out):
    ms = cuda.shared.array((TW, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    c, r = cuda.grid(2)
    c0 = cuda.blockIdx.x * TW          # the block's first column of out: its first row of nt
    h, k = m.shape
    w = nt.shape[0]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = m[r, ph + tc] if r < h and ph + tc < k else numba.float32(0.0)
        # tc runs along a row of nt (coalesced); nt[c0 + tr, ph + tc] is n[ph + tc, c0 + tr]
        ns[tc, tr] = nt[c0 + tr, ph + tc] if c0 + tr < w and ph + tc < k else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p
''',
}

_SQUARE_TILES = '''
TH = 8


@cuda.jit
def matmul_rect_numba(m, n, out):  # right values with 16 x 8 threads, but 16 x 16 tiles for both
    ms = cuda.shared.array((TW, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r0 = cuda.blockIdx.y * TH
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        for i in range(tr, TW, TH):
            ms[i, tc] = m[r0 + i, ph + tc] if r0 + i < h and ph + tc < k else numba.float32(0.0)
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r0 + tr < h and c < w:
        out[r0 + tr, c] = p
'''

# the check's tile shapes must not come from the notebook's globals: this cell rebinds TH
_TH_REBOUND_SQUARE_TILES = '''
TH = 16   # rebound: a check that read the global TH would now ask for 16 x 16 tiles


@cuda.jit
def matmul_rect_numba(m, n, out):  # right values with 16 x 8 threads, 16 x 16 tiles for both
    ms = cuda.shared.array((TW, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r0 = cuda.blockIdx.y * 8
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        for i in range(tr, TW, 8):
            ms[i, tc] = m[r0 + i, ph + tc] if r0 + i < h and ph + tc < k else numba.float32(0.0)
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r0 + tr < h and c < w:
        out[r0 + tr, c] = p
'''

_PLAIN_UNDER_THE_NAME = '''
@cuda.jit
def matmul_rect_numba(m, n, out):  # matmul_k_numba's body: no shared memory
    c, r = cuda.grid(2)
    h, k = m.shape
    w = n.shape[1]
    if r < h and c < w:
        o = numba.float32(0.0)
        for i in range(k):
            o += m[r, i] * n[i, c]
        out[r, c] = o
'''

_TILES_DECLARED_NOT_USED = '''
@cuda.jit
def matmul_rect_numba(m, n, out):  # the asked tiles are declared and written, the products read global memory
    ms = cuda.shared.array((8, 16), numba.float32)
    ns = cuda.shared.array((16, 16), numba.float32)
    ms[cuda.threadIdx.y, cuda.threadIdx.x] = numba.float32(0.0)
    ns[cuda.threadIdx.y, cuda.threadIdx.x] = numba.float32(0.0)
    c, r = cuda.grid(2)
    h, k = m.shape
    w = n.shape[1]
    if r < h and c < w:
        o = numba.float32(0.0)
        for i in range(k):
            o += m[r, i] * n[i, c]
        out[r, c] = o
'''

# the old answer of exercise 4: right values, read from global memory (no tiles)
_NAIVE_BT = (_PLAIN_UNDER_THE_NAME.replace("def matmul_rect_numba(m, n, out):", "def matmul_bt_numba(m, nt, out):")
             .replace("w = n.shape[1]", "w = nt.shape[0]").replace("* n[i, c]", "* nt[c, i]"))

CHEATS = {
    "ex05-1-answer": {
        "the notebook's 16 x 16 blocks": '''
def launch_8x32(m, n, out):
    h, w = out.shape
    matmul_k_numba[(utils.cdiv(w, 16), utils.cdiv(h, 16)), (16, 16)](m, n, out)
    return out
''',
        "x and y swapped: blocks of 32 rows x 8 columns": '''
def launch_8x32(m, n, out):
    h, w = out.shape
    matmul_k_numba[(utils.cdiv(w, 8), utils.cdiv(h, 32)), (8, 32)](m, n, out)
    return out
''',
        "a grid rounded down": '''
def launch_8x32(m, n, out):
    h, w = out.shape
    matmul_k_numba[(w // 32, h // 8), (32, 8)](m, n, out)
    return out
''',
        "a grid larger than needed": '''
def launch_8x32(m, n, out):
    h, w = out.shape
    matmul_k_numba[(utils.cdiv(w, 32) + 1, utils.cdiv(h, 8) + 1), (32, 8)](m, n, out)
    return out
''',
        "the product computed on the host, no launch": '''
def launch_8x32(m, n, out):
    out[:] = m @ n
    return out
''',
    },
    "ex05-2-answer": {
        "a number, not a function": "smem_bytes = (8 * 16 + 16 * 16) * 4",
        "section 2's square-tile formula": "smem_bytes = lambda th, tw: 2 * tw * tw * 4",
        "the floats, not the bytes": "smem_bytes = lambda th, tw: th * tw + tw * tw",
        "the package's reference": "from gpu_course.launch import rect_tiles_smem_bytes as smem_bytes",
        "a wrapper of the package's reference": '''
from gpu_course import launch as _l
def smem_bytes(th, tw):
    return _l.rect_tiles_smem_bytes(th, tw)
''',
    },
    "ex05-3-answer": {
        "the notebook's matmul_k_numba": "matmul_rect_numba = matmul_k_numba",
        "matmul_k_numba's body under the asked name": _PLAIN_UNDER_THE_NAME,
        "square 16 x 16 tiles for both": _SQUARE_TILES,
        "square 16 x 16 tiles for both, with the global TH rebound to 16": _TH_REBOUND_SQUARE_TILES,
        "the asked tiles declared but not used": _TILES_DECLARED_NOT_USED,
        "the notebook's square tiled kernel": "matmul_rect_numba = matmul_tiled_numba",
        "torch, no kernel": "matmul_rect_numba = lambda m, n, out: torch.from_numpy(m) @ torch.from_numpy(n)",
        "no barrier after the products (a race)": SOLUTIONS["ex05-3-answer"].replace(
            "            p += ms[tr, i] * ns[i, tc]\n        cuda.syncthreads()\n",
            "            p += ms[tr, i] * ns[i, tc]\n"),
    },
    "ex05-4-answer": {
        "the notebook's matmul_k_numba": "matmul_bt_numba = matmul_k_numba",
        "torch, no kernel": "matmul_bt_numba = lambda m, nt, out: torch.from_numpy(m) @ torch.from_numpy(nt).T",
        "the naive kernel on nt, no shared memory": _NAIVE_BT,
        "matmul_k_numba's indexing under the asked name": _NAIVE_BT.replace("nt[c, i]", "nt[i, c]"),
        "the notebook's tiled kernel on nt as it is": "matmul_bt_numba = matmul_tiled_numba",
        "no barrier after the products (a race)": SOLUTIONS["ex05-4-answer"].replace(
            "            p += ms[tr, i] * ns[i, tc]\n        cuda.syncthreads()\n",
            "            p += ms[tr, i] * ns[i, tc]\n"),
    },
}

# right answers written otherwise than the solutions: each must be accepted (05-3's and 05-4's are in
# tests/unit/test_exercises_work.py, test_exercises_learners_launch.py and test_exercises_counted.py)
_RECT_N_TILE = """\
        for i in range(tr, TW, TH):  # rows tr and tr + 8 of the n tile (a range: numba types it on a GPU)
            ns[i, tc] = n[ph + i, c] if ph + i < k and c < w else numba.float32(0.0)
"""
assert _RECT_N_TILE in SOLUTIONS["ex05-3-answer"]

UNUSUAL = {
    "ex05-3-answer": {
        "the n tile loaded by flat index: each of the 128 threads loads two of its 256 elements": (
            SOLUTIONS["ex05-3-answer"].replace(_RECT_N_TILE, """\
        for e in range(tr * TW + tc, TW * TW, TH * TW):   # element e of the n tile: row e // TW, column e % TW
            i, j = e // TW, e % TW
            ns[i, j] = n[ph + i, c - tc + j] if ph + i < k and c - tc + j < w else numba.float32(0.0)
""")),
        "a while loop over k, the last tile's products cut short instead of padded": '''
TH = 8


@cuda.jit
def matmul_rect_numba(m, n, out):
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    c, r = cuda.grid(2)
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    ph = 0
    while ph < k:
        if ph + tc < k:                       # columns past k are never read below
            ms[tr, tc] = m[r, ph + tc] if r < h else numba.float32(0.0)
        for i in range(tr, min(TW, k - ph), TH):
            ns[i, tc] = n[ph + i, c] if c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(min(TW, k - ph)):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
        ph += TW
    if r < h and c < w:
        out[r, c] = p
''',
    },
    "ex05-4-answer": {
        "the nt tile kept as loaded (ns[tr, tc] = nt[c0 + tr, ph + tc]) and read along its rows": (
            SOLUTIONS["ex05-4-answer"].replace("ns[tc, tr] = nt[c0 + tr, ph + tc]", "ns[tr, tc] = nt[c0 + tr, ph + tc]")
            .replace("p += ms[tr, i] * ns[i, tc]", "p += ms[tr, i] * ns[tc, i]")),
        "tiles counted by a range, two partial sums (the even and the odd terms of each tile)": '''
@cuda.jit
def matmul_bt_numba(m, nt, out):
    ms = cuda.shared.array((TW, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    c, r = cuda.grid(2)
    c0 = c - tc
    h, k = m.shape
    w = nt.shape[0]
    even = numba.float32(0.0)
    odd = numba.float32(0.0)
    for t in range((k + TW - 1) // TW):
        ph = t * TW
        ms[tr, tc] = m[r, ph + tc] if r < h and ph + tc < k else numba.float32(0.0)
        ns[tc, tr] = nt[c0 + tr, ph + tc] if c0 + tr < w and ph + tc < k else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(0, TW, 2):
            even += ms[tr, i] * ns[i, tc]
            odd += ms[tr, i + 1] * ns[i + 1, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = even + odd
''',
    },
    "ex05-1-answer": {
        "the grid and the block as three numbers each, the grid by ceiling division": '''
import math


def launch_8x32(m, n, out):
    h, w = out.shape
    blocks = (math.ceil(w / 32), math.ceil(h / 8), 1)
    matmul_k_numba[blocks, (32, 8, 1)](m, n, out)
    return out
''',
        "the configuration as a tuple bound beforehand": '''
def launch_8x32(m, n, out):
    rows, cols = out.shape
    config = ((-(-cols // 32), -(-rows // 8)), (32, 8))
    matmul_k_numba[config](m, n, out)
    return out
''',
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer
