"""Notebook 15's instruction census of its two batch-1 int4 GEMV kernels: each compiled for sm_90 (without a
GPU: :func:`~gpu_course.triton_ptx.compiled_ptx`) with the same block of W, and the machine code (SASS) of its k
loop counted per weight a thread handles in one iteration. What the source says each kernel does per weight (the first: mask,
OR, subtract and multiply-add; the strided one: shift, AND, OR and multiply-add, with ``sum(x)`` once per block)
becomes a count the compiler produced, and so does the traffic through shared memory that the first kernel's
broadcast of x and change of layout cost (barriers, shared stores and loads)."""
from __future__ import annotations

from ...kernels import quant_gemv as G
from ...kernels import quant_gemv_strided as S

# the block both kernels are compiled with: S.CONFIG's on a GPU (32 rows of W, 512 columns a step, k in two)
BLOCK = dict(BLOCK_N=32, COLUMNS=512, SPLIT_K=2, num_warps=4, num_stages=2)
OPS = {"BAR": "barrier: every warp of the program waits", "STS": "registers -> shared memory",
       "LDSM": "shared memory -> registers, a warp's tile", "LDS": "shared memory -> registers",
       "LDG": "global memory -> registers"}   # SASS opcodes (LDSM before LDS: a name is counted once)


def _instruction(line: str) -> str | None:
    r"""The opcode of one line of ``cuobjdump -sass`` as Triton prints it (``ctrl<TAB>@P0 OPCODE args;``), without
    its predicate, or None for a label or a blank line.

    >>> _instruction("--:-:-:-:5\t@!P0 BRA LBB0;"), _instruction("LBB1:"), _instruction("--:-:-:Y:2\tSTS.128 [R3], R4;")
    ('BRA', None, 'STS.128')
    """
    body = line.split("\t", 1)[1].strip() if "\t" in line else ""
    if not body:
        return None
    words = body.rstrip(";").split()
    return words[1] if words[0].startswith("@") else words[0]


def loop_body(sass: str) -> list:
    r"""The opcodes of the longest loop of ``sass``: from a label to the last branch back to it (what lies between
    them, inner branches included, runs once an iteration).

    >>> loop_body("--:-:-:-:1\tMOV R1, RZ;\nLBB1:\n--:-:-:-:1\tIADD3 R1, R1, 1, RZ;\n--:-:-:-:5\t@P1 BRA LBB1;\nEXIT;")
    ['IADD3', 'BRA']
    """
    lines = [ln.strip() for ln in sass.splitlines()]
    labels = {ln[:-1]: i for i, ln in enumerate(lines) if ln.endswith(":") and "\t" not in ln and " " not in ln}
    best = (0, 0)
    for i, ln in enumerate(lines):
        words = ln.rstrip(";").split()
        if len(words) >= 2 and words[-2] == "BRA" and labels.get(words[-1], i) < i:
            best = max(best, (i - labels[words[-1]], labels[words[-1]]), key=lambda b: b[0])
    span, start = best
    return [op for op in map(_instruction, lines[start + 1:start + span + 1]) if op]


def count(body: list) -> dict:
    """How many opcodes of ``body`` start with each name of :data:`OPS` (each counted once, under the first that
    fits), and ``"all"`` of them.

    >>> count(["BAR.SYNC.DEFER_BLOCKING", "LDSM.16.M88.4", "LDS.U8", "LDG.E.128", "FFMA"])
    {'BAR': 1, 'STS': 0, 'LDSM': 1, 'LDS': 1, 'LDG': 1, 'all': 5}
    """
    out = dict.fromkeys(OPS, 0)
    for op in body:
        name = next((n for n in OPS if op.startswith(n)), None)
        if name:
            out[name] += 1
    return {**out, "all": len(body)}


def _compile(module: str, kernel: str, signature: dict, constexprs: dict, num_warps: int, num_stages: int) -> str:
    from ...triton_ptx import compiled_ptx
    aligned = [i for i, t in enumerate(signature.values()) if t != "constexpr"]   # 16-byte pointers, sizes of 16
    return compiled_ptx(module, kernel, signature, constexprs, num_warps=num_warps, num_stages=num_stages,
                        aligned=aligned, asm="sass")


_FIRST = dict(x_ptr="*bf16", w_ptr="*i32", s_ptr="*bf16", out_ptr="*fp32", M="constexpr", N="i32", K="i32",
              x_stride_m="i32", w_stride_n="i32", s_stride_g="i32", out_stride_m="i32", GROUP="constexpr",
              BLOCK_M="constexpr", BLOCK_N="constexpr", BLOCK_K="constexpr", SPLIT_K="constexpr")
_STRIDED = dict(x_ptr="*bf16", w_ptr="*i32", s_ptr="*bf16", out_ptr="*fp32", N="i32", K="i32", w_stride_n="i32",
                s_stride_g="i32", BLOCK_N="constexpr", BLOCK_KW="constexpr", SPLIT_K="constexpr")


def gemv_census(timed: dict | None = None) -> dict:
    """``{kernel: counts}`` for the first int4 kernel (``int4_gemv_kernel``, batch 1) and the strided one, both
    with :data:`BLOCK`: :func:`count` of the k loop's SASS, plus ``"weights"`` (the weights each thread handles in
    an iteration) and ``"per weight"`` (instructions per weight). ``timed``: ``{label: cfg}``, more columns of the
    first kernel compiled with other blocks (``cfg`` as :func:`~gpu_course.kernels.quant_gemv.int4_gemv` takes
    it: BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages), e.g. the autotuner's picks for the shapes it timed.
    A few seconds a kernel, no GPU needed."""
    same = dict(BLOCK_N=BLOCK["BLOCK_N"], BLOCK_K=BLOCK["COLUMNS"], SPLIT_K=BLOCK["SPLIT_K"],
                num_warps=BLOCK["num_warps"], num_stages=BLOCK["num_stages"])
    kernels = {"first (int4_gemv_kernel)": (G.__name__, "int4_gemv_kernel", _FIRST, same)}
    kernels["strided"] = (S.__name__, "int4_gemv_strided_kernel", _STRIDED, same)
    for label, cfg in (timed or {}).items():
        assert set(cfg) >= set(same), f"gemv_census: {label}'s cfg needs {sorted(same)}, got {sorted(cfg)}"
        kernels[label] = (G.__name__, "int4_gemv_kernel", _FIRST, cfg)
    out = {}
    for name, (module, kernel, sig, cfg) in kernels.items():
        if kernel == "int4_gemv_kernel":
            ce = dict(M=1, GROUP=G.GROUP, BLOCK_M=1, BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"],
                      SPLIT_K=cfg["SPLIT_K"])
        else:
            ce = dict(BLOCK_N=cfg["BLOCK_N"], BLOCK_KW=cfg["BLOCK_K"] // 8, SPLIT_K=cfg["SPLIT_K"])
        c = count(loop_body(_compile(module, kernel, sig, ce, cfg["num_warps"], cfg["num_stages"])))
        weights = cfg["BLOCK_N"] * cfg["BLOCK_K"] // (32 * cfg["num_warps"])
        out[name] = {**c, "weights": weights, "per weight": c["all"] / weights}
    return out


def tuned_blocks(tuned: dict, shapes) -> dict:
    """The columns to add to the census for the first kernel as it was timed: ``{label: cfg}`` with one entry per
    distinct block that the autotuner chose at batch 1 for the shapes ``shapes`` ((n, k) pairs), labelled by the
    shapes that ran it. ``tuned``: :func:`~gpu_course.kernels.quant_gemv.tuned_configs` (shapes not in ``shapes``,
    such as a small check's, are left out).

    >>> a, b = dict(BLOCK_N=8), dict(BLOCK_N=16)
    >>> tuned_blocks({(1, 8, 8): a, (1, 4, 14): a, (1, 40, 384): b, (2, 8, 8): b}, [(8, 8), (4, 14)])
    {'tuned 8x8, 4x14': {'BLOCK_N': 8}}
    """
    by_block: list = []                     # [(cfg, [shape labels])], in the order of shapes
    for n, k in shapes:
        cfg = tuned.get((1, n, k))
        if cfg is None:
            continue
        entry = next((e for e in by_block if e[0] == cfg), None)
        if entry is None:
            by_block.append(entry := (cfg, []))
        entry[1].append(f"{n}x{k}")
    return {"tuned " + ", ".join(labels): dict(cfg) for cfg, labels in by_block}


def show_gemv_census(census: dict) -> str:
    """The census as a table: a row per count, a column per kernel (as wide as its name).

    >>> print(show_gemv_census({"a": dict.fromkeys([*OPS, "all", "weights"], 1) | {"per weight": 1.0}}))
    ... # doctest: +NORMALIZE_WHITESPACE
    in the k loop, per thread   a
    BAR                         1   barrier: every warp of the program waits
    STS                         1   registers -> shared memory
    LDSM                        1   shared memory -> registers, a warp's tile
    LDS                         1   shared memory -> registers
    LDG                         1   global memory -> registers
    all                         1   every instruction
    weights                     1   weights an iteration
    per weight                1.0   instructions per weight
    BAR per weight          1.000   barriers per weight
    """
    names = list(census)
    width = {n: max(8, len(n) + 2) for n in names}
    lines = [f"{'in the k loop, per thread':<26}" + "".join(f"{n:>{width[n]}}" for n in names)]
    rows = {n: {**census[n], "BAR per weight": census[n]["BAR"] / census[n]["weights"]} for n in names}
    for key, what in [*OPS.items(), ("all", "every instruction"), ("weights", "weights an iteration"),
                      ("per weight", "instructions per weight"), ("BAR per weight", "barriers per weight")]:
        fmt = {"per weight": ".1f", "BAR per weight": ".3f"}.get(key, "")
        cells = "".join(f"{rows[n][key]:>{width[n]}{fmt}}" for n in names)
        lines.append(f"{key:<26}" + cells + f"   {what}")
    return "\n".join(lines)
