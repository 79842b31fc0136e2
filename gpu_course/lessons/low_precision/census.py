"""Notebook 15's instruction census of its two batch-1 int4 GEMV kernels: each compiled for sm_90 (without a
GPU: :func:`~gpu_course.triton_ptx.compiled_ptx`) with the same block of W, and the PTX of its k loop counted per
weight a thread handles in one iteration. What the source says each kernel does per weight (the first: mask,
OR, subtract and multiply-add; the strided one: shift, AND, OR and multiply-add, with ``sum(x)`` once per block)
becomes a count the compiler produced, and so does the traffic through shared memory that the first kernel's
broadcast of x and change of layout cost (barriers, shared stores and loads)."""
from __future__ import annotations

from ...kernels import quant_gemv as G
from ...kernels import quant_gemv_strided as S

# the block both kernels are compiled with: S.CONFIG's on a GPU (32 rows of W, 512 columns a step, k in two)
BLOCK = dict(BLOCK_N=32, COLUMNS=512, SPLIT_K=2, num_warps=4, num_stages=2)
OPS = {"bar.sync": "barrier: every warp of the program waits", "st.shared": "registers -> shared memory",
       "ld.shared": "shared memory -> registers", "ldmatrix": "shared memory -> registers, a warp's tile",
       "ld.global": "global memory -> registers"}
_SKIP = ("//", ".", "$", "{", "}", ")")


def loop_body(ptx: str) -> list:
    """The instructions of the longest loop of ``ptx``: from a label to the last branch back to it (what lies
    between them, inner branches included, runs once an iteration), without labels and directives.

    >>> loop_body("mov.u32 %r1, 0;\\n$L__BB0_1:  // loop\\nadd.s32 %r1, %r1, 1;\\n@%p1 bra $L__BB0_1;\\nret;")
    ['add.s32 %r1, %r1, 1;', '@%p1 bra $L__BB0_1;']
    """
    lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]   # a label may carry a comment
    labels = {ln[:-1]: i for i, ln in enumerate(lines) if ln.startswith("$") and ln.endswith(":")}
    best = (0, 0)
    for i, ln in enumerate(lines):
        words = ln.rstrip(";").split()
        if len(words) >= 2 and words[-2].startswith("bra") and labels.get(words[-1], i) < i:
            j = labels[words[-1]]
            best = max(best, (i - j, j), key=lambda b: b[0])
    span, start = best
    return [ln for ln in lines[start + 1:start + span + 1] if ln and not ln.startswith(_SKIP)]


def count(body: list) -> dict:
    """How many instructions of ``body`` start with each opcode of :data:`OPS`, and ``"all"`` of them.

    >>> count(["bar.sync 0;", "@%p1 ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];", "add.f32 %f1, %f2, %f3;"])
    {'bar.sync': 1, 'st.shared': 0, 'ld.shared': 0, 'ldmatrix': 0, 'ld.global': 1, 'all': 3}
    """
    ops = [ln.split()[1] if ln.startswith("@") else ln.split()[0] for ln in body]
    return {**{op: sum(o.startswith(op) for o in ops) for op in OPS}, "all": len(ops)}


def _compile(module: str, kernel: str, signature: dict, constexprs: dict) -> str:
    from ...triton_ptx import compiled_ptx
    aligned = [i for i, t in enumerate(signature.values()) if t != "constexpr"]   # 16-byte pointers, sizes of 16
    return compiled_ptx(module, kernel, signature, constexprs, num_warps=BLOCK["num_warps"],
                        num_stages=BLOCK["num_stages"], aligned=aligned)


def gemv_census() -> dict:
    """``{kernel: counts}`` for the first int4 kernel (``int4_gemv_kernel``, batch 1) and the strided one, both
    with :data:`BLOCK`: :func:`count` of the k loop's PTX, plus ``"weights"`` (the weights each thread handles in
    an iteration) and ``"per weight"`` (instructions per weight). A few seconds a kernel, no GPU needed."""
    threads = 32 * BLOCK["num_warps"]
    first = dict(x_ptr="*bf16", w_ptr="*i32", s_ptr="*bf16", out_ptr="*fp32", M="constexpr", N="i32", K="i32",
                 x_stride_m="i32", w_stride_n="i32", s_stride_g="i32", out_stride_m="i32", GROUP="constexpr",
                 BLOCK_M="constexpr", BLOCK_N="constexpr", BLOCK_K="constexpr", SPLIT_K="constexpr")
    strided = dict(x_ptr="*bf16", w_ptr="*i32", s_ptr="*bf16", out_ptr="*fp32", N="i32", K="i32", w_stride_n="i32",
                   s_stride_g="i32", BLOCK_N="constexpr", BLOCK_KW="constexpr", SPLIT_K="constexpr")
    kernels = {
        "first (int4_gemv_kernel)": (G.__name__, "int4_gemv_kernel", first,
                                     dict(M=1, GROUP=G.GROUP, BLOCK_M=1, BLOCK_N=BLOCK["BLOCK_N"],
                                          BLOCK_K=BLOCK["COLUMNS"], SPLIT_K=BLOCK["SPLIT_K"])),
        "strided": (S.__name__, "int4_gemv_strided_kernel", strided,
                    dict(BLOCK_N=BLOCK["BLOCK_N"], BLOCK_KW=BLOCK["COLUMNS"] // 8, SPLIT_K=BLOCK["SPLIT_K"]))}
    out = {}
    for name, (module, kernel, sig, ce) in kernels.items():
        c = count(loop_body(_compile(module, kernel, sig, ce)))
        weights = BLOCK["BLOCK_N"] * BLOCK["COLUMNS"] // threads
        out[name] = {**c, "weights": weights, "per weight": c["all"] / weights}
    return out


def show_gemv_census(census: dict) -> str:
    """The census as a table: a row per count, a column per kernel."""
    names = list(census)
    lines = [f"{'in the k loop, per thread':<28}" + "".join(f"{n:>26}" for n in names)]
    for key, what in [*OPS.items(), ("all", "every PTX instruction"), ("weights", "weights an iteration"),
                      ("per weight", "instructions per weight")]:
        cells = "".join(f"{census[n][key]:>26.1f}" if key == "per weight" else f"{census[n][key]:>26}" for n in names)
        lines.append(f"{key:<28}" + cells + f"   {what}")
    return "\n".join(lines)
