"""Lines of code counted one way for every language (gpu_course.lessons.languages)."""
import utils  # noqa: F401  (the mode first)

import pytest

from gpu_course.lessons.languages import c_loc, python_loc


def test_comments_blank_lines_and_docstrings_are_not_code():
    def kernel(x):
        """Doc.

        More doc."""
        # a comment
        s = "a string, " \
            "continued"          # code over two lines

        return s, """a string in an expression
        is code"""
    assert python_loc(kernel) == 5      # def, the two lines of s, the return with its string on two lines


def test_c_comments_of_both_kinds_are_not_code():
    src = "/* head\n   comment */\n#include <x.h>\n\n__global__ void k() {  // body\n    int a = 1; /* x */ a++;\n}\n"
    assert c_loc(src) == 4


def test_a_triton_kernel_is_counted_through_its_python_function():
    triton = pytest.importorskip("triton")
    from gpu_course.kernels.triton_softmax import softmax_rows_kernel
    assert isinstance(softmax_rows_kernel, triton.runtime.JITFunction) or hasattr(softmax_rows_kernel, "fn")
    assert python_loc(softmax_rows_kernel) == 13      # @triton.jit, the signature's two lines, ten of body


def test_cutes_128_byte_swizzle_is_notebook_12s_for_halves_and_one_pattern_in_bytes_for_every_size():
    from gpu_course.lessons.languages import nb12_swizzled_offset, swizzle, swizzled_offset_128b
    assert all(swizzle(r * 64 + c, 3, 3, 3) == nb12_swizzled_offset(r, c) for r in range(64) for c in range(64))
    for elem_bytes in (1, 2, 4, 8):          # in bytes, every size is Swizzle<3,4,3> on 128-byte rows
        width = 128 // elem_bytes
        for r in range(16):
            for c in range(width):
                assert swizzled_offset_128b(r, c, width, elem_bytes) * elem_bytes == \
                    swizzle((r * width + c) * elem_bytes, 3, 4, 3)
    assert swizzle(swizzle(12345, 3, 3, 3), 3, 3, 3) == 12345   # an XOR of bits above the ones it changes: its own inverse
