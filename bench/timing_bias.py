"""How much the launch biases event timing of short kernels, and what utils.bench does about it.

    python3 bench/timing_bias.py      # on a GPU; in cpu mode it says so and stops

For a few sizes of torch.square (from a few µs to a few hundred µs) it prints the median time of:
events with an idle queue (the CPU's launch time included), events with the launch hidden (what
utils.bench reports), the same with the L2 flushed, triton.testing.do_bench, torch.utils.benchmark
(its blocked_autorange: a synchronize per block of runs), and a CUDA graph of 100 launches (the GPU's
time per kernel when nothing waits on the CPU). It also prints the CPU's time to launch one call.
Notebook 01 teaches the same effect with its own measurements.

It records nothing in results/: it compares ways of timing one torch kernel, not a kernel of the course
with a library, and the results file holds each kernel's figures as utils.bench and utils.bench_user
measure them (notebook 01 records its own).
"""
import utils  # first: chooses the mode
import torch


def main():
    if not utils.ON_GPU:
        print("cpu mode: this script measures GPU timing bias; run it on a GPU.")
        return
    import triton
    from torch.utils import benchmark
    print(utils.device_name())
    print(f"{'n':>12} {'idle q':>9} {'hidden':>9} {'flushed':>9} {'fl+idle':>9} {'do_bench':>9} "
          f"{'torch.bm':>9} {'graph':>9} {'launch':>9}  (µs)")
    for n in (2**14, 2**18, 2**21, 2**24, 2**26):
        x = torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        fn = lambda: torch.square(x, out=out)  # noqa: E731
        idle = utils.bench(fn, hide_launch=False)
        hidden = utils.bench(fn)
        flushed = utils.bench(fn, l2_flush=True)
        fl_idle = utils.bench(fn, l2_flush=True, hide_launch=False)
        db = triton.testing.do_bench(fn, return_mode="median")
        tb = benchmark.Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=0.3).median * 1e3
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(100):
                fn()
        gt = utils.bench(g.replay).median / 100
        print(f"{n:>12,} " + " ".join(f"{v * 1e3:9.1f}" for v in (
            idle.median, hidden.median, flushed.median, fl_idle.median, db, tb, gt, hidden.launch_ms)))


if __name__ == "__main__":
    main()
