"""The running notebook's session: its name, the banner its first cell prints (where it runs and what that
means for its numbers), the GPU its stored outputs come from and what running it does to them, and the
versions of the course's tools.

>>> stored_gpu("no_such_notebook")
'an NVIDIA H100 or H200'
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from .hardware import acting
from .mode import MODE_ENV, ON_GPU

_NOTEBOOK: str | None = None   # the running notebook's name, as its banner call gives it


def current_notebook(env=None) -> str | None:
    """The running notebook's name without ``.ipynb`` (``"03_first_cuda_kernels"``): the one its
    first cell gave :func:`banner`, else JupyterLab's ``JPY_SESSION_NAME``; ``None`` where neither
    tells (a script).

    """
    if _NOTEBOOK:
        return _NOTEBOOK
    env = os.environ if env is None else env
    return _stem(env.get("JPY_SESSION_NAME") or "")


def _stem(path: str) -> str | None:
    """The notebook's name in a path, without ``.ipynb``; ``None`` where the path is not a notebook's.

    >>> _stem("/x/03_first_cuda_kernels.ipynb"), _stem("/x/script.py"), _stem("")
    ('03_first_cuda_kernels', None, None)
    """
    name = Path(path).name
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
        p = torch.cuda.get_device_properties(0)   # the device itself, whatever it acts as (below)
        line = (f"Mode gpu: {p.name} (sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, "
                f"{p.total_memory / 2**30:.0f} GiB), torch {torch.__version__}. "
                f"Kernels and timings are real.")
    else:
        line = ("Mode cpu: no GPU in use. CUDA C runs in the course's CPU emulation, Numba in its "
                "CUDA simulator, Triton in its interpreter; results are checked as on a GPU, but "
                f"timings here say nothing about a GPU. (Set {MODE_ENV}=gpu|cpu to force a mode.)")
    if acting():
        line += " " + acting()
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
