"""What limits notebook 11's attention kernels and cuDNN's, measured with Nsight Compute, stored for the notebook.

    python bench/flash_attention_ncu.py                 # profile on this GPU, write results/profiles/ncu_flash_attention_<gpu>.csv
    python bench/flash_attention_ncu.py --from-raw R.csv   # distill an export made before (ncu --csv --page raw)

It runs this script again under ``ncu --set full`` (``--launch``), which launches once each, at batch 4, 16 heads,
N 4096, fp16, not causal (``lessons.attention.ncu_launches``): our forward at d = 128 (ladder steps 3 and 5) and
cuDNN's, our forward at d = 64 and cuDNN's, our dK/dV and dQ kernels at d = 64 and cuDNN's backward kernel. From each
kernel it keeps what says why it runs at its speed (``gpu_course.profiling.limiters``: tensor-pipe and issue
utilisation, active warps, registers, blocks per SM, the largest stall reasons) and writes them, one row per kernel,
with a first line naming the GPU, the ncu version and the date. Notebook 11 prints that file.

Needs a GPU with TMA (compute capability 9.0), cuDNN's attention in PyTorch, ncu, and permission to read the GPU's
performance counters (ncu says so when it is missing). ncu locks the clocks at base and replays each kernel: the
times it reports are longer than a normal run's, so it records nothing in results/<device>.csv.
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile

import utils
from gpu_course import profiling
from gpu_course.lessons import attention as lesson


def launch():
    """Launch each of ``lesson.ncu_launches()`` once, in order (after checking that this GPU has what they need)."""
    for what, _, fn in lesson.ncu_launches():
        fn()
        print(f"launched: {what}")
    import torch
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launch", action="store_true", help="(what ncu runs) launch the kernels once each")
    ap.add_argument("--from-raw", metavar="RAW_CSV", help="distill an `ncu --csv --page raw` export instead")
    ap.add_argument("--device", default=None, help="the GPU the --from-raw export comes from (default: this one)")
    ap.add_argument("--out", default=None, help="where to write (default: results/profiles/ncu_flash_attention_<gpu>.csv)")
    args = ap.parse_args()
    if args.launch:
        launch()
        return
    device = args.device or utils.device_name()
    from gpu_course.results import results_file
    out = args.out or lesson.limiters_file(results_file(device).stem)
    if args.from_raw:
        raw = open(args.from_raw).read()
        about = f"ncu --set full on {device} (distilled from {os.path.basename(args.from_raw)})"
    else:
        if not utils.ON_GPU:
            sys.exit("flash_attention_ncu: needs a GPU (cpu mode has no kernels to profile)")
        for feature in ("wgmma", "cudnn_sdpa"):
            ok, why = utils.gpu_supports(feature)
            if not ok:
                sys.exit(f"flash_attention_ncu: {why}")
        ncu = profiling.find_ncu()
        if ncu is None:
            sys.exit("flash_attention_ncu: ncu (Nsight Compute) is not installed here")
        version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
        with tempfile.TemporaryDirectory() as d:
            rep = os.path.join(d, "attention")
            cmd = [ncu, "--target-processes", "all", "-k", lesson.NCU_KERNELS, "--set", "full", "-o", rep, "-f",
                   sys.executable, os.path.abspath(__file__), "--launch"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if r.returncode != 0 or not os.path.exists(rep + ".ncu-rep"):
                sys.exit(f"ncu failed (exit code {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
            raw = subprocess.run([ncu, "--import", rep + ".ncu-rep", "--csv", "--page", "raw"], capture_output=True,
                                 text=True, timeout=300, check=True).stdout
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        B, H, N = lesson.NCU_SHAPE
        about = f"ncu --set full on {device}, {version}, {when}; B{B} H{H} N{N} fp16, not causal, one launch of each"
    rows = lesson.attention_limiter_rows(raw, lesson.NCU_ORDER)
    profiling.write_limiter_csv(rows, lesson.NCU_FIELDS, out, about)
    print(f"{about}\nwritten to {out}\n")
    print(lesson.limiter_table(rows))


if __name__ == "__main__":
    main()
