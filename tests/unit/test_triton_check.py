"""gpu_course/triton_check.py: in cpu mode, a Triton kernel's access outside the tensors it was
given raises TritonOutOfBounds (kernel, program, line, argument, offsets) instead of corrupting
memory or killing the process with a segmentation fault."""
import subprocess
import sys
import textwrap
import types

import utils  # noqa: F401  first: cpu mode sets TRITON_INTERPRET and installs the check

import pytest
import torch
import triton
import triton.language as tl

from gpu_course import triton_check
from gpu_course.triton_check import TritonOutOfBounds

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="the check is for Triton's interpreter (cpu mode)")


def test_unmasked_store_past_the_end_raises_in_a_live_interpreter(tmp_path):
    """The mistake that killed the kernel: 1024 lanes stored into 10 elements (a segmentation
    fault before). Run in a child process with a time limit, in case the check is not there."""
    script = textwrap.dedent("""
        import utils, torch, triton, triton.language as tl
        from gpu_course.triton_check import TritonOutOfBounds

        @triton.jit
        def copy_kernel(x_ptr, o_ptr, n):
            offs = tl.arange(0, 1024)
            tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n))

        x, o = torch.ones(10), torch.zeros(10)
        try:
            copy_kernel[(1,)](x, o, 10)
        except TritonOutOfBounds as e:
            print("RAISED", e.kernel, e.argument, int(e.offsets.min()), int(e.offsets.max()))
            print(e)
        print("ALIVE", float(torch.ones(3).sum()))
    """)
    (tmp_path / "oob.py").write_text(script)
    r = subprocess.run([sys.executable, str(tmp_path / "oob.py")], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "RAISED copy_kernel o_ptr 10 1023" in out, out
    assert "tl.store writes outside the tensor 'o_ptr' (10 float32 elements" in out
    assert "tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n))" in out   # the learner's line
    assert "program (0, 0, 0)" in out and "mask=offs < n" in out
    assert "ALIVE 3.0" in out


@triton.jit
def add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def test_masked_accesses_pass_and_compute():
    x, y = torch.randn(100), torch.randn(100)
    o = torch.empty(100)
    add_kernel[(4,)](x, y, o, 100, BLOCK=32)
    assert torch.equal(o, x + y)


def test_views_may_touch_their_whole_storage():
    """As on a GPU, memory of the allocation outside a view is not out of bounds."""
    base = torch.arange(40.0)
    x, o = base[10:20], torch.empty(10)
    add_kernel[(1,)](x, x, o, 10, BLOCK=16)
    assert torch.equal(o, 2 * base[10:20])


@triton.jit
def read_at(x_ptr, o_ptr, d):
    tl.store(o_ptr, tl.load(x_ptr + d))


def test_a_read_before_the_start_names_a_negative_offset():
    x, o = torch.ones(8), torch.zeros(1)
    with pytest.raises(TritonOutOfBounds, match=r"(?s)tl.load reads outside the tensor 'x_ptr' "
                       r"\(8 float32 elements, valid offsets 0 to 7\).*reach offset -3") as e:
        read_at[(1,)](x, o, -3)
    assert e.value.argument == "x_ptr" and list(e.value.offsets) == [-3]
    assert "line" in str(e.value) and "tl.load(x_ptr + d)" in str(e.value)


def test_a_pointer_stays_tied_to_its_tensor():
    """x + d that lands inside another argument (y) is still outside x: the check follows where
    a pointer came from, not only whether some tensor is there."""
    x, y, o = torch.ones(4), torch.full((4,), 7.0), torch.zeros(1)
    d = (y.data_ptr() - x.data_ptr()) // 4
    with pytest.raises(TritonOutOfBounds, match="outside the tensor 'x_ptr'"):
        read_at[(1,)](x, o, d)


@triton.jit
def _store_all(ptr, BLOCK: tl.constexpr):
    tl.store(ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))


@triton.jit
def calls_helper(o_ptr, BLOCK: tl.constexpr):
    _store_all(o_ptr + tl.program_id(0) * BLOCK, BLOCK)


def test_an_access_in_a_helper_function_names_its_line_and_program():
    o = torch.ones(48)
    with pytest.raises(TritonOutOfBounds, match=r"(?s)program \(3, 0, 0\), line \d+: "
                       r"tl.store\(ptr \+ tl.arange\(0, BLOCK\).*offsets 48 to 63"):
        calls_helper[(4,)](o, BLOCK=16)


@triton.jit
def count_kernel(c_ptr, n_bins, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(c_ptr + offs, 1)


def test_atomics_are_checked():
    c = torch.zeros(8, dtype=torch.int32)
    with pytest.raises(TritonOutOfBounds, match=r"(?s)atomic operation touches outside the tensor 'c_ptr' "
                       r"\(8 int32 elements.*offsets 8 to 15"):
        count_kernel[(1,)](c, 8, BLOCK=16)
    count_kernel[(1,)](c, 8, BLOCK=8)
    assert c.tolist() == [1] * 8


def test_an_interpreter_without_the_hook_points_fails_clearly():
    fake = types.ModuleType("fake_interpreter")
    fake.GridExecutor, fake._implicit_cvt, fake.InterpreterError = object, lambda a: a, RuntimeError
    fake.InterpreterBuilder = type("InterpreterBuilder", (), {"create_masked_load": lambda *a: 0})
    with pytest.raises(RuntimeError, match=r"no InterpreterBuilder.create_masked_store.*"
                       r"COURSE_TRITON_CHECK=0"):
        triton_check.check_interpreter(fake)


def test_install_is_idempotent_and_wraps_once():
    from triton.runtime import interpreter
    triton_check.install()
    triton_check.install()
    load = interpreter.InterpreterBuilder.create_masked_load
    assert load.__wrapped__.__name__ == "create_masked_load"   # one layer of checks, not two
    assert not hasattr(load.__wrapped__, "__wrapped__")
