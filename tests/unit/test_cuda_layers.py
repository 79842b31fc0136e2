"""The package's floors, read from the modules' imports: mode and hardware at the bottom; gpu_course/cuda/ a
lower floor that the kernels, exercises and lessons build on, never the other way round; kernels/ below the lessons,
the results and the exercises. And both of cuda/'s back ends give a module's launch counters the one set of names of
cuda/counters.py."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpu_course
from gpu_course.cuda import counters, gpu_build
from gpu_course.cuda.emulation import HEADER_DIR, source

CUDA = Path(gpu_course.__file__).resolve().parent / "cuda"
HIGHER = ("gpu_course.kernels", "gpu_course.exercises", "gpu_course.lessons")


def _package(path: Path) -> str:
    """The package that relative imports in the file at ``path`` start from."""
    name = ".".join(path.relative_to(CUDA.parent.parent).with_suffix("").parts)
    return name.removesuffix(".__init__") if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _imports(text: str, package: str) -> list[str]:
    """The absolute names that a module of ``package`` with source ``text`` imports (relative imports
    resolved; ``from a import b`` gives ``a`` and ``a.b``, since b may be a module)."""
    names = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


def _upward(names: list[str]) -> list[str]:
    return [n for n in names if any(n == h or n.startswith(h + ".") for h in HIGHER)]


def test_the_import_walk_finds_an_upward_import_however_it_is_spelled():
    assert _package(CUDA / "__init__.py") == "gpu_course.cuda"
    assert _package(CUDA / "emulation" / "toolchain.py") == "gpu_course.cuda.emulation"
    text = ("from ..kernels import COMMON\nfrom .. import exercises\nimport gpu_course.lessons.attention\n"
            "from . import cxx\nfrom .errors import CudaBuildError\n")
    assert _upward(_imports(text, "gpu_course.cuda")) == [
        "gpu_course.kernels", "gpu_course.kernels.COMMON", "gpu_course.exercises", "gpu_course.lessons.attention"]
    assert _upward(_imports("from ...kernels import cuda_source\n", "gpu_course.cuda.emulation"))[0] == \
        "gpu_course.kernels"
    assert _upward(_imports(text, "gpu_course.cuda.emulation")) == ["gpu_course.lessons.attention"]


@pytest.mark.parametrize("path", sorted(CUDA.rglob("*.py")), ids=lambda p: str(p.relative_to(CUDA)))
def test_no_module_under_cuda_imports_a_higher_floor(path):
    up = _upward(_imports(path.read_text(), _package(path)))
    assert not up, f"{path.relative_to(CUDA.parent)} imports {up}: cuda/ must not depend on the layers above it"


def test_both_back_ends_bind_the_launch_counters_under_the_names_of_counters_py():
    emu = source.binding("m", ["f"], "void f();")
    assert f'CUDA_EMU_LAUNCH_METHODS("{counters.COUNTS}", "{counters.RESET}", "{counters.LOG}")' in emu
    assert "#define CUDA_EMU_LAUNCH_METHODS(COUNTS, RESET, LOG)" in (HEADER_DIR / "emu" / "binding.h").read_text()
    units = gpu_build.make_units("__global__ void k() {}\nvoid f() { k<<<1, 1>>>(); }\n", "void f();", ["f"])
    for name in (counters.COUNTS, counters.RESET, counters.LOG):
        assert f'm.def("{name}"' in units.binding


def test_readers_of_a_module_without_counters():
    class NoCounters:
        __name__ = "plain"
    assert counters.launch_counts(NoCounters()) is None and counters.launch_log(NoCounters()) is None
    with pytest.raises(ValueError, match="'plain' has no launch counters"):
        counters.reset_launches(NoCounters())


KERNELS = CUDA.parent / "kernels"
ABOVE_KERNELS = ("gpu_course.lessons", "gpu_course.exercises", "gpu_course.results")


@pytest.mark.parametrize("path", sorted(KERNELS.rglob("*.py")), ids=lambda p: str(p.relative_to(KERNELS)))
def test_no_kernels_module_imports_the_lessons_or_the_exercises(path):
    """kernels/ holds kernels and their thin wrappers: the harness that measures and records them (lessons/,
    results) and the judging of exercises build on it, not the other way round."""
    names = _imports(path.read_text(), _package(path))
    up = [n for n in names if any(n == h or n.startswith(h + ".") for h in ABOVE_KERNELS)]
    assert not up, f"kernels/{path.relative_to(KERNELS)} imports {up}"


@pytest.mark.parametrize("name, allowed", [("mode.py", ()), ("hardware.py", ("gpu_course.mode",))])
def test_the_bottom_floor_imports_nothing_above_it(name, allowed):
    """mode (which mode) and hardware (what this GPU is) are what everything else reads."""
    path = CUDA.parent / name
    ours = {n for n in _imports(path.read_text(), _package(path))
            if n.startswith("gpu_course") and n != "gpu_course"}
    assert ours <= set(allowed) | {f"{a}.{x}" for a in allowed for x in ("ON_GPU", "MODE", "DEVICE")}, ours


def test_the_one_unit_build_undoes_every_half_switch_torch_defines():
    """load_inline defines __CUDA_NO_HALF_OPERATORS__ and friends; the one-unit build undefines each of
    them, so that (float)h and a + b on __half/__nv_bfloat16 mean what they mean in the split build and
    in cpu mode."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS
    from gpu_course.cuda.gpu_build.pipeline import HALF_AS_CUDA
    defined = {f[2:] for f in COMMON_NVCC_FLAGS if f.startswith("-D__CUDA_NO_")}
    assert defined and defined == {f[2:] for f in HALF_AS_CUDA}
