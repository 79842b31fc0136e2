"""gpu_course.kernels.listing: the parts of a CUDA C file that a notebook's text reads, with what it leaves out
counted, so that a listing stays short and hides nothing."""
import re

import pytest

from gpu_course.kernels import cuda_source, listing
from gpu_course.kernels import reductions, tensor_cores as tc


def _shown_and_left(text):
    marks = [l for l in text.splitlines() if re.fullmatch(r"\s*// \.\.\. \(\d+ lines? left out\)", l)]
    return len(text.splitlines()) - len(marks), sum(int(re.search(r"\((\d+)", l).group(1)) for l in marks)


@pytest.mark.parametrize("path, names", [
    ("matmul/08_warptiling.cu", ["mm_warp_k"]),
    ("tensor_cores/05_wgmma_tma.cu", ["wgmma_tma_k", "wg_desc"]),
    ("matmul/10_async_pipeline.cu", [("for (int kt = 0; kt < tiles",)]),
    ("scan/04_three_pass.cu", ["check_scan", ("for (int base",)]),
])
def test_a_listing_shows_every_line_or_counts_it(path, names):
    text = listing(path, names, max_lines=None)
    shown, left = _shown_and_left(text)
    assert shown + left == len(cuda_source(path).rstrip().splitlines())


def test_definitions_come_in_the_files_order_with_their_comment():
    text = listing("tensor_cores/05_wgmma_tma.cu", ["wgmma_tma_k", "wg_desc"], max_lines=None)
    assert text.index("wg_desc(const void* tile") < text.index("wgmma_tma_k(const __grid_constant__")
    kernel = text.splitlines()[[i for i, l in enumerate(text.splitlines()) if "wgmma_tma_k(" in l][0] - 1]
    assert not kernel.startswith("// ... (")        # the line above the kernel is its own comment or template


def test_a_part_ends_where_its_braces_close_and_its_gaps_are_indented():
    text = listing("scan/01_kogge_stone.cu", [("for (int s",)])
    lines = text.splitlines()
    assert lines[0] == "    // ... (7 lines left out)" and lines[1].lstrip().startswith("for (int s")
    assert lines[-2] == "    }" and lines[-1].endswith("lines left out)")
    assert listing("scan/01_kogge_stone.cu", [("for (int s", "sh[t] += left")]).splitlines()[-2].strip() == "sh[t] += left;"


def test_no_names_leaves_out_only_the_host_functions():
    text = listing("scan/04_three_pass.cu", max_lines=None)
    assert "static void check_scan(" not in text and "void scan_three_pass(" not in text
    assert "__global__" in text and "lines left out)" in text and "\n\n\n" not in text
    assert reductions.kernel_source("scan/04_three_pass.cu") == text + "\n"


def test_mistakes_name_what_the_file_has():
    with pytest.raises(ValueError, match=r"defines no nothing_here; it defines .*scan_kogge_stone_k"):
        listing("scan/01_kogge_stone.cu", ["nothing_here"])
    with pytest.raises(ValueError, match=re.escape("no line of scan/01_kogge_stone.cu contains 'while ('")):
        listing("scan/01_kogge_stone.cu", [("while (",)])
    with pytest.raises(ValueError, match=r"more than max_lines=40: lines \d+-\d+ \(\d+\)"):
        listing("matmul/08_warptiling.cu", ["mm_warp_k"])
    with pytest.raises(FileNotFoundError, match="no file"):
        listing("scan/99_missing.cu", ["x"])


def test_tensor_cores_listing_is_the_same_reader():
    assert tc.listing("tc_ptx.cuh", ["smem_addr"]) == listing("tensor_cores/tc_ptx.cuh", ["smem_addr"])
