"""The execution mode, chosen once at import: ``"gpu"`` (a real GPU) or ``"cpu"`` (simulators).

* ``"gpu"`` when ``torch.cuda.is_available()``: everything runs for real.
* ``"cpu"`` otherwise: Numba runs in its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), Triton in
  its interpreter (``TRITON_INTERPRET=1``) and CUDA C in the course's CPU emulation. Results are
  checked the same way; timings mean nothing about a GPU.

``COURSE_MODE=gpu|cpu`` in the environment forces a mode. This module is imported first by the
package, so the simulator switches are set before numba or triton reads them. Its other import-time
effects: in cpu mode a fix of Numba's simulator (``simulator_fix``: a thread-safe shared array, the
GPU's launch limits) and bounds checks for Triton's interpreter (``triton_check``), each applied when
that library is imported; in gpu mode a filter for
torch's harmless first-use cuBLAS warning (``_quiet_known_gpu_warnings``).

What this GPU can do: ``gpu_supports(feature)`` / ``gpu_has(feature)`` (bf16, TF32, SDPA's flash and cuDNN
backends, cp.async, wgmma) and ``shared_memory_per_block()``; a notebook skips what the GPU lacks with
one printed line. ``COURSE_FAKE_CC=7.5`` makes them answer as on a GPU of that compute capability (here
Colab's T4), on a GPU or in cpu mode, so that the skips can be checked without one.

>>> from gpu_course import mode
>>> n = mode.by_mode(gpu=100_000_000, cpu=10_000)  # problem sizes come from the mode, here only
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
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
        if module in sys.modules and os.environ.get(var, "0") != value:
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
if MODE == "cpu":   # the simulators made to behave as a GPU: see simulator_fix, triton_check
    from . import simulator_fix, triton_check
    simulator_fix.install()
    triton_check.install()
else:
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


_NOTEBOOK: str | None = None   # the running notebook's name, as its banner call gives it


def current_notebook(env=None) -> str | None:
    """The running notebook's name without ``.ipynb`` (``"03_first_cuda_kernels"``): the one its
    first cell gave :func:`banner`, else JupyterLab's ``JPY_SESSION_NAME``; ``None`` where neither
    tells (a script).

    >>> current_notebook({"JPY_SESSION_NAME": "/x/03_first_cuda_kernels.ipynb"}) in (_NOTEBOOK, "03_first_cuda_kernels")
    True
    """
    if _NOTEBOOK:
        return _NOTEBOOK
    env = os.environ if env is None else env
    name = Path(env.get("JPY_SESSION_NAME") or "").name
    return name[:-len(".ipynb")] if name.endswith(".ipynb") else None


def banner(notebook: str | None = None) -> str:
    """Where this notebook runs and what that means for its numbers, then (see
    :func:`stored_outputs_note`) what running it does to the outputs it is stored with. A notebook
    names itself here (``utils.banner("03_first_cuda_kernels")``): its claims then know which GPU
    its stored outputs come from (see :func:`claims.strict`)."""
    global _NOTEBOOK
    if notebook is not None:
        if not isinstance(notebook, str) or not notebook.strip():
            raise ValueError("banner: give the notebook's name, e.g. utils.banner(\"03_first_cuda_kernels\")")
        _NOTEBOOK = notebook[:-len(".ipynb")] if notebook.endswith(".ipynb") else notebook
    if ON_GPU:
        p = torch.cuda.get_device_properties(0)
        line = (f"Mode gpu: {p.name} (sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, "
                f"{p.total_memory / 2**30:.0f} GiB), torch {torch.__version__}. "
                f"Kernels and timings are real.")
    else:
        line = ("Mode cpu: no GPU in use. CUDA C runs in the course's CPU emulation, Numba in its "
                "CUDA simulator, Triton in its interpreter; results are checked as on a GPU, but "
                f"timings here say nothing about a GPU. (Set {MODE_ENV}=gpu|cpu to force a mode.)")
    if os.environ.get(CC_ENV):
        line += (f" Acting as a GPU of compute capability {os.environ[CC_ENV]} ({CC_ENV}): what such a GPU "
                 "lacks is skipped.")
    note = stored_outputs_note()
    return f"{line}\n{note}" if note else line


LECTURE_ENV = "COURSE_LECTURE_DIR"  # set by `python3 course.py lecture` for its kernels


def stored_outputs_note(env=None, colab: bool | None = None) -> str:
    """What running this notebook does to the GPU outputs it is stored with, and how to get them
    back; ``""`` while ``python3 course.py execute`` stores new ones. The notebook's name comes
    from JupyterLab (``JPY_SESSION_NAME``) where it tells.

    >>> note = stored_outputs_note({"JPY_SESSION_NAME": "/x/03_first_cuda_kernels.ipynb"}, colab=False)
    >>> "run python3 course.py reset 03_first_cuda_kernels" in note
    True
    >>> stored_outputs_note({"COURSE_SAVE_RESULTS": "1"})
    ''
    """
    env = os.environ if env is None else env
    if env.get("COURSE_SAVE_RESULTS") == "1":  # `execute`: these outputs become the stored ones
        return ""
    stem = current_notebook(env) or "NB"
    gpu = stored_gpu(stem)
    stored = (f"This notebook is stored with the outputs of a run on {gpu}, which its text "
              "discusses; running a cell replaces its stored output with this machine's.")
    if env.get(LECTURE_ENV):
        return (f"Lecture copy: this notebook is a scratch copy in {env[LECTURE_ENV]}, not the "
                f"repository's; it shows the outputs of {gpu} as stored, and running cells changes "
                "only the copy (python3 course.py lecture makes a fresh one).")
    if colab if colab is not None else "google.colab" in sys.modules:
        return (f"{stored} To see them again, open the notebook afresh from GitHub (its Open in "
                "Colab badge) without saving this copy.")
    return (f"{stored} To get them back, close the notebook and run python3 course.py reset "
            f"{stem} (this also undoes your edits to it).")


def stored_device(stem: str | None) -> str | None:
    """The GPU whose outputs notebook ``stem`` is stored with, exactly as its metadata records it
    (``course.py execute`` writes ``outputs_from``: ``"NVIDIA H200"``); ``None`` where the notebook
    or the record is not found, or the outputs are not a GPU's.

    >>> stored_device("no_such_notebook") is None
    True
    """
    import json
    from .paths import ROOT
    if not stem:
        return None
    try:
        gpu = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["metadata"]["course"]["outputs_from"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return gpu if isinstance(gpu, str) and gpu.startswith("NVIDIA") else None


def stored_gpu(stem: str) -> str:
    """:func:`stored_device` with its article, for a sentence: ``"an NVIDIA H200"``; where it is not
    known (Colab, which does not name the notebook), ``"an NVIDIA H100 or H200"``.

    >>> stored_gpu("no_such_notebook")
    'an NVIDIA H100 or H200'
    """
    gpu = stored_device(stem)
    return f"an {gpu}" if gpu else "an NVIDIA H100 or H200"


def versions() -> dict:
    """Versions of the course's tools (``None`` for one that is missing).

    >>> sorted(versions())[:3]
    ['cuda (torch built for)', 'numba', 'numba-cuda']
    """
    from importlib import metadata

    def dist(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    out = {"python": sys.version.split()[0], "torch": torch.__version__,
           "cuda (torch built for)": torch.version.cuda, "triton": dist("triton"),
           "numba": dist("numba"), "numba-cuda": dist("numba-cuda"), "nvcc": None}
    nvcc = shutil.which("nvcc")
    if nvcc:
        try:
            text = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                  timeout=30).stdout
            m = re.search(r"release ([\d.]+)", text)
            out["nvcc"] = m.group(1) if m else "unknown"
        except (OSError, subprocess.SubprocessError):
            pass
    return out


def gpu_properties() -> dict | None:
    """The GPU's properties that matter for this course, or ``None`` in cpu mode."""
    if not ON_GPU:
        return None
    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "compute capability": f"{p.major}.{p.minor}",
            "SMs": p.multi_processor_count, "memory (GiB)": round(p.total_memory / 2**30, 1),
            "L2 cache (MiB)": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
            "max threads per SM": getattr(p, "max_threads_per_multi_processor", None),
            "warp size": getattr(p, "warp_size", 32)}


def synchronize() -> None:
    """Wait until the GPU has finished all queued work (``torch.cuda.synchronize()``); on the
    CPU there is nothing to wait for.

    >>> synchronize()
    """
    if ON_GPU:
        torch.cuda.synchronize()


# ------------------------------------------------------------- what this GPU can do (a T4 vs an H100)
CC_ENV = "COURSE_FAKE_CC"  # e.g. "7.5": act as a GPU of that compute capability (to test the guards)

# feature -> (lowest compute capability, what a learner is told when the GPU lacks it)
FEATURES = {
    "bf16": ((8, 0), "bfloat16 arithmetic needs compute capability 8.0 (Ampere) or newer"),
    "flash_sdpa": ((8, 0), "SDPA's flash-attention backend needs compute capability 8.0 (Ampere) or newer"),
    "cudnn_sdpa": ((8, 0), "SDPA's cuDNN attention backend needs compute capability 8.0 (Ampere) or newer "
                           "and a torch built with cuDNN 9"),
    "cp_async": ((8, 0), "cp.async copies need compute capability 8.0 (Ampere) or newer"),
    "wgmma": ((9, 0), "wgmma and TMA are Hopper instructions: compute capability 9.0 or newer"),
    "tf32": ((8, 0), "TF32 tensor cores need compute capability 8.0 (Ampere) or newer (here allow_tf32 and "
                     "input_precision='tf32' compute in plain fp32)"),
}

# The most shared memory one block may use (cudaDevAttrMaxSharedMemoryPerBlockOptin: dynamic shared memory
# above 48 KB needs cudaFuncSetAttribute), in bytes, by compute capability: the CUDA C++ Programming Guide's
# table of technical specifications. A faked compute capability (COURSE_FAKE_CC) is looked up here; so is a
# GPU whose torch does not report it. A capability between two rows takes the row below it.
SHARED_MEMORY_PER_BLOCK = {
    (7, 0): 96 * 1024, (7, 5): 64 * 1024,                       # V100; T4, RTX 20xx
    (8, 0): 163 * 1024, (8, 6): 99 * 1024, (8, 7): 163 * 1024,  # A100; A10, RTX 30xx; Orin
    (8, 9): 99 * 1024,                                          # L4, RTX 40xx
    (9, 0): 227 * 1024, (10, 0): 227 * 1024, (12, 0): 99 * 1024,  # H100; B200; RTX 50xx
}


def compute_capability() -> tuple | None:
    """The GPU's compute capability as ``(major, minor)`` (``COURSE_FAKE_CC=7.5`` pretends), or
    ``None`` in cpu mode.

    >>> compute_capability() is None or len(compute_capability()) == 2
    True
    """
    fake = os.environ.get(CC_ENV)
    if fake:
        try:
            major, minor = (int(v) for v in fake.split("."))
        except ValueError:
            raise ValueError(f"{CC_ENV}={fake!r}: write a compute capability as MAJOR.MINOR, e.g. 7.5") from None
        return major, minor
    if not ON_GPU:
        return None
    return tuple(torch.cuda.get_device_capability())


def gpu_supports(feature: str) -> tuple:
    """``(True, "")`` where this GPU has ``feature`` (one of :data:`FEATURES`), else ``(False, reason)``:
    a notebook skips what the GPU lacks (Colab's T4 is sm_75) with the reason in one line. In cpu mode
    every feature counts as present: the interpreters and the emulation run what they can and say
    themselves what they cannot.

    >>> gpu_supports("bf16")[0] or compute_capability() < (8, 0)
    True
    """
    if feature not in FEATURES:
        raise ValueError(f"gpu_supports: unknown feature {feature!r}; known: {', '.join(FEATURES)}")
    cc = compute_capability()
    if cc is None:
        return True, ""
    need, why = FEATURES[feature]
    if cc < need:
        return False, f"skipped on this GPU (sm_{cc[0]}{cc[1]}): {why}"
    if feature == "cudnn_sdpa" and not os.environ.get(CC_ENV):
        v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        if not v or v < 90000:
            return False, f"skipped: {why} (this torch has cuDNN {v})"
    return True, ""


def gpu_has(feature: str) -> bool:
    """Whether this GPU has ``feature`` (as :func:`gpu_supports`); where it does not, print the one-line
    reason first, so that a notebook guards a section with ``if utils.gpu_has("tf32"):`` and says why
    it skips it. Prints nothing where the feature is there, and in cpu mode (unless ``COURSE_FAKE_CC``).

    >>> gpu_has("bf16") == gpu_supports("bf16")[0]
    True
    """
    ok, why = gpu_supports(feature)
    if not ok:
        print(why)
    return ok


def _by_capability(table: dict, cc: tuple):
    """The value of ``table`` (keyed by compute capability) for ``cc``: its own row, else the row below
    it, else ``None``.

    >>> _by_capability({(7, 5): "T4", (8, 0): "A100"}, (8, 6)), _by_capability({(7, 5): 1}, (6, 1))
    ('A100', None)
    """
    below = [k for k in table if k <= tuple(cc)]
    return table[max(below)] if below else None


@functools.lru_cache(maxsize=None)
def sm_count(device=None) -> int:
    """The SMs of ``device``'s GPU (default: the current one), asked of the driver once per device: a
    question costs ~6 µs, which a kernel launcher must not pay at every call."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def shared_memory_per_block() -> int | None:
    """The most shared memory one block may use on this GPU, in bytes (with the opt-in above 48 KB):
    the device's own figure, or :data:`SHARED_MEMORY_PER_BLOCK`'s for a faked compute capability
    (``COURSE_FAKE_CC=7.5``: 64 KB, Colab's T4); ``None`` in cpu mode, where nothing limits it.

    >>> limit = shared_memory_per_block()
    >>> limit is None or limit >= 48 * 1024
    True
    """
    cc = compute_capability()
    if cc is None:
        return None
    if ON_GPU and not os.environ.get(CC_ENV):
        own = getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", None)
        if own:
            return int(own)
    return _by_capability(SHARED_MEMORY_PER_BLOCK, cc) or 48 * 1024


def fits_shared_memory(nbytes: int, what: str) -> tuple:
    """``(True, "")`` where a block of ``what`` (e.g. ``"rung 10"``) that uses ``nbytes`` of shared memory
    can run on this GPU, else ``(False, reason)`` with the one-line reason a notebook prints.

    >>> fits_shared_memory(1024, "a small tile")
    (True, '')
    """
    limit = shared_memory_per_block()
    if limit is None or nbytes <= limit:
        return True, ""
    cc = compute_capability()
    return False, (f"{what}: skipped on this GPU (sm_{cc[0]}{cc[1]}): it needs {nbytes / 1024:.0f} KB of shared "
                   f"memory per block, this GPU gives a block at most {limit / 1024:.0f} KB")
