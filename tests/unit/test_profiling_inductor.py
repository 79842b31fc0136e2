"""Unit tests of gpu_course/profiling.py and gpu_course/inductor.py (CPU)."""
import sys
import types

import torch

from gpu_course import inductor, profiling

NCU_TEXT = """==PROF== Connected to process 123
==PROF== Profiling "vectorized_elementwise_kernel": 0%....50%....100% - 11 passes
    DRAM Frequency                  Ghz         2.62
    SM Frequency                    Ghz         1.59
    Memory Throughput                 %        88.65
    DRAM Throughput                   %        88.65
    Duration                         us       262.34
    Compute (SM) Throughput           %         5.71
    Memory Throughput           Tbyte/s         2.97
    Elapsed Cycles                cycle      416,855
"""


def test_parse_ncu_reads_the_metrics_and_their_units():
    r = profiling.parse_ncu(NCU_TEXT)
    assert r.problem is None and "vectorized_elementwise_kernel" in r.kernel
    assert r.duration_us == 262.34 and r.dram_pct == 88.65 and r.sm_pct == 5.71
    assert r.bytes_per_s == 2.97e12                     # the Tbyte/s row, not the % row of the same name
    assert r.metric("Elapsed Cycles", {"cycle": 1}) == 416855
    assert "Duration" in str(r) and "262.34" in str(r)


def test_parse_ncu_without_metrics_says_why():
    r = profiling.parse_ncu("==ERROR== ERR_NVGPUCTRPERM - no permission\n", returncode=1)
    assert r.rows == [] and r.duration_us is None
    assert "exit code 1" in r.problem and "ERR_NVGPUCTRPERM" in r.problem and "developer.nvidia.com" in str(r)


def test_run_ncu_without_ncu_returns_a_report(monkeypatch, tmp_path):
    monkeypatch.setattr(profiling, "find_ncu", lambda: None)
    r = profiling.run_ncu(tmp_path / "s.py", "vectorized")
    assert r.problem.startswith("skipped: ncu (Nsight Compute) is not installed") and r.rows == []
    assert "\n" not in str(r)   # one line in the notebook


def test_run_ncu_runs_the_command_and_saves_the_text(monkeypatch, tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\ncat <<'X'\n" + NCU_TEXT + "X\n")
    fake.chmod(0o755)
    monkeypatch.setattr(profiling, "find_ncu", lambda: str(fake))
    script = tmp_path / "s.py"
    r = profiling.run_ncu(script, "vectorized", save_to=tmp_path / "out.txt", root=tmp_path)
    assert r.duration_us == 262.34 and (tmp_path / "out.txt").read_text().startswith("==PROF==")
    assert r.command.startswith("ncu --kernel-name regex:vectorized") and r.command.endswith("python3 s.py")


def test_kernel_times_leaves_out_the_profilers_own_rows():
    cuda = torch.autograd.DeviceType.CUDA
    row = lambda key, us, dev=cuda: types.SimpleNamespace(key=key, count=2, self_device_time_total=us, device_type=dev)
    prof = types.SimpleNamespace(key_averages=lambda: [row("gemm", 10.0), row("Activity Buffer Request", 10.0),
                                                       row("aten::mm", 10.0, torch.autograd.DeviceType.CPU),
                                                       row("idle", 0.0)])
    assert profiling.kernel_times(prof) == {"gemm": (2, 10.0)}


def test_readable_frames_hides_cell_files_and_addresses():
    s = "/tmp/ipykernel_1/22.py(2):_f;<built-in_method_pow_of_type_object_at_0xdeadbeef>;x.py(3):_g"
    assert profiling.readable_frames(s) == "<cell>(2):_f;<built-in_method_pow_of_type_object>;x.py(3):_g"



def test_frames_from_keeps_the_whole_stack_without_the_name():
    assert profiling.frames_from("<module>;three_squares;pow", "nowhere") == "<module>;three_squares;pow"


def test_operator_folded_sums_by_stack_and_ends_every_stack_at_an_operator():
    from torch.profiler import ProfilerActivity, profile

    def three_squares(a):
        return torch.square(a), a * a, a ** 2
    a = torch.rand(1000)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                 experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True)) as prof:
        for _ in range(3):
            three_squares(a)
    folded = profiling.operator_folded(prof, "three_squares")
    assert folded and all(s.split(";")[-1].startswith("aten::") for s in folded)    # an operator at each end
    assert all(s.split(";")[0].endswith("three_squares") for s in folded)
    assert len(folded) == len(set(folded))                                          # distinct: summed by stack
    tops = {s for s in folded if s.count("aten::") == 1 or s.endswith("aten::square;aten::pow")}
    assert any(s.endswith("three_squares;aten::mul") for s in tops)                  # a * a: straight into C
    assert any(s.endswith("aten::square;aten::pow") for s in tops)                   # torch.square calls pow
    assert any("wrapped" in s and s.endswith("aten::pow") for s in tops)             # a ** 2 through the wrapper
    assert list(folded.values()) == sorted(folded.values(), reverse=True)


OUTPUT_CODE = """V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code] Output code:
V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code] triton_poi_fused_gelu_1 = async_compile.triton('triton_poi_fused_gelu_1', '''
V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code] @triton.jit
V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code] def triton_poi_fused_gelu_1(in_ptr0):
V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code]     pass
V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code] ''', device_str='cuda')
V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code]         extern_kernels.mm(buf1, x, out=buf2)
V1121 20:19:30.315000 77 torch/_inductor/graph.py:2045] [0/0] [__output_code]         extern_kernels.addmm(b, buf3, w, alpha=1, beta=1, out=buf4)
"""


def test_output_code_kernels_and_library_calls():
    kernels = inductor.kernels_in(OUTPUT_CODE)
    assert list(kernels) == ["triton_poi_fused_gelu_1"]
    assert kernels["triton_poi_fused_gelu_1"].startswith("@triton.jit\ndef triton_poi_fused_gelu_1(")
    assert inductor.extern_calls(OUTPUT_CODE) == ["mm", "addmm"]
    assert inductor.clean_log(OUTPUT_CODE).splitlines()[0] == "Output code:"


def test_capture_logs_catches_a_recompilation():
    graphs = []
    f = torch.compile(lambda t: t + 1, backend=lambda gm, ex: graphs.append(1) or gm.forward)
    with inductor.capture_logs(recompiles=True) as cap:
        f(torch.ones(3))
        f(torch.ones(3, 2))                     # a new rank: a recompilation, logged
    assert len(graphs) == 2 and "Recompiling function" in cap.text
    assert "rank mismatch" in cap.clean and not cap.clean.startswith("V")
    with inductor.capture_logs() as quiet:       # logs are back to the default after the block
        f(torch.ones(3, 2, 2))
    assert quiet.text == ""


def test_shown_path_hides_the_user(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert inductor.shown_path(tmp_path / "ab" / "c.py") == "$TORCHINDUCTOR_CACHE_DIR/ab/c.py"
    assert inductor.shown_path(tmp_path) == "$TORCHINDUCTOR_CACHE_DIR"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    import getpass, tempfile
    from pathlib import Path
    assert inductor.shown_path(Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}" / "triton" / "0") \
        == "/tmp/torchinductor_<user>/triton/0"
    assert inductor.shown_path(Path.home() / ".triton" / "cache") == "~/.triton/cache"


def test_slice_loads_rule_and_ptx():
    """The vector-load rule of notebook 08's exercise 1, and the PTX reading it uses on a GPU."""
    assert inductor.slice_loads(4, 1600) == ("ld.global.v4.b32", 2)
    assert inductor.slice_loads(2, 1600) == ("ld.global.b32", 8)  # 8-byte aligned is not enough
    assert inductor.slice_loads(8, 4099) == ("ld.global.b32", 8)  # a length not a multiple of 16

    class Handle:
        asm = {"ptx": "@%p1 ld.global.v4.b32 { %r1 }, [ %rd1 + 0 ];\n@%p2 ld.global.v4.b32 { %r5 }, [ %rd2 + 0 ];"}
    assert inductor.slice_loads(1, 7, Handle()) == ("ld.global.v4.b32", 2)  # the PTX wins over the rule


def test_compiled_variants_marks_the_kept_config_and_finds_each_ptx(monkeypatch, tmp_path):
    from types import SimpleNamespace as NS

    import gpu_course.inductor as ind

    cfg = lambda xb, w: NS(kwargs={"XBLOCK": xb}, num_warps=w)   # noqa: E731  (a triton.Config's two fields)
    small, big = cfg(256, 4), cfg(1024, 4)
    results = [NS(config=small, kernel=NS(asm={"ptx": "ld.global.v2.b32"})), NS(config=big, kernel=NS())]
    (tmp_path / "abc").mkdir()
    (tmp_path / "abc" / "k0.ptx").write_text("ld.global.v4.b32")   # the kept one: only in Triton's cache
    launcher = NS(config=big, cache_hash="abc")
    fake = NS(k0=NS(launchers=[launcher], compile_results=results))
    monkeypatch.setattr(ind, "_loaded_modules", lambda: [fake])
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    got = ind.compiled_variants("k0")
    assert got == [{"config": "XBLOCK=256, num_warps=4", "kept": False, "ptx": "ld.global.v2.b32"},
                   {"config": "XBLOCK=1024, num_warps=4", "kept": True, "ptx": "ld.global.v4.b32"}]
    assert ind.global_accesses(got[1]["ptx"]) == {"loads": ["ld.global.v4.b32"], "stores": []}


def test_inductors_worker_triton_cache_is_searched_for_a_kernels_ptx():
    # Inductor's workers compile its kernels with TRITON_CACHE_DIR set to triton_cache_dir(device), not Triton's default
    from pathlib import Path
    from torch._inductor.runtime.cache_dir_utils import triton_cache_dir
    from gpu_course import inductor
    assert Path(triton_cache_dir(0)) in inductor._triton_caches()


def test_run_ncu_script_hands_the_script_its_build(monkeypatch, tmp_path):
    fake = tmp_path / "ncu"     # stands in for ncu: prints its own options, then runs the profiled command
    fake.write_text(f"#!{sys.executable}\nimport subprocess, sys\nprint(' '.join(sys.argv[1:3]))\n"
                    "subprocess.run(sys.argv[-3:])\n")
    fake.chmod(0o755)
    monkeypatch.setattr(profiling, "find_ncu", lambda: str(fake))
    r, why = profiling.run_ncu_script(["--metrics", "x"], "import json, sys\nprint(json.load(open(sys.argv[1]))['n'] * 2)\n",
                                      {"n": 21})
    assert why is None and r.stdout.split() == ["--metrics", "x", "42"]
    monkeypatch.setattr(profiling, "find_ncu", lambda: None)
    assert profiling.run_ncu_script([], "", {}) == (None, "ncu not found: Nsight Compute comes with the CUDA toolkit; "
                                                          "put its ncu on PATH.")


def test_profile_grids_reads_a_fake_ncu_and_says_what_is_missing(monkeypatch, tmp_path):
    from gpu_course.lessons import elementwise_ncu as N
    head = ",".join(f'"{c}"' for c in ["ID", "Kernel Name", "Grid Size", *N.METRICS])
    line = lambda g: ",".join(f'"{v}"' for v in ["0", "gelu_fast_k<1>", f"({g}, 1, 1)", "5", *"123456"])
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\ncat <<'X'\n" + "\n".join([head, ",".join(['""'] * 10), line(8), line(16)]) + "\nX\n")
    fake.chmod(0o755)
    monkeypatch.setattr(profiling, "find_ncu", lambda: str(fake))
    c = N.profile_grids("", "", [], 1024, 64, {"a": 8, "b": 16})
    assert c.problem is None and list(c.values) == ["a", "b"] and c.command.startswith("$ ncu --kernel-name")
    c = N.profile_grids("", "", [], 1024, 64, {"a": 8, "c": 32})
    assert c.problem.startswith("ncu ran (exit code 0) but reported no metrics for every grid")
