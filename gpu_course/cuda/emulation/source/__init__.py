"""The emulation's source side: what it refuses (found before compiling, so the message is about
CUDA, not C++), and the rewriting of CUDA C into C++ that the emulator's headers run on the CPU
(kernels, launches, ``__shared__`` arrays, checked pointers -- parameters, locals and what they
derive --, checked accesses for the race check and the messages, loop ticks for Ctrl-C and
spin-waits, checked integer divisors).

One module a concern: :mod:`.refused` (what is refused), :mod:`.rewriter` (the edits), :mod:`.transform`
(the rewrite, and ``__shared__``), :mod:`.pointers` (checked pointers and accesses), :mod:`.loops` (loop
ticks, checked divisors), :mod:`.launches` (launches, host mappings), :mod:`.binding` (the Python
binding). Every file of this package is part of the emulation's build cache key
(``toolchain.generator_digest``): an edit to any of them rebuilds the learners' modules."""
from __future__ import annotations

from .binding import binding
from .refused import check_supported
from .transform import STATIC_SHARED_MAX, Transformed, transform

__all__ = ["check_supported", "transform", "Transformed", "STATIC_SHARED_MAX", "binding"]
