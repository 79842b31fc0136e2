"""Quick benchmark of notebook 06's Triton kernels against torch, for tuning on a GPU.

    python bench/triton_basics_bench.py           # the notebook's configurations
    python bench/triton_basics_bench.py --tune    # also sweep tile sizes / rows per program / warps
    python bench/triton_basics_bench.py --no-record  # print only

Prints two tables: the mean of 1e8 fp32 (one program walking everything, many programs each with a
scalar loop, the two-pass and atomic versions) and the row softmax (2**26 floats in rows of
w = 128 .. 16384, torch's row and ours for each w). Each row: GPU time (launch hidden, L2 flushed), time
per step of a back-to-back loop, CPU time per call (utils.bench_user), GB/s, % of the measured copy
ceiling, and torch's time over ours for the GPU time and for the loop (>= 1 is as fast as torch or
faster). The --tune sweeps pick on GPU time alone (their rows leave the loop and CPU columns blank); the
best configuration found is then timed as the others.
Targets on an H100 (GPU time): mean >= 0.95x torch.mean, softmax >= 1.0x torch.softmax at every w.

On a GPU every row timed three ways (torch's and ours, in both tables and the "as called" ones; not the
sweeps' rows) is appended to results/<device>.csv under notebook "bench/triton_basics_bench", with its loop
and CPU figures and torch's; --no-record leaves the results alone. In cpu mode it runs tiny sizes through
the Triton interpreter: that checks the script, its times say nothing about a GPU, and nothing is recorded.
The kernels and their configurations are the notebook's own, imported from gpu_course/kernels/triton_mean.py
and triton_softmax.py; a sweep passes other configurations to the same launchers.
"""
import argparse
import itertools

import utils  # first: chooses the mode before triton is imported
import torch
import triton

from gpu_course.kernels.triton_mean import (mean_atomic, mean_config, mean_scalar_loop, mean_serial,
                                            mean_two_pass)
from gpu_course.kernels.triton_softmax import softmax, softmax_config
from gpu_course.results import bench_recording, compare_and_record, record_comparison, record_flag
from gpu_course.user_timing import user_cells, user_header, user_ratios

NB = "bench/triton_basics_bench"   # the results rows' notebook


# ----------------------------------------------------------------------------------- reporting
def short(cfg):
    """A configuration in a few characters: {'BLOCK': 4096, 'TILES': 4, ...} -> 'BLOCK=4096 TILES=4 ...'."""
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def time_it(fn, *args, budget_ms=None):
    """GPU time alone (L2 flushed before each run): what a sweep picks a configuration by."""
    return utils.bench(fn, *args, l2_flush=True, reps=utils.by_mode(gpu=None, cpu=2),
                       budget_ms=budget_ms)


def time_user(fn, *args):
    """GPU time (L2 flushed), time per step of a back-to-back loop and CPU time per call."""
    return utils.bench_user(fn, *args, l2_flush=True)


def line(name, t, nbytes, t_torch):
    r = utils.throughput(t, nbytes=nbytes)
    vs = user_ratios(t, t_torch) if t_torch is not None else ""
    print(f"  {name:<54}{user_cells(t)}{r.value:>9,.0f} GB/s {r.pct:5.0f} %  {vs}")
    return t_torch.median / t.median if t_torch is not None else None


def bench_mean(tune):
    n = utils.by_mode(gpu=100_000_000, cpu=4_099)  # cpu: the scalar loop interprets one element at a time
    x = torch.rand(n, device=utils.DEVICE)
    ref = x.double().mean()
    cfg0 = mean_config()  # the notebook's
    print(f"\n{f'mean of {n:,} fp32 ({x.nbytes / 1e6:,.1f} MB read)':<56}{user_header()}{'rate':>14} "
          f"{'% copy*':>7}  × torch (GPU, loop)   (* of the copy rate measured here)")
    t_torch = time_user(torch.mean, x)
    line("torch.mean", t_torch, x.nbytes, None)
    compared = {"torch.mean": t_torch}   # the rows timed three ways: recorded
    variants = [("one program (mean_serial)", mean_serial, ()),
                ("scalar loop, many programs (mean_scalar_loop)", mean_scalar_loop, ()),
                (f"two-pass {short(cfg0)}", mean_two_pass, (cfg0,)),
                (f"atomic   {short(cfg0)}", mean_atomic, (cfg0,))]
    fixed = len(variants)  # the notebook's: timed three ways; the sweep's below: GPU time alone
    if tune:
        blocks = utils.by_mode(gpu=[1024, 2048, 4096, 8192, 16384], cpu=[1024])
        tiles = utils.by_mode(gpu=[1, 2, 4, 8, 16], cpu=[1, 2])
        warps = utils.by_mode(gpu=[4, 8, 16], cpu=[4])
        for b, t, wp in itertools.product(blocks, tiles, warps):
            if b * t > 262144 or b // (32 * wp) > 64:  # too few programs / too many registers
                continue
            cfg = dict(BLOCK=b, TILES=t, num_warps=wp)
            variants.append((f"two-pass {short(cfg)}", mean_two_pass, (cfg,)))
    scores = []
    for i, (name, fn, extra) in enumerate(variants):
        try:
            utils.check(fn(x, *extra), ref, atol=0, rtol=1e-5, name=name)
            budget = 100 if name.startswith("two-pass") and len(scores) > 1 else None
            t = time_user(fn, x, *extra) if i < fixed else time_it(fn, x, *extra, budget_ms=budget)
            ratio = line(name, t, x.nbytes, t_torch)
            if i < fixed:
                compared[name] = t
            if fn not in (mean_serial, mean_scalar_loop):  # the slow versions: not candidates
                scores.append((ratio, name, fn, extra))
        except Exception as e:  # a config that fails to compile or check: say so, go on
            print(f"  {name:<54} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
    if tune:
        print("  best five (GPU time):")
        ranked = sorted(scores, key=lambda s: -s[0])
        for ratio, name, _, _ in ranked[:5]:
            print(f"    {ratio:.3f}x  {name}")
        if ranked:
            _, name, fn, extra = ranked[0]
            compared[f"the best, {name}"] = t = time_user(fn, x, *extra)
            line(f"the best, {name}", t, x.nbytes, t_torch)
    record_comparison(NB, f"{n:.6g} fp32", compared, "torch.mean", nbytes=x.nbytes, prefix="mean: ")


def bench_softmax(tune):
    floats = utils.by_mode(gpu=2**26, cpu=16 * 128)  # the same bytes at every width
    widths = utils.by_mode(gpu=[128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384],
                           cpu=[128, 777])
    print(f"\nsoftmax, {floats:,} fp32 in rows of w (notebook config; --tune: best found)")
    print(f"  {'w':<9}{'kernel':<8}{user_header()}{'GB/s':>9} {'% copy':>7}  × torch (GPU, loop)  config")
    worst = None  # (GPU, loop) ratios to torch of the notebook's configuration, the lowest over w
    for w in widths:
        x = torch.randn(floats // w, w, device=utils.DEVICE)
        nbytes = 2 * x.nbytes
        t_torch = time_user(torch.softmax, x, 1)
        cfg = softmax_config(w)
        utils.check(softmax(x, cfg), torch.softmax(x, dim=1), atol=1e-6, rtol=1e-5)
        t = time_user(softmax, x, cfg)

        def row(kernel, tt, cfg_text=""):
            print(f"  {f'w={w:>6}':<9}{kernel:<8}{user_cells(tt)}{nbytes / tt.median / 1e6:>9,.0f} "
                  f"{utils.throughput(tt, nbytes=nbytes).pct:>5.0f} %  {user_ratios(tt, t_torch):>19}  {cfg_text}")

        row("torch", t_torch)
        row("triton", t, short(cfg))
        compared = {"torch.softmax": t_torch, "softmax (triton)": t}   # recorded below
        ratios = (t_torch.median / t.median, t_torch.loop_ms / t.loop_ms)
        worst = ratios if worst is None else tuple(min(a, b) for a, b in zip(worst, ratios))
        if tune:
            best = (ratios[0], cfg)
            ref = torch.softmax(x, dim=1)
            rows_opts = [r for r in (1, 2, 4, 8, 16, 32) if r * cfg["BLOCK_W"] <= 16384]
            for rows, wp in itertools.product(rows_opts, utils.by_mode(gpu=[1, 2, 4, 8, 16],
                                                                       cpu=[4])):
                c = dict(BLOCK_W=cfg["BLOCK_W"], ROWS=rows, num_warps=wp)
                if c == cfg or c["BLOCK_W"] * rows // (32 * wp) > 64:
                    continue
                try:
                    err = (softmax(x, c) - ref).abs().max().item()  # on the device: quick
                    if not err <= 1e-5:
                        continue
                    r = t_torch.median / time_it(softmax, x, c, budget_ms=100).median
                except Exception:  # noqa: BLE001 - a config may not compile; skip it
                    continue
                best = max(best, (r, c), key=lambda b: b[0])
            if best[1] != cfg:  # the sweep's pick (on GPU time), timed as the others
                compared[f"softmax (triton), the best {short(best[1])}"] = tb = time_user(softmax, x, best[1])
                row("best", tb, short(best[1]))
            else:
                print(f"  {'':<17}(best found: the notebook's configuration)")
        record_comparison(NB, f"{x.shape[0]}x{w}", compared, "torch.softmax", nbytes=nbytes)
        del x
    print(f"  slowest ratio to torch.softmax (notebook config): {worst[0]:.2f}x GPU time (target >= 1.0x), "
          f"{worst[1]:.2f}x in a loop")


def mean_as_called():
    """What a caller gets: GPU time, time per step of a loop, CPU time per call (utils.compare), on a large
    and a small tensor; a Triton launch goes through Python, so the small one is launch-bound unless a
    CUDA graph replays it."""
    for n in utils.by_mode(gpu=(100_000_000, 65_536), cpu=(10_000,)):
        x = torch.rand(n, device=utils.DEVICE)
        print(f"\nmean of {n:,} fp32, as called (GPU time, loop per step, CPU per call):")
        compare_and_record(NB, f"{n:.6g} fp32", {"torch.mean": lambda: torch.mean(x),
                                                 "two-pass": lambda: mean_two_pass(x),
                                                 "two-pass, CUDA graph": utils.cuda_graph(mean_two_pass, x)},
                           baseline="torch.mean", nbytes=x.nbytes, prefix="mean as called: ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", action="store_true", help="also sweep kernel configurations")
    ap.add_argument("--only", choices=["mean", "softmax"], help="run one of the two tables")
    args = record_flag(ap).parse_args()
    print(utils.banner())
    print(bench_recording(args.record))
    print(f"triton {triton.__version__}, torch {torch.__version__}; copy ceiling "
          f"{utils.ceilings()['copy']:,.0f} GB/s (bytes read + written)")
    if args.only in (None, "mean"):
        bench_mean(args.tune)
        mean_as_called()
    if args.only in (None, "softmax"):
        bench_softmax(args.tune)


if __name__ == "__main__":
    main()
