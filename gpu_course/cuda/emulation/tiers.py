"""Which torch a build starts with, and what a failed build's log says to try next: the torch tier
(1: the emulator's "lite" slice of ATen, 2: all of ATen, 3: ``torch/all.h``; :func:`first_tier` from the
source's includes, :func:`needs_more_torch` from the errors) and unchecked pointers
(:func:`needs_unchecked`: the checked types got in the way)."""
from __future__ import annotations

import re

from ..errors import diagnostics, missing_name
from ..language import FRONTEND_NAMESPACES, TORCH_NAMESPACES, includes


def needs_unchecked(log: str) -> bool:
    """Did a build fail on the emulator's checked types (a template deducing ``T`` from a ``T*``)?"""
    return bool(re.search(r"cuda_emu::(gptr|sarr|dshared|shared_array|rcast)", log))


# torch's own errors a lookup in torch does not name (missing_name): operators and overloads of its types
_TORCH_USE_FAILS = re.compile(r"no match for '[^']*' \(operand types? (is|are) .*'(at|c10)::\w+'"
                              r"|no matching function for call to '(torch|at)::"
                              rf"|incomplete type '({'|'.join(TORCH_NAMESPACES)})::")


def first_tier(src: str) -> int:
    """Torch tier to start with: 2 if the source includes ATen headers itself, 3 for torch/ ones
    other than torch/extension.h (their declarations would clash with the lite tier's)."""
    tier = 1
    for inc in includes(src):
        if inc.startswith("torch/") and inc != "torch/extension.h":
            tier = 3
        elif inc.startswith("ATen/") and not inc.startswith(("ATen/cuda/", "ATen/hip/")):
            tier = max(tier, 2)
    return tier


# names only the full C++ frontend (tier 3) declares (and torch::indexing, which tier 2 lacks)
FRONTEND_ONLY = re.compile(rf"error: '({'|'.join(FRONTEND_NAMESPACES + ('indexing',))})' "
                            r"(is not a member of '(torch|at)'|has not been declared)")


LITE_NAMESPACE = "cuda_emu::lite::"   # torch_api.h's tier-1 stand-ins for ATen's functions


def needs_more_torch(log: str) -> bool:
    """Did a build fail because the source uses parts of torch its tier does not declare? (A name
    in torch's namespaces, or one of them, is not declared, or torch's types lack an operation, or
    a call the lite tier's functions do not take: g++ names them in its errors and notes.)

    >>> needs_more_torch("main.cpp:9:30: error: no matching function for call to 'cumsum(at::Tensor&)'\\n"
    ...                  "torch_api.h:80:8: note: candidate: 'at::Tensor cuda_emu::lite::cumsum(...)'")
    True
    >>> needs_more_torch("main.cpp:9:3: error: 'y' was not declared in this scope")
    False
    """
    for d in diagnostics(log):
        missing = missing_name(d.msg)
        if missing and ((missing[0] or "").split("::")[0] in TORCH_NAMESPACES
                        or missing[0] is None and missing[1] in (*TORCH_NAMESPACES, "py", "pybind11")):
            return True
        if _TORCH_USE_FAILS.search(d.msg):
            return True
    # a call the lite tier's few overloads of torch::sum, torch::empty... do not take (ATen may have more)
    return LITE_NAMESPACE in log


