"""Unit tests of gpu_course/occupancy.py: resident blocks per SM from an SM's limits, the ptxas
report, and the persistent grid (CPU; the compiler tests need nvcc, not a GPU)."""
import shutil

import pytest

import utils
from gpu_course import occupancy
from gpu_course.kernels import elementwise

H100 = occupancy.H100


@pytest.mark.parametrize("threads,regs,shared,blocks,limit", [
    (256, 32, 0, 8, "threads"),          # full occupancy: 8 x 256 = 2,048 threads
    (128, None, 0, 16, "threads"),       # registers unknown: threads and blocks only
    (32, 16, 0, 32, "blocks"),           # 64 blocks of threads would fit, an SM takes 32
    (512, 48, 0, 2, "registers"),        # 48 x 32 = 1,536 registers a warp: 42 warps, two 16-warp blocks
    (256, 64, 0, 4, "registers"),        # 2,048 registers a warp: 32 warps
    (1024, 64, 0, 1, "registers"),
    (128, 255, 0, 2, "registers"),       # 8,160 -> 8,192 registers a warp: 8 warps, two 4-warp blocks
    (256, 32, 48 * 1024, 4, "shared memory"),   # 228 KiB / (48 + 1 reserved) KiB
    (256, 32, 100 * 1024, 2, "shared memory"),
    (100, 32, 0, 16, "threads"),         # 100 threads take 4 warps (128 thread slots)
])
def test_blocks_per_sm_h100(threads, regs, shared, blocks, limit):
    occ = occupancy.blocks_per_sm(threads, regs, shared, H100)
    assert (occ.blocks, occ.limited_by) == (blocks, limit)
    assert occ.grid == 132 * blocks
    assert 0 < occ.fraction <= 1


def test_fraction_and_text():
    occ = occupancy.blocks_per_sm(512, registers=48)
    assert occ.fraction == pytest.approx(0.5)
    assert str(occ) == ("512 threads x 48 registers -> 2 blocks/SM, limited by registers (50% of the warps); "
                        "persistent grid 132 x 2 = 264 blocks")
    assert "registers unknown" in str(occupancy.blocks_per_sm(256))
    assert "4,096 B shared" in str(occupancy.blocks_per_sm(256, 32, 4096))


@pytest.mark.parametrize("kwargs", [dict(threads=0), dict(threads=1025), dict(threads=2.5), dict(threads=True),
                                    dict(threads=256, registers=0), dict(threads=256, registers=256),
                                    dict(threads=256, shared=-1)])
def test_blocks_per_sm_refuses_impossible_launches(kwargs):
    with pytest.raises(ValueError, match="blocks_per_sm"):
        occupancy.blocks_per_sm(**kwargs)


def test_limits_and_stand_in():
    if not utils.ON_GPU:
        assert occupancy.sm_limits() == H100
    small = occupancy.stand_in(H100, 2)
    assert (small.sms, small.threads, small.registers) == (2, 2048, 65536) and "2 SMs" in small.name
    assert occupancy.blocks_per_sm(256, 32, limits=small).grid == 16
    assert H100.warps == 64


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6tile_kPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z6tile_kPKfPfi
    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem
ptxas info    : Compiling entry function 'plain_k' for 'sm_90'
ptxas info    : Function properties for plain_k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""


def test_parse_ptxas():
    found = occupancy.parse_ptxas(PTXAS_LOG)
    tile = "tile_k" if shutil.which("c++filt") else "_Z6tile_kPKfPfi"
    assert found[tile] == occupancy.KernelResources(255, 8192, 8)
    assert found["plain_k"] == occupancy.KernelResources(12, 0, 0)


@pytest.mark.skipif(not shutil.which("c++filt"), reason="needs c++filt")
def test_demangle_keeps_template_arguments():
    assert occupancy._demangle("_Z13square_fast_kILi1EEvPKfPfi") == "square_fast_k<1>"
    assert occupancy._demangle("_Z12square_vec_kPKfPfi") == "square_vec_k"


@pytest.fixture(scope="module")
def fast_source():
    src, funcs = elementwise.source("fast"), elementwise.functions("fast")
    return src, "\n".join(utils.get_sig(f, src) for f in funcs), funcs


def test_occupancy_of_the_grid_stride_kernels(fast_source):
    if occupancy.kernel_resources(*fast_source) is None:
        pytest.skip("needs nvcc")
    occ = occupancy.occupancy_of(["square_fast_k<1>", "gelu_fast_k<8>"], *fast_source, threads=256, limits=H100)
    assert occ["square_fast_k<1>"].registers <= 32 and occ["square_fast_k<1>"].blocks == 8
    assert occ["gelu_fast_k<8>"].registers > occ["square_fast_k<1>"].registers
    with pytest.raises(KeyError, match="square_fast_k<3>"):
        occupancy.occupancy_of(["square_fast_k<3>"], *fast_source, threads=256, limits=H100)


def test_occupancy_of_without_nvcc(fast_source, monkeypatch):
    monkeypatch.setattr(occupancy, "kernel_resources", lambda *a, **k: None)
    occ = occupancy.occupancy_of(["square_fast_k<1>"], *fast_source, threads=512, limits=H100)
    assert occ["square_fast_k<1>"].registers is None and occ["square_fast_k<1>"].blocks == 4


def test_kernel_resources_without_a_working_nvcc(fast_source, monkeypatch, tmp_path):
    from gpu_course.cuda import gpu_build
    broken = tmp_path / "nvcc"
    broken.write_text("#!/bin/sh\necho 'unsupported GNU version' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr(gpu_build, "nvcc_command", lambda **kw: [str(broken)])
    if utils.ON_GPU:
        with pytest.raises(RuntimeError, match="unsupported GNU version"):
            occupancy.kernel_resources(*fast_source)
    else:
        assert occupancy.kernel_resources(*fast_source) is None
    monkeypatch.setattr(gpu_build, "nvcc_command", lambda **kw: [str(tmp_path / "missing-nvcc")])
    assert occupancy.kernel_resources(*fast_source) is None
