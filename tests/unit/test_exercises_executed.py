"""Kernel exercises judge what the learner's kernel executed, launched by the course itself (cpu
mode: the Triton interpreter, the Numba simulator). One test per class of cheat:

1. torch does the work and the kernel is decoration (the course's own launch on fresh memory);
2. the technique is a token, not an execution (tl.dot in an untaken branch, a dummy shared array);
3. the work split is not the asked one (program 0 or one thread does everything);
4. the check is rebound from the learner's cell (utils / torch functions, an object equal to
   everything, a copy of a refused helper made with exec).

The kernels are at module level (a learner's cell)."""
from gpu_course.exercises import judging

import utils  # first: it sets the simulator switches that numba and triton read at import

import numba
import pytest
import torch
import triton
import triton.language as tl
from numba import cuda

pytestmark = [pytest.mark.skipif(utils.ON_GPU, reason="cpu-mode launch paths (interpreter, simulator)"),
              pytest.mark.usefixtures("without_nvcc_check")]   # builds that test other things


def out_lines(capsys):
    return capsys.readouterr().out.splitlines()


# ----------------------------------------------------------------------------------------------
# 1. torch does the work

XE, YE = torch.randn(2, 3000)


@triton.jit
def add_relu_loads_only(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)  # loads, never stores
    x = x + 1


def torch_before_a_silent_kernel(x, y):
    out = torch.relu(x + y)  # torch's result in out, "unchanged since the launch"
    add_relu_loads_only[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


@triton.jit
def add_relu_good(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), 0.0),
             mask=m)


def good_add_relu(x, y):
    out = utils.poisoned(x.shape)
    add_relu_good[(utils.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def changes_its_input(x, y):
    x[0] = 0.0  # the learner's function writes into the check's input
    return good_add_relu(x, y)


def check_add_relu(answer, kernel, **kw):
    utils.kernel_exercise("add + relu", answer, kind="triton", kernel=kernel, run=lambda f: f(XE, YE),
                          reference=lambda: torch.relu(XE + YE), atol=0, rtol=0, **kw)


def test_1_torch_before_a_kernel_that_stores_nothing_is_refused(capsys):
    check_add_relu(good_add_relu, "add_relu_good", evidence=[utils.only_reads(XE, YE)])
    check_add_relu(torch_before_a_silent_kernel, "add_relu_loads_only")
    ok, silent = out_lines(capsys)
    assert ok == "✅ add + relu: correct (your Triton kernel add_relu_good wrote the result)"
    assert silent.startswith("❌ add + relu: not yet: the check launched add_relu_loads_only itself (your "
                             "grid and arguments, on fresh memory, without the rest of your function) and "
                             "it did not compute the result: add_relu_loads_only: 3000 of 3000"), silent


def test_1_inputs_are_compared_by_value_before_and_after(capsys):
    x = XE.clone()
    utils.kernel_exercise("add + relu", changes_its_input, kind="triton", run=lambda f: f(x, YE),
                          reference=lambda: torch.relu(x + YE), atol=0, rtol=0, inputs=(x, YE))
    (line,) = out_lines(capsys)
    assert line == ("❌ add + relu: not yet: running it changed input 1 of the check (a 3000 float32 tensor): "
                    "a kernel reads its inputs and writes only its output")


RELU_HOST = r"""
void relu(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    relu_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    HOST_EXTRA
}
"""
CUDA_CHEATS = {
    "a kernel that writes nothing, then torch": (
        "if (i < n) { float v = x[i]; (void)v; }", "out.copy_(x.clamp_min(0));",
        "computes with torch (aten.clamp_min)"),
    "half the work in the kernel, the rest by torch": (
        "if (i < n) out[i] = fmaxf(x[i], 0.0f) * 0.5f;", "out.add_(out);",
        "writes the output with torch (aten.add_)"),
    "torch computes, the kernel copies": (
        "if (i < n) out[i] = x[i];", "",  # with x replaced by torch's result below
        "computes with torch (aten.clamp_min)"),
}
XR = torch.randn(700)


def relu_source(body, extra, computed_input=False):
    src = utils.cuda_begin + (
        "__global__ void relu_k(const float* x, float* out, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    " + body + "\n}\n" + RELU_HOST.replace("HOST_EXTRA", extra))
    if computed_input:
        src = src.replace("int n = x.numel();", "int n = x.numel(); x = x.clamp_min(0);")
    return src


def run_cuda_relu(mod):
    out = utils.poisoned(XR.shape)
    mod.relu(XR, out)
    return out


def test_1_cuda_host_functions_that_compute_with_torch_are_refused(capsys):
    build = lambda s: utils.load_cuda(s, utils.get_sig("relu", s), ["relu"])  # noqa: E731
    answers = [relu_source("if (i < n) out[i] = fmaxf(x[i], 0.0f);", "")]
    for i, (body, extra, _) in enumerate(CUDA_CHEATS.values()):
        answers.append(relu_source(body, extra, computed_input=i == 2))
    for src in answers:
        utils.kernel_exercise("relu", src, kind="cuda", kernel="relu_k", build=build, run=run_cuda_relu,
                              reference=lambda: torch.relu(XR), atol=0, rtol=0)
    ok, *refused = out_lines(capsys)
    assert ok == "✅ relu: correct (your CUDA C kernel relu_k wrote the result)"
    for line, (what, (_, _, why)) in zip(refused, CUDA_CHEATS.items()):
        assert line.startswith("❌ relu: not yet: your host function relu ") and why in line, (what, line)


# ----------------------------------------------------------------------------------------------
# 2. a token, not an execution

MM_A, MM_B = torch.randn(32, 16), torch.randn(16, 32)


@triton.jit
def mm_dot_never_runs(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    k = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + k[None, :])
    b = tl.load(b_ptr + k[:, None] * 32 + c[None, :])
    acc = tl.sum(a[:, :, None] * b[None, :, :], axis=1)  # a broadcast product
    if n < 0:  # never taken
        acc = tl.dot(a, b)
    tl.store(out_ptr + r[:, None] * 32 + c[None, :], acc)


@triton.jit
def mm_dot(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    k = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + k[None, :])
    b = tl.load(b_ptr + k[:, None] * 32 + c[None, :])
    tl.store(out_ptr + r[:, None] * 32 + c[None, :], tl.dot(a, b, input_precision="ieee"))


def mm_with(kernel):
    def f(a, b):
        out = utils.poisoned(32, 32)
        kernel[(2, 2)](a, b, out, 1, BLOCK=16)
        return out
    return f


mm_dot_branch, mm_dot_real = mm_with(mm_dot_never_runs), mm_with(mm_dot)


def test_2_tl_dot_in_an_untaken_branch_is_refused(capsys):
    for answer in (mm_dot_real, mm_dot_branch):
        utils.kernel_exercise("tiles", answer, kind="triton", run=lambda f: f(MM_A, MM_B),
                              reference=lambda: MM_A.double() @ MM_B.double(), atol=1e-4, rtol=1e-4,
                              evidence=[utils.calls("tl.dot")])
    ok, token = out_lines(capsys)
    assert ok.startswith("✅ tiles: correct"), ok
    assert token == ("❌ tiles: not yet: mm_dot_never_runs did not execute tl.dot when the check launched it "
                     "(in 4 of the 4 programs that stored a result): the exercise asks for the product as "
                     "tl.dot on tiles")


TH, TW = 8, 16
NA, NB = torch.randn(30, 19), torch.randn(19, 40)


@cuda.jit
def dummy_tiles(m, n, out):  # right values from global memory; a shared tile touched by one thread
    ms = cuda.shared.array((TH, TW), numba.float32)
    ns = cuda.shared.array((TW, TW), numba.float32)
    r = cuda.blockIdx.y * TH + cuda.threadIdx.y
    c = cuda.blockIdx.x * TW + cuda.threadIdx.x
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        ms[0, 0] = 0.0
        ns[0, 0] = ms[0, 0]
        ms[0, 0] = ns[0, 0]
    if r < out.shape[0] and c < out.shape[1]:
        p = numba.float32(0.0)
        for i in range(m.shape[1]):
            p += m[r, i] * n[i, c]
        out[r, c] = p


def run_tiles(kernel):
    o = utils.poisoned(30, 40)
    kernel[(utils.cdiv(40, TW), utils.cdiv(30, TH)), (TW, TH)](utils.to_numba(NA), utils.to_numba(NB),
                                                               utils.to_numba(o))
    return o


def test_2_a_shared_tile_touched_by_one_thread_is_refused(capsys):
    utils.kernel_exercise("rect", dummy_tiles, kind="numba", run=run_tiles,
                          reference=lambda: NA.double() @ NB.double(), atol=1e-4, rtol=1e-4,
                          evidence=[utils.shared_tiles((8, 16), (16, 16))])
    (line,) = out_lines(capsys)
    assert line.startswith("❌ rect: not yet: dummy_tiles stages no 8 × 16 tile in shared memory that every "
                           "thread writes and reads (in the check's launch, 12 (block, thread) pairs wrote"), line


# ----------------------------------------------------------------------------------------------
# 3. the work split

XM = torch.randn(9, 50)


@triton.jit
def row_max_by_program_0(x_ptr, out_ptr, stride, h, w, BLOCK_W: tl.constexpr):
    if tl.program_id(0) == 0:
        cols = tl.arange(0, BLOCK_W)
        for r in range(h):
            v = tl.load(x_ptr + r * stride + cols, mask=cols < w, other=float("-inf"))
            tl.store(out_ptr + r, tl.max(v, axis=0))


@triton.jit
def row_max_per_program(x_ptr, out_ptr, stride, h, w, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK_W)
    v = tl.load(x_ptr + r * stride + cols, mask=cols < w, other=float("-inf"))
    tl.store(out_ptr + r, tl.max(v, axis=0))


def row_max_with(kernel):
    def f(x):
        out = utils.poisoned(x.shape[0])
        kernel[(x.shape[0],)](x, out, x.stride(0), x.shape[0], x.shape[1], BLOCK_W=64)
        return out
    return f


row_max_0, row_max_good = row_max_with(row_max_by_program_0), row_max_with(row_max_per_program)


@cuda.jit
def one_thread_does_all(m, n, out):
    if cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0 and cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        for r in range(out.shape[0]):
            for c in range(out.shape[1]):
                p = numba.float32(0.0)
                for i in range(m.shape[1]):
                    p += m[r, i] * n[i, c]
                out[r, c] = p


def test_3_one_program_or_one_thread_doing_all_the_work_is_refused(capsys):
    for answer in (row_max_good, row_max_0):
        utils.kernel_exercise("row max", answer, kind="triton", run=lambda f: f(XM),
                              reference=lambda: XM.amax(dim=1), atol=0, rtol=0,
                              evidence=[utils.grid_is(9, meaning="one program per row")])
    utils.kernel_exercise("rect", one_thread_does_all, kind="numba", run=run_tiles,
                          reference=lambda: NA.double() @ NB.double(), atol=1e-4, rtol=1e-4)
    ok, program_0, thread_0 = out_lines(capsys)
    assert ok.startswith("✅ row max: correct"), ok
    assert program_0 == ("❌ row max: not yet: 8 of the 9 programs of row_max_by_program_0 stored nothing: "
                         "split the work so that each program computes and stores its own part")
    assert thread_0 == ("❌ rect: not yet: launched alone, block 0 of one_thread_does_all wrote all 1200 "
                        "outputs, the work of the whole grid of 12: each block must compute its own part, not "
                        "loop over the others'")


@triton.jit
def add_relu_grid_stride(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):   # each program every 4th block
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), 0.0),
                 mask=m)


@triton.jit
def add_relu_every_program_all(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK):   # ignores its program id: each program does the whole job
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), 0.0),
                 mask=m)


def grid_stride_add_relu(x, y):
    out = utils.poisoned(x.shape)
    add_relu_grid_stride[(4,)](x, y, out, x.numel(), BLOCK=256)
    return out


def every_program_add_relu(x, y):
    out = utils.poisoned(x.shape)
    add_relu_every_program_all[(4,)](x, y, out, x.numel(), BLOCK=256)
    return out


def test_3_a_grid_stride_loop_is_a_split_and_a_program_ignoring_its_id_is_not(capsys):
    """A grid-stride kernel on 4 programs splits the work (each program its own blocks), though one program
    launched alone would rightly do it all; a kernel whose every program does the whole job does not."""
    check_add_relu(grid_stride_add_relu, add_relu_grid_stride)
    check_add_relu(every_program_add_relu, add_relu_every_program_all)
    stride, every = out_lines(capsys)
    assert stride.startswith("✅ add + relu: correct"), stride
    assert every == ("❌ add + relu: not yet: program 0 of add_relu_every_program_all wrote all 3000 outputs itself, "
                     "the work of the whole grid of 4: each program must compute its own part, not loop over the "
                     "others'"), every


# ----------------------------------------------------------------------------------------------
# 4. the check rebound from the learner's cell

fake_grid_is = lambda *a, **k: (lambda attempt: None)  # noqa: E731  the learner's cell
identity = lambda n: n  # noqa: E731


def test_4_a_reassigned_course_or_torch_function_is_refused(capsys, monkeypatch):
    check_add_relu(good_add_relu, "add_relu_good", evidence=[fake_grid_is(1)])
    monkeypatch.setattr(utils, "grid_is", fake_grid_is)
    check_add_relu(good_add_relu, "add_relu_good")
    monkeypatch.undo()
    monkeypatch.setattr(torch, "relu", lambda t: t)
    check_add_relu(good_add_relu, "add_relu_good")
    utils.formula_exercise("n", identity, lambda n: n, [(1,), (2,)])
    monkeypatch.undo()
    evidence, course, torch_fn, formula = out_lines(capsys)
    assert evidence == ("❌ add + relu: not yet: <lambda> is not evidence the course made, nor a function of "
                        "the check cell: the check's evidence comes from utils (utils.grid_is(...), ...)")
    assert course.startswith("❌ add + relu: not yet: utils.grid_is is not the original any more"), course
    assert torch_fn.startswith("❌ add + relu: not yet: torch.relu is not the original any more"), torch_fn
    assert formula.startswith("❌ n: not yet: torch.relu is not the original any more"), formula


class EqualsEverything(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def blocks_of(n, t):
    return -(-n // t)


exec_copy = {}
exec("def blocks_copy(n, t):\n    return -(-n // t)\n", exec_copy)


ANSWERS = {  # the learner's cells
    "right": lambda n, t: (n + t - 1) // t,
    "equal to everything": lambda n, t: EqualsEverything(0),
    "a copy made by exec": lambda n, t: exec_copy["blocks_copy"](n, t),
    "a float": lambda n, t: float((n + t - 1) // t),
    "always True": lambda n, t: True,
}


def test_4_formula_answers_are_plain_values_and_copies_of_refused_helpers_are_seen(capsys):
    cases = [(1000, 256), (1, 128), (5000, 1024)]
    utils.formula_exercise("blocks", ANSWERS["right"], blocks_of, cases, refuse=[blocks_of])
    utils.formula_exercise("blocks", ANSWERS["equal to everything"], blocks_of, cases)
    utils.formula_exercise("blocks", ANSWERS["a copy made by exec"], blocks_of, cases, refuse=[blocks_of])
    utils.formula_exercise("blocks", ANSWERS["a float"], blocks_of, cases)  # 4.0 == 4
    utils.formula_exercise("blocks", ANSWERS["always True"], lambda n, t: n > t, [(3, 1), (1, 3)])
    ok, equal_all, copied, as_float, as_bool = out_lines(capsys)
    assert ok == "✅ blocks: correct"
    assert equal_all == "❌ blocks: not yet: for 1000, 256 it gives 0, expected 4"
    assert copied == ("❌ blocks: not yet: for 1000, 256 it calls blocks_of, which computes the answer: work "
                      "it out yourself")
    assert as_float == "✅ blocks: correct"
    assert as_bool == "❌ blocks: not yet: for 1, 3 it gives True, expected False"


def test_compiled_code_readers():
    from gpu_course.exercises import compiled
    sass = """
        Function : _Z6relu_kPKfPfi
        /*0000*/      MOV R1, c[0x0][0x28] ;
        /*0090*/      STS [R7], R2 ;
        /*00a0*/      BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00b0*/  @P0 LDS.128 R8, [R3] ;
        /*00c0*/      SHFL.DOWN PT, R5, R4, 0x10, 0x1f ;
        /*00d0*/      ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU PT, RZ, [R2.64], R5 ;
        /*00e0*/      HMMA.16816.F32 R12, R4, R8, R12 ;
        Function : _Z7other_kPf
        /*0000*/      BAR.SYNC 0x0 ;
    """
    ops = compiled.sass_ops(compiled.sass_of_kernel(sass, "relu_k"))
    assert dict(ops) == {"shared_store": 1, "barrier": 1, "shared_load": 1, "shuffle": 1, "shfl_down": 1,
                         "atomic": 1, "mma": 1}
    assert compiled.sass_ops(compiled.sass_of_kernel(sass, "other_k")) == {"barrier": 1}
    ptx = """
    .shared .align 4 .b8 _ZN6cudapy8__main__2ms[512];
    	st.shared.f32 	[%r5], %f1;   // a store
    	bar.sync 	0;
    @%p1 ld.shared.f32 	%f2, [%r6];
    	shfl.sync.down.b32 	%r7|%p2, %r8, 16, 31, -1;
    	mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1}, {%r1}, {%r2}, {%f3};
    	atom.global.add.f32 	%f9, [%rd1], %f2;
    """
    assert dict(compiled.ptx_ops(ptx)) == {"shared_store": 1, "barrier": 1, "shared_load": 1, "shuffle": 1,
                                           "mma": 1, "atomic": 1}
    assert compiled.ptx_shared_bytes(ptx) == [512]
    ttgir = """
      %12 = tt.dot %10, %11, %cst, inputPrecision = tf32 : tensor<32x16xf32, #dot0> * tensor<16x32xf32, #dot1> -> tensor<32x32xf32, #mma>
      %13 = ttg.local_load %9 : !ttg.memdesc<32x16xf32> -> tensor<32x16xf32>
    """
    assert compiled.triton_ir_ops(ttgir) == {"dot": 1, "shared_load": 1}
    assert compiled.triton_ir_ops("%1 = arith.mulf %a, %b : tensor<32x32xf32>") == {}

