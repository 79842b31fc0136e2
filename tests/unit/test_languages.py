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
