"""Shared memory per block of the course's autotuned Triton kernels, compiled for a GPU you may not have.

    python bench/triton_shared_memory.py             # for a T4 (sm_75, 64 KB a block)
    python bench/triton_shared_memory.py --cc 86     # an A10 / RTX 30xx (99 KB)

No GPU needed: Triton compiles for the given compute capability (ptxas included) and reports the shared
memory each kernel would use. For FlashAttention's forward, dK/dV and dQ kernels (fp16, d = 64 and 128, causal)
and the matmul (fp16 and fp32) it prints, per tile shape the autotuner tries on such a GPU, the bytes and
whether they fit; the autotuner skips a shape that does not, so every kernel needs one that does. (On sm_7x
Triton does not pipeline loads, so num_stages does not change the figure there; from sm_80 on it does.)
It times nothing, so it records nothing in results/.
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("COURSE_MODE", "cpu")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", type=int, default=75, help="compute capability, as 75 for 7.5")
    args = ap.parse_args()
    os.environ["COURSE_FAKE_CC"] = f"{args.cc // 10}.{args.cc % 10}"
    import gpu_course  # noqa: F401  (chooses the mode before triton is imported)
    from gpu_course import hardware, mode
    os.environ["TRITON_INTERPRET"] = "0"   # kernels defined from here on are compiled, not interpreted
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from gpu_course.kernels import triton_attention as ta, triton_matmul as tm
    mode.ON_GPU = ta.configs.ON_GPU = True   # the GPU's lists of tile shapes, as for that capability
    limit = hardware.shared_memory_per_block()
    print(f"sm_{args.cc}: at most {limit // 1024} KB of shared memory per block (triton {triton.__version__})")

    def shared(kernel, types, const, cfg):
        sig = {n: "constexpr" if n in const else types.get(n, "i32") for n in kernel.arg_names}
        src = ASTSource(kernel, sig, constexprs={(kernel.arg_names.index(n),): v for n, v in const.items()})
        try:
            c = triton.compile(src, target=GPUTarget("cuda", args.cc, 32),
                               options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages))
            return c.metadata.shared
        except Exception as e:  # noqa: BLE001 - report any compile failure, go on
            return f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"

    def report(name, kernel, types, const, configs):
        for cfg in configs:
            got = shared(kernel, types, {**const, **cfg.kwargs}, cfg)
            fits = "fits" if isinstance(got, int) and got <= limit else "DOES NOT FIT"
            size = f"{got // 1024:4d} KB" if isinstance(got, int) else got
            print(f"  {name:28s} {str(cfg.kwargs):44s} w{cfg.num_warps} s{cfg.num_stages}  {size}  {fits}")

    half = "*fp16"
    fwd, (dkdv, dq) = ta.forward_configs(), ta.backward_configs()
    for d in (64, 128):
        const = dict(HEAD_DIM=d, CAUSAL=True, DOT_PRECISION="tf32")
        f32 = {"scale": "fp32", "lse_ptr": "*fp32", "delta_ptr": "*fp32"}
        report(f"attention forward d={d}", ta.attention_fwd_kernel,
               {**{n: half for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr")}, **f32}, const, fwd)
        report(f"attention dK/dV d={d}", ta.attention_bwd_dkdv_kernel,
               {**{n: half for n in ("q_ptr", "k_ptr", "v_ptr", "do_ptr", "dk_ptr", "dv_ptr")}, **f32}, const, dkdv)
        report(f"attention dQ d={d}", ta.attention_bwd_dq_kernel,
               {**{n: half for n in ("q_ptr", "k_ptr", "v_ptr", "do_ptr", "dq_ptr")}, **f32}, const, dq)
    for dt, prec in (("fp16", "tf32"), ("fp32", "ieee")):
        types = {n: f"*{dt}" for n in ("a_ptr", "b_ptr", "bias_ptr", "out_ptr")}
        report(f"matmul {dt}", tm.matmul_kernel, types,
               dict(DOT_PRECISION=prec, HAS_BIAS=False, ACTIVATION=""), tm.matmul_configs())


if __name__ == "__main__":
    main()
