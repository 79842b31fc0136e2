"""Reference solutions of notebook 12's exercises, and answers its checks must refuse.

Exercise 1 builds CUDA C (in CI through the CPU emulation, which runs WMMA; a build takes a few seconds and the check
launches wmma_any_k itself): the solution pads the edge tiles with zeros in shared memory, and the cheats that a
build refuses (no tensor cores; rung 2 under another name, or trimmed, whose geometry is not one warp per tile;
the result written by torch; one warp doing all tiles).
"""

WMMA_ANY = r'''wmma_any_src = utils.cuda_begin + r"""
#include <cuda_fp16.h>
#include <mma.h>

// One warp per 16x16 tile of out. Each 16-step of k, the warp copies the tiles of m and n into shared memory,
// zeros where they reach past the matrices, so that the WMMA loads (always whole tiles) read zeros there;
// the result goes through shared memory too, and only the elements inside out are stored.
__global__ void wmma_any_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out,
                           int h, int w, int k) {
    using namespace nvcuda;
    __shared__ __align__(32) __half ms[16][16];
    __shared__ __align__(32) __half ns[16][16];
    __shared__ __align__(32) float os[16][16];
    const int lane = threadIdx.x, r0 = blockIdx.y * 16, c0 = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int i = 0; i < k; i += 16) {
        for (int e = lane; e < 16 * 16; e += 32) {
            const int r = e / 16, c = e % 16;
            ms[r][c] = r0 + r < h && i + c < k ? m[(r0 + r) * k + i + c] : __float2half(0.0f);
            ns[r][c] = i + r < k && c0 + c < w ? n[(i + r) * w + c0 + c] : __float2half(0.0f);
        }
        __syncwarp();                                   // the tiles are complete
        wmma::load_matrix_sync(a, &ms[0][0], 16);
        wmma::load_matrix_sync(b, &ns[0][0], 16);
        wmma::mma_sync(acc, a, b, acc);
        __syncwarp();                                   // read before the next step overwrites them
    }
    wmma::store_matrix_sync(&os[0][0], acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 16 * 16; e += 32) {
        const int r = r0 + e / 16, c = c0 + e % 16;
        if (r < h && c < w) out[r * w + c] = __float2half(os[e / 16][e % 16]);
    }
}

torch::Tensor wmma_any(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    CHECK_INPUT(m); CHECK_INPUT(n); CHECK_INPUT(out);
    TORCH_CHECK(m.scalar_type() == torch::kHalf && n.scalar_type() == torch::kHalf && out.scalar_type() == torch::kHalf,
                "wmma_any: m, n and out must be float16");
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    TORCH_CHECK(n.size(0) == k && out.size(0) == h && out.size(1) == w, "wmma_any: the sizes do not fit");
    wmma_any_k<<<dim3(cdiv(w, 16), cdiv(h, 16)), 32>>>(reinterpret_cast<const __half*>(m.data_ptr<at::Half>()),
        reinterpret_cast<const __half*>(n.data_ptr<at::Half>()), reinterpret_cast<__half*>(out.data_ptr<at::Half>()),
        h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
'''

# the same structure with the products done one by one in float: right values, no tensor cores
SCALAR = r'''wmma_any_src = utils.cuda_begin + r"""
#include <cuda_fp16.h>
__global__ void wmma_any_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out,
                           int h, int w, int k) {
    const int r = blockIdx.y * 16 + threadIdx.x / 16, c = blockIdx.x * 16 + threadIdx.x % 16;
    for (int q = 0; q < 8; ++q) {
        const int rr = r + 2 * q;
        if (rr < h && c < w) {
            float s = 0.0f;
            for (int i = 0; i < k; ++i) s += __half2float(m[rr * k + i]) * __half2float(n[i * w + c]);
            out[rr * w + c] = __float2half(s);
        }
    }
}
torch::Tensor wmma_any(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    wmma_any_k<<<dim3(cdiv(w, 16), cdiv(h, 16)), 32>>>(reinterpret_cast<const __half*>(m.data_ptr<at::Half>()),
        reinterpret_cast<const __half*>(n.data_ptr<at::Half>()), reinterpret_cast<__half*>(out.data_ptr<at::Half>()),
        h, w, k);
    return out;
}
"""
'''

# rung 2 of the notebook (tc_common.cuh and 02_wmma_shared.cu), renamed
RUNG2_RENAMED = '''wmma_any_src = tc.source([2]).replace("wmma_shared_k", "wmma_any_k").replace("tc_wmma_shared", "wmma_any")'''

# rung 2 renamed, with its two extra parameters dropped: the token stream differs from rung 2's, its geometry does not
RUNG2_TRIMMED = '''wmma_any_src = (tc.source([2]).replace("wmma_shared_k", "wmma_any_k").replace("tc_wmma_shared", "wmma_any")
                .replace("int h, int w, int k, bool vec_m, bool vec_n) {",
                         "int h, int w, int k) {\\n    const bool vec_m = false, vec_n = false;")
                .replace("h, w, k, vec_m, vec_n);", "h, w, k);"))'''

# rung 1's kernel (a variable renamed) on copies of m and n padded to multiples of 16 by torch, the result copied
# into out by torch
PADDED_BY_TORCH = '''import re
wmma_any_src = (re.sub(r"\\bacc\\b", "total", tc.source([1])) + r"""
torch::Tensor wmma_any(torch::Tensor m, torch::Tensor n, torch::Tensor out) {
    const int h = m.size(0), k = m.size(1), w = n.size(1);
    const int hp = cdiv(h, 16) * 16, kp = cdiv(k, 16) * 16, wp = cdiv(w, 16) * 16;
    auto mp = torch::zeros({hp, kp}, m.options()), np = torch::zeros({kp, wp}, n.options());
    mp.narrow(0, 0, h).narrow(1, 0, k).copy_(m);
    np.narrow(0, 0, k).narrow(1, 0, w).copy_(n);
    auto op = torch::empty({hp, wp}, out.options());
    tc_wmma_global(mp, np, op);
    out.copy_(op.narrow(0, 0, h).narrow(1, 0, w));
    return out;
}
""").replace("wmma_global_k", "wmma_any_k")
'''

# the tensor cores only in a branch no thread takes; the products one by one in float
UNTAKEN_MMA = WMMA_ANY.replace(
    """        wmma::mma_sync(acc, a, b, acc);
        __syncwarp();                                   // read before the next step overwrites them
    }""",
    """        if (k < 0) wmma::mma_sync(acc, a, b, acc);   // never
        __syncwarp();                                   // read before the next step overwrites them
    }
    for (int e = lane; e < 16 * 16; e += 32) {
        const int r = r0 + e / 16, c = c0 + e % 16;
        float s = 0.0f;
        for (int i = 0; i < k; ++i) if (r < h && c < w) s += __half2float(m[r * k + i]) * __half2float(n[i * w + c]);
        if (r < h && c < w) out[r * w + c] = __float2half(s);
    }
    return;""")

# every warp does its own tiles' WMMA, but block (0, 0) writes the whole product, computed one by one
ONE_WARP_WRITES = WMMA_ANY.replace(
    """        if (r < h && c < w) out[r * w + c] = __float2half(os[e / 16][e % 16]);
    }
}""",
    """        if (r < h && c < w && os[e / 16][e % 16] != os[e / 16][e % 16]) out[r * w + c] = __float2half(0.0f);
    }
    if (blockIdx.x == 0 && blockIdx.y == 0 && lane == 0)
        for (int r = 0; r < h; ++r)
            for (int c = 0; c < w; ++c) {
                float s = 0.0f;
                for (int i = 0; i < k; ++i) s += __half2float(m[r * k + i]) * __half2float(n[i * w + c]);
                out[r * w + c] = __float2half(s);
            }
}""")

SOLUTIONS = {
    "ex12-1-answer": WMMA_ANY,
    "ex12-2-answer": '''
def swizzle(row, piece):
    # rows 64 bytes apart alternate between the two halves of the banks, so rows r, r + 2, r + 4, r + 6 of a pass
    # start in the same bank: XOR the piece with (row / 2) % 4, which differs for those four
    return piece ^ ((row // 2) % 4)
''',
    "ex12-3-answer": '''
import math
def smallest_tile(flop_per_clock, bytes_per_clock):
    # a b x b tile loads 2 * b * bk halves (4 b bk bytes) per k-step for 2 b^2 bk FLOP: b / 2 FLOP per byte,
    # which must reach the FLOP per byte the rates ask for
    need = flop_per_clock / bytes_per_clock
    b = 16
    while b / 2 < need:
        b += 16
    return b
''',
}

CHEATS = {
    "ex12-1-answer": {
        "torch": "wmma_any_src = lambda m, n, out: torch.matmul(m, n, out=out)",
        "products one by one in float, no tensor cores": SCALAR,
        "rung 2 of the notebook under another name": RUNG2_RENAMED,
        "rung 1 on copies padded by torch, out written by torch": PADDED_BY_TORCH,
        "rung 2 renamed, two parameters dropped": RUNG2_TRIMMED,
    },
    "ex12-2-answer": {
        "no swizzle": "swizzle = lambda row, piece: piece",
        "rung 3's swizzle, for 128-byte rows": "swizzle = lambda row, piece: piece ^ (row % 8)",
        "XOR with row % 4": "swizzle = lambda row, piece: piece ^ (row % 4)",
        "a rotation by the row": "swizzle = lambda row, piece: (piece + row) % 4",
        "every piece at place 0": "swizzle = lambda row, piece: 0",
        "a number": "swizzle = 3",
    },
    "ex12-3-answer": {
        "a number": "smallest_tile = 128",
        "the side not rounded to 16": "smallest_tile = lambda flop_per_clock, bytes_per_clock: 2 * flop_per_clock / bytes_per_clock",
        "b FLOP per byte instead of b / 2": "import math\nsmallest_tile = lambda f, b: 16 * math.ceil(f / b / 16)",
        "fp32 operands": "import math\nsmallest_tile = lambda f, b: 16 * math.ceil(4 * f / b / 16)",
        "rounded down": "smallest_tile = lambda f, b: max(16, 16 * int(2 * f / b // 16))",
        "the course's own function": "smallest_tile = lesson.smallest_square_tile",
    },
}

# the product by scalar multiply-adds from shared tiles, mma_sync on zero fragments beside it (the loads are a tiled
# kernel's; the emulation, launched again with every mma_sync product doubled, sees the output unchanged)
SHARED_SCALAR_BESIDE_ZERO_MMA = r'''wmma_any_src = utils.cuda_begin + r"""
#include <cuda_fp16.h>
#include <mma.h>

__global__ void wmma_any_k(const __half* __restrict__ m, const __half* __restrict__ n, __half* __restrict__ out,
                           int h, int w, int k) {
    using namespace nvcuda;
    __shared__ float ms[16][16], ns[16][16];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> z;
    wmma::fill_fragment(a, __float2half(0.0f)); wmma::fill_fragment(b, __float2half(0.0f)); wmma::fill_fragment(z, 0.0f);
    const int r0 = blockIdx.y * 16, c0 = blockIdx.x * 16, lane = threadIdx.x;
    float s[8] = {};
    for (int i = 0; i < k; i += 16) {
        for (int e = lane; e < 256; e += 32) {
            int r = e / 16, c = e % 16;
            ms[r][c] = r0 + r < h && i + c < k ? __half2float(m[(r0 + r) * k + i + c]) : 0.0f;
            ns[r][c] = i + r < k && c0 + c < w ? __half2float(n[(i + r) * w + c0 + c]) : 0.0f;
        }
        __syncwarp();
        wmma::mma_sync(z, a, b, z);
        for (int j = 0; j < 8; ++j) {
            int e = lane + 32 * j, r = e / 16, c = e % 16;
            for (int q = 0; q < 16; ++q) s[j] += ms[r][q] * ns[q][c];
        }
        __syncwarp();
    }
    for (int j = 0; j < 8; ++j) {
        int e = lane + 32 * j, r = r0 + e / 16, c = c0 + e % 16;
        if (r < h && c < w) out[r * w + c] = __float2half(s[j] + z.x[0]);
    }
}

''' + WMMA_ANY[WMMA_ANY.index("torch::Tensor wmma_any("):]

# Refused only in cpu mode, where the emulation counts what every thread of the course's own launch did; on a GPU the
# evidence is the compiled kernel, where a branch whose condition depends on the arguments stays.
CPU_CHEATS = {
    "ex12-1-answer": {
        "wmma::mma_sync in a branch no thread takes": UNTAKEN_MMA,
        "block (0, 0) writes the whole product": ONE_WARP_WRITES,
        "the product from shared tiles by scalar multiply-adds, mma_sync on zero fragments beside it":
            SHARED_SCALAR_BESIDE_ZERO_MMA,
    },
}


# exercise 4: where wgmma reads an operand through a descriptor with the 128-byte swizzle
_ADDRESS = '''
def wgmma_address(start, lbo, sbo, mn_major, k, i):
    if mn_major:   # one 128-byte row per k, 8 rows (k) per sbo, 64 columns (i) per lbo
        addr = start + (i // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + 2 * (i % 64)
    else:          # one 128-byte row (64 halves along k) per i, 8 rows per sbo
        addr = start + (i // 8) * sbo + (i % 8) * 128 + 2 * k
    return {swizzled}
'''
_SWIZZLED = "addr ^ (((addr >> 7) & 7) << 4)   # the 16-byte piece (bits 4-6) XOR the row within 1024 bytes (7-9)"

SOLUTIONS["ex12-4-answer"] = _ADDRESS.format(swizzled=_SWIZZLED)
CHEATS["ex12-4-answer"] = {
    "the course's function": "wgmma_address = lesson.wgmma_address",
    "the course's swizzle helper": _ADDRESS.format(swizzled="lesson.swizzle_128b(addr)"),
    "no swizzle": _ADDRESS.format(swizzled="addr"),
    "the offset from the start swizzled, not the address (wrong 32 bytes into a 1024-byte group)": _ADDRESS.format(
        swizzled="start + ((addr - start) ^ ((((addr - start) >> 7) & 7) << 4))"),
    "LBO and SBO swapped": _ADDRESS.format(swizzled=_SWIZZLED).replace(
        "(i // 64) * lbo + (k // 8) * sbo", "(i // 64) * sbo + (k // 8) * lbo"),
    "the piece XORed with i % 8 (the operand's row) in both majors": _ADDRESS.format(
        swizzled="addr ^ ((i % 8) << 4)"),
}

_STAGE_LOOP = WMMA_ANY[WMMA_ANY.index("    for (int i = 0; i < k; i += 16) {\n"):
                       WMMA_ANY.index("    wmma::store_matrix_sync(&os[0][0], acc, 16, wmma::mem_row_major);")]
_TILES = ("    __shared__ __align__(32) __half ms[16][16];\n"
          "    __shared__ __align__(32) __half ns[16][16];\n")
assert _TILES in WMMA_ANY

# right answers written otherwise than the solution: each must be accepted (another, judged by its counts, is in
# tests/unit/test_exercises_learners_launch.py)
UNUSUAL = {
    "ex12-1-answer": {
        "two lanes a row of each tile, 8 halves each: zeros first, then what lies inside": WMMA_ANY.replace(
            _STAGE_LOOP, """\
    const int tr = lane / 2, tc0 = (lane % 2) * 8;     // this lane's 8 halves of row tr of both tiles
    for (int i = 0; i < k; i += 16) {
        for (int c = tc0; c < tc0 + 8; ++c) {
            ms[tr][c] = __float2half(0.0f);
            ns[tr][c] = __float2half(0.0f);
            if (r0 + tr < h && i + c < k) ms[tr][c] = m[(r0 + tr) * k + i + c];
            if (i + tr < k && c0 + c < w) ns[tr][c] = n[(i + tr) * w + c0 + c];
        }
        __syncwarp();
        wmma::load_matrix_sync(a, &ms[0][0], 16);
        wmma::load_matrix_sync(b, &ns[0][0], 16);
        wmma::mma_sync(acc, a, b, acc);
        __syncwarp();
    }
"""),
        "32 of k a step: two pairs of tiles staged, the second product skipped past k": WMMA_ANY.replace(
            _TILES, _TILES.replace("[16][16]", "[2][16][16]")).replace(_STAGE_LOOP, """\
    for (int i = 0; i < k; i += 32) {
        for (int e = lane; e < 2 * 16 * 16; e += 32) {
            const int q = e / 256, r = e / 16 % 16, c = e % 16, kq = i + 16 * q;
            ms[q][r][c] = r0 + r < h && kq + c < k ? m[(r0 + r) * k + kq + c] : __float2half(0.0f);
            ns[q][r][c] = kq + r < k && c0 + c < w ? n[(kq + r) * w + c0 + c] : __float2half(0.0f);
        }
        __syncwarp();
        for (int q = 0; q < 2 && i + 16 * q < k; ++q) {    // a 16-step wholly past k adds nothing: not done
            wmma::load_matrix_sync(a, &ms[q][0][0], 16);
            wmma::load_matrix_sync(b, &ns[q][0][0], 16);
            wmma::mma_sync(acc, a, b, acc);
        }
        __syncwarp();
    }
"""),
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer
