"""What limits each rung of notebook 12's tensor-core ladder, measured with Nsight Compute, stored for the notebook.

    python bench/tensor_cores_ncu.py                   # profile on this GPU, write results/profiles/ncu_tensor_cores_<gpu>.csv
    python bench/tensor_cores_ncu.py --variants "not swizzled"   # profile one variant again, into the stored file
    python bench/tensor_cores_ncu.py --from-raw S.csv N.csv   # distill exports made before (ncu --csv --page raw)

It runs this script again under ``ncu --set full`` twice, each time launching every shape of the rungs once at 4096³
(``--launch``): first as notebook 12 builds them (rungs 2 to 5), then rungs 3 and 4 built with -DTC_NO_SWIZZLE (every
16-byte piece of a row left in place, the same results, the bank conflicts back). From each kernel it keeps what says
why it runs at its speed (``gpu_course.profiling.limiters``: tensor-pipe and issue utilisation, active warps,
registers, blocks per SM, shared-memory bank conflicts and load passes, the largest stall reasons) and writes them,
one row per kernel, with a first line naming the GPU, the ncu version and the date. Notebook 12 prints that file.

Needs a GPU, ncu, and permission to read the GPU's performance counters (ncu says so when it is missing). ncu locks
the clocks at base and replays each kernel ~40 times: the times it reports are longer than a normal run's, which is
why it records nothing in results/<device>.csv (bench/tensor_cores.py times the ladder there).
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile

import torch
import utils
from gpu_course import profiling
from gpu_course.kernels import tensor_cores as tc
from gpu_course.lessons import tensor_cores as lesson

KERNELS = "regex:" + "|".join(lesson.KERNEL_NAMES.values())
N = 4096


def launch(variant):
    """Build the rungs of ``variant`` and launch each (rung, cfg) of ``lesson.PROFILED[variant]`` once, in order, each
    checked against a float32 product on a poisoned output."""
    rungs = sorted({r for r, _ in lesson.PROFILED[variant]})
    flags = lesson.NO_SWIZZLE_FLAGS if variant == "not swizzled" else []
    mod = tc.build(rungs, extra_cuda_cflags=flags)
    g = torch.Generator(device=utils.DEVICE).manual_seed(0)
    m = torch.randn(N, N, device=utils.DEVICE, generator=g).half()
    n = torch.randn(N, N, device=utils.DEVICE, generator=g).half()
    ref = m.float() @ n.float()
    for rung, cfg in lesson.PROFILED[variant]:
        out = tc.run(mod, rung, m, n, utils.poisoned(N, N, dtype=torch.float16), cfg)
        utils.check(out, ref, **tc.tol(N), name=f"{variant} rung {rung} cfg {cfg}")
    print(f"{variant}: {len(lesson.PROFILED[variant])} launches checked")


def profile(ncu, variant, workdir):
    """The raw metrics (CSV text) of ``ncu --set full`` over ``launch(variant)`` in a child process."""
    rep = os.path.join(workdir, variant.replace(" ", "_"))
    cmd = [ncu, "--target-processes", "all", "-k", KERNELS, "--set", "full", "-o", rep, "-f",
           sys.executable, os.path.abspath(__file__), "--launch", variant]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0 or not os.path.exists(rep + ".ncu-rep"):
        raise RuntimeError(f"ncu failed (exit code {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    raw = subprocess.run([ncu, "--import", rep + ".ncu-rep", "--csv", "--page", "raw"], capture_output=True, text=True,
                         timeout=300, check=True)
    return raw.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launch", choices=sorted(lesson.PROFILED), help="(what ncu runs) launch one variant's kernels")
    ap.add_argument("--from-raw", nargs=2, metavar=("SWIZZLED_CSV", "NOT_SWIZZLED_CSV"),
                    help="distill two `ncu --csv --page raw` exports instead of profiling")
    ap.add_argument("--device", default=None, help="the GPU the --from-raw exports come from (default: this one)")
    ap.add_argument("--out", default=None, help="where to write (default: results/profiles/ncu_tensor_cores_<gpu>.csv)")
    ap.add_argument("--variants", nargs="+", choices=sorted(lesson.PROFILED), default=None,
                    help="profile only these, and put their rows into the stored file in place of its rows of them")
    args = ap.parse_args()
    if args.launch:
        launch(args.launch)
        return
    device = args.device or utils.device_name()
    from gpu_course.results import results_file
    out = args.out or lesson.limiters_file(results_file(device).stem)
    if args.from_raw:
        raw = dict(zip(("swizzled", "not swizzled"), (open(p).read() for p in args.from_raw)))
        about = f"ncu --set full on {device} (distilled from {', '.join(os.path.basename(p) for p in args.from_raw)})"
    else:
        if not utils.ON_GPU:
            sys.exit("tensor_cores_ncu: needs a GPU (cpu mode has no kernels to profile)")
        ncu = profiling.find_ncu()
        if ncu is None:
            sys.exit("tensor_cores_ncu: ncu (Nsight Compute) is not installed here")
        version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
        with tempfile.TemporaryDirectory() as d:
            raw = {v: profile(ncu, v, d) for v in (args.variants or lesson.PROFILED)}
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        about = f"ncu --set full on {device}, {version}, {when}; {N}³ fp16, one launch of each kernel"
    rows = lesson.limiter_rows(raw)
    if args.variants and os.path.exists(out):     # the other variants' rows as they were measured before
        rows, about = lesson.merge_limiters(lesson.read_limiters(out), rows, f"{', '.join(args.variants)}: {about}")
    lesson.write_limiters(rows, out, about)
    print(f"{about}\nwritten to {out}\n")
    print(lesson.limiter_table(rows))


if __name__ == "__main__":
    main()
