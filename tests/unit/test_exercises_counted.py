"""Every access counts, whatever it goes through, and a copy of the reference is one under any name (cpu mode).

* CUDA C (the emulation): ``memcpy`` in device code, pointers held in a local struct (``io.out[j]``) and
  ``*b++ = f(*a++)`` in a ``__device__`` helper are counted like ``out[j]``: one thread doing the whole
  ReLU, or a naive product loaded through ``memcpy``, is refused; a correct answer written that way passes.
* Numba (the simulator): the elements read through a view of an input (``m[r]``, ``n[:, c]``) are global
  loads: a naive product read through row and column views is refused beside dummy tiles.
* Formulas: the reference rebuilt from its source (``inspect.getsource`` + ``exec``) under another name,
  its docstring removed where the code is long enough not to be written again by chance, is refused; an
  honest formula that happens to read like a short reference passes.
"""
import inspect
import math
import re
import textwrap

import utils  # first: it sets the simulator switches that numba reads at import

import numba
import pytest
import torch
from numba import cuda

from test_exercises_work import BT, RELU, RELU_LOOP, build, check_bt, check_relu, src_of, verdict
from solutions import nb03

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the emulation's and the simulator's counts"),
              pytest.mark.usefixtures("without_nvcc_check")]

RELU_OK = "✅ a ReLU kernel: correct"


def relu_with(kernel_body: str, before: str = "") -> str:
    return RELU.replace("__global__ void relu_k", before + "__global__ void relu_k").replace(RELU_LOOP, kernel_body)


# ------------------------------------------------------------------------------------------------
# 03: one thread doing everything where the count did not look

@pytest.mark.slow
@pytest.mark.parametrize("src", [
    # memcpy (valid device code): thread 0 loads and stores every element through it
    relu_with("    if (i == 0) for (int j = 0; j < n; ++j) { float v; memcpy(&v, x + j, 4); v = fmaxf(v, 0.0f); "
              "memcpy(out + j, &v, 4); }"),
    # the pointers held in a local struct
    relu_with("    Io io{x, out};\n    if (i == 0) for (int j = 0; j < n; ++j) io.out[j] = fmaxf(io.x[j], 0.0f);",
              "struct Io { const float* x; float* out; };\n"),
    # a __device__ helper walking raw pointers with *b++ = f(*a++)
    relu_with("    if (i == 0) all_of_it(x, out, n);",
              "__device__ void all_of_it(const float* a, float* b, int n) {\n"
              "    for (int j = 0; j < n; ++j) *b++ = fmaxf(*a++, 0.0f);\n}\n"),
    # the elements read and written as members of a struct, through ->
    relu_with("    const F* a = reinterpret_cast<const F*>(x); F* o = reinterpret_cast<F*>(out);\n"
              "    if (i == 0) for (int j = 0; j < n; ++j) (o + j)->v = fmaxf((a + j)->v, 0.0f);",
              "struct F { float v; };\n"),
    # references bound to elements (through a local pointer and through ->), read and written through them
    relu_with("    const F* a = reinterpret_cast<const F*>(x); float* o = out;\n"
              "    if (i == 0) for (int j = 0; j < n; ++j) { const float& v = (a + j)->v; float& r = o[j]; r = fmaxf(v, 0.0f); }",
              "struct F { float v; };\n"),
], ids=["memcpy", "struct-member-pointers", "helper-postincrement", "arrow", "references"])
def test_03_one_thread_is_refused_whatever_the_access_goes_through(src, capsys):
    why = verdict(capsys, check_relu, src)
    assert why.startswith("❌ a ReLU kernel: not yet: in the check's launch of relu_k"), why
    # every access thread 0's: its 4099 loads and 4099 stores (a member through ->, after for (...), included)
    assert re.search(r"thread 0 of block 0 made 8198 of the 8198 global memory accesses: split the work", why), why


@pytest.mark.slow
@pytest.mark.parametrize("src", [
    relu_with("    if (i < n) { float v; memcpy(&v, x + i, sizeof v); v = fmaxf(v, 0.0f); memcpy(out + i, &v, sizeof v); }"),
    relu_with("    Io io{x + i, out + i};\n    if (i < n) *io.out = fmaxf(*io.x, 0.0f);",
              "struct Io { const float* x; float* out; };\n"),
    relu_with("    const F* a = reinterpret_cast<const F*>(x) + i;\n    if (i < n) reinterpret_cast<F*>(out)[i].v = fmaxf(a->v, 0.0f);",
              "struct F { float v; };\n"),
], ids=["memcpy-per-thread", "struct-per-thread", "arrow-per-thread"])
def test_03_the_same_accesses_split_between_threads_pass(src, capsys):
    assert verdict(capsys, check_relu, src).startswith(RELU_OK)


X36 = torch.randn(4099)
RELU4 = src_of(nb03.RELU4)
RELU4_LOAD = ("        float4 v = reinterpret_cast<const float4*>(x)[j];\n"
              "        reinterpret_cast<float4*>(out)[j] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), "
              "fmaxf(v.z, 0.0f), fmaxf(v.w, 0.0f));\n")


def check_relu4(src):
    def run(mod):
        out = utils.poisoned(X36.numel())
        mod.relu4(X36, out)
        return out
    utils.kernel_exercise("a ReLU kernel with float4 loads", src, kind="cuda", kernel="relu4_k", build=build("relu4"),
                          run=run, reference=lambda: torch.relu(X36), atol=0, rtol=0,
                          evidence=[utils.splits_work(items=X36.numel(), per_thread=4)])


@pytest.mark.slow
def test_03_float4_counts_memcpy_by_the_bytes_it_moves(capsys):
    assert RELU4_LOAD in RELU4
    ok = "✅ a ReLU kernel with float4 loads: correct"
    # unusual (accepted): the 16 bytes through one memcpy each way, as one float4
    whole = RELU4.replace(RELU4_LOAD, "        float4 v; memcpy(&v, x + 4 * j, 16);\n"
                          "        v = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f), fmaxf(v.w, 0.0f));\n"
                          "        memcpy(out + 4 * j, &v, 16);\n")
    assert verdict(capsys, check_relu4, whole).startswith(ok)
    # unusual (accepted): the float4's lanes in a loop through a pointer to the thread's own local variable (its
    # accesses are not global memory's: only the float4 load and store count)
    lanes = RELU4.replace(RELU4_LOAD, "        float4 v = reinterpret_cast<const float4*>(x)[j];\n"
                          "        float* lane = &v.x;\n        for (int q = 0; q < 4; ++q) lane[q] = fmaxf(lane[q], 0.0f);\n"
                          "        reinterpret_cast<float4*>(out)[j] = v;\n")
    assert verdict(capsys, check_relu4, lanes).startswith(ok)
    # class 2: four scalar memcpy loads a thread, no float4
    scalar = RELU4.replace(RELU4_LOAD, "        for (int q = 0; q < 4; ++q) { float v; memcpy(&v, x + 4 * j + q, 4); "
                           "v = fmaxf(v, 0.0f); memcpy(out + 4 * j + q, &v, 4); }\n")
    why = verdict(capsys, check_relu4, scalar)
    assert why.startswith("❌ a ReLU kernel with float4 loads: not yet: in the check's launch, relu4_k made 4,099 "
                          "global loads for 4,099 elements"), why


# ------------------------------------------------------------------------------------------------
# 04: a naive product's loads through memcpy

@pytest.mark.slow
def test_04_memcpy_loads_are_counted(capsys):
    tile_m = "ms[tr][tc] = (r < h && ph + tc < k) ? m[r * k + ph + tc] : 0.0f;"
    assert tile_m in BT
    # unusual (accepted): the tile of m loaded through memcpy
    by_memcpy = BT.replace(tile_m, "ms[tr][tc] = 0.0f; if (r < h && ph + tc < k) memcpy(&ms[tr][tc], m + r * k + ph + tc, 4);")
    assert verdict(capsys, check_bt, by_memcpy).startswith("✅ transposed-B tiled kernel: correct")
    # class 2: the naive product's 2k loads per output through memcpy, parked in the tile
    naive = BT.replace("    for (int ph = 0; ph < k; ph += TW) {", """    for (int i = 0; r < h && c < w && i < k; ++i) {
        float a, b; memcpy(&a, m + r * k + i, 4); memcpy(&b, nt + c * k + i, 4); p += a * b; }
    ms[tr][tc] = p; __syncthreads(); p = ms[tr][tc];
    for (int ph = k; ph < k; ph += TW) {""")
    why = verdict(capsys, check_bt, naive)
    assert why.startswith("❌ transposed-B tiled kernel: not yet: when the check launched matmul_bt_k for a 50x37 by "
                          "37x45 product, it made 74.0 global loads per output element"), why


# ------------------------------------------------------------------------------------------------
# 05 (Numba): element reads through views are global loads

TH, TW = 8, 16
A5, B5 = torch.randn(12, 19), torch.randn(19, 21)


@cuda.jit
def rect_views_naive(m, n, out):   # class 1+2: a naive product through row/column views, beside dummy tiles
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    z = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = numba.float32(0.0)
        ns[tr, tc] = numba.float32(0.0)
        ns[tr + TH, tc] = numba.float32(0.0)
        cuda.syncthreads()
        z += ms[tr, tc] + ns[tr, tc]
        cuda.syncthreads()
    if r < h and c < w:
        mr = m[r]
        nc = n[:, c]
        p = z
        for i in range(k):
            p += mr[i] * nc[i]
        out[r, c] = p


@cuda.jit
def rect_iterated_naive(m, n, out):   # class 1+2: a naive product iterating over a row of m, beside dummy tiles
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    z = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = numba.float32(0.0)
        ns[tr, tc] = numba.float32(0.0)
        ns[tr + TH, tc] = numba.float32(0.0)
        cuda.syncthreads()
        z += ms[tr, tc] + ns[tr, tc]
        cuda.syncthreads()
    if r < h and c < w:
        p = z
        i = 0
        for a in m[r]:
            p += a * n[i, c]
            i += 1
        out[r, c] = p


@cuda.jit
def rect_tiles_from_views(m, n, out):   # unusual (accepted): the tiles loaded through a row view of m and n
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TH + tr
    c = cuda.blockIdx.x * TW + tc
    h, k = m.shape
    w = n.shape[1]
    p = numba.float32(0.0)
    for ph in range(0, k, TW):
        ms[tr, tc] = m[r][ph + tc] if r < h and ph + tc < k else numba.float32(0.0)
        for half in range(2):
            kk = ph + tr + half * TH
            ns[tr + half * TH, tc] = n[kk][c] if kk < k and c < w else numba.float32(0.0)
        cuda.syncthreads()
        for i in range(TW):
            p += ms[tr, i] * ns[i, tc]
        cuda.syncthreads()
    if r < h and c < w:
        out[r, c] = p


def check_rect(kernel, name):
    from gpu_course.exercises.evidence import barriers_passed

    def run(kern):
        out = utils.poisoned(12, 21)
        kern[(utils.cdiv(21, 16), utils.cdiv(12, 8)), (16, 8)](utils.to_numba(A5), utils.to_numba(B5), utils.to_numba(out))
        utils.synchronize()
        return out
    utils.kernel_exercise("rectangular 8 x 16 tiled kernel", kernel, kind="numba", kernel=name, run=run,
                          reference=lambda: A5.double() @ B5.double(), **utils.dot_tol(19),
                          evidence=[utils.uses_shared_memory(), utils.shared_tiles((8, 16), (16, 16)),
                                    barriers_passed(4, compiled_at_least=2, meaning="two phases, two barriers each")])


@pytest.mark.slow
def test_05_numba_reads_through_views_are_counted(capsys):
    ok = "✅ rectangular 8 x 16 tiled kernel: correct"
    assert verdict(capsys, lambda k: check_rect(k, "rect_tiles_from_views"), rect_tiles_from_views).startswith(ok)
    for name, kernel in (("rect_views_naive", rect_views_naive), ("rect_iterated_naive", rect_iterated_naive)):
        why = verdict(capsys, lambda k: check_rect(k, name), kernel)
        assert why.startswith(f"❌ rectangular 8 x 16 tiled kernel: not yet: when the check launched {name} for a "
                              "12x19 by 19x21 product, it made 38.0 global loads per output element: a naive kernel "
                              "makes 2k = 38"), why


# ------------------------------------------------------------------------------------------------
# formulas: a copy of the reference's code, made from its source, under another name

def global_loads_ref(h: int, w: int, k: int, bm: int, bn: int) -> int:
    """Floats a grid of bm x bn tiles loads for out = m @ n (a short reference, with its docstring)."""
    return k * (h * -(-w // bn) + w * -(-h // bm))


def tile_ref(flops: float, bw: float) -> int:
    """The side of the smallest square tile, a multiple of 16, that reaches flops / bw FLOP per byte
    (a longer reference: its code is not written again by chance)."""
    if flops <= 0 or bw <= 0:
        raise ValueError(f"flops and bw must be positive, got {flops} and {bw}")
    need = 2 * flops / bw
    side = 16
    while side < need - 1e-9:
        side += 16
    if side > 4096:
        raise ValueError(f"no tile that large: {side} > 4096")
    return max(16, side)


LOAD_CASES = [(4096, 4096, 4096, 128, 128), (1000, 555, 777, 16, 16), (100, 90, 70, 64, 32), (130, 129, 8, 128, 64)]
TILE_CASES = [(4096, 48), (4096, 64), (4096, 32), (1024, 100), (2048, 8)]


def from_source(fn, new_name, strip_doc=False):
    src = textwrap.dedent(inspect.getsource(fn))
    if strip_doc:
        i = src.index('"""')
        src = src[:i] + "pass" + src[src.index('"""', i + 3) + 3:]
    src = src.replace(f"def {fn.__name__}(", f"def {new_name}(", 1)
    g = dict(fn.__globals__)
    exec(compile(src, f"<my notes {new_name}>", "exec"), g)
    return g[new_name]


def honest_loads(h, w, k, bm, bn):   # worked out: reads exactly like the short reference, without its docstring
    return k * (h * -(-w // bn) + w * -(-h // bm))


def honest_tile(f, b):   # worked out otherwise
    return 16 * max(1, math.ceil(2 * f / b / 16 - 1e-9))


INNER = None


def tile_through_a_copy(f, b):   # calls a copy of the reference made from its source, docstring removed
    return INNER(f, b)


def check_formula(title, answer, expected, cases, capsys):
    utils.formula_exercise(title, answer, expected, cases)
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_a_copy_of_the_reference_from_its_source_is_refused(capsys, monkeypatch):
    monkeypatch.setitem(globals(), "INNER", from_source(tile_ref, "inner", True))
    copied = "which computes the answer: work it out yourself"
    why = check_formula("global loads", from_source(global_loads_ref, "my_loads"), global_loads_ref, LOAD_CASES, capsys)
    assert why == f"❌ global loads: not yet: that is a copy of the code of global_loads_ref, {copied}", why
    for strip in (False, True):   # renamed, with or without its docstring: the longer code is known by its shape
        why = check_formula("tile", from_source(tile_ref, "my_tile", strip), tile_ref, TILE_CASES, capsys)
        assert why == f"❌ tile: not yet: that is a copy of the code of tile_ref, {copied}", why
    # a copy called from the answer is the reference called
    why = check_formula("tile", tile_through_a_copy, tile_ref, TILE_CASES, capsys)
    assert why.startswith("❌ tile: not yet: for ") and f"it calls tile_ref, {copied}" in why, why


def test_an_honest_formula_like_a_short_reference_passes(capsys):
    assert check_formula("global loads", honest_loads, global_loads_ref, LOAD_CASES, capsys) == "✅ global loads: correct"
    assert check_formula("tile", honest_tile, tile_ref, TILE_CASES, capsys) == "✅ tile: correct"
