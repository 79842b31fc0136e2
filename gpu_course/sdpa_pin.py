"""SDPA restricted to one backend for each call, at a small fraction of what ``torch.nn.attention.sdpa_kernel`` costs.

``sdpa_kernel(backend)`` is a Python generator context that lists, sets and restores SDPA's backend flags: on the
course's CPUs its enter and exit cost 14-22 µs, more than a small ``scaled_dot_product_attention`` call itself (9 µs
there). Timed inside every call, that is the harness's cost put on the library's account. :class:`pin` sets the same
flags through the same ``torch._C`` setters (the names ``sdpa_kernel`` itself derives from
``torch.nn.attention._backend_names``), resolved once, and restores them on exit.

>>> import torch
>>> flags = lambda: tuple(getattr(torch._C, f"_get_{n}_sdp_enabled")() for n in ("flash", "math"))
>>> before = flags()
>>> with pin("MATH"):
...     flags()
(False, True)
>>> flags() == before
True
"""
from __future__ import annotations

import torch


class pin:
    """``with pin("FLASH_ATTENTION"):`` only that backend (a ``torch.nn.attention.SDPBackend`` member's name) may
    run ``scaled_dot_product_attention`` inside the block; the flags before it are restored on exit."""

    __slots__ = ("_flags", "_saved")

    def __init__(self, backend: str):
        from torch.nn.attention import SDPBackend, _backend_names
        if not hasattr(SDPBackend, backend):
            raise ValueError(f"pin: unknown SDPA backend {backend!r}; known: {', '.join(_backend_names.values())}")
        self._flags = [(getattr(torch._C, f"_get_{n}_sdp_enabled"), getattr(torch._C, f"_set_sdp_use_{n}"),
                        member == backend) for n, member in _backend_names.items()]
        self._saved = None

    def __enter__(self):
        self._saved = [get() for get, _, _ in self._flags]
        for _, set_, on in self._flags:
            set_(on)
        return self

    def __exit__(self, *exc):
        for (_, set_, _), was in zip(self._flags, self._saved):
            set_(was)
