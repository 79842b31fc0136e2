"""A learner's mistake in CUDA C never kills, hangs or poisons the Python process running the CPU
emulation (gpu_course/cuda/emulation): each case runs in a subprocess with a time limit, must raise a
clear Python exception (the message is checked), and the same process must then run a correct
kernel.

* writes and reads past the end through pointers derived in the kernel (``float* row = out + 5``,
  ``p++``, ``p += k``, ``reinterpret_cast<float4*>``, a ``__device__`` function's parameter, pointers
  into ``__shared__`` arrays and into the dynamic shared memory): CudaEmulationError naming the
  pointer, the element reached, the tensor's size and the line (before this, the heap was corrupted
  and Python aborted with ``free(): invalid next size``);
* endless loops and spin-waits: Ctrl-C (SIGINT) stops the launch within a second with a
  KeyboardInterrupt naming the kernel and what its threads do; a spin-wait on a flag that a later
  thread of the block sets ends, as on a GPU with independent thread scheduling;
* integer division by zero, by a literal 0 too: a CudaEmulationError naming the kernel and the line
  where the rewriting checks the divisor, the kernel and the thread where the CPU traps it (SIGFPE);
  and a trap the compiler plants for undefined behaviour (SIGILL) the same way.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from gpu_course.cuda import cuda_begin
from gpu_course.cuda import emulation as cuda_emu

ROOT = Path(__file__).resolve().parents[2]

# A correct kernel that every child runs after the mistakes: the process must still work.
GOOD = r'''
__global__ void square_k(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * x[i];
}
void square(torch::Tensor x, torch::Tensor out) {
    square_k<<<cdiv(x.numel(), 64), 64>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
'''

PRELUDE = '''
import sys, torch
from gpu_course.cuda import cuda_begin
from gpu_course.cuda import emulation as cuda_emu
from gpu_course.cuda.emulation import CudaEmulationError

def load(src, funcs):
    cpp = "\\n".join(f"void {f}(torch::Tensor x, torch::Tensor out, int64_t which);" for f in funcs)
    return cuda_emu.load(cuda_begin + src + GOOD, cpp + "\\nvoid square(torch::Tensor x, torch::Tensor out);",
                         list(funcs) + ["square"], name=NAME, nvcc_check=False)

def alive(m):
    x = torch.randn(300); out = torch.empty(300)
    m.square(x, out)
    assert torch.equal(out, x * x)
    print("ALIVE", flush=True)
'''


def line_of(src: str, marker: str) -> int:
    """The line of cuda_begin + src (cuda_src's numbering) holding ``marker``."""
    lines = (cuda_begin + src).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def child(name: str, src: str, body: str) -> subprocess.Popen:
    """A Python process that builds ``src`` (plus GOOD) and runs ``body``; stdout and stderr piped."""
    code = (f"NAME = {name!r}\nGOOD = {GOOD!r}\nSRC = {src!r}\n" + PRELUDE + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=ROOT)


def finish(p: subprocess.Popen, timeout: float, before: str = "") -> str:
    """The child's whole output (``before``: what was already read); it must exit with 0 in time."""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        pytest.fail(f"the child did not finish within {timeout} s:\n{before}{out}")
    out = before + out
    assert p.returncode == 0, f"the child died (exit code {p.returncode}):\n{out}"
    return out


# ---- out-of-bounds accesses through pointers derived inside the kernel
OOB = r'''
__device__ float4 load4(const float* p, int row, int col, int ld) {
    const float* q = p + (size_t)row * ld + col;           // the course's own pattern (rung 6)
    return *reinterpret_cast<const float4*>(q);             // OOB4
}
__device__ void put(float* p, int i, float v) { p[i] = v; }  // PUT
__global__ void mistakes_k(const float* x, float* out, int n, int which) {
    int i = threadIdx.x;
    __shared__ float tile[4][8];
    extern __shared__ float dyn[];
    if (which == 0) { float* row = out + 5; row[i] = 1.0f; }              // ROW
    if (which == 1) { const float* p = x; for (int k = 0; k < n; k++) p++; out[0] = *p + i; }  // DEREF
    if (which == 2) { float* p = out; p += n + i; p[0] = 2.0f; }          // PLUSEQ
    if (which == 3) { float4 v = load4(x, i, 0, 4); out[0] = v.x; }
    if (which == 4) { put(out + n / 2, i, 3.0f); }
    if (which == 5) { float* s = tile[1]; s[8 * 3 + i] = 1.0f; }          // SHARED
    if (which == 6) { float* d = dyn + 4; d[i] = 1.0f; }                  // DYN
    if (which == 7) { *reinterpret_cast<float4*>(&out[n]) = make_float4(1, 2, 3, 4); }  // AMP
}
void mistakes(torch::Tensor x, torch::Tensor out, int64_t which) {
    mistakes_k<<<1, 32, 16 * sizeof(float)>>>(x.data_ptr<float>(), out.data_ptr<float>(), out.numel(), which);
}
'''

OOB_EXPECTED = {
    0: rf"out-of-bounds access to row\[3\] in kernel mistakes_k .* thread \(3,0,0\) at cuda_src line "
       rf"{line_of(OOB, '// ROW')}: row\[3\] is out\[8\] \(row points to out\[5\]\), past the end of out, which "
       rf"points to a Float tensor of 8 elements \(valid indices 0\.\.7\)",
    1: rf"out-of-bounds access to \*p in kernel mistakes_k .* thread \(0,0,0\) at cuda_src line "
       rf"{line_of(OOB, '// DEREF')}: \*p is x\[8\], past the end of x, which points to a Float tensor of 8",
    2: rf"out-of-bounds access to p\[0\] .* thread \(0,0,0\) at cuda_src line {line_of(OOB, '// PLUSEQ')}: "
       rf"p\[0\] is out\[8\] \(p points to out\[8\]\), past the end of out",
    3: rf"out-of-bounds access to \*reinterpret_cast<const float4\*>\(q\) .* thread \(2,0,0\) at cuda_src line "
       rf"{line_of(OOB, '// OOB4')}: \*reinterpret_cast<const float4\*>\(q\) is x\[8\.\.11\], past the end of x",
    4: rf"out-of-bounds access to p\[4\] .* thread \(4,0,0\) at cuda_src line {line_of(OOB, '// PUT')}: "
       rf"p\[4\] is out\[8\] \(p points to out\[4\]\)",
    5: rf"out-of-bounds access to s\[24\] .* thread \(0,0,0\) at cuda_src line {line_of(OOB, '// SHARED')}: "
       rf"s\[24\] is byte 128 of tile .* past the end of tile, which points to __shared__ tile \(128 bytes\)\. Guard",
    6: rf"out-of-bounds access to d\[12\] .* thread \(12,0,0\) at cuda_src line {line_of(OOB, '// DYN')}: "
       rf"d\[12\] is byte 64 of dyn .* the launch's 64 bytes of dynamic shared memory",
    7: rf"out-of-bounds access to \*reinterpret_cast<float4\*>\(&out\[n\]\) .* at cuda_src line "
       rf"{line_of(OOB, '// AMP')}: .* is out\[8\.\.11\]",
}


@pytest.mark.timeout(180)
def test_out_of_bounds_through_derived_pointers_raise_and_python_lives():
    p = child("mistakes_oob", OOB, f'''
        m = load(SRC, ["mistakes"])
        for which in {sorted(OOB_EXPECTED)}:
            x, out = torch.zeros(8), torch.zeros(8)
            try:
                m.mistakes(x, out, which)
                print(f"CASE {{which}}: no error", flush=True)
            except CudaEmulationError as e:
                print(f"CASE {{which}}: {{e}}", flush=True)
        alive(m)
    ''')
    out = finish(p, 150)
    for which, pattern in OOB_EXPECTED.items():
        line = next((ln for ln in out.splitlines() if ln.startswith(f"CASE {which}:")), "")
        assert re.search(pattern, line), f"case {which}: {line!r} does not match {pattern!r}\n{out}"
    assert "ALIVE" in out


# ---- endless loops and spin-waits: Ctrl-C, and progress as on a GPU
SPIN = r'''
__global__ void spin_k(int* flag) {
    if (threadIdx.x == 0) while (1) {}                                     // SPIN
    __syncthreads();
}
__global__ void barrier_loop_k(int* flag) {
    while (true) __syncthreads();                                          // BARRIER
}
__global__ void wait_later_block_k(volatile int* flag) {
    while (flag[blockIdx.x + 1] == 0) {}                                   // LATER
    flag[blockIdx.x] = 1;
}
__global__ void handoff_k(int* out) {
    __shared__ volatile int ready;
    if (threadIdx.x == 0) ready = 0;
    __syncthreads();
    if (threadIdx.x == 0) { while (ready == 0) {} out[0] = ready; }        // thread 31 sets it later
    if (threadIdx.x == 31) ready = 7;
}
void spin(torch::Tensor x, torch::Tensor out, int64_t which) {
    int* f = reinterpret_cast<int*>(out.data_ptr<float>());
    if (which == 0) spin_k<<<2, 32>>>(f);
    if (which == 1) barrier_loop_k<<<1, 64>>>(f);
    if (which == 2) wait_later_block_k<<<3, 1>>>(reinterpret_cast<volatile int*>(f));
    if (which == 3) handoff_k<<<4, 32>>>(f);
}
'''

SPIN_EXPECTED = {
    0: rf"KeyboardInterrupt: kernel spin_k \(launched at cuda_src line \d+\) was interrupted in block \(0,0,0\) .*"
       rf"thread \(0,0,0\) runs the loop at cuda_src line {line_of(SPIN, '// SPIN')}; threads \(1,0,0\)\.\.\(31,0,0\) "
       rf"wait at __syncthreads\(\)",
    # the interrupt finds each thread at the barrier, past it ("about to go on") or running the loop: any mix
    1: r"KeyboardInterrupt: kernel barrier_loop_k .*(wait at __syncthreads\(\)|runs? the loop) at "
       rf"cuda_src line {line_of(SPIN, '// BARRIER')}",
    2: rf"KeyboardInterrupt: kernel wait_later_block_k .* block \(0,0,0\) .* thread \(0,0,0\) runs the loop at "
       rf"cuda_src line {line_of(SPIN, '// LATER')}.*a later block writes waits forever",
}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ctrl_c_stops_an_endless_launch_and_python_lives():
    p = child("mistakes_spin", SPIN, f'''
        import signal   # Ctrl-C raises KeyboardInterrupt, as in a Jupyter kernel, even where the process that
        signal.signal(signal.SIGINT, signal.default_int_handler)   # started this one ignored SIGINT (inherited)
        m = load(SRC, ["spin"])
        x, out = torch.zeros(8), torch.zeros(8)
        m.spin(x, out, 3)   # a spin-wait on a flag that a later thread of the block sets: ends, as on a GPU
        print("HANDOFF", out[:1].view(torch.int32).item(), flush=True)
        for which in {sorted(SPIN_EXPECTED)}:
            out = torch.zeros(8)
            print(f"LAUNCH {{which}}", flush=True)
            try:
                m.spin(x, out, which)
                print(f"CASE {{which}}: finished", flush=True)
            except KeyboardInterrupt as e:
                print(f"CASE {{which}}: KeyboardInterrupt: {{e}}", flush=True)
        alive(m)
    ''')
    lines: queue.Queue = queue.Queue()  # the child's lines, read by a thread (a hung child never blocks us)
    threading.Thread(target=lambda: [lines.put(ln.rstrip("\n")) for ln in p.stdout] + [lines.put(None)],
                     daemon=True).start()
    seen = []

    def next_line(timeout):
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            p.kill()
            pytest.fail(f"no answer from the child within {timeout} s:\n" + "\n".join(seen))
        if line is not None:
            seen.append(line)
        return line

    while (line := next_line(60)) is not None:
        if line.startswith("LAUNCH"):
            time.sleep(1.0)
            p.send_signal(signal.SIGINT)
            answer = next_line(60)  # the launch stops: its KeyboardInterrupt is the child's next line
            assert answer is not None and answer.startswith(f"CASE {line.split()[1]}: KeyboardInterrupt"), \
                "the launch did not stop at Ctrl-C:\n" + "\n".join(seen)
    p.wait(timeout=30)
    out = "\n".join(seen)
    assert p.returncode == 0, f"the child died (exit code {p.returncode}):\n{out}"
    assert "HANDOFF 7" in out, out
    for which, pattern in SPIN_EXPECTED.items():
        line = next((ln for ln in out.splitlines() if ln.startswith(f"CASE {which}:")), "")
        assert re.search(pattern, line), f"case {which}: {line!r} does not match {pattern!r}\n{out}"
    assert "ALIVE" in out


# ---- integer division by zero
DIV = r'''
__global__ void div_literal_k(int* out) {
    out[threadIdx.x] = 100 / 0;                                            // LITERAL
}
__global__ void mod_zero_k(int* out, int d) {
    int k = threadIdx.x % (d - (int)threadIdx.x);                          // MOD
    out[threadIdx.x] = k;
}
__global__ void div_cast_zero_k(int* out) {
    out[threadIdx.x] = 100 / (int)0;      // a cast: not a checked divisor; at -O1 the CPU's division traps (SIGFPE)
}
__global__ void trap_k(int* out) {
    if (threadIdx.x == 2) __builtin_trap();   // what gcc -O2 compiles 100 / (int)0 into: ud2 (SIGILL)
    out[threadIdx.x] = 1;
}
void divide(torch::Tensor x, torch::Tensor out, int64_t which) {
    int* o = reinterpret_cast<int*>(out.data_ptr<float>());
    if (which == 0) div_literal_k<<<1, 4>>>(o);
    if (which == 1) mod_zero_k<<<1, 8>>>(o, 3);
    if (which == 2) div_cast_zero_k<<<1, 4>>>(o);
    if (which == 3) trap_k<<<1, 4>>>(o);
}
'''

DIV_EXPECTED = {
    0: rf"integer division by zero in kernel div_literal_k .* thread \(0,0,0\) at cuda_src line "
       rf"{line_of(DIV, '// LITERAL')}: the divisor of / or % is 0",
    1: rf"integer division by zero in kernel mod_zero_k .* thread \(3,0,0\) at cuda_src line {line_of(DIV, '// MOD')}",
    2: r"integer division by zero \(SIGFPE\) in kernel div_cast_zero_k .* thread \(0,0,0\)\. On a GPU the result "
       r"would be undefined; check the divisor",
    3: r"illegal instruction \(SIGILL\) in kernel trap_k .* thread \(2,0,0\): the compiler turned undefined "
       r"behaviour into a trap here, e.g. an integer division by 0",
}


@pytest.mark.timeout(180)
def test_integer_division_by_zero_raises_and_python_lives():
    p = child("mistakes_div", DIV, f'''
        m = load(SRC, ["divide"])
        for which in {sorted(DIV_EXPECTED)}:
            try:
                m.divide(torch.zeros(8), torch.zeros(8), which)
                print(f"CASE {{which}}: no error", flush=True)
            except CudaEmulationError as e:
                print(f"CASE {{which}}: {{e}}", flush=True)
        alive(m)
    ''')
    out = finish(p, 150)
    from gpu_course.cuda.emulation.toolchain import get_toolchain
    clang = "clang" in get_toolchain()["version"].lower()
    for which, pattern in DIV_EXPECTED.items():
        line = next((ln for ln in out.splitlines() if ln.startswith(f"CASE {which}:")), "")
        if which == 2 and clang and line == "CASE 2: no error":   # undefined behaviour: clang folds 100 / 0 away
            continue
        assert re.search(pattern, line), f"case {which}: {line!r} does not match {pattern!r}\n{out}"
    assert "ALIVE" in out


# ---- the rewriting itself (no compiler)
def test_transform_local_pointers_loops_and_divisors():
    src = r'''
template <class T> __device__ float first(const float* p, const T* q) { return p[0]; }
__global__ void k(float* out, const float* x, int n, int d) {
    float* row = out + 5, *r2 = out;
    const auto* a = x + 1;
    float* const c = out;
    void* v = out;
    float** pp = nullptr;
    for (int i = 0; i < n; i++) row[i] = 1.0f / d;
    for (int j = 0; j < TM; j += 4) out[j] = n % 7;
    while (n > 0) n--;
    for (unsigned u = n; u >= 0; u--) out[u] = &x[u] - x;
}
'''
    out = cuda_emu.transform(src).text
    assert out.count("\n") == src.count("\n")
    for text in [
        "__device__ float first(::cuda_emu::gptr<const float> p, const T* q)",  # T: deduced, left alone
        "::cuda_emu::gptr<float> row = ::cuda_emu::bound(out + 5), r2 = ::cuda_emu::bound(out);",
        "auto a = ::cuda_emu::aptr<true>(x + 1);",
        "const ::cuda_emu::gptr<float> c = ::cuda_emu::bound(out);",
        "void* v = out;", "float** pp = nullptr;",
        # a counting loop ends by itself: no tick; the divisor is checked
        'for (int i = 0; i < n; i++) ::cuda_emu::gat<1>(row, 9, "row", (i)) = 1.0f / ::cuda_emu::divisor(d, 9);',
        'for (int j = 0; j < TM; j += 4) ::cuda_emu::gat<1>(out, 10, "out", (j)) = n % 7;',
        "while (::cuda_emu::tick(11), (n > 0)) n--;",
        'for (unsigned u = n; ::cuda_emu::tick(12), ( u >= 0); u--) ::cuda_emu::gat<1>(out, 12, "out", (u)) = '
        '(x + (u)) - x;',
    ]:
        assert text in out, (text, out)
    unchecked = cuda_emu.transform(src, checked=False).text
    assert "gptr" not in unchecked and "gat<" not in unchecked
    assert "::cuda_emu::tick(11)" in unchecked and "::cuda_emu::divisor(d, 9)" in unchecked
