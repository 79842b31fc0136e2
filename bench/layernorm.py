"""Notebook 10's LayerNorm (gpu_course/kernels/triton_layernorm/) against torch, on a GPU, with notebook 10's
comparison (gpu_course/lessons/layernorm/).

    python bench/layernorm.py            # (4096 x 8192) fp16 and bf16 (fp16 alone without bf16)
    python bench/layernorm.py --tune     # also a few backward configurations (GROUPS, warps)
    python bench/layernorm.py --dtypes float16   # one dtype only
    python bench/layernorm.py --no-record  # print only

For each dtype, the forward alone (no_grad) and forward + backward (dx, dweight, dbias) of: torch's
``F.layer_norm`` (eager), ``torch.compile`` of it, ours as a model calls it in eager mode
(``layer_norm_op``: the autograd.Function), the custom op called directly
(``torch.ops.gpu_course.layer_norm``) and ``torch.compile`` of a function calling ``layer_norm_op``;
on a GPU also ``layer_norm_node``, the same kernels launched from a C++ autograd node (built first with
``ln.build_node()``, about a minute the first time).
Each row gives three figures (``utils.bench_user``): the GPU time (launch hidden, L2 flushed), the
time per step of a back-to-back Python loop, and the CPU time per call; then eager torch's time over
this one's, for the GPU time and for the loop (>= 1 is as fast or faster). Then forward + backward of
eager torch and ours each replayed from a CUDA graph. The last lines check, on the loop figures:
ours forward >= 1.0x eager, ours forward + backward >= 1.0x eager (the autograd.Function, and the C++
node where it is built), ours forward + backward under a CUDA graph >= 1.4x eager forward + backward (not
under a graph).

Every variant is checked against torch (float64) before it is timed. On a GPU every row of the tables
(not the --tune rows) is appended to results/<device>.csv under notebook "bench/layernorm", named as
notebook 10 names them ("LayerNorm forward: ...", size "4096x8192 float16"), each with its loop and CPU
figures and eager torch's; --no-record leaves the results alone. In cpu mode it runs a tiny size through
the Triton interpreter, torch.compile with ``backend="aot_eager"``: that checks the script; its times say nothing about a GPU, and nothing is recorded.
"""
import argparse

import utils  # first: chooses the mode before triton is imported
import torch
import triton

from gpu_course.kernels import triton_layernorm as ln
from gpu_course.lessons import layernorm as lesson
from gpu_course.results import bench_recording, record_comparison, record_flag
from gpu_course.user_timing import user_table

EPS = lesson.EPS
FB = "forward + backward"
NB = "bench/layernorm"   # the results rows' notebook


def bench_dtype(h, w, dtype, tune):
    # checks every variant against torch first (raises if wrong); torch.compile's backend on the CPU: aot_eager,
    # as in notebook 10 (Inductor would generate and build C++ for the CPU, which says nothing about a GPU)
    times = lesson.compare_with_torch(h, w, dtype, backend=utils.by_mode(gpu="inductor", cpu="aot_eager"))
    torch._dynamo.reset()
    print(f"  all {len(lesson.variants(w))} variants match torch in float64 (y, dx, dweight, dbias)")
    size, nbytes = f"{h}x{w} {str(dtype).replace('torch.', '')}", lesson.bytes_moved(h, w, dtype.itemsize)
    for what in nbytes:
        table = {n: t for (w_, n), t in times.items() if w_ == what}
        print(f"  {what}")
        print("    " + user_table(table, lesson.EAGER).replace("\n", "\n    "))
        record_comparison(NB, size, table, lesson.EAGER, nbytes=nbytes[what], baseline_name="eager torch",
                          prefix=f"LayerNorm {what}: ")
    graphs = lesson.under_cuda_graph(h, w, dtype)
    print(f"  {FB}, replayed from a CUDA graph (gradients checked against torch)")
    table = {lesson.EAGER: times[(FB, lesson.EAGER)], **graphs}
    print("    " + user_table(table, lesson.EAGER).replace("\n", "\n    "))
    record_comparison(NB, size, table, lesson.EAGER, nbytes=nbytes[FB], baseline_name="eager torch",
                      prefix=f"LayerNorm {FB}: ", include_baseline=False)   # eager's row: recorded above
    if tune:
        x, wt, b, dy = lesson.inputs(h, w, dtype)
        tune_backward(x, wt, b, dy)
    loop = lambda t: times[(t, lesson.EAGER)].loop_ms  # noqa: E731
    verdicts = [("forward, loop", loop("forward") / times[("forward", lesson.OURS)].loop_ms, 1.0),
                (f"{FB}, loop", loop(FB) / times[(FB, lesson.OURS)].loop_ms, 1.0),
                (f"{FB}, CUDA graph", loop(FB) / graphs[f"{lesson.OURS}, CUDA graph"].loop_ms, 1.4)]
    if (FB, lesson.NODE) in times:
        verdicts.append((f"{FB}, loop, C++ node", loop(FB) / times[(FB, lesson.NODE)].loop_ms, 1.0))
    return verdicts


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
                t = lesson.time_it(ln.layer_norm_backward, dy, x.detach(), wt.detach(), mean, rstd, cfg)
            except Exception as e:  # noqa: BLE001 - a config may not compile: say so, go on
                print(f"    GROUPS={groups:>4} num_warps={warps:>2}: FAILED {type(e).__name__}")
                continue
            print(f"    GROUPS={groups:>4} num_warps={warps:>2}: {utils.fmt_ms(t.median):>10}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", action="store_true", help="also time a few backward configurations")
    ap.add_argument("--dtypes", nargs="*", choices=["float16", "bfloat16"],
                    help="only these dtypes (default: fp16, and bf16 where the GPU has it)")
    args = record_flag(ap).parse_args()
    print(utils.banner())
    print(bench_recording(args.record))
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    print("C++ autograd node (layer_norm_node):", "built" if ln.build_node() else ln.node_status())
    h, w = utils.by_mode(gpu=(4096, 8192), cpu=(6, 300))
    if not utils.ON_GPU:
        print("cpu mode: a tiny size through the Triton interpreter; the times below say nothing "
              "about a GPU")
    dtypes, skipped = lesson.dtypes_here()
    if args.dtypes:
        dtypes = [d for d in dtypes if str(d).replace("torch.", "") in args.dtypes]
    for why in skipped:
        print(why)
    verdicts = []
    for dtype in dtypes:
        print(f"\nLayerNorm of ({h} x {w}) {str(dtype).replace('torch.', '')}, eps={EPS}; ratio: eager "
              "torch's time / this one's")
        verdicts += [(f"{str(dtype)[6:]} {name}", got, target) for name, got, target in bench_dtype(h, w, dtype, args.tune)]
    print(f"\nOurs ({lesson.OURS}) against eager torch, time per step in a loop:")
    for name, got, target in verdicts:
        met = "met" if got >= target else "NOT met"
        print(f"  {name:<40} {got:5.2f}x (target >= {target}x): {met}"
              + ("" if utils.ON_GPU else " (cpu mode: not meaningful)"))


if __name__ == "__main__":
    main()
