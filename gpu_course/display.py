"""Showing things in a notebook cell: images (``show_img``), what C code prints
(``capture_printf``), the source of a kernel kept in the course package (``show_source``), and
prose whose numbers come from a measurement (``say``)."""
from __future__ import annotations

import inspect
import os  # noqa: F401  (used by the doctest)
import sys

import torch

from .mode import synchronize

def show_img(x, figsize=(4, 3), title=None, cmap=None, ax=None, **kwargs):
    """Show an image tensor or array (CHW, HWC or HW) with matplotlib and return the axes.

    matplotlib is imported only when this is called. A 2-D image defaults to a grey map.
    """
    import matplotlib.pyplot as plt
    img = x.detach().cpu() if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if img.ndim == 3 and img.shape[0] in (1, 3, 4) and img.shape[-1] not in (1, 3, 4):
        img = img.permute(1, 2, 0)  # CHW -> HWC
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    if img.ndim not in (2, 3):
        raise ValueError(f"show_img expects an image of 2 or 3 dimensions, got shape "
                         f"{tuple(img.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    ax.imshow(img.numpy(), cmap=cmap or ("gray" if img.ndim == 2 else None), **kwargs)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


class capture_printf:
    """Show what C code writes to stdout/stderr (``printf`` in a kernel) in the notebook cell.

    Jupyter only forwards Python's ``sys.stdout``; a kernel's printf goes to the process's C-level
    file descriptors. Wrap the launch: the GPU is synchronized (device printf is flushed then) and
    the C output is printed when the block ends. ``.text`` keeps what was captured.

    >>> with capture_printf() as cap:
    ...     _ = os.write(1, b"hello from C\\n")
    hello from C
    >>> cap.text
    'hello from C\\n'
    """

    def __enter__(self):
        self.text = ""
        try:
            import wurlitzer
        except ImportError:  # no wurlitzer (Windows): C output goes to the terminal instead
            self._pipes = None
            print("(capture_printf: wurlitzer is not installed; C output goes to the terminal)")
            return self
        sys.stdout.flush()
        self._pipes = wurlitzer.pipes(stdout=wurlitzer.PIPE, stderr=wurlitzer.STDOUT)
        self._out, _ = self._pipes.__enter__()
        return self

    def __exit__(self, *exc):
        if self._pipes is None:
            return False
        try:
            synchronize()
        finally:
            self._pipes.__exit__(*exc)
            self.text = self._out.read()
            self._out.close()
        print(self.text, end="")
        return False


def source_of(obj) -> str:
    """The source text of a function, a Triton ``@triton.jit`` kernel or a Numba ``@cuda.jit``
    kernel, without its decorators' wrappers (what :func:`show_source` prints).

    >>> print(source_of(source_of).splitlines()[0])
    def source_of(obj) -> str:
    """
    for attr in ("fn", "py_func", "__wrapped__"):  # triton JITFunction, numba dispatcher, wraps
        inner = getattr(obj, attr, None)
        if callable(inner):
            obj = inner
            break
    try:
        return inspect.getsource(obj)
    except (TypeError, OSError) as e:
        raise TypeError(f"source_of: no Python source for {obj!r} ({e})") from None


def show_source(*objs) -> None:
    """Print the source of kernels and helpers kept in the course package, so that a notebook
    shows exactly the code it runs (and that a benchmark times): one definition, two readers.

    >>> show_source(source_of)  # doctest: +ELLIPSIS
    def source_of(obj) -> str:
    ...
    """
    for i, obj in enumerate(objs):
        if i:
            print()
        print(source_of(obj).rstrip())


def say(markdown: str) -> None:
    """Show a sentence of prose whose numbers were rendered from a measurement (an f-string), as
    Markdown in a notebook and as plain text elsewhere: numbers in prose are never typed by hand.

    >>> say("copy runs at **2,971 GB/s**")  # doctest: +SKIP
    """
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        print(markdown)
        return
    if get_ipython() is None:
        print(markdown)
    else:
        display(Markdown(markdown))
