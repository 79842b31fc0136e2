"""How many blocks of a kernel one SM holds at once (its *occupancy*), from the SM's limits and the
kernel's registers and shared memory, and the grid that fills the GPU exactly once (a *persistent*
grid: SMs × resident blocks per SM).

An SM keeps a block resident until the block ends; it takes a new one while all of these fit:
threads (2,048 on an H100), blocks (32), 32-bit registers (65,536, given to each warp in units of
256) and shared memory (228 KiB, plus 1 KiB the system reserves per block). The registers per
thread come from the compiler (``ptxas -v``, see :func:`kernel_resources`).

>>> occ = blocks_per_sm(256, registers=32)          # on an H100
>>> occ.blocks, occ.limited_by, f"{occ.fraction:.0%}", occ.grid
(8, 'threads', '100%', 1056)
>>> blocks_per_sm(512, registers=48).blocks         # 48 registers: two 512-thread blocks, not four
2
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from . import hardware
from .mode import ON_GPU


@dataclass(frozen=True)
class SMLimits:
    """What one SM of a GPU holds at once, and how many SMs the GPU has (:func:`limits_of` reads them
    from :mod:`gpu_course.hardware`'s tables)."""
    name: str
    sms: int                   # streaming multiprocessors
    threads: int = 2048        # resident threads per SM
    blocks: int = 32           # resident blocks per SM
    registers: int = 65536     # 32-bit registers per SM
    shared: int = 228 * 1024   # bytes of shared memory per SM that blocks can use
    reserved_shared: int = 1024  # bytes the system reserves per resident block (sm_80 and newer)
    register_unit: int = 256   # a warp's registers are allocated in multiples of this
    warp: int = 32

    @property
    def warps(self) -> int:
        """Resident warps per SM (64 on an H100)."""
        return self.threads // self.warp


def limits_of(gpu: hardware.GPU, name: str | None = None) -> SMLimits:
    """The SM limits of ``gpu`` (a :data:`gpu_course.hardware.GPUS` entry), named ``name`` (default: the
    GPU's name and its ``sm_XY``).

    >>> limits_of(hardware.GPUS["Tesla T4"]).threads, limits_of(hardware.GPUS["NVIDIA L4"]).blocks
    (1024, 24)
    """
    a = gpu.arch
    return SMLimits(name or f"{gpu.name} ({gpu.sm})", sms=gpu.sms, threads=a.threads, blocks=a.blocks,
                    registers=a.registers, shared=a.shared_per_sm, reserved_shared=a.reserved_shared,
                    register_unit=a.register_unit, warp=a.warp)


H100 = limits_of(hardware.REFERENCE, f"{hardware.REFERENCE.short} ({hardware.REFERENCE.sm})")   # "H100 SXM (sm_90)"


def sm_limits() -> SMLimits:
    """This GPU's limits (:func:`gpu_course.hardware.this_gpu`); in cpu mode an H100's (:data:`H100`), or
    the profile's GPU's under ``COURSE_GPU_PROFILE`` (a T4's: 1,024 threads, 16 blocks, 64 KB per SM).

    >>> sm_limits().threads if not ON_GPU else 2048
    2048
    """
    if not ON_GPU and hardware.profile() is None:
        return H100
    return limits_of(hardware.this_gpu())


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM of a kernel launched with ``threads`` per block, the limit that
    binds, and the persistent grid (SMs × blocks) on ``limits``."""
    threads: int
    registers: int | None      # per thread; None: unknown (no compiler report)
    shared: int                # bytes per block
    blocks: int                # resident blocks per SM
    limited_by: str            # "threads", "registers", "shared memory" or "blocks"
    limits: SMLimits

    @property
    def fraction(self) -> float:
        """The fraction of the SM's warps the resident blocks fill."""
        return self.blocks * -(-self.threads // self.limits.warp) / self.limits.warps

    @property
    def grid(self) -> int:
        """Blocks in a grid that fills every SM exactly once: SMs × resident blocks per SM."""
        return self.limits.sms * self.blocks

    def __str__(self):
        regs = f"{self.registers} registers" if self.registers is not None else "registers unknown"
        shared = f", {self.shared:,} B shared" if self.shared else ""
        return (f"{self.threads} threads x {regs}{shared} -> {self.blocks} blocks/SM, limited by "
                f"{self.limited_by} ({self.fraction:.0%} of the warps); persistent grid {self.limits.sms} x "
                f"{self.blocks} = {self.grid:,} blocks")


def blocks_per_sm(threads: int, registers: int | None = None, shared: int = 0,
                  limits: SMLimits = H100) -> Occupancy:
    """How many blocks of ``threads`` threads, each thread using ``registers`` registers and each
    block ``shared`` bytes of shared memory, one SM of ``limits`` holds at once. ``registers=None``
    (unknown) counts only threads, blocks and shared memory.

    >>> str(blocks_per_sm(1024, registers=64))
    '1024 threads x 64 registers -> 1 blocks/SM, limited by registers (50% of the warps); persistent grid 132 x 1 = 132 blocks'
    >>> blocks_per_sm(256, shared=48 * 1024).limited_by
    'shared memory'
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise ValueError(f"blocks_per_sm: threads per block must be an int from 1 to 1024, got {threads!r}")
    if registers is not None and not 1 <= registers <= 255:
        raise ValueError(f"blocks_per_sm: a thread has 1 to 255 registers, got {registers!r}")
    if shared < 0:
        raise ValueError(f"blocks_per_sm: shared memory per block cannot be negative, got {shared}")
    warps = -(-threads // limits.warp)
    by = {"threads": limits.threads // (warps * limits.warp), "blocks": limits.blocks}
    if registers is not None:
        per_warp = -(-registers * limits.warp // limits.register_unit) * limits.register_unit
        by["registers"] = (limits.registers // per_warp) // warps
    if shared:
        by["shared memory"] = limits.shared // (shared + limits.reserved_shared)
    limited_by = min(by, key=by.get)
    return Occupancy(threads, registers, shared, by[limited_by], limited_by, limits)


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas -v`` reports for one kernel."""
    registers: int             # per thread
    shared: int                # bytes of static shared memory per block
    spilled: int               # bytes of spill stores (0 is what you want)


def parse_ptxas(log: str) -> dict:
    """``{kernel: KernelResources}`` from the output of ``nvcc -Xptxas -v`` (names demangled to
    ``name<args>`` where ``c++filt`` is available, else left mangled).

    >>> log = '''ptxas info    : Compiling entry function '_Z8square_kPKfPfi' for 'sm_90'
    ... ptxas info    : Function properties for _Z8square_kPKfPfi
    ...     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ... ptxas info    : Used 10 registers, used 0 barriers'''
    >>> parse_ptxas(log)
    {'square_k': KernelResources(registers=10, shared=0, spilled=0)}
    """
    found, current, spill = {}, None, 0
    for line in log.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            current, spill = _demangle(m.group(1)), 0
        elif current and (m := re.search(r"(\d+) bytes spill stores", line)):
            spill = int(m.group(1))
        elif current and (m := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            found[current] = KernelResources(int(m.group(1)), int(smem.group(1)) if smem else 0, spill)
    return found


def _demangle(name: str) -> str:
    """``_Z13square_fast_kILi1EEvPKfPfi`` -> ``square_fast_k<1>`` (the name as the source spells it)."""
    tool = shutil.which("c++filt")
    if not tool:
        return name
    try:
        full = subprocess.run([tool, name], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return name
    full = re.sub(r"^void\s+", "", full)                     # a kernel returns void
    depth = 0
    for k, ch in enumerate(full):                           # drop the parameter list: the first
        depth += (ch == "<") - (ch == ">")                  # "(" outside template brackets
        if ch == "(" and depth == 0:
            return full[:k]
    return full


def kernel_resources(cuda_src: str, cpp_src: str, funcs: list, arch: str | None = None) -> dict | None:
    """Registers and shared memory of every kernel of ``cuda_src``, from ``nvcc -Xptxas -v`` on the
    kernels alone (load_cuda's device unit, its flags): ``{"square_fast_k<1>": KernelResources(...)}``.

    ``arch`` defaults to this GPU's, and in cpu mode to an H100's (``-arch=sm_90``): the compiler
    needs the CUDA toolkit, not a GPU. Returns ``None`` where nvcc is not installed (or, in cpu mode,
    cannot compile here).
    """
    from .cuda import gpu_build
    if arch is None and not ON_GPU:
        arch = "-arch=sm_90"
    try:
        cmd = gpu_build.nvcc_command(extra_cuda_cflags=["-Xptxas", "-v"], arch=arch)
    except Exception:  # no CUDA toolchain that torch knows of
        return None
    if not Path(cmd[0]).exists():
        return None
    device_unit = gpu_build.make_units(cuda_src, cpp_src, funcs).device    # kernels only, no torch
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "k.cu").write_text(device_unit)
        r = subprocess.run(cmd + ["-cubin", "k.cu", "-o", "k.cubin"], cwd=d, capture_output=True,
                           text=True, timeout=300)
    if r.returncode != 0:
        if not ON_GPU:  # a toolkit that cannot compile here (e.g. a host compiler it does not support)
            return None
        raise RuntimeError("kernel_resources: nvcc failed:\n" + (r.stdout + r.stderr)[-2000:])
    return parse_ptxas(r.stdout + r.stderr)


def occupancy_of(kernels, cuda_src: str, cpp_src: str, funcs: list, threads: int,
                 limits: SMLimits | None = None) -> dict:
    """``{kernel: Occupancy}`` for each name in ``kernels`` (as the source spells it, e.g.
    ``"square_fast_k<1>"``) launched with ``threads`` per block on ``limits`` (default: this GPU's,
    in cpu mode an H100's), registers and static shared memory from :func:`kernel_resources`.
    Without nvcc the registers are unknown and only threads and blocks count (the printed line says
    "registers unknown")."""
    limits = limits or sm_limits()
    found = kernel_resources(cuda_src, cpp_src, funcs)
    out = {}
    for k in kernels:
        if found is not None and k not in found:
            raise KeyError(f"occupancy_of: no kernel {k!r} in the compiler's report; it has: "
                           f"{', '.join(sorted(found))}")
        res = found[k] if found is not None else None
        out[k] = blocks_per_sm(threads, res.registers if res else None, res.shared if res else 0, limits)
    return out


def stand_in(limits: SMLimits, sms: int) -> SMLimits:
    """The same SM with fewer of them: a small grid of the same shape for a slow emulation.

    >>> stand_in(H100, 2).sms, stand_in(H100, 2).threads
    (2, 2048)
    """
    return replace(limits, name=f"{limits.name}, {sms} SMs standing in for {limits.sms}", sms=sms)
