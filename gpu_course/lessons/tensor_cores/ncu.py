"""What limits each rung of notebook 12's ladder: what ``bench/tensor_cores_ncu.py`` launches under Nsight Compute
(swizzled, and rungs 3 and 4 built without the swizzle), how its counters become rows, where they are stored, and
their table."""
from __future__ import annotations

from ...kernels.tensor_cores import CONFIGS


# What bench/tensor_cores_ncu.py launches under ncu, in order: every shape of rungs 2 to 5 as the notebook builds them
# ("swizzled"), then rungs 3 and 4 built with -DTC_NO_SWIZZLE (every piece in place: the bank conflicts back), then
# every shape of rung 6 ("persistent").
PROFILED = {"swizzled": [(r, c) for r in (2, 3, 4, 5) for c in range(len(CONFIGS.get(r, [None])))],
            "not swizzled": [(r, c) for r in (3, 4) for c in range(len(CONFIGS.get(r, [None])))],
            "persistent": [(6, c) for c in range(len(CONFIGS[6]))]}
KERNEL_NAMES = {2: "wmma_shared_k", 3: "mma_ldmatrix_k", 4: "mma_async_k", 5: "wgmma_tma_k", 6: "persistent_k"}
NO_SWIZZLE_FLAGS = ["-DTC_NO_SWIZZLE"]
LIMITER_FIELDS = ("variant", "rung", "cfg", "time_us", "tensor_pct", "issue_pct", "warps_pct", "registers",
                  "blocks_per_sm", "ld_conflicts", "st_conflicts", "ld_wavefronts", "stalls")


def limiter_rows(raw_by_variant: dict) -> list:
    """One dict per profiled launch (:data:`PROFILED`) from ``{variant: ncu --csv --page raw text}``: the variant,
    rung, cfg and ``gpu_course.profiling.limiters`` of its kernel."""
    from ...profiling import limiters, ncu_raw_rows
    out = []
    for variant, text in raw_by_variant.items():
        kernels = ncu_raw_rows(text)
        order = PROFILED[variant]
        if len(kernels) != len(order):
            raise ValueError(f"limiter_rows: {variant}: ncu profiled {len(kernels)} kernels, expected {len(order)} "
                             f"({order})")
        for (rung, cfg), row in zip(order, kernels):
            want = KERNEL_NAMES[rung]
            if want not in row["Kernel Name"]:
                raise ValueError(f"limiter_rows: {variant}: expected {want} for rung {rung} cfg {cfg}, ncu has "
                                 f"{row['Kernel Name'][:60]}")
            out.append(dict(variant=variant, rung=rung, cfg=cfg, **limiters(row)))
    return out


def merge_limiters(old: tuple, rows: list, about: str) -> tuple:
    """``(rows, about)`` of a stored file (``old``, as :func:`read_limiters` gives it) with the variants of ``rows``
    replaced by ``rows`` (the others kept, in the file's order) and ``about`` added to its first line: a profile of
    one variant added to a file without measuring the others again.

    >>> old = ([dict(variant="swizzled", rung=2), dict(variant="persistent", rung=6)], "ncu on X, day 1")
    >>> rows, about = merge_limiters(old, [dict(variant="persistent", rung=6, cfg=1)], "persistent: ncu on X, day 2")
    >>> [(r["variant"], r.get("cfg")) for r in rows], about
    ([('swizzled', None), ('persistent', 1)], 'ncu on X, day 1; persistent: ncu on X, day 2')
    """
    new = {r["variant"] for r in rows}
    old_rows, old_about = old
    return [r for r in old_rows if r["variant"] not in new] + list(rows), f"{old_about}; {about}"


def write_limiters(rows: list, path, about: str) -> None:
    """Store :func:`limiter_rows` as CSV at ``path``, the first line a comment saying where they come from."""
    from ...profiling import write_limiter_csv
    write_limiter_csv(rows, LIMITER_FIELDS, path, about)


def read_limiters(path) -> tuple:
    """``(rows, about)`` from a file of :func:`write_limiters` (numbers back as int/float, stalls as a list of
    (reason, warps per issued instruction))."""
    from ...profiling import read_limiter_csv
    return read_limiter_csv(path, texts=("variant",), ints=("rung", "cfg"))


def limiters_file(device: str = "nvidia-h100-80gb-hbm3"):
    """Where bench/tensor_cores_ncu.py stores what it measured on ``device`` (a results file's stem)."""
    from ... import paths
    return paths.RESULTS_DIR / "profiles" / f"ncu_tensor_cores_{device}.csv"


def limiter_table(rows: list) -> str:
    """The rows of :func:`read_limiters` as a table: per rung and shape, the time under ncu, how busy the tensor pipe
    and the schedulers were, the warps, registers and blocks per SM, the shared-memory bank conflicts and load
    passes (millions), and the three largest stall reasons."""
    head = (f"{'kernel':30s} {'µs':>6s} {'tc%':>4s} {'iss%':>4s} {'wrp%':>4s} {'regs':>4s} {'blk':>3s} "
            f"{'ld cfl':>7s} {'st cfl':>7s} {'ld pass':>7s}  largest stalls (warps per issued instruction)")
    lines = [head]
    for r in rows:
        name = f"rung {r['rung']}" + (f" cfg {r['cfg']}" if r["rung"] in CONFIGS else "") + \
            (", not swizzled" if r["variant"] == "not swizzled" else "")
        m = lambda v: f"{v / 1e6:7.2f}" if v is not None else f"{'':>7s}"  # noqa: E731
        stalls = ", ".join(f"{n} {v:.1f}" for n, v in r["stalls"])
        lines.append(f"{name:30s} {r['time_us']:6.0f} {r['tensor_pct']:4.0f} {r['issue_pct']:4.0f} {r['warps_pct']:4.0f} "
                     f"{r['registers']:4.0f} {r['blocks_per_sm']:3.0f} {m(r['ld_conflicts'])} {m(r['st_conflicts'])} "
                     f"{r['ld_wavefronts'] / 1e6:7.1f}  {stalls}")
    lines.append("µs: time under ncu (clocks locked at base); tc%: tensor pipe busy, % of cycles; iss%: cycles a scheduler "
                 "issued; wrp%: active warps, % of the SM's 64; regs: registers a thread; blk: blocks an SM holds; "
                 "ld/st cfl: shared-memory bank conflicts of loads and stores, ld pass: passes of shared loads "
                 "(millions)")
    return "\n".join(lines)
