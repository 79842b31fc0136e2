"""Round 2 of the kernel exercises' judging (cpu mode): the technique must carry the work.

* Triton: the loads and stores of every program of every launch are counted, whatever the number of
  kernels the answer launched (program 0 looping over every row beside a second launch is refused);
* a ``tl.dot`` must carry the product: its operands hold loaded data (not an identity or zero tile made up in
  the kernel), its multiply-adds on them add up to the product's (``dot_work``), and, launched again with every
  product doubled, the output changes;
* a program that loads element by element (more than 256 one-element loads) is refused: the lesson is a block load;
* memory passed to a kernel as anything but a tensor (an object with ``data_ptr``) is refused;
* the interpreter rounds ``tl.dot``'s fp32 inputs to TF32 where that precision is asked for.

Each cheat is refused with a message naming the lesson; each right answer, unusual ones included, passes.
The kernels are at module level (a learner's cell)."""
import numpy as np
import pytest
import torch

import utils  # first: it sets the simulator switches that triton reads at import

import triton
import triton.language as tl

from gpu_course.interpose import triton as events

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="cpu-mode launch paths (the interpreter)")

H, W = 9, 40
XR = torch.randn(H, W)


def out_lines(capsys):
    return capsys.readouterr().out.splitlines()


# ----------------------------------------------------------------------------------------------
# one program per row, as notebook 06's row max

@triton.jit
def rmax_row(x_ptr, out_ptr, stride, w, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    tl.store(out_ptr + r, tl.max(tl.load(x_ptr + r * stride + c, mask=c < w, other=-float("inf")), axis=0))


@triton.jit
def rmax_two_rows(x_ptr, out_ptr, stride, h, w, BLOCK: tl.constexpr):   # unusual: two rows a program
    for i in range(2):
        r = tl.program_id(0) * 2 + i
        c = tl.arange(0, BLOCK)
        if r < h:
            x = tl.load(x_ptr + r * stride + c, mask=c < w, other=-float("inf"))
            tl.store(out_ptr + r, tl.max(x, axis=0))


@triton.jit
def rmax_columns_first(x_ptr, out_ptr, stride, w, BLOCK: tl.constexpr):  # unusual: halves of the row, then max
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK // 2)
    a = tl.load(x_ptr + r * stride + c, mask=c < w, other=-float("inf"))
    b = tl.load(x_ptr + r * stride + BLOCK // 2 + c, mask=BLOCK // 2 + c < w, other=-float("inf"))
    tl.store(out_ptr + r, tl.max(tl.maximum(a, b), axis=0))


@triton.jit
def rmax_program0_all(x_ptr, out_ptr, stride, h, w, BLOCK: tl.constexpr):
    if tl.program_id(0) == 0:
        for r in range(h):
            c = tl.arange(0, BLOCK)
            tl.store(out_ptr + r, tl.max(tl.load(x_ptr + r * stride + c, mask=c < w, other=-float("inf")), axis=0))
    else:   # the others re-store one element: not idle
        r = tl.program_id(0)
        tl.store(out_ptr + r, tl.load(out_ptr + r))


@triton.jit
def touch(out_ptr):   # a second kernel, launched so that the answer has two launches
    tl.store(out_ptr + tl.program_id(0), tl.load(out_ptr + tl.program_id(0)))


def rows_one_each(x):
    out = utils.poisoned(H)
    rmax_row[(H,)](x, out, x.stride(0), W, BLOCK=64)
    return out


def rows_two_each(x):
    out = utils.poisoned(H)
    rmax_two_rows[(triton.cdiv(H, 2),)](x, out, x.stride(0), H, W, BLOCK=64)
    return out


def rows_by_halves(x):
    out = utils.poisoned(H)
    rmax_columns_first[(H,)](x, out, x.stride(0), W, BLOCK=64)
    return out


def program0_then_second_kernel(x):
    out = utils.poisoned(H)
    rmax_program0_all[(H,)](x, out, x.stride(0), H, W, BLOCK=64)
    touch[(H,)](out)
    return out


def single_program_then_restores(x):   # all the rows in a launch of one program, the rows re-stored by another
    out = utils.poisoned(H)
    rmax_program0_all[(1,)](x, out, x.stride(0), H, W, BLOCK=64)
    touch[(H,)](out)
    return out


def check_rows(answer, capsys):
    utils.kernel_exercise("row max", answer, kind="triton", run=lambda f: f(XR),
                          reference=lambda: XR.max(1).values, atol=0, rtol=0, inputs=(XR,))
    return out_lines(capsys)[-1]


@pytest.mark.parametrize("answer", [rows_one_each, rows_two_each, rows_by_halves])
def test_row_max_split_between_programs_passes(answer, capsys):
    assert check_rows(answer, capsys).startswith("✅ row max: correct"), answer.__name__


class Address:   # an object that hands a kernel an address, without being a tensor
    def __init__(self, t):
        self.t, self.dtype = t, t.dtype

    def data_ptr(self):
        return self.t.data_ptr()

    def untyped_storage(self):
        return self.t.untyped_storage()

    def storage_offset(self):
        return self.t.storage_offset()

    def stride(self):
        return self.t.stride()

    def size(self):
        return self.t.size()

    def new_empty(self, *a, **k):
        return self.t.new_empty(*a, **k)


KEPT = []


def torch_result_through_an_address(x):   # torch did the work; the kernel copies it through a non-tensor
    out = utils.poisoned(H)
    KEPT.append(x.max(1).values.contiguous())
    rmax_row[(H,)](Address(KEPT[-1].reshape(H, 1).expand(H, W).contiguous()), out, W, W, BLOCK=64)
    return out


def reinterpreted_input(x):   # triton.reinterpret of a tensor is memory the check replaces like the tensor
    out = utils.poisoned(H)
    rmax_row[(H,)](triton.reinterpret(x, tl.float32), out, x.stride(0), W, BLOCK=64)
    return out


def test_memory_passed_as_a_non_tensor_is_refused(capsys):
    line = check_rows(torch_result_through_an_address, capsys)
    assert line.startswith("❌ row max: not yet:") and "x_ptr is not a torch tensor (it is a Address)" in line, line
    assert check_rows(reinterpreted_input, capsys).startswith("✅ row max: correct")


@pytest.mark.parametrize("answer", [program0_then_second_kernel, single_program_then_restores])
def test_one_program_doing_every_row_is_refused_whatever_the_launches(answer, capsys):
    line = check_rows(answer, capsys)
    # the kernel named is the one whose program did it, with which of the two launches it was
    assert line.startswith("❌ row max: not yet: program 0 of rmax_program0_all (its launch 1 of 2) "), line
    assert "each program must do its own share of the work" in line, line


# ----------------------------------------------------------------------------------------------
# tl.dot must carry the product

M = 16
A, B = torch.randn(M, M), torch.randn(M, M)


@triton.jit
def mm_dot(a_ptr, b_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    tl.store(o_ptr + i[:, None] * N + i[None, :], tl.dot(a, b, input_precision="ieee"))


@triton.jit
def mm_dot_halves(a_ptr, b_ptr, o_ptr, N: tl.constexpr):   # unusual: two dots over the halves of k
    i = tl.arange(0, N)
    h = tl.arange(0, N // 2)
    acc = tl.zeros((N, N), dtype=tl.float32)
    for s in range(2):
        a = tl.load(a_ptr + i[:, None] * N + s * (N // 2) + h[None, :])
        b = tl.load(b_ptr + (s * (N // 2) + h[:, None]) * N + i[None, :])
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(o_ptr + i[:, None] * N + i[None, :], acc)


@triton.jit
def mm_dot_descriptors(a_ptr, b_ptr, o_ptr, N: tl.constexpr):   # unusual: tensor descriptors, a cast, transposes
    da = tl.make_tensor_descriptor(a_ptr, shape=[N, N], strides=[N, 1], block_shape=[N, N])
    db = tl.make_tensor_descriptor(b_ptr, shape=[N, N], strides=[N, 1], block_shape=[N, N])
    a, b = da.load([0, 0]).to(tl.float32), tl.trans(tl.trans(db.load([0, 0])))
    i = tl.arange(0, N)
    tl.store(o_ptr + i[:, None] * N + i[None, :], tl.dot(a, b, input_precision="ieee"))


@triton.jit
def mm_zero_dot_beside_a_sum(a_ptr, b_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    zero = tl.zeros((N, N), dtype=tl.float32)
    prod = tl.sum(a[:, :, None] * b[None, :, :], axis=1)     # the product, by a broadcast-sum
    tl.store(o_ptr + i[:, None] * N + i[None, :], prod + tl.dot(zero, zero))


@triton.jit
def mm_identity_dot_after_a_sum(a_ptr, b_ptr, o_ptr, N: tl.constexpr):   # the product by a sum, then dot(., I)
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    eye = tl.where(i[:, None] == i[None, :], 1.0, 0.0)
    prod = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(o_ptr + i[:, None] * N + i[None, :], tl.dot(prod, eye, input_precision="ieee"))


@triton.jit
def mm_loaded_tiles_through_an_identity(a_ptr, b_ptr, o_ptr, N: tl.constexpr):   # a @ I and I @ b, then a sum
    i = tl.arange(0, N)
    eye = tl.where(i[:, None] == i[None, :], 1.0, 0.0)
    a = tl.dot(tl.load(a_ptr + i[:, None] * N + i[None, :]), eye, input_precision="ieee")
    b = tl.dot(eye, tl.load(b_ptr + i[:, None] * N + i[None, :]), input_precision="ieee")
    tl.store(o_ptr + i[:, None] * N + i[None, :], tl.sum(a[:, :, None] * b[None, :, :], axis=1))


@triton.jit
def mm_unused_dot_beside_a_sum(a_ptr, b_ptr, o_ptr, N: tl.constexpr):   # a real dot, thrown away
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    junk = tl.dot(a, b, input_precision="ieee")
    prod = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(o_ptr + i[:, None] * N + i[None, :], prod + 0.0 * junk)


@triton.jit
def mm_half_by_dot(a_ptr, b_ptr, o_ptr, N: tl.constexpr):   # the first half of k by tl.dot, the second by a sum
    i = tl.arange(0, N)
    h = tl.arange(0, N // 2)
    a0 = tl.load(a_ptr + i[:, None] * N + h[None, :])
    b0 = tl.load(b_ptr + h[:, None] * N + i[None, :])
    a1 = tl.load(a_ptr + i[:, None] * N + N // 2 + h[None, :])
    b1 = tl.load(b_ptr + (N // 2 + h[:, None]) * N + i[None, :])
    acc = tl.dot(a0, b0, input_precision="ieee") + tl.sum(a1[:, :, None] * b1[None, :, :], axis=1)
    tl.store(o_ptr + i[:, None] * N + i[None, :], acc)


def launch_mm(kernel):
    def run(a, b):
        out = utils.poisoned(M, M)
        kernel[(1,)](a, b, out, N=M)
        return out
    return run


def check_mm(answer, capsys):
    utils.kernel_exercise("a product by tl.dot", answer, kind="triton", run=lambda f: f(A, B),
                          reference=lambda: A.double() @ B.double(), atol=1e-4, rtol=1e-4, inputs=(A, B),
                          evidence=[utils.calls("tl.dot"), utils.dot_work(M * M * M)])
    return out_lines(capsys)[-1]


@pytest.mark.parametrize("kernel", [mm_dot, mm_dot_halves, mm_dot_descriptors])
def test_a_product_by_tl_dot_passes(kernel, capsys):
    assert check_mm(launch_mm(kernel), capsys).startswith("✅ a product by tl.dot: correct"), kernel


@pytest.mark.parametrize("kernel", [mm_zero_dot_beside_a_sum, mm_identity_dot_after_a_sum,
                                    mm_loaded_tiles_through_an_identity])
def test_a_dot_of_made_up_tiles_beside_a_broadcast_sum_is_refused(kernel, capsys):
    """A dot counts as the product only where both operands are data (loaded, or computed from loads): a tile made
    of constants (an identity) beside a loaded one moves the data without multiplying it."""
    line = check_mm(launch_mm(kernel), capsys)
    assert line.startswith(f"❌ a product by tl.dot: not yet: {kernel.fn.__name__}'s tl.dot calls multiply no loaded "
                           f"data by data"), line


def test_a_dot_whose_result_is_thrown_away_is_refused(capsys):
    line = check_mm(launch_mm(mm_unused_dot_beside_a_sum), capsys)
    assert line.startswith("❌ a product by tl.dot: not yet: mm_unused_dot_beside_a_sum's tl.dot products do not "
                           "reach its output"), line


def test_part_of_k_by_tl_dot_and_the_rest_by_a_sum_is_refused(capsys):
    line = check_mm(launch_mm(mm_half_by_dot), capsys)
    assert line.startswith("❌ a product by tl.dot: not yet: mm_half_by_dot's tl.dot calls did 2,048 multiply-adds "
                           "on loaded tiles when the check launched it, fewer than the 4,096 of the product"), line


C3 = torch.randn(M, M)


@triton.jit
def mm3_dots(a_ptr, b_ptr, c_ptr, o_ptr, N: tl.constexpr):   # (A @ B) @ C, both products by tl.dot
    i = tl.arange(0, N)
    ab = tl.dot(tl.load(a_ptr + i[:, None] * N + i[None, :]), tl.load(b_ptr + i[:, None] * N + i[None, :]),
                input_precision="ieee")
    c = tl.trans(tl.trans(tl.load(c_ptr + i[:, None] * N + i[None, :])))   # moved, not computed: still loaded
    tl.store(o_ptr + i[:, None] * N + i[None, :], tl.dot(ab, tl.where(i[:, None] >= 0, c, 0.0), input_precision="ieee"))


@triton.jit
def mm3_second_by_a_sum(a_ptr, b_ptr, c_ptr, o_ptr, N: tl.constexpr):   # the product with C by a broadcast sum
    i = tl.arange(0, N)
    ab = tl.dot(tl.load(a_ptr + i[:, None] * N + i[None, :]), tl.load(b_ptr + i[:, None] * N + i[None, :]),
                input_precision="ieee")
    c = tl.load(c_ptr + i[:, None] * N + i[None, :])
    tl.store(o_ptr + i[:, None] * N + i[None, :], tl.sum(ab[:, :, None] * c[None, :, :], axis=1))


def launch_mm3(kernel):
    def run(a, b, c):
        out = utils.poisoned(M, M)
        kernel[(1,)](a, b, c, out, N=M)
        return out
    return run


def check_mm3(kernel, capsys):
    utils.kernel_exercise("two products by tl.dot", launch_mm3(kernel), kind="triton", run=lambda f: f(A, B, C3),
                          reference=lambda: A.double() @ B.double() @ C3.double(), atol=1e-3, rtol=1e-3,
                          inputs=(A, B, C3), evidence=[utils.calls("tl.dot"), utils.dot_inputs(A, B, C3)])
    return out_lines(capsys)[-1]


def test_every_input_a_product_reads_must_reach_a_dot(capsys):
    assert check_mm3(mm3_dots, capsys).startswith("✅ two products by tl.dot: correct"), "both by dot"
    line = check_mm3(mm3_second_by_a_sum, capsys)
    assert line.startswith("❌ two products by tl.dot: not yet: no tl.dot of mm3_second_by_a_sum multiplied the "
                           "data of its c_ptr"), line


# ----------------------------------------------------------------------------------------------
# TF32 in the interpreter

@triton.jit
def mm_tf32(a_ptr, b_ptr, o_ptr, N: tl.constexpr, IEEE: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    if IEEE:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b, input_precision="tf32")
    tl.store(o_ptr + i[:, None] * N + i[None, :], c)


def test_tf32_dots_round_their_inputs_as_the_tensor_cores_do():
    a, b = torch.randn(M, M), torch.randn(M, M)
    tf = lambda t: torch.from_numpy(events.round_tf32(t.numpy()))   # noqa: E731
    want_tf32 = tf(a).double() @ tf(b).double()
    exact = a.double() @ b.double()
    got = {}
    for ieee in (True, False):
        for on in (False, True):
            o = torch.empty(M, M)
            with events.tf32_rounding() if on else torch.no_grad():
                mm_tf32[(1,)](a, b, o, N=M, IEEE=ieee)
            got[ieee, on] = o.double()
    assert (got[True, True] - exact).abs().max() < 1e-5          # "ieee" stays exact fp32
    assert (got[False, False] - exact).abs().max() < 1e-5        # outside the block, as Triton's interpreter
    assert (got[False, True] - want_tf32).abs().max() < 1e-5     # inside: the inputs rounded to TF32
    assert (got[False, True] - exact).abs().max() > 1e-4         # which the GPU's error shows
    x = np.float32([1 + 2**-11, 1 + 2**-12, -3.0, np.inf, np.nan])
    r = events.round_tf32(x)
    assert r[0] == np.float32(1 + 2**-10) and r[1] == 1.0 and r[2] == -3.0 and np.isinf(r[3]) and np.isnan(r[4])


# ----------------------------------------------------------------------------------------------
# formulas: judged in a worker process, on cases drawn at check time, results only

import sys as _sys   # noqa: E402
import types as _types   # noqa: E402


def ridge(tflops, gbps, itemsize):   # the check's reference (a course function, say)
    return tflops * 1e12 / (gbps * 1e9) * itemsize


RIDGE_CASES = [(66.9, 3002.0, 4), (8.1, 320.0, 2), (19.5, 1555.0, 8), (51.6, 3350.0, 1)]


def ridge_right(tf, gb, size):               # right
    return tf / gb * 1e3 * size


def ridge_right_other_order(tf, gb, size):   # right, written otherwise
    bytes_per_s = gb * 1e9
    return size * (tf * 1e12) / bytes_per_s


def ridge_from_the_frame(tf, gb, size):      # reads the expected values from the check's frame
    f = _sys._getframe(1)
    while f is not None:
        for name in ("expect", "e", "ee"):
            v = f.f_locals.get(name)
            if isinstance(v, list) and v and isinstance(v[0], float):
                i = [c[:2] for c in RIDGE_CASES].index((tf, gb)) if (tf, gb) in [c[:2] for c in RIDGE_CASES] else 0
                return v[i]
            if isinstance(v, float):
                return v
        for v in f.f_locals.values():   # or calls the reference found there
            if getattr(v, "__name__", "") == "ridge":
                return v(tf, gb, size)
        f = f.f_back
    return 0.0


def ridge_by_a_code_copy(tf, gb, size):      # a copy of the reference's code, changed so that its key differs
    code = ridge.__code__
    copy = code.replace(co_consts=code.co_consts + ("not the same constants",))
    return _types.FunctionType(copy, ridge.__globals__)(tf, gb, size)


TABLE = {c: ridge(*c) for c in RIDGE_CASES}


def ridge_typed_in(tf, gb, size):            # the visible cases typed into a dict
    return TABLE[(tf, gb, size)]


def check_ridge(answer, capsys):
    utils.formula_exercise("FLOP per byte at the ridge", answer, ridge, RIDGE_CASES, rtol=1e-9)
    return out_lines(capsys)[-1]


@pytest.mark.parametrize("answer", [ridge_right, ridge_right_other_order])
def test_right_formulas_pass_on_drawn_cases(answer, capsys):
    for _ in range(3):   # a new draw each time
        assert check_ridge(answer, capsys) == "✅ FLOP per byte at the ridge: correct"


def test_the_expected_values_are_not_in_the_answers_process(capsys):
    line = check_ridge(ridge_from_the_frame, capsys)
    assert line.startswith("❌ FLOP per byte at the ridge: not yet: for "), line
    assert "it calls ridge, which computes the answer" in line or "it gives 0.0" in line, line


def test_a_copy_of_the_references_code_is_reported(capsys):
    line = check_ridge(ridge_by_a_code_copy, capsys)
    assert line == ("❌ FLOP per byte at the ridge: not yet: for 66.9, 3002.0, 4 it calls ridge, which computes "
                    "the answer: work it out yourself"), line


def test_the_visible_cases_typed_into_a_table_miss_the_drawn_ones(capsys):
    line = check_ridge(ridge_typed_in, capsys)
    assert line.startswith("❌ FLOP per byte at the ridge: not yet: for ") and "raised KeyError" in line, line


def test_drawn_cases_mix_the_visible_parameters():
    from gpu_course.exercises.formulas import draw_cases
    drawn = draw_cases(RIDGE_CASES, 3)
    assert len(drawn) == 3 and not set(drawn) & set(RIDGE_CASES)
    assert all(c[i] in {v[i] for v in RIDGE_CASES} for c in drawn for i in range(3))


# ----------------------------------------------------------------------------------------------
# block loads, not one element at a time

XS = torch.randn(4, 600)


@triton.jit
def rsum_blocks(x_ptr, out_ptr, w, BLOCK: tl.constexpr):   # the lesson: a block load a step
    r = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, w, BLOCK):
        c = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r * w + c, mask=c < w, other=0.0)
    tl.store(out_ptr + r, tl.sum(acc, axis=0))


@triton.jit
def rsum_scalars(x_ptr, out_ptr, w, BLOCK: tl.constexpr):   # a Python-level loop of one-element loads
    r = tl.program_id(0)
    s = 0.0
    for i in range(w):
        s += tl.load(x_ptr + r * w + i)
    tl.store(out_ptr + r, s)


def launch_rsum(kernel):
    def run(x):
        out = utils.poisoned(x.shape[0])
        kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=128)
        return out
    return run


def check_rsum(answer, capsys):
    utils.kernel_exercise("row sums", answer, kind="triton", run=lambda f: f(XS),
                          reference=lambda: XS.double().sum(1), atol=1e-4, rtol=1e-4, inputs=(XS,))
    return out_lines(capsys)[-1]


def test_row_sums_by_block_loads_pass_and_by_one_element_loads_are_refused(capsys):
    assert check_rsum(launch_rsum(rsum_blocks), capsys).startswith("✅ row sums: correct")
    line = check_rsum(launch_rsum(rsum_scalars), capsys)
    assert line.startswith("❌ row sums: not yet: program 0 of rsum_scalars made 600 loads of one element each"), line
