"""Notebook 10's LayerNorm (gpu_course/kernels/triton_layernorm.py) against torch, on a GPU.

    python bench/layernorm.py            # (4096 x 8192) fp16 and bf16, the issue's sizes
    python bench/layernorm.py --tune     # also a few backward configurations (GROUPS, warps)

For each dtype, the forward alone and forward + backward (dx, dweight, dbias) of: torch's
``F.layer_norm`` (eager), ``torch.compile`` of it (Inductor's generated Triton), ours through the
custom op (the launchers directly) and through the ``autograd.Function``. Each row gives the median
time (``utils.bench``, L2 flushed), the GB/s of the bytes a fused kernel must move (forward: x read,
y written; forward + backward: also dy and x read again, dx written; the weights are small) and the
ratio to eager torch (torch's time / ours: >= 1 is as fast or faster), all from the same run.
Issue 16's targets on an H100: forward >= 1.0x torch, forward + backward >= 0.9x torch; the last
lines say whether they are met.

Every variant is checked against torch (float64) before it is timed. In cpu mode it runs a tiny size
through the Triton interpreter: that checks the script; its times say nothing about a GPU.
It reads and writes no files.
"""
import argparse

import utils  # first: chooses the mode before triton is imported
import torch
import triton

from gpu_course.kernels import triton_layernorm as ln

EPS = ln.EPS


def bench_dtype(h, w, dtype, tune):
    times = ln.compare_with_torch(h, w, dtype)  # checks every variant against torch first (raises if wrong)
    print("  all 4 variants match torch in float64 (y, dx, dweight, dbias)")
    ratios = {}
    for what, nbytes in ln.bytes_moved(h, w, dtype.itemsize).items():
        print(f"  {what} ({nbytes / 1e6:,.1f} MB moved at least)")
        t_torch = times[(what, "torch F.layer_norm (eager)")]
        for (w_, name), t in times.items():
            if w_ != what:
                continue
            r = t_torch.median / t.median
            ratios[(what, name)] = r
            print(f"    {name:<30} {utils.fmt_ms(t.median):>10} {utils.throughput(t, nbytes=nbytes).value:>8,.0f}"
                  f" GB/s  {r:5.2f}x")
    if tune:
        x, wt, b, dy = ln.inputs(h, w, dtype)
        tune_backward(x, wt, b, dy)
    return ratios


def tune_backward(x, wt, b, dy):
    """Backward alone for a few (GROUPS, num_warps): which configuration layer_norm_config should pick."""
    h, w = x.shape
    _, mean, rstd = ln.layer_norm_forward(x.detach(), wt.detach(), b.detach(), EPS)
    base = ln.layer_norm_config(w, h=h, device=x.device)
    sms = base["GROUPS"]
    print(f"  backward alone (dx kernel + dweight/dbias reduction); default {base}")
    for groups in utils.by_mode(gpu=[sms // 2, sms, 2 * sms, 4 * sms], cpu=[2, 4]):
        for warps in utils.by_mode(gpu=[4, 8, 16, 32], cpu=[4]):
            cfg = dict(base, GROUPS=groups, num_warps=warps)
            try:
                t = ln.time_it(ln.layer_norm_backward, dy, x.detach(), wt.detach(), mean, rstd, cfg)
            except Exception as e:  # noqa: BLE001 - a config may not compile: say so, go on
                print(f"    GROUPS={groups:>4} num_warps={warps:>2}: FAILED {type(e).__name__}")
                continue
            print(f"    GROUPS={groups:>4} num_warps={warps:>2}: {utils.fmt_ms(t.median):>10}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", action="store_true", help="also time a few backward configurations")
    args = ap.parse_args()
    print(utils.banner())
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    h, w = utils.by_mode(gpu=(4096, 8192), cpu=(6, 300))
    if not utils.ON_GPU:
        print("cpu mode: a tiny size through the Triton interpreter; the times below say nothing "
              "about a GPU")
    verdicts = []
    for dtype in (torch.float16, torch.bfloat16):
        print(f"\nLayerNorm of ({h} x {w}) {str(dtype).replace('torch.', '')}, eps={EPS}; ratio: eager "
              "torch's time / this one's")
        r = bench_dtype(h, w, dtype, args.tune)
        for what, target in (("forward", 1.0), ("forward + backward", 0.9)):
            got = r[(what, "ours, custom op")]
            verdicts.append((f"{dtype} {what}", got, target))
    print("\nIssue 16's targets (ours through the custom op vs eager torch):")
    for name, got, target in verdicts:
        met = "met" if got >= target else "NOT met"
        print(f"  {name:<36} {got:5.2f}x (target >= {target}x): {met}"
              + ("" if utils.ON_GPU else " (cpu mode: not meaningful)"))


if __name__ == "__main__":
    main()
