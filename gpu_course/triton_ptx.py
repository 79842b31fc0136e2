"""The PTX Triton writes for a kernel, without launching it: :func:`compiled_ptx` compiles a kernel of a
module for a CUDA target (sm_90 by default) in a fresh Python, with the interpreter off, so it works on a
machine without a GPU too (the compiler and ``ptxas`` ship with Triton); :func:`vector_loads` counts the
16-byte global loads in it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

_COMPILE = r"""
import os, sys, json, importlib
import gpu_course                                  # in cpu mode it turns the interpreter on: turn it off
os.environ["TRITON_INTERPRET"] = "0"               # before the kernel's module is imported
import triton
from triton.backends.compiler import GPUTarget
a = json.loads(sys.argv[1])
fn = getattr(importlib.import_module(a["module"]), a["kernel"])
attrs = {(i,): [["tt.divisibility", 16]] for i in a["aligned"]}
src = triton.compiler.ASTSource(fn, a["signature"], a["constexprs"], attrs)
opts = {"num_warps": a["num_warps"], **({"num_stages": a["num_stages"]} if a["num_stages"] else {})}
k = triton.compile(src, target=GPUTarget("cuda", a["capability"], 32), options=opts)
sys.stdout.write(k.asm[a.get("asm", "ptx")])
"""


def compiled_ptx(module: str, kernel: str, signature: dict, constexprs: dict, *, num_warps: int = 4,
                 num_stages: int | None = None, aligned=(), capability: int = 90, timeout: float = 300,
                 asm: str = "ptx") -> str:
    """The PTX of ``module.kernel`` (a ``@triton.jit`` function) compiled for compute capability
    ``capability`` with ``num_warps`` warps. ``signature`` maps each argument to its Triton type
    (``"*fp32"``, ``"i32"``, ``"constexpr"``), ``constexprs`` gives the constexpr values, and
    ``aligned`` lists the argument indices a launch would find divisible by 16 (pointers from torch,
    sizes that are multiples of 16), which is what lets Triton emit vector loads. ``asm="sass"`` gives the GPU's
    machine code instead (``ptxas``, then ``cuobjdump -sass``, both shipped with Triton).

    For example (tests/unit checks it), pass 1 of notebook 06's mean::

        compiled_ptx("gpu_course.kernels.triton_mean", "partial_sums_kernel",
                     {"x_ptr": "*fp32", "partial_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr",
                      "TILES": "constexpr"}, {"BLOCK": 4096, "TILES": 4}, num_warps=8, aligned=(0, 1, 2))
    """
    args = dict(module=module, kernel=kernel, signature=signature, constexprs=constexprs, num_warps=num_warps,
                num_stages=num_stages, aligned=list(aligned), capability=capability, asm=asm)
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", _COMPILE, json.dumps(args)], capture_output=True, text=True,
                       timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"compiled_ptx: compiling {kernel} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def vector_loads(ptx: str) -> dict:
    """The global loads in ``ptx`` by width: ``"16 B"`` for ``ld.global...v4`` of 32-bit values,
    ``"8 B"`` for ``.v2``, ``"4 B"`` for scalar 32-bit loads.

    >>> vector_loads("ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];\\n@%p1 ld.global.b32 %r5, [%rd2];")
    {'16 B': 1, '8 B': 0, '4 B': 1}
    """
    loads = re.findall(r"\bld\.global((?:\.[\w:]+)*)\.([bfsu]32)\b", ptx)
    out = {"16 B": 0, "8 B": 0, "4 B": 0}
    for mods, _ in loads:
        out["16 B" if ".v4" in mods else "8 B" if ".v2" in mods else "4 B"] += 1
    return out
