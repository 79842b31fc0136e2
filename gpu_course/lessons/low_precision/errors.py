"""Notebook 15's tables of formats and errors: what each format holds (range, precision, specials), what a
cast does at the edges, and the error a matmul keeps in each format and scale granularity, against float64.

>>> print(format_table().splitlines()[0])
format      bits  largest      smallest normal  smallest subnormal  step at 1  inf   NaN
"""
from __future__ import annotations

import torch

from .quantize import FP8, QMAX, dequantize, outlier_activations, quantize, roundtrip, row_errors, weight_like

FLOATS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
          "fp8 e4m3fn": torch.float8_e4m3fn, "fp8 e5m2": torch.float8_e5m2}
# granularity name -> (the block of a: rows x columns of k, the block of b = w: rows of w x columns of k, where
# its scale is applied in a GEMM)
GRANULARITIES = {
    "per tensor": ((-1, -1), (-1, -1), "epilogue (one number)"),
    "per row / column": ((1, -1), (1, -1), "epilogue (outer product)"),
    "1x128 / 128x128": ((1, 128), (128, 128), "inside the k loop"),
    "128x128 / 128x128": ((128, 128), (128, 128), "inside the k loop"),
}
# weight-only quantisation (the activations stay exact): the block of w, and where its scale is applied
W_GRANULARITIES = {
    "per row": ((1, -1), "epilogue (one per output)"),
    "groups of 128": ((1, 128), "inside the k loop"),
}


def format_table() -> str:
    """Each format's bits, largest finite value, smallest normal and subnormal values, the step between 1 and
    the next value, and whether it has infinities and NaN (int8 and int4: integers, step 1, no specials)."""
    lines = [f"{'format':<12}{'bits':>4}  {'largest':<13}{'smallest normal':<17}{'smallest subnormal':<20}"
             f"{'step at 1':<11}{'inf':<6}NaN"]
    for name, dt in FLOATS.items():
        fi = torch.finfo(dt)
        sub = fi.smallest_normal * fi.eps          # the last mantissa bit at the smallest exponent
        has_inf = torch.tensor(float("inf")).to(dt).float().isinf().item() if dt not in FP8.values() else \
            dt == torch.float8_e5m2
        lines.append(f"{name:<12}{fi.bits:>4}  {fi.max:<13.6g}{fi.smallest_normal:<17.4g}{sub:<20.4g}"
                     f"{fi.eps:<11.4g}{'yes' if has_inf else 'no':<6}yes")
    for name, bits, hi in (("int8", 8, 127), ("int4", 4, 7)):
        lines.append(f"{name:<12}{bits:>4}  {hi:<13}{'-':<17}{'-':<20}{1:<11}{'no':<6}no")
    return "\n".join(lines)


def cast_edges(dtype) -> list:
    """``[(x, x cast to dtype and back)]`` for values around ``dtype``'s largest finite value, inf and NaN:
    what *this* torch's cast does at the edge (it has changed between versions)."""
    hi = torch.finfo(dtype).max
    xs = [hi, hi * 1.03, hi * 1.2, hi * 4, float("inf"), float("nan")]
    return [(x, torch.tensor([x]).to(dtype).float().item()) for x in xs]


def spacing(dtype, lo: float, hi: float) -> list:
    """Every value ``dtype`` holds in ``[lo, hi]`` (all 256 fp8 codes decoded, or the int range)."""
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        v = torch.arange(256, dtype=torch.uint8).view(dtype).float()
        v = v[torch.isfinite(v)].unique()
        return [x for x in v.tolist() if lo <= x <= hi]
    return list(range(int(lo), int(hi) + 1))


def matmul_error(x: torch.Tensor, w: torch.Tensor, fmt: str, gran: str = "per tensor",
                 weights_only: bool = False) -> torch.Tensor:
    """The relative error of each row of ``x @ w.T`` computed from the operands quantised to ``fmt`` at
    granularity ``gran`` (:data:`GRANULARITIES`), the products summed in float64: the error the format and its
    scales leave, not the accumulator's. ``weights_only``: x stays exact (weight-only quantisation).
    ``fmt`` may also be "bf16" or "fp16" (a plain cast, no scale)."""
    ref = x.double() @ w.double().T
    if fmt in ("bf16", "fp16"):
        dt = torch.bfloat16 if fmt == "bf16" else torch.float16
        xq = x.double() if weights_only else x.to(dt).double()
        return row_errors(xq @ w.to(dt).double().T, ref)
    if weights_only:
        return row_errors(x.double() @ roundtrip(w, fmt, W_GRANULARITIES[gran][0]).T, ref)
    ba, bw, _ = GRANULARITIES[gran]
    xq = roundtrip(x, fmt, ba)
    return row_errors(xq @ roundtrip(w, fmt, bw).T, ref)


def error_table(x, w, fmts=("e4m3", "e5m2", "int8", "int4"), grans=None, weights_only=False) -> dict:
    """``{(fmt, gran): (median, worst) row error}`` of :func:`matmul_error` (``grans``: default every one of
    :data:`GRANULARITIES`, or of :data:`W_GRANULARITIES` with ``weights_only``)."""
    grans = grans or tuple(W_GRANULARITIES if weights_only else GRANULARITIES)
    out = {}
    for fmt in fmts:
        for gran in grans:
            e = matmul_error(x, w, fmt, gran, weights_only)
            out[(fmt, gran)] = (e.median().item(), e.max().item())
    return out


def show_error_table(table: dict, title: str = "") -> str:
    """:func:`error_table` as text: a row per format and granularity, the median and worst row's error."""
    lines = [title] if title else []
    lines.append(f"{'format':<7}{'scales (a / b)':<20}{'applied':<26}{'median':>9}{'worst row':>11}")
    for (fmt, gran), (med, worst) in table.items():
        where = (GRANULARITIES[gran][2] if gran in GRANULARITIES else
                 W_GRANULARITIES[gran][1] if gran in W_GRANULARITIES else "-")
        lines.append(f"{fmt:<7}{gran:<20}{where:<26}{med:>9.2e}{worst:>11.2e}")
    return "\n".join(lines)


def choose_ok(choice, budget: float, x, w, fmt: str) -> tuple:
    """Exercise (b)'s judge: ``(ok, worst row error)`` of granularity ``choice`` for ``fmt`` on ``x, w``;
    ``ok`` when the worst row's error is within ``budget``."""
    if choice not in GRANULARITIES:
        raise ValueError(f"the choice must be one of {list(GRANULARITIES)}, got {choice!r}")
    worst = matmul_error(x, w, fmt, choice).max().item()
    return worst <= budget, worst


def cheapest_within(x, w, fmt: str, budget: float):
    """The first granularity of :data:`GRANULARITIES`, in its order, whose worst row error for ``x @ w.T`` in
    ``fmt`` is within ``budget``, or None (notebook 15's exercise 2)."""
    for gran in GRANULARITIES:
        if matmul_error(x, w, fmt, gran).max().item() <= budget:
            return gran
    return None


__all__ = ["FLOATS", "GRANULARITIES", "W_GRANULARITIES", "format_table", "cast_edges", "spacing", "matmul_error", "error_table",
           "show_error_table", "choose_ok", "cheapest_within", "check_scale_choice", "quantize", "dequantize", "QMAX"]


# (format, budget, outlier factor, massive factor) of exercise 2's fresh draws
_EXERCISE_CASES = [("int8", 0.05, 20.0, 100.0), ("int8", 0.05, 4.0, 1.0), ("e4m3", 0.045, 20.0, 100.0),
                   ("int8", 0.2, 10.0, 300.0), ("e4m3", 0.03, 1.0, 1.0), ("int4", 0.6, 30.0, 50.0),
                   ("e5m2", 0.09, 20.0, 100.0)]


def check_scale_choice(choose, cases=None, seed=None) -> bool:
    """Exercise 2's judge: ``choose(x, w, fmt, budget)`` on activations and weights drawn now (fresh seeds, 64 x 512
    and 96 x 512, the outliers of each case), compared with :func:`cheapest_within` computed afterwards; a call of
    the notebook's own error functions while ``choose`` runs is refused. Draws whose worst errors sit within 3 % of
    the budget are drawn again (a tie there would judge rounding, not the choice). Raises AssertionError with what
    went wrong; returns True."""
    import os

    from ...exercises import watch_calls
    rng = int.from_bytes(os.urandom(4), "little") if seed is None else seed
    refused = (matmul_error, error_table, cheapest_within, choose_ok)
    for i, (fmt, budget, factor, massive) in enumerate(cases or _EXERCISE_CASES):
        for attempt in range(5):
            s = rng + 101 * i + 7 * attempt
            x, _ = outlier_activations(64, 512, seed=s, factor=factor, massive=massive)
            w = weight_like(96, 512, seed=s + 1)
            worst = {g: matmul_error(x, w, fmt, g).max().item() for g in GRANULARITIES}
            if all(abs(e - budget) > 0.03 * budget for e in worst.values()):
                break
        seen = []
        import contextlib
        with contextlib.ExitStack() as stack:
            for f in refused:
                seen.append(stack.enter_context(watch_calls(f)))
            got = choose(x.clone(), w.clone(), fmt, budget)
        called = [f.__name__ for f, s_ in zip(refused, seen) if s_]
        assert not called, f"it calls {called[0]}, which computes the answer: work the error out yourself"
        want = next((g for g in GRANULARITIES if worst[g] <= budget), None)
        table = ", ".join(f"{g}: {e:.3g}" for g, e in worst.items())
        assert got == want, (f"for {fmt} with a budget of {budget} on fresh data it chose {got!r}, but the first "
                             f"within budget is {want!r} (worst token errors: {table})")
    return True
