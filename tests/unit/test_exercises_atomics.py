"""Programs that combine their results into the output with atomics (cpu mode: the Triton interpreter).

Each program of a max reduced with ``tl.atomic_max`` writes the whole, one-element output: that is no sign of a
program doing the others' work, and the check does not say it is (notebook 06's exercise 4 then says what its own
evidence finds). A program that does the others' work is still refused, atomics or not.
The kernels are at module level (a learner's cell)."""
import utils  # first: it sets the interpreter switch that triton reads at import

import pytest
import torch
import triton
import triton.language as tl

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="cpu mode: the interpreter's counts per program")

XG = torch.rand(20_003) - 2   # all negative: a maximum that starts at 0 is wrong
BLOCK = 1024


@triton.jit
def max_atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    tl.atomic_max(out_ptr, tl.max(x, axis=0))   # each program's maximum, combined in one number


@triton.jit
def max_atomic_program_0_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if tl.program_id(0) == 0:   # program 0 walks the whole tensor; the others only add their own block
        best = tl.full((BLOCK,), -float("inf"), tl.float32)
        for start in range(0, n, BLOCK):
            o = start + tl.arange(0, BLOCK)
            best = tl.maximum(best, tl.load(x_ptr + o, mask=o < n, other=-float("inf")))
        tl.atomic_max(out_ptr, tl.max(best, axis=0))
    else:
        tl.atomic_max(out_ptr, tl.max(tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")), axis=0))


def max_with(kernel):
    def answer(x):
        out = torch.full((1,), -float("inf"))
        kernel[(utils.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
        return out
    return answer


def verdict(capsys, kernel) -> str:
    utils.kernel_exercise("global max", max_with(kernel), kind="triton", run=lambda f: f(XG),
                          reference=lambda: XG.max().reshape(1), atol=0, rtol=0, evidence=[utils.only_reads(XG)])
    return capsys.readouterr().out.strip()


def test_programs_that_combine_their_maxima_with_atomic_max_are_not_said_to_do_the_others_work(capsys):
    why = verdict(capsys, max_atomic_kernel)
    assert "wrote all 1 outputs itself" not in why, why
    assert why.startswith("✅ global max: correct"), why


def test_a_program_that_does_the_others_work_is_refused_though_it_writes_with_an_atomic(capsys):
    why = verdict(capsys, max_atomic_program_0_kernel)
    assert why.startswith("❌ global max: not yet: program 0 of "), why
    assert "each program must do its own share of the work" in why, why
