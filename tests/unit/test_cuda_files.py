"""The CUDA C files under gpu_course/kernels/cuda/: each compiles on its own, as the .cu files of llm.c's
dev/cuda/ do with their common.h. A file has an include guard, and starts with `#include "../common.cuh"`
(the prelude, which is utils.cuda_begin) and an #include of each file it builds on. The sources the kernel
modules assemble for load_cuda are the files in include order, each as the notebooks print it: the same
text as the notebooks built before the files had includes.

With nvcc on PATH, each file is compiled alone for sm_90a (`nvcc --ptx`; ~30 s for all 32 on 2 busy
cores, 9 s of it the ladder's dispatcher with its 25 kernels): the file with what it includes, its host
code that uses torch left out (the torch headers cost 20 s to minutes a file). tests/gpu/test_cuda_files_gpu.py compiles each file whole, with the torch headers and nvcc
resolving the includes itself, on a GPU machine.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import utils
from gpu_course import kernels
from gpu_course.cuda import cxx, files
from gpu_course.cuda import gpu_build
from gpu_course.kernels import elementwise, matmul_ladder, reductions

NVCC = shutil.which("nvcc")
FILES = sorted(str(p.relative_to(kernels.CUDA_DIR)) for p in kernels.CUDA_DIR.rglob("*.cu*")   # .cu, and a folder's
               if str(p.relative_to(kernels.CUDA_DIR)) != kernels.COMMON)                   # shared .cuh
_INCLUDE = re.compile(r'#include "([^"]+)"')


def _includes(name: str) -> list:
    """The files ``name`` includes (paths under cuda/), read from its lines as a compiler would."""
    here = (kernels.CUDA_DIR / name).parent
    return [str((here / m).resolve().relative_to(kernels.CUDA_DIR))
            for m in _INCLUDE.findall((kernels.CUDA_DIR / name).read_text())]


def test_each_file_has_an_include_guard_and_includes_the_prelude_first():
    for name in FILES + [kernels.COMMON]:
        code = [line for line in (kernels.CUDA_DIR / name).read_text().splitlines()
                if line.strip() and not line.startswith("//")]
        guard = "GPU_COURSE_" + re.sub(r"\W", "_", name).upper()   # unique: one per path
        assert code[:2] == [f"#ifndef {guard}", f"#define {guard}"] and code[-1] == f"#endif  // {guard}", name
        if name != kernels.COMMON:
            assert _includes(name)[0] == kernels.COMMON, f"{name} must include common.cuh first"
    assert {inc for name in FILES for inc in _includes(name)} <= set(FILES) | {kernels.COMMON}


def _top_level_names(text: str) -> set:
    """What ``text`` defines at file scope: macros, functions, kernels, variables and constants, types."""
    toks = cxx.tokenize(text)
    match = cxx.match_brackets(toks)
    names = set()
    for s in cxx.statements(toks, match):
        if s.kind == "pp":
            names.update(re.findall(r"^\s*#\s*define\s+(\w+)", toks[s.a].text))
        elif s.kind == "decl":
            d = cxx.analyze(toks, match, s)
            names.update([d.name] + [toks[q].text for q, _ in d.names])
    return names - {""}


def _used_names(text: str) -> set:
    """The identifiers ``text`` uses (members after . -> :: left out), in macro bodies too."""
    toks = cxx.tokenize(text)
    toks += [t for p in toks if p.kind == "pp" for t in cxx.tokenize(p.text, directives=False)]
    return {t.text for i, t in enumerate(toks) if t.kind == "id" and (i == 0 or toks[i - 1].text not in (".", "->", "::"))}


def test_each_file_includes_what_it_uses():
    """A name a file uses that another file defines is defined in what it includes: nvcc accepts a call in
    a template that is never instantiated (rung 7 alone) without its definition, clang (an editor's
    language server) does not."""
    defined = {name: _top_level_names(kernels.cuda_source(name)) for name in FILES + [kernels.COMMON]}
    assert {"load4", "check_scan", "CHECK_PAIR", "RB", "block_sum", "RUNG9_CFGS", "cdiv"} <= set().union(*defined.values())
    for name in FILES:
        seen = kernels.cuda_files(name)
        elsewhere = set().union(*(names for f, names in defined.items() if f not in seen))
        missing = _used_names(kernels.cuda_source(name)) & elsewhere - set().union(*(defined[f] for f in seen))
        assert not missing, f"{name} uses {sorted(missing)} but includes no file that defines them"

def test_the_prelude_is_cuda_begin():
    text = (kernels.CUDA_DIR / kernels.COMMON).read_text()
    assert kernels.cuda_source(kernels.COMMON) == utils.cuda_begin
    assert text.endswith("#define GPU_COURSE_COMMON_CUH\n" + utils.cuda_begin + "#endif  // GPU_COURSE_COMMON_CUH\n")
    assert kernels.cuda_files(kernels.COMMON) == [kernels.COMMON]


def test_sources_are_the_files_in_include_order():
    """What notebooks 03, 04, 05 and 09 and bench/ build: cuda_begin, then the files in the order the steps
    and rungs build on each other, a blank line between two files."""
    def joined(names):   # a header (.cuh) is joined to its neighbours without a blank line
        out = utils.cuda_begin
        for prev, n in zip([None] + names, names):
            out += ("\n" if prev and prev.endswith(".cu") and n.endswith(".cu") else "") + kernels.cuda_source(n)
        return out

    ladder = [matmul_ladder.rung_file(r) for r in sorted(matmul_ladder.RUNGS)] + [matmul_ladder.DISPATCHER]
    ladder.insert(ladder.index(matmul_ladder.rung_file(8)), "matmul/warp_tile.cuh")   # what rungs 8 and 10 share
    assert matmul_ladder.source() == joined(ladder)
    assert kernels.cuda_files(matmul_ladder.DISPATCHER) == [kernels.COMMON] + ladder
    assert matmul_ladder.source([3]) == joined([matmul_ladder.rung_file(3)])     # notebook 05
    assert matmul_ladder.source([7]) == joined([matmul_ladder.rung_file(6), matmul_ladder.rung_file(7)])
    steps = list(elementwise.STEPS.values())
    for i, step in enumerate(elementwise.STEPS):
        files = [f for f in kernels.cuda_files(steps[i]) if f != kernels.COMMON]
        assert [f for f in files if f.startswith("elementwise/")] == steps[:i + 1]   # each step includes the ones before
        assert elementwise.source(step) == joined(files)
    sums = [reductions.rung_file(r) for r in sorted(reductions.RUNGS)] + [reductions.DISPATCHER]
    rest = [*reductions.SCANS.values(), *reductions.HISTOGRAMS.values(), *reductions.IMAGES.values()]
    assert reductions.files() == sums + rest
    assert reductions.source() == joined(sums + rest)


def test_line_directives_name_each_file_and_its_lines():
    unit = kernels.cuda_unit(matmul_ladder.DISPATCHER, line_directives=True)
    lines = unit.splitlines()
    marks = [(i, int(m.group(1)), m.group(2)) for i, l in enumerate(lines)
             for m in [re.fullmatch(r'#line (\d+) "([^"]+)"', l)] if m]
    assert [name for _, _, name in marks] == kernels.cuda_files(matmul_ladder.DISPATCHER)
    for i, first, name in marks:   # the line after each mark is that line of the file
        assert lines[i + 1] == (kernels.CUDA_DIR / name).read_text().splitlines()[first - 1], name
    assert re.sub(r'#line \d+ "[^"]+"\n', "", unit) == matmul_ladder.source()


@pytest.fixture
def tmp_cuda_dir(tmp_path, monkeypatch):
    """A cuda/ folder of one's own, with the course's common.cuh."""
    (tmp_path / "k").mkdir()
    (tmp_path / kernels.COMMON).write_text((kernels.CUDA_DIR / kernels.COMMON).read_text())
    monkeypatch.setattr(files, "CUDA_DIR", tmp_path)
    return tmp_path


def test_includes_must_come_first_and_stay_inside(tmp_cuda_dir):
    (tmp_cuda_dir / "k" / "a.cu").write_text('// the file a\n#ifndef A\n#define A\n#include "../common.cuh"\n'
                                             '// a\nint a;\n#endif\n\n')
    (tmp_cuda_dir / "k" / "late.cu").write_text('#include "../common.cuh"\nint b;\n#include "a.cu"\n')
    (tmp_cuda_dir / "k" / "out.cu").write_text('#include "../../x.cu"\n')
    (tmp_cuda_dir / "k" / "open.cu").write_text('#ifndef O\n#define O\nint o;\n')
    (tmp_cuda_dir / "k" / "loop.cu").write_text('#include "loop2.cu"\n')
    (tmp_cuda_dir / "k" / "loop2.cu").write_text('#include "loop.cu"\n')
    assert kernels.cuda_source("k/a.cu") == "// a\nint a;\n"
    assert kernels.cuda_unit("k/a.cu", line_directives=True).endswith('#line 5 "k/a.cu"\n// a\nint a;\n')
    with pytest.raises(ValueError, match="k/open.cu: the include guard #ifndef O must end with #endif"):
        kernels.cuda_source("k/open.cu")
    with pytest.raises(ValueError, match=r'k/late.cu:3: #include "a.cu" comes after code'):
        kernels.cuda_unit("k/late.cu")
    with pytest.raises(ValueError, match=r'k/out.cu:1: #include "../../x.cu" is outside'):
        kernels.cuda_unit("k/out.cu")
    with pytest.raises(ValueError, match="k/loop.cu -> k/loop2.cu -> k/loop.cu includes itself"):
        kernels.cuda_files("k/loop.cu")
    with pytest.raises(FileNotFoundError, match=r"no file 'k/b.cu'.*there are: common.cuh, k/a.cu"):
        kernels.cuda_unit("k/b.cu")


@pytest.mark.skipif(not NVCC, reason="nvcc is not on PATH")
def test_a_compile_error_names_the_included_file_and_its_line(tmp_cuda_dir, tmp_path):
    """Through cuda_unit(..., line_directives=True), nvcc names the file a mistake is in, and its line."""
    (tmp_cuda_dir / "k" / "a.cu").write_text('#ifndef A\n#define A\n// device code only\n'
                                             '__device__ float twice(float v) { return 2.0f * w; }\n#endif\n')
    (tmp_cuda_dir / "k" / "b.cu").write_text('#include "a.cu"\n'
                                             '__global__ void k(float* x) { x[0] = twice(x[0]); }\n')
    src = tmp_path / "unit.cu"  # as by hand: the unit itself (the GPU build's split numbers lines its own way)
    src.write_text(kernels.cuda_unit("k/b.cu", line_directives=True))
    r = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "--ptx", str(src), "-o", str(tmp_path / "unit.ptx")],
                       capture_output=True, text=True, timeout=600)
    log = r.stdout + r.stderr
    assert re.search(r'k/a\.cu\(4\): error: identifier "w" is undefined', log), log


def _ptx(tmp_path, name: str) -> str:
    """Compile the device part of ``name`` with what it includes for sm_90a; the log if nvcc fails, else ''."""
    src = tmp_path / "unit.cu"
    src.write_text(gpu_build.make_units(kernels.cuda_unit(name, line_directives=True)).device)  # the GPU build's device unit
    # cicc at -O0: the same front end (templates instantiated, static_asserts, redefinitions), without the
    # optimiser, which took 9 of matmul_rung.cu's 10 s
    r = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "--expt-relaxed-constexpr", "-Xcicc", "-O0", "--ptx",
                        str(src), "-o", str(tmp_path / "unit.ptx")], capture_output=True, text=True, timeout=600)
    return "" if r.returncode == 0 else r.stdout + r.stderr


@pytest.mark.slow   # nvcc, about a second a file
@pytest.mark.skipif(not NVCC, reason="nvcc is not on PATH")
@pytest.mark.parametrize("name", FILES)
def test_each_file_compiles_alone(name, tmp_path):
    """The file with what it includes compiles for an H100 (every templated kernel its host code launches
    instantiated: rung 9's and 10's shapes pass their static_asserts), and nothing is defined twice."""
    assert _ptx(tmp_path, name) == ""


def test_a_file_is_read_once_while_unchanged_and_again_when_it_changes(tmp_path, monkeypatch):
    import os
    monkeypatch.setattr(files, "CUDA_DIR", tmp_path)
    reads, read = [], files._read_split
    monkeypatch.setattr(files, "_read_split", lambda name: reads.append(name) or read(name))
    f = tmp_path / "k.cu"
    f.write_text("#ifndef K\n#define K\n__global__ void one() {}\n#endif\n")
    assert "one" in kernels.cuda_source("k.cu") and "one" in kernels.cuda_source("k.cu")
    assert reads == ["k.cu"]  # the second call came from the cache
    f.write_text("#ifndef K\n#define K\n__global__ void other() {}\n#endif\n")
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10 ** 9))  # a later time, as an editor's save
    assert "other" in kernels.cuda_source("k.cu") and reads == ["k.cu", "k.cu"]
