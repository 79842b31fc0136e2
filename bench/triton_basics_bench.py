"""Quick benchmark of notebook 06's Triton kernels against torch, for tuning on a GPU.

    python bench/triton_basics_bench.py           # the notebook's configurations
    python bench/triton_basics_bench.py --tune    # also sweep tile sizes / rows per program / warps

Prints two tables: the mean of 1e8 fp32 (one program walking everything, many programs each with a
scalar loop, the two-pass and atomic versions) and the row softmax (2**26 floats in rows of
w = 128 .. 16384), each as time, GB/s, % of the measured copy ceiling and the ratio to torch
(torch's time / ours: >= 1 is as fast as torch or faster).
Targets on an H100: mean >= 0.95x torch.mean, softmax >= 1.0x torch.softmax at every w.

It reads no files and writes none (nothing is recorded). In cpu mode it runs tiny sizes through the
Triton interpreter: that checks the script, and its times say nothing about a GPU. The kernels and
their configurations are the notebook's own, imported from gpu_course/kernels/triton_mean.py and
triton_softmax.py; a sweep passes other configurations to the same launchers.
"""
import argparse
import itertools

import utils  # first: chooses the mode before triton is imported
import torch
import triton

from gpu_course.kernels.triton_mean import (mean_atomic, mean_config, mean_scalar_loop, mean_serial,
                                            mean_two_pass)
from gpu_course.kernels.triton_softmax import softmax, softmax_config


# ----------------------------------------------------------------------------------- reporting
def short(cfg):
    """A configuration in a few characters: {'BLOCK': 4096, 'TILES': 4, ...} -> 'BLOCK=4096 TILES=4 ...'."""
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def time_it(fn, *args, budget_ms=None):
    return utils.bench(fn, *args, l2_flush=True, reps=utils.by_mode(gpu=None, cpu=2),
                       budget_ms=budget_ms)


def line(name, t, nbytes, t_torch):
    r = utils.throughput(t, nbytes=nbytes)
    vs = f"{t_torch.median / t.median:6.2f}x" if t_torch is not None else "      "
    print(f"  {name:<54} {utils.fmt_ms(t.median):>10} {r.value:>9,.0f} GB/s {r.pct:5.0f} %  {vs}")
    return t_torch.median / t.median if t_torch is not None else None


def bench_mean(tune):
    n = utils.by_mode(gpu=100_000_000, cpu=10_000)
    x = torch.rand(n, device=utils.DEVICE)
    ref = x.double().mean()
    cfg0 = mean_config()  # the notebook's
    print(f"\n{f'mean of {n:,} fp32 ({x.nbytes / 1e6:,.1f} MB read)':<56} {'time':>10} {'rate':>14} "
          f"{'% copy*':>7}  vs torch   (* of the copy rate measured here)")
    t_torch = time_it(torch.mean, x)
    line("torch.mean", t_torch, x.nbytes, None)
    variants = [("one program (mean_serial)", mean_serial, ()),
                ("scalar loop, many programs (mean_scalar_loop)", mean_scalar_loop, ()),
                (f"two-pass {short(cfg0)}", mean_two_pass, (cfg0,)),
                (f"atomic   {short(cfg0)}", mean_atomic, (cfg0,))]
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
    for name, fn, extra in variants:
        try:
            utils.check(fn(x, *extra), ref, atol=0, rtol=1e-5, name=name)
            budget = 100 if name.startswith("two-pass") and len(scores) > 1 else None
            ratio = line(name, time_it(fn, x, *extra, budget_ms=budget), x.nbytes, t_torch)
            if fn not in (mean_serial, mean_scalar_loop):  # the slow versions: not candidates
                scores.append((ratio, name))
        except Exception as e:  # a config that fails to compile or check: say so, go on
            print(f"  {name:<54} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
    if tune:
        print("  best five:")
        for ratio, name in sorted(scores, reverse=True)[:5]:
            print(f"    {ratio:.3f}x  {name}")


def bench_softmax(tune):
    floats = utils.by_mode(gpu=2**26, cpu=64 * 128)  # the same bytes at every width
    widths = utils.by_mode(gpu=[128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384],
                           cpu=[128, 777])
    print(f"\nsoftmax, {floats:,} fp32 in rows of w (notebook config; --tune: best found)   GB/s: torch / "
          f"Triton, vs torch")
    worst = None
    for w in widths:
        x = torch.randn(floats // w, w, device=utils.DEVICE)
        nbytes = 2 * x.nbytes
        t_torch = time_it(torch.softmax, x, 1)
        cfg = softmax_config(w)
        utils.check(softmax(x, cfg), torch.softmax(x, dim=1), atol=1e-6, rtol=1e-5)
        t = time_it(softmax, x, cfg)
        gbs = lambda tt: nbytes / tt.median / 1e6  # noqa: E731
        ratio = t_torch.median / t.median
        worst = ratio if worst is None else min(worst, ratio)
        msg = (f"  w={w:>6}: torch {gbs(t_torch):>7,.0f}  triton {gbs(t):>7,.0f} "
               f"({utils.throughput(t, nbytes=nbytes).pct:3.0f} % copy) {ratio:5.2f}x  {short(cfg)}")
        if tune:
            best = (ratio, cfg)
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
            msg += f"\n           best found: {best[0]:5.2f}x  {short(best[1])}"
        print(msg)
        del x
    print(f"  slowest ratio to torch.softmax (notebook config): {worst:.2f}x (target >= 1.0x)")


def mean_as_called():
    """What a caller gets: GPU time, time per step of a loop, CPU time per call (utils.compare), on a large
    and a small tensor; a Triton launch goes through Python, so the small one is launch-bound unless a
    CUDA graph replays it."""
    for n in utils.by_mode(gpu=(100_000_000, 65_536), cpu=(10_000,)):
        x = torch.rand(n, device=utils.DEVICE)
        print(f"\nmean of {n:,} fp32, as called (GPU time, loop per step, CPU per call):")
        utils.compare({"torch.mean": lambda: torch.mean(x), "two-pass": lambda: mean_two_pass(x),
                       "two-pass, CUDA graph": utils.cuda_graph(mean_two_pass, x)}, baseline="torch.mean")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", action="store_true", help="also sweep kernel configurations")
    ap.add_argument("--only", choices=["mean", "softmax"], help="run one of the two tables")
    args = ap.parse_args()
    print(utils.banner())
    print(f"triton {triton.__version__}, torch {torch.__version__}; copy ceiling "
          f"{utils.ceilings()['copy']:,.0f} GB/s (bytes read + written)")
    if args.only in (None, "mean"):
        bench_mean(args.tune)
        mean_as_called()
    if args.only in (None, "softmax"):
        bench_softmax(args.tune)


if __name__ == "__main__":
    main()
