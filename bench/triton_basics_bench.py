"""Quick benchmark of notebook 06's Triton kernels against torch, for tuning on a GPU.

    python bench/triton_basics_bench.py           # the notebook's configurations
    python bench/triton_basics_bench.py --tune    # also sweep tile sizes / rows per program / warps

Prints two tables: the mean of 1e8 fp32 (the seed's one-program loop, the two-pass and atomic
versions) and the row softmax (2**26 floats in rows of w = 128 .. 16384), each as time, GB/s, % of the measured
copy ceiling and the ratio to torch (torch's time / ours: >= 1 is as fast as torch or faster).
Targets on an H100: mean >= 0.95x torch.mean, softmax >= 1.0x torch.softmax at every w.

It reads no files and writes none (nothing is recorded). In cpu mode it runs tiny sizes through the
Triton interpreter: that checks the script, and its times say nothing about a GPU. The kernels are
copies of the notebook's (a script cannot import a notebook): change both together.
"""
import argparse
import itertools

import utils  # first: chooses the mode before triton is imported
import torch
import triton
import triton.language as tl


# ------------------------------------------------------------------------------------ kernels
@triton.jit
def mean_serial_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


@triton.jit
def tile_sum(x_ptr, pid, n, BLOCK: tl.constexpr, TILES: tl.constexpr, UNROLL: tl.constexpr):
    start = pid * (BLOCK * TILES)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    if UNROLL:
        for t in tl.static_range(TILES):
            offs = start + t * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    else:
        for t in range(TILES):
            offs = start + t * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    return tl.sum(acc, axis=0)


@triton.jit
def partial_sums_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr, TILES: tl.constexpr,
                        UNROLL: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(partial_ptr + pid, tile_sum(x_ptr, pid, n, BLOCK, TILES, UNROLL))


@triton.jit
def sum_to_mean_kernel(partial_ptr, out_ptr, m, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.sum(tl.load(partial_ptr + offs, mask=offs < m, other=0.0), axis=0)
    tl.store(out_ptr, total / n)


@triton.jit
def mean_atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, TILES: tl.constexpr,
                       UNROLL: tl.constexpr):
    pid = tl.program_id(0)
    tl.atomic_add(out_ptr, tile_sum(x_ptr, pid, n, BLOCK, TILES, UNROLL) / n)


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, h, w,
                        BLOCK_W: tl.constexpr, ROWS: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_W)
    r_in = tl.minimum(r, h - 1)
    col_ok = c < w
    x = tl.load(x_ptr + r_in[:, None] * x_row_stride + c[None, :], mask=col_ok[None, :],
                other=-float("inf"))
    x = x - tl.max(x, axis=1)[:, None]
    num = tl.exp(x)
    out = num / tl.sum(num, axis=1)[:, None]
    store_ok = (r[:, None] < h) & col_ok[None, :]
    tl.store(out_ptr + r[:, None] * out_row_stride + c[None, :], out, mask=store_ok)


# ---------------------------------------------------------------------------------- launchers
def num_warps_for(block):
    return 4 if block < 2048 else 8 if block < 4096 else 16


MEAN_GPU = dict(BLOCK=4096, TILES=4, num_warps=8, UNROLL=True)  # the notebook's MEAN_GPU
MEAN_CPU = dict(BLOCK=1024, TILES=2, num_warps=4, UNROLL=True)


def mean_serial(x):
    out = torch.empty(1, device=x.device)
    mean_serial_kernel[(1,)](x, out, x.numel(), BLOCK=1024)
    return out[0]


def mean_two_pass(x, cfg):
    n = x.numel()
    m = utils.cdiv(n, cfg["BLOCK"] * cfg["TILES"])
    partial = torch.empty(m, device=x.device)
    out = torch.empty(1, device=x.device)
    partial_sums_kernel[(m,)](x, partial, n, BLOCK=cfg["BLOCK"], TILES=cfg["TILES"],
                              UNROLL=cfg["UNROLL"], num_warps=cfg["num_warps"])
    m_block = triton.next_power_of_2(m)
    sum_to_mean_kernel[(1,)](partial, out, m, n, BLOCK=m_block, num_warps=num_warps_for(m_block))
    return out[0]


def mean_atomic(x, cfg):
    out = torch.zeros(1, device=x.device)
    grid = (utils.cdiv(x.numel(), cfg["BLOCK"] * cfg["TILES"]),)
    mean_atomic_kernel[grid](x, out, x.numel(), BLOCK=cfg["BLOCK"], TILES=cfg["TILES"],
                             UNROLL=cfg["UNROLL"], num_warps=cfg["num_warps"])
    return out[0]


def softmax_config(w):  # the notebook's heuristic
    BLOCK_W = triton.next_power_of_2(w)
    ROWS = max(1, 512 // BLOCK_W)
    return dict(BLOCK_W=BLOCK_W, ROWS=ROWS, num_warps=max(1, min(16, BLOCK_W * ROWS // 512)))


def softmax(x, cfg=None):
    h, w = x.shape
    cfg = cfg or softmax_config(w)
    out = torch.empty(h, w, device=x.device)
    softmax_rows_kernel[(utils.cdiv(h, cfg["ROWS"]),)](x, out, x.stride(0), out.stride(0), h, w,
                                                       **cfg)
    return out


# ----------------------------------------------------------------------------------- reporting
def short(cfg):
    """A configuration in a few characters: {'BLOCK': 4096, 'TILES': 4, ...} -> 'BLOCK=4096 TILES=4 ...'."""
    return " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in cfg.items())


def time_it(fn, *args, budget_ms=None):
    return utils.bench(fn, *args, l2_flush=True, reps=utils.by_mode(gpu=None, cpu=2),
                       budget_ms=budget_ms)


def line(name, t, nbytes, t_torch):
    r = utils.rate(t, nbytes=nbytes)
    vs = f"{t_torch.median / t.median:6.2f}x" if t_torch is not None else "      "
    print(f"  {name:<54} {utils.fmt_ms(t.median):>10} {r.value:>9,.0f} GB/s {r.pct:5.0f} %  {vs}")
    return t_torch.median / t.median if t_torch is not None else None


def bench_mean(tune):
    n = utils.by_mode(gpu=100_000_000, cpu=10_000)
    x = torch.rand(n, device=utils.DEVICE)
    ref = x.double().mean()
    cfg0 = utils.by_mode(gpu=MEAN_GPU, cpu=MEAN_CPU)
    print(f"\n{f'mean of {n:,} fp32 ({x.nbytes / 1e6:,.1f} MB read)':<56} {'time':>10} {'rate':>14} "
          f"{'% copy':>7}  vs torch")
    t_torch = time_it(torch.mean, x)
    line("torch.mean", t_torch, x.nbytes, None)
    variants = [("serial, one program (seed)", mean_serial, ()),
                (f"two-pass {short(cfg0)}", mean_two_pass, (cfg0,)),
                (f"atomic   {short(cfg0)}", mean_atomic, (cfg0,))]
    if tune:
        blocks = utils.by_mode(gpu=[1024, 2048, 4096, 8192, 16384], cpu=[1024])
        tiles = utils.by_mode(gpu=[1, 2, 4, 8, 16], cpu=[1, 2])
        warps = utils.by_mode(gpu=[4, 8, 16], cpu=[4])
        for b, t, wp, un in itertools.product(blocks, tiles, warps, [True, False]):
            if b * t > 262144 or b // (32 * wp) > 64:  # too few programs / too many registers
                continue
            cfg = dict(BLOCK=b, TILES=t, num_warps=wp, UNROLL=un)
            variants.append((f"two-pass {short(cfg)}", mean_two_pass, (cfg,)))
    scores = []
    for name, fn, extra in variants:
        try:
            utils.check(fn(x, *extra), ref, atol=0, rtol=1e-5, name=name)
            budget = 100 if name.startswith("two-pass") and len(scores) > 1 else None
            ratio = line(name, time_it(fn, x, *extra, budget_ms=budget), x.nbytes, t_torch)
            if fn is not mean_serial:
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
               f"({utils.rate(t, nbytes=nbytes).pct:3.0f} % copy) {ratio:5.2f}x  {short(cfg)}")
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
    if args.only in (None, "softmax"):
        bench_softmax(args.tune)


if __name__ == "__main__":
    main()
