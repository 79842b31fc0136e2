"""The notebooks that teach Triton, run where Triton cannot be imported (as on macOS or Windows, which it has no
wheels for: tests/no_triton/sitecustomize.py makes ``import triton`` fail in the kernel): each must finish,
every cell that needs Triton printing one line instead (gpu_course.no_triton), everything else running.
Outputs are not compared with the stored ones: without Triton they differ by design."""
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "tests" / "no_triton"
NOTEBOOKS = ["06_triton_basics", "07_triton_matmul", "10_autograd_custom_ops", "11_flash_attention",
             "15_low_precision", "16_decoding_attention"]
USES_TRITON = re.compile(r"\btriton\b|\btl\.|\[\(?grid|_kernel\[")


def text_of(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
    return "".join(out)


def run_without_triton(name: str):
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIM), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COURSE_MODE": "cpu"}
    env.pop("COURSE_SAVE_RESULTS", None)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute(env=env)
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_triton_notebook_runs_without_triton(name):
    nb = run_without_triton(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "Triton is not installed here" in text_of(code[1])        # the imports cell says it once
    skipped = [c for c in code if "Skipped: this cell" in text_of(c)]
    assert skipped, "no cell was skipped"
    for c in skipped:   # one line each, saying where it runs
        line = [ln for ln in text_of(c).splitlines() if ln.startswith("Skipped: this cell")]
        assert len(line) == 1 and "WSL2" in line[0] and "Colab" in line[0], line
    ran = [c for c in code[2:] if not USES_TRITON.search(c.source) and c not in skipped]
    assert ran, "no cell without Triton ran"
    print(f"{name}: {len(skipped)} of {len(code)} code cells skipped without Triton")


@pytest.mark.slow
def test_the_torch_compile_notebook_runs_without_triton():
    """Notebook 08 imports Triton only where it reads a Triton kernel's PTX; without it, torch.compile's C++
    backend does the rest and every cell finishes (nbclient raises on a cell's error)."""
    nb = run_without_triton("08_torch_compile")
    check = next(c for c in nb.cells if c.get("id") == "ex08-1-check")   # its refuse list needed Triton once
    assert "loads of the GeLU kernel" in text_of(check), text_of(check)
