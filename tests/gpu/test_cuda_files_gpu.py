"""Every CUDA C file under gpu_course/kernels/cuda/ compiles on its own, whole: `nvcc -c` on the file as it
lies in the repository, nvcc resolving its #include "..." itself, with the torch headers of a CUDA build of
torch (what an editor's language server or a learner's own nvcc sees). About 20 s a file, run on all the
cores of a GPU machine; tests/unit/test_cuda_files.py compiles the device part of each file on the CPU."""
import os
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import utils
from gpu_course import kernels

pytestmark = pytest.mark.skipif(not utils.ON_GPU, reason="needs a GPU machine (gpu mode): CUDA torch's headers")


def test_every_file_compiles_alone_with_the_torch_headers(tmp_path):
    from torch.utils import cpp_extension as ce
    nvcc = shutil.which("nvcc") or os.path.join(ce.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
    major, minor = torch.cuda.get_device_capability()
    cmd = [nvcc, "-std=c++17", "--expt-relaxed-constexpr", f"-arch=sm_{major}{minor}", "-c"]
    cmd += [f"-I{p}" for p in ce.include_paths("cuda") + [sysconfig.get_paths()["include"]]]
    files = sorted(kernels.CUDA_DIR.rglob("*.cu"))

    def compile_alone(path):
        obj = tmp_path / (str(path.relative_to(kernels.CUDA_DIR)).replace("/", "__") + ".o")
        return path, subprocess.run(cmd + [str(path), "-o", str(obj)], capture_output=True, text=True,
                                    timeout=1200)

    with ThreadPoolExecutor(max(1, min(len(files), os.cpu_count() or 1))) as pool:
        results = list(pool.map(compile_alone, files))
    failed = [f"{p.relative_to(kernels.CUDA_DIR)}:\n{r.stdout[-1500:]}{r.stderr[-1500:]}"
              for p, r in results if r.returncode != 0]
    assert not failed, "\n".join(failed)
