"""Unit tests of gpu_course/cuda/builds.py: which units of the split build an edit changes, timed
builds, and a setup.py build (CPU: the split is text, and the setup.py test builds plain C)."""
import textwrap

import pytest

import utils
from gpu_course import cuda
from gpu_course.cuda import builds

SRC = utils.cuda_begin + r"""
__global__ void twice_k(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2 * x[i];
}

torch::Tensor twice(torch::Tensor x) {
    CHECK_INPUT(x);
    auto out = torch::empty_like(x);
    int n = x.numel(), threads = 256;
    twice_k<<<cdiv(n, threads), threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
CPP = "torch::Tensor twice(torch::Tensor x);"
EDITS = {"kernel": SRC.replace("2 * x[i];", "3 * x[i];"),
         "host": SRC.replace("threads = 256;", "threads = 128;"),
         "kernel, one more line": SRC.replace("    if (i < n)", "    // a new line\n    if (i < n)"),
         "nothing": SRC}


def test_changed_units():
    got = {k: builds.changed_units(SRC, CPP, ["twice"], v) for k, v in EDITS.items()}
    assert got == {"kernel": ["device"], "host": ["host"], "kernel, one more line": ["device", "host"],
                   "nothing": []}


def test_show_split(capsys):
    changed = builds.show_split(SRC, CPP, ["twice"], {"kernel": EDITS["kernel"]})
    out = capsys.readouterr().out
    assert changed == {"kernel": ["device"]}
    assert "device   compiled by nvcc, includes no torch header" in out
    assert "the kernels twice_k and 1 launch stubs" in out
    assert "includes torch/python.h" in out and "includes torch/types.h, c10/cuda/CUDAException.h" in out
    assert builds.show_split(SRC, CPP, ["twice"]) == {}


def test_torch_headers():
    assert builds.torch_headers("#include <torch/extension.h>\n  # include <c10/util/Half.h>\n#include <vector>") \
        == ["torch/extension.h", "c10/util/Half.h"]


def test_timed_builds(monkeypatch, capsys):
    built, checked = [], []
    monkeypatch.setattr(cuda, "load_cuda", lambda src, cpp, funcs: built.append(src) or f"mod{len(built)}")
    secs = builds.timed_builds({"first": "a", "again": "b"}, CPP, ["twice"], check=checked.append)
    assert built == ["a", "b"] and checked == ["mod1", "mod2"] and list(secs) == ["first", "again"]
    assert all(s >= 0 for s in secs.values())
    assert capsys.readouterr().out.splitlines()[0].startswith("first ")
    if not utils.ON_GPU:
        with pytest.raises(ValueError, match="fresh_cache"):
            builds.timed_builds({"first": "a"}, CPP, ["twice"], fresh_cache=True)


def test_timed_builds_on_a_fresh_cache_build_in_an_empty_one_and_remove_it(monkeypatch, capsys):
    from gpu_course.cuda import gpu_build
    monkeypatch.setattr(builds, "ON_GPU", True)
    monkeypatch.setenv("COURSE_CUDA_CACHE", "/the/usual/cache")
    seen = []
    monkeypatch.setattr(cuda, "load_cuda", lambda src, cpp, funcs: seen.append(gpu_build.cache_dir()))
    builds.timed_builds({"cold": "a"}, CPP, ["twice"], fresh_cache=True)
    assert seen[0].name.startswith("cuda-cache-") and not seen[0].exists()
    assert str(gpu_build.cache_dir()) == "/the/usual/cache"


TINY_C = textwrap.dedent("""
    #define PY_SSIZE_T_CLEAN
    #include <Python.h>
    static PyObject* two(PyObject* self, PyObject* args) { return PyLong_FromLong(2); }
    static PyMethodDef methods[] = {{"two", two, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "tiny_ext", NULL, -1, methods};
    PyMODINIT_FUNC PyInit_tiny_ext(void) { return PyModule_Create(&def); }
""")
TINY_SETUP = ('from setuptools import setup, Extension\n'
              'setup(name="tiny_ext", ext_modules=[Extension("tiny_ext", ["tiny.c"])])\n')


def test_build_setup_py(tmp_path):
    (tmp_path / "tiny.c").write_text(TINY_C)
    (tmp_path / "setup.py").write_text(TINY_SETUP)
    ext = builds.build_setup_py(tmp_path, "tiny_ext", arch_list="")
    assert ext.returncode == 0 and ext.module.two() == 2, ext.errors
    assert str(ext).startswith("python setup.py build_ext: exit code 0, ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["setup.py", "tiny.c"]   # built elsewhere


def test_build_setup_py_reports_the_compiler_error(tmp_path):
    (tmp_path / "tiny.c").write_text(TINY_C.replace("return PyLong_FromLong(2);", "return undefined_name;"))
    (tmp_path / "setup.py").write_text(TINY_SETUP)
    ext = builds.build_setup_py(tmp_path, "tiny_ext", arch_list="")
    assert ext.returncode != 0 and ext.module is None
    assert "undefined_name" in ext.errors and "undefined_name" in str(ext)
    with pytest.raises(FileNotFoundError, match="no setup.py"):
        builds.build_setup_py(tmp_path / "nowhere", "tiny_ext")
