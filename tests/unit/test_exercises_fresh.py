"""The check's launch on inputs with new values (gpu_course.exercises.fresh): a kernel that computes from what it
reads passes, one whose result was computed beforehand and handed to it (as a number, in a ``__device__``
array) is refused, and the step stands aside wherever it could not judge fairly (integer inputs, data derived
from the inputs before the launch, a reference that does not follow the shuffle).

The Triton kernels are at module level (a learner's cell); the CUDA C stash (notebook 03's cheat) runs through
the emulation."""
import pytest
import torch

import utils  # first: it sets the simulator switches that triton reads at import

import triton
import triton.language as tl

from gpu_course.exercises import judging
from gpu_course.exercises.fresh import varied, varied_names, vary
from gpu_course.exercises.replay import Memory, fresh_copies
from solutions import nb03
from test_exercises_work import src_of

N = 300
XS = torch.randn(N) + 0.5


def out_lines(capsys):
    return capsys.readouterr().out.splitlines()


# ----------------------------------------------------------------------------------------------
# the pieces

def test_vary_shuffles_floats_moves_bytes_and_leaves_other_integers_and_bools_alone():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(50)
    new = vary(x, gen)
    assert not torch.equal(new, x) and torch.equal(new.sort().values, x.sort().values)
    assert vary(torch.arange(50), gen) is None            # lengths, offsets, page tables keep their values
    b = torch.randint(0, 256, (50,), dtype=torch.uint8)  # bytes are data: moved round 0..255 by one step
    moved = vary(b, gen).to(torch.int16)
    step = (moved - b.to(torch.int16)) % 256
    assert step.min() == step.max() != 0
    assert vary(torch.ones(50, dtype=torch.bool), gen) is None
    assert vary(torch.tensor([1.0]), gen) is None         # nothing to shuffle


def test_varied_names_are_the_tensors_both_run_and_reference_read():
    a, b, only_run = torch.randn(5), torch.randn(5), torch.randn(5)

    def run(f):
        return f(a, b, only_run)
    assert {id(t) for t in varied_names(run, lambda: a + b)} == {id(a), id(b)}
    named = varied_names(run, lambda: a + b, named=(only_run,))
    assert id(named[0]) == id(only_run) and {id(t) for t in named} == {id(only_run), id(a), id(b)}


def test_varied_keeps_what_changes_the_reference_and_puts_every_value_back():
    x, y = torch.randn(40), torch.randn(40)
    x0, y0 = x.clone(), y.clone()

    def ref():
        return y * 2 + 0 * x.sum()            # new values of x do not change it; new ones of y do
    with varied([x, y], ref, ref(), seed=1) as (new_ref, kept):
        assert [id(t) for t, _ in kept] == [id(y)]
        assert torch.equal(x, x0) and not torch.equal(y, y0)
        assert torch.allclose(new_ref, ref())
    assert torch.equal(x, x0) and torch.equal(y, y0)


def test_a_reference_that_fails_on_the_new_values_leaves_them_be():
    x = torch.randn(40)
    x0 = x.clone()

    def ref():
        if not torch.equal(x, x0):
            raise ValueError("x must stay sorted")
        return x * 2
    with varied([x], ref, ref(), seed=2) as (new_ref, kept):
        assert new_ref is None and kept == []
        assert torch.equal(x, x0)


def test_memory_gives_a_copy_of_a_varied_input_its_new_values_and_notes_other_data():
    x = torch.randn(64)
    old = x.clone()
    copy, derived, scratch = x.clone(), x.exp(), torch.zeros(64)
    with torch.no_grad():
        x.copy_(x.flip(0))
    mem = Memory(output=torch.empty(64), inputs=[])
    with fresh_copies([(x, old)], [x]) as state:
        assert torch.equal(mem.tensor(copy, "copy"), x)          # the copy follows the input
        assert torch.equal(mem.tensor(x, "x"), x)
        mem.tensor(scratch, "scratch")                            # zeros: nothing computed beforehand
        assert state.unknown == []
        mem.tensor(derived, "derived")                            # data the check cannot vary with x
        assert state.unknown == ["derived"]


# ----------------------------------------------------------------------------------------------
# judged: x minus its mean, the mean computed by the kernel, or handed to it as a number

@triton.jit
def centre(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ALL: tl.constexpr):   # each program reads all of x
    everything = tl.arange(0, ALL)
    mean = tl.sum(tl.load(x_ptr + everything, mask=everything < n, other=0.0), axis=0) / n
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) - mean, mask=offs < n)


@triton.jit
def centre_given(x_ptr, out_ptr, n, mean, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) - mean, mask=offs < n)


def centred(x):
    out = utils.poisoned(N)
    centre[(triton.cdiv(N, 64),)](x, out, N, BLOCK=64, ALL=512)
    return out


def centred_copy(x):   # unusual but right: the kernel reads a copy of x
    return centred(x.clone())


def mean_passed_as_a_number(x):
    out = utils.poisoned(N)
    centre_given[(triton.cdiv(N, 64),)](x, out, N, float(x.double().mean()), BLOCK=64)
    return out


def check_centre(answer, capsys):
    utils.kernel_exercise("x minus its mean", answer, kind="triton", run=lambda f: f(XS),
                          reference=lambda: XS.double() - XS.double().mean(), atol=1e-4, rtol=1e-4)
    return out_lines(capsys)[-1]


@pytest.mark.skipif(utils.ON_GPU, reason="cpu-mode launch paths (the interpreter)")
@pytest.mark.parametrize("answer", [centred, centred_copy])
def test_a_kernel_that_computes_from_what_it_reads_passes(answer, capsys):
    assert check_centre(answer, capsys).startswith("✅ x minus its mean: correct"), answer.__name__


@pytest.mark.skipif(utils.ON_GPU, reason="cpu-mode launch paths (the interpreter)")
def test_a_number_computed_beforehand_is_refused_and_only_this_step_refuses_it(capsys, monkeypatch):
    line = check_centre(mean_passed_as_a_number, capsys)
    assert line.startswith("❌ x minus its mean: not yet: the check launched centre_given again, with your launch "
                           "configuration and arguments, on inputs whose values it changed"), line
    monkeypatch.setattr(judging, "STEPS", [s for s in judging.STEPS if s is not judging._fresh_values])
    assert check_centre(mean_passed_as_a_number, capsys).startswith("✅"), "the step is what refuses it"


# ----------------------------------------------------------------------------------------------
# CUDA C: the result computed on the host and kept in a __device__ array

X_RELU = torch.randn(1000, device=utils.DEVICE)
RELU_SRC = src_of(nb03.RELU)   # notebook 03's solution, and its cheat that keeps the result in a __device__ array
STASH_SRC = src_of(nb03.CHEATS["ex03-1-answer"][
    "the host function computes ReLU in a C++ loop and keeps it in a __device__ array the kernel copies"])


def check_relu(src, capsys):
    def run(mod):
        out = utils.poisoned(X_RELU.numel())
        mod.relu(X_RELU, out)
        return out
    utils.kernel_exercise("a ReLU kernel", src, kind="cuda", kernel="relu_k",
                          build=lambda s: utils.load_cuda(s, utils.get_sig("relu", s), ["relu"]),
                          run=run, reference=lambda: torch.relu(X_RELU), atol=0, rtol=0)
    return out_lines(capsys)[-1]


def test_cuda_c_a_result_kept_in_a_device_array_is_refused(capsys):
    assert check_relu(RELU_SRC, capsys).startswith("✅ a ReLU kernel: correct")
    line = check_relu(STASH_SRC, capsys)
    if utils.ON_GPU:   # the check's own launch builds the module afresh: its stash is empty, refused a step earlier
        assert line.startswith("❌ a ReLU kernel: not yet: the check launched relu_k"), line
    else:              # the emulation's module keeps the stash: refused on the new values
        assert line.startswith("❌ a ReLU kernel: not yet: the check launched relu_k again"), line
        assert "not from anything computed beforehand and kept" in line
