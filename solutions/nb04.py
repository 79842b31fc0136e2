"""Reference solutions of notebook 04's exercises, and answers its checks must refuse.

Exercise 3 builds CUDA C (in CI through the CPU emulation, a few seconds a build, and a second build: the check
launches matmul_bt_k itself): the solution and the cheats that need a build to be refused (no shared memory; a
kernel fed a transposed copy; tiles that are text, not execution; the work done elsewhere).
"""

MATMUL_BT = r'''matmul_bt_src = utils.cuda_begin + r"""
constexpr int TW = 16;

__global__ void matmul_bt_k(const float* __restrict__ m, const float* __restrict__ nt,
                            float* __restrict__ out, int h, int w, int k) {
    __shared__ float ms[TW][TW];
    __shared__ float nts[TW][TW + 1];   // nts[j][i] = n[ph + i][c0 + j] = nt[c0 + j][ph + i]; +1: no bank conflicts
    int tr = threadIdx.y, tc = threadIdx.x;
    int r = blockIdx.y * TW + tr, c0 = blockIdx.x * TW, c = c0 + tc;
    float p = 0.0f;
    for (int ph = 0; ph < k; ph += TW) {
        ms[tr][tc] = (r < h && ph + tc < k) ? m[r * k + ph + tc] : 0.0f;
        // neighbouring threads (tc) read neighbouring floats of one row of nt: coalesced
        nts[tr][tc] = (c0 + tr < w && ph + tc < k) ? nt[(c0 + tr) * k + ph + tc] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TW; ++i) p += ms[tr][i] * nts[tc][i];
        __syncthreads();
    }
    if (r < h && c < w) out[r * w + c] = p;
}

torch::Tensor matmul_bt(torch::Tensor m, torch::Tensor nt, torch::Tensor out) {
    CHECK_INPUT(m); CHECK_INPUT(nt); CHECK_INPUT(out);
    int h = m.size(0), k = m.size(1), w = nt.size(0);
    TORCH_CHECK(nt.size(1) == k && out.dim() == 2 && out.size(0) == h && out.size(1) == w,
                ("matmul_bt: m is " + std::to_string(h) + "x" + std::to_string(k) + ", so nt must have " +
                 std::to_string(k) + " columns and out must be " + std::to_string(h) + "x" + std::to_string(w)).c_str());
    matmul_bt_k<<<dim3(cdiv(w, TW), cdiv(h, TW)), dim3(TW, TW), 0, at::cuda::getCurrentCUDAStream()>>>(
        m.data_ptr<float>(), nt.data_ptr<float>(), out.data_ptr<float>(), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
'''

NAIVE_BT = r'''matmul_bt_src = utils.cuda_begin + r"""
__global__ void matmul_bt_k(const float* __restrict__ m, const float* __restrict__ nt,
                            float* __restrict__ out, int h, int w, int k) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < h && c < w) {
        float p = 0.0f;
        for (int i = 0; i < k; ++i) p += m[r * k + i] * nt[c * k + i];
        out[r * w + c] = p;
    }
}

torch::Tensor matmul_bt(torch::Tensor m, torch::Tensor nt, torch::Tensor out) {
    int h = m.size(0), k = m.size(1), w = nt.size(0);
    matmul_bt_k<<<dim3(cdiv(w, 16), cdiv(h, 16)), dim3(16, 16)>>>(
        m.data_ptr<float>(), nt.data_ptr<float>(), out.data_ptr<float>(), h, w, k);
    return out;
}
"""
'''

# matmul_static_k of section 4, renamed, fed a transposed copy of nt made by torch
STATIC_ON_A_COPY = '''matmul_bt_src = utils.cuda_begin + static_src[:static_src.index("torch::Tensor matmul_static(")].replace(
    "matmul_static_k", "matmul_bt_k") + r"""
torch::Tensor matmul_bt(torch::Tensor m, torch::Tensor nt, torch::Tensor out) {
    auto n = nt.t().contiguous();
    int h = m.size(0), k = m.size(1), w = n.size(1);
    matmul_bt_k<<<dim3(cdiv(w, TW), cdiv(h, TW)), dim3(TW, TW)>>>(
        m.data_ptr<float>(), n.data_ptr<float>(), out.data_ptr<float>(), h, w, k);
    return out;
}
"""
'''

# matmul_dyn_k of section 4 (not a course file), renamed, fed a transposed copy of nt
DYN_ON_A_COPY = '''matmul_bt_src = utils.cuda_begin + dyn_src[:dyn_src.index("torch::Tensor matmul_dyn(")].replace(
    "matmul_dyn_k", "matmul_bt_k") + r"""
torch::Tensor matmul_bt(torch::Tensor m, torch::Tensor nt, torch::Tensor out) {
    auto n = nt.t().contiguous();
    int h = m.size(0), k = m.size(1), w = n.size(1), tw = 16;
    matmul_bt_k<<<dim3(cdiv(w, tw), cdiv(h, tw)), dim3(tw, tw), 2 * tw * tw * sizeof(float)>>>(
        m.data_ptr<float>(), n.data_ptr<float>(), out.data_ptr<float>(), h, w, k, tw);
    return out;
}
"""
'''

# the naive kernel with tiles that are declared, or staged, but not what computes the product
DEAD_TILES = NAIVE_BT.replace("""    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
""", """    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
#if 0
    __shared__ float ms[16][16], nts[16][16];
    ms[threadIdx.y][threadIdx.x] = m[r * k + threadIdx.x];
    nts[threadIdx.y][threadIdx.x] = nt[c * k + threadIdx.y];
    __syncthreads();
#endif
""")
UNTAKEN_TILES = NAIVE_BT.replace("""    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
""", """    __shared__ float ms[16][16], nts[16][16];
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < 0) {   // never true
        ms[threadIdx.y][threadIdx.x] = m[r * k + threadIdx.x];
        nts[threadIdx.y][threadIdx.x] = nt[c * k + threadIdx.y];
        __syncthreads();
        out[r * w + c] = ms[threadIdx.y][0] * nts[0][threadIdx.x];
    }
""")
UNUSED_TILES = NAIVE_BT.replace("""    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
""", """    __shared__ float ms[16][16], nts[16][16 + 1];
    __syncthreads();
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
""")
# the tiles are loaded (every thread, with barriers) and never read: the product comes from global memory
TILES_NEVER_READ = MATMUL_BT.replace(
    "for (int i = 0; i < TW; ++i) p += ms[tr][i] * nts[tc][i];",
    "for (int i = 0; i < TW && ph + i < k; ++i) if (r < h && c < w) p += m[r * k + ph + i] * nt[c * k + ph + i];")
# every thread stages and reads the tiles, but thread (0,0) of block (0,0) computes the whole product
ONE_THREAD_BT = MATMUL_BT.replace(
    "    if (r < h && c < w) out[r * w + c] = p;",
    """    if (p != p) return;   // uses p (never NaN here)
    if (blockIdx.x == 0 && blockIdx.y == 0 && tr == 0 && tc == 0)
        for (int rr = 0; rr < h; ++rr)
            for (int cc = 0; cc < w; ++cc) {
                float q = 0.0f;
                for (int i = 0; i < k; ++i) q += m[rr * k + i] * nt[cc * k + i];
                out[rr * w + cc] = q;
            }""")
# a naive kernel of the source computes the product; matmul_bt_k (tiles, barriers) runs after it, writes nothing
WORK_ELSEWHERE = MATMUL_BT.replace(
    "    if (r < h && c < w) out[r * w + c] = p;", "    if (p != p) out[0] = p;   // never").replace(
    "torch::Tensor matmul_bt(torch::Tensor m, torch::Tensor nt, torch::Tensor out) {", """__global__ void helper_k(const float* m, const float* nt, float* out, int h, int w, int k) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < h && c < w) {
        float p = 0.0f;
        for (int i = 0; i < k; ++i) p += m[r * k + i] * nt[c * k + i];
        out[r * w + c] = p;
    }
}

torch::Tensor matmul_bt(torch::Tensor m, torch::Tensor nt, torch::Tensor out) {""").replace(
    "    matmul_bt_k<<<", """    helper_k<<<dim3(cdiv(nt.size(0), TW), cdiv(m.size(0), TW)), dim3(TW, TW)>>>(
        m.data_ptr<float>(), nt.data_ptr<float>(), out.data_ptr<float>(), m.size(0), nt.size(0), m.size(1));
    matmul_bt_k<<<""")

SOLUTIONS = {
    # every row of m is loaded once per column of blocks, every column of n once per row of blocks
    "ex04-1-answer": "global_loads = lambda h, w, k, bm, bn: k * (h * utils.cdiv(w, bn) + w * utils.cdiv(h, bm))",
    "ex04-2-answer": '''
def max_registers(blocks, threads):
    warps = blocks * utils.cdiv(threads, 32)      # warps that must be resident
    per_warp = 65536 // warps // 256 * 256        # registers each warp may hold, in whole units of 256
    return min(255, per_warp // 32)               # and a thread addresses at most 255
''',
    "ex04-3-answer": MATMUL_BT,
    "ex04-4-answer": '''
def fastest_tile_width(a, b, o):
    medians = {tw: utils.bench(mod.matmul_tiled, a, b, o, tw).median for tw in (8, 16, 32)}
    return min(medians, key=medians.get)
''',
}

CHEATS = {
    "ex04-1-answer": {
        "a number from the table of section 6": "global_loads = 0.0312",
        "per multiply-add, not in all": "global_loads = lambda h, w, k, bm, bn: (bm + bn) / (bm * bn)",
        "the naive kernel's count": "global_loads = lambda h, w, k, bm, bn: 2 * h * w * k",
        "whole tiles only (section 6's count times h·w·k)": (
            "global_loads = lambda h, w, k, bm, bn: (h // bm) * (w // bn) * k * (bm + bn)"),
        "partial tiles loaded whole (padding counted as loads)": (
            "global_loads = lambda h, w, k, bm, bn: utils.cdiv(h, bm) * utils.cdiv(w, bn) * k * (bm + bn)"),
        "the package's reference": "global_loads = matmul_ladder.grid_global_loads",
    },
    "ex04-2-answer": {
        "the 128 of rung 7's __launch_bounds__(256, 2)": "max_registers = 128",
        "a search with the notebook's occupancy()": (
            "max_registers = lambda blocks, threads: max(r for r in range(1, 256) "
            "if occupancy(r, 0, threads)[0] >= blocks)"),
        "the allocation unit ignored": "max_registers = lambda blocks, threads: 65536 // (blocks * threads)",
        "a search with the course's occupancy module": (
            "max_registers = lambda blocks, threads: max(r for r in range(1, 256) "
            "if sm_occupancy.blocks_per_sm(threads, r, 0, SM).blocks >= blocks)"),
    },
    "ex04-3-answer": {
        "torch": "matmul_bt_src = lambda m, nt, out: torch.matmul(m, nt.T, out=out)",
        "the course's tiled kernel (rung 3) under the exercise's name": (
            "matmul_bt_src = utils.cuda_begin + matmul_ladder.rung_source(3).replace('matmul_tiled_k', 'matmul_bt_k')"),
        "no shared memory": NAIVE_BT,
        "matmul_static_k on a transposed copy of nt": STATIC_ON_A_COPY,
        "matmul_dyn_k on a transposed copy of nt": DYN_ON_A_COPY,
        "__shared__ tiles and __syncthreads() under #if 0": DEAD_TILES,
        "an unused __shared__ array and a __syncthreads()": UNUSED_TILES,
        "tiles stored into shared memory and never read back": TILES_NEVER_READ,
        "a naive kernel computes the product; matmul_bt_k, launched after it, writes nothing": WORK_ELSEWHERE,
    },
    "ex04-4-answer": {
        "the width read off the stored lecture-5 timings": "fastest_tile_width = 32",
        "an answer without measuring": "fastest_tile_width = lambda a, b, o: 32",
        "two widths timed": '''
def fastest_tile_width(a, b, o):
    medians = {tw: utils.bench(mod.matmul_tiled, a, b, o, tw).median for tw in (16, 32)}
    return min(medians, key=medians.get)
''',
        "the slowest returned": '''
def fastest_tile_width(a, b, o):
    medians = {tw: utils.bench(mod.matmul_tiled, a, b, o, tw).median for tw in (8, 16, 32)}
    return max(medians, key=medians.get)
''',
    },
}

# Refused only in cpu mode, where the emulation counts what every thread of the course's own launch did; on
# a GPU the evidence is the compiled kernel, where a branch whose condition depends on the arguments stays
# and the split of the work between threads does not show.
CPU_CHEATS = {
    "ex04-3-answer": {
        "__shared__ tiles and __syncthreads() in a branch no thread takes": UNTAKEN_TILES,
        "every thread stages tiles, thread (0,0) of block (0,0) computes the whole product": ONE_THREAD_BT,
    },
}

_BT_KERNEL = MATMUL_BT[MATMUL_BT.index("constexpr int TW = 16;"):MATMUL_BT.index("torch::Tensor matmul_bt(")]

# right answers written otherwise than the solution: each must be accepted
UNUSUAL = {
    "ex04-3-answer": {
        "8 x 8 tiles, the n tile gathered from nt a column at a time (uncoalesced, correct)": MATMUL_BT.replace(
            _BT_KERNEL, r"""constexpr int TW = 8;

__global__ void matmul_bt_k(const float* __restrict__ m, const float* __restrict__ nt,
                            float* __restrict__ out, int h, int w, int k) {
    __shared__ float ms[TW][TW], ns[TW][TW];     // ns[i][j] = n[ph + i][c0 + j]
    const int tr = threadIdx.y, tc = threadIdx.x, r = blockIdx.y * TW + tr, c = blockIdx.x * TW + tc;
    float p = 0.0f;
    for (int ph = 0; ph < k; ph += TW) {
        ms[tr][tc] = (r < h && ph + tc < k) ? m[r * k + ph + tc] : 0.0f;
        ns[tr][tc] = (c < w && ph + tr < k) ? nt[c * k + ph + tr] : 0.0f;   // n[ph + tr][c] = nt[c][ph + tr]
        __syncthreads();
        for (int i = 0; i < TW; ++i) p += ms[tr][i] * ns[i][tc];
        __syncthreads();
    }
    if (r < h && c < w) out[r * w + c] = p;
}

"""),
        "one dynamic shared-memory array holding both tiles, flat indices, the last k-tile's loop cut short": (
            MATMUL_BT.replace(_BT_KERNEL, r"""constexpr int TW = 16;

__global__ void matmul_bt_k(const float* __restrict__ m, const float* __restrict__ nt,
                            float* __restrict__ out, int h, int w, int k) {
    extern __shared__ float tiles[];             // the m tile, then the nt tile (row j: column c0 + j of n)
    float* ms = tiles;
    float* nts = tiles + TW * TW;
    const int tr = threadIdx.y, tc = threadIdx.x, r = blockIdx.y * TW + tr, c0 = blockIdx.x * TW;
    float p = 0.0f;
    for (int ph = 0; ph < k; ph += TW) {
        if (ph + tc < k) {                       // columns past k are never read below: nothing to pad
            ms[tr * TW + tc] = r < h ? m[r * k + ph + tc] : 0.0f;
            nts[tr * TW + tc] = c0 + tr < w ? nt[(c0 + tr) * k + ph + tc] : 0.0f;
        }
        __syncthreads();
        const int steps = min(TW, k - ph);
        for (int i = 0; i < steps; ++i) p += ms[tr * TW + i] * nts[tc * TW + i];
        __syncthreads();
    }
    if (r < h && c0 + tc < w) out[r * w + c0 + tc] = p;
}

""").replace("dim3(TW, TW), 0,", "dim3(TW, TW), 2 * TW * TW * sizeof(float),")),
    },
}
for _answer, _variants in UNUSUAL.items():   # each differs from the solution it stands beside
    assert all(code != SOLUTIONS[_answer] for code in _variants.values()), _answer
