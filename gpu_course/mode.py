"""The execution mode, chosen once at import: ``"gpu"`` (a real GPU) or ``"cpu"`` (simulators).

* ``"gpu"`` when ``torch.cuda.is_available()``: everything runs for real.
* ``"cpu"`` otherwise: Numba runs in its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), Triton in
  its interpreter (``TRITON_INTERPRET=1``) and CUDA C in the course's CPU emulation. Results are
  checked the same way; timings mean nothing about a GPU.

``COURSE_MODE=gpu|cpu`` in the environment forces a mode. This module is imported first by the
package, so the simulator switches are set before numba or triton reads them (the package then installs,
in cpu mode, the simulators' fixes: ``simulator_fix`` and ``triton_check``). Its one other import-time
effect, in gpu mode: a filter for torch's harmless first-use cuBLAS warning (``_quiet_known_gpu_warnings``).

What this GPU is and can do is :mod:`gpu_course.hardware`'s; the running notebook's banner and stored
outputs are :mod:`gpu_course.session`'s.

>>> from gpu_course import mode
>>> n = mode.by_mode(gpu=100_000_000, cpu=10_000)  # problem sizes come from the mode, here only
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import torch

MODE_ENV = "COURSE_MODE"

def _choose_mode(requested: str | None, cuda_available: bool) -> str:
    """Return ``"gpu"`` or ``"cpu"`` from the requested mode and whether CUDA is usable.

    >>> _choose_mode(None, True), _choose_mode("cpu", True), _choose_mode("", False)
    ('gpu', 'cpu', 'cpu')
    """
    req = (requested or "auto").strip().lower()
    if req not in ("auto", "gpu", "cpu"):
        raise ValueError(f"{MODE_ENV}={requested!r}: use 'gpu', 'cpu' or leave it unset (auto).")
    if req == "gpu" and not cuda_available:
        raise RuntimeError(
            f"{MODE_ENV}=gpu but torch sees no CUDA GPU (torch {torch.__version__}, "
            f"built for CUDA {torch.version.cuda}). Unset {MODE_ENV} to run on the CPU.")
    if req == "auto":
        return "gpu" if cuda_available else "cpu"
    return req


def _set_simulator_switches(mode: str) -> None:
    """Set the environment switches numba and triton read at import / decoration time."""
    # The course launches small grids on purpose (to show indexing); numba would warn each time.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    value = "1" if mode == "cpu" else "0"
    for var, module in (("NUMBA_ENABLE_CUDASIM", "numba"), ("TRITON_INTERPRET", "triton")):
        if sys.modules.get(module) is not None and os.environ.get(var, "0") != value:   # None: made unimportable
            warnings.warn(f"{module} was imported before utils, so {var}={value} may not take "
                          f"effect: restart the kernel and import utils first.", stacklevel=3)
        os.environ[var] = value


# torch warns when autograd's device thread is the first to call cuBLAS ("no current CUDA context!
# Attempting to set the primary context..."): it then sets the context and goes on. GPU-only noise that
# would make a notebook's stored stderr differ between modes.
_KNOWN_GPU_WARNINGS = (r"Attempting to run cuBLAS, but there was no current CUDA context",)


def _quiet_known_gpu_warnings() -> None:
    """Ignore the harmless GPU-only warnings in ``_KNOWN_GPU_WARNINGS`` (each filter added once)."""
    for message in _KNOWN_GPU_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=UserWarning)


MODE: str = _choose_mode(os.environ.get(MODE_ENV), torch.cuda.is_available())
ON_GPU: bool = MODE == "gpu"
DEVICE: torch.device = torch.device("cuda" if ON_GPU else "cpu")
_set_simulator_switches(MODE)
if MODE == "gpu":
    _quiet_known_gpu_warnings()


def by_mode(gpu, cpu):
    """Pick the value for the current mode: big problems on a GPU, small ones on the CPU.

    >>> by_mode(gpu=4096, cpu=96) == (4096 if ON_GPU else 96)
    True
    """
    return gpu if ON_GPU else cpu


def device_name() -> str:
    """Name of the device timings are taken on: the GPU's name, or ``"CPU (<model>)"``."""
    if ON_GPU:
        return torch.cuda.get_device_name()
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import platform
    return f"CPU ({model or platform.processor() or platform.machine()})"


def synchronize() -> None:
    """Wait until the GPU has finished all queued work (``torch.cuda.synchronize()``); on the
    CPU there is nothing to wait for.

    >>> synchronize()
    """
    if ON_GPU:
        torch.cuda.synchronize()
