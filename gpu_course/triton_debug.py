"""Debugging Triton kernels: the interpreter on any machine, and what kernels print.

* :func:`interpreted`: the same ``@triton.jit`` kernel run by Triton's interpreter (numpy on the
  CPU, one program after another, every access bounds-checked by ``triton_check``), on a GPU
  machine too, so that one cell can run a kernel both ways and compare what each gives;
* :func:`printed_lines`: what a launch printed, from Python (``tl.static_print``, the interpreter's
  ``tl.device_print``) and from the GPU (a compiled kernel's ``tl.device_print`` is a device
  ``printf`` on the process's C-level stdout, which Jupyter does not show), as a list of lines;
* :func:`line_counts`: those lines once each, with how often each came: a GPU prints every value
  once per thread that holds it, hundreds of lines for a block of four values.

Import this module after ``utils`` (or ``gpu_course``), which chooses the mode before triton is
imported.

>>> line_counts(["b", "a", "b"])
[(2, 'b'), (1, 'a')]
"""
from __future__ import annotations

import contextlib
import io
from collections import Counter

from .interpose import triton as _triton
from .mode import ON_GPU, synchronize


class Interpreted:
    """A Triton kernel as Triton's interpreter runs it: launch it as the kernel,
    ``interpreted(kernel)[grid](*args)``. Tensors on the GPU are copied to the host for the run
    and back after it, as ``TRITON_INTERPRET=1`` does. See :func:`interpreted`."""

    def __init__(self, kernel):
        from . import triton_check

        triton_check.install()  # an access outside a tensor raises TritonOutOfBounds, here as in cpu mode
        if isinstance(kernel, Interpreted):
            kernel = kernel.kernel
        self.kernel = _triton.interpreted_function(kernel)
        self.__name__ = self.kernel.fn.__name__

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def run(*args, **kwargs):
            with _triton.interpreting():  # as under TRITON_INTERPRET=1, for this launch only
                try:
                    return launch(*args, **kwargs)
                except Exception as e:
                    if "outside of the scope of a kernel" not in str(e):
                        raise
                    raise NotImplementedError(
                        f"interpreted({self.__name__}): it calls a @triton.jit function (one of yours, or one "
                        "of triton.language's own written in Triton, such as tl.sum or tl.max), which stays "
                        "compiled on a GPU machine, and the interpreter cannot call a compiled function. Interpret a kernel without such calls here, or run the notebook in "
                        "cpu mode (COURSE_MODE=cpu), where every kernel is interpreted.") from None
        return run

    def __repr__(self):
        return f"interpreted({self.__name__})"


def interpreted(kernel) -> Interpreted:
    """The interpreter's version of ``kernel`` (a ``@triton.jit`` function), launched like it:
    ``interpreted(square_kernel)[(64,)](x, out, n, BLOCK=1024)``. In cpu mode every kernel already
    runs in the interpreter, so both launch the same thing; on a GPU machine the kernel itself runs
    compiled and this runs its Python body with numpy, program after program. Each launch is
    bounds-checked (``triton_check``).

    On a GPU machine a kernel that calls another ``@triton.jit`` function (``tl.sum``, ``tl.max`` and
    other reductions of ``triton.language`` are such functions) cannot be interpreted: the callee stays
    compiled, and the launch raises ``NotImplementedError`` saying so.

    >>> import torch
    >>> from gpu_course.kernels.triton_mean import mean_scalar_loop_kernel
    >>> sums = torch.full((2,), float("nan"))
    >>> interpreted(mean_scalar_loop_kernel)[(2,)](torch.ones(5), sums, 5, CHUNK=4)  # 4 + 1 elements
    >>> sums.tolist()
    [4.0, 1.0]
    """
    return Interpreted(kernel)


def printed_lines(run) -> list:
    """Call ``run()`` and return the lines it printed, without showing them: Python's prints
    (``tl.static_print``, and ``tl.device_print`` / ``print`` in the interpreter) first, then, on a
    GPU, what the device's ``printf`` wrote to the C-level stdout (flushed by synchronizing the GPU;
    captured with ``wurlitzer``, and shown in the terminal instead where it is missing).

    >>> printed_lines(lambda: print("one\\ntwo"))
    ['one', 'two']
    """
    py = io.StringIO()
    c_text = ""
    with contextlib.redirect_stdout(py):
        if ON_GPU:
            try:
                import wurlitzer
            except ImportError:  # no wurlitzer (Windows): device printf goes to the terminal
                run()
                synchronize()
            else:
                with wurlitzer.pipes(stdout=wurlitzer.PIPE, stderr=wurlitzer.STDOUT) as (out, _):
                    run()
                    synchronize()  # device printf is flushed when the kernel has finished
                c_text = out.read()
        else:
            run()
    return py.getvalue().splitlines() + c_text.splitlines()


def line_counts(lines) -> list:
    """``(count, line)`` for each distinct line, in the order they first came.

    >>> line_counts(["x = 1", "x = 1", "pid 0"])
    [(2, 'x = 1'), (1, 'pid 0')]
    """
    return [(n, line) for line, n in Counter(lines).items()]
