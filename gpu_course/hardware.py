"""The GPU facts the course uses, in one place: two tables and the questions asked of them.

* :data:`ARCHS`: what every GPU of one compute capability shares (resident threads, blocks and registers
  per SM, shared memory per SM and per block), from the CUDA C++ Programming Guide's table of technical
  specifications per compute capability;
* :data:`GPUS`: each GPU the course knows by the name torch reports (``torch.cuda.get_device_name()``): its
  compute capability, SMs, boost clock, spec-sheet peaks and links, each with the datasheet it comes from;
* :data:`FEATURES`: the feature gates (bf16, TF32, cp.async, wgmma and TMA, fp8, SDPA's flash and cuDNN
  backends), each the lowest compute capability that has it.

Adding a GPU of a known compute capability is one :data:`GPUS` entry (a new compute capability adds its
:data:`ARCHS` row too); occupancy, the spec-sheet peaks, the link bandwidth and the feature gates follow it.

:func:`this_gpu` is the running GPU's entry; in cpu mode the reference GPU's (:data:`REFERENCE`, an H100
SXM: the figures the notebooks quote). ``COURSE_FAKE_CC=7.5`` makes :func:`compute_capability`, the feature
gates and :func:`shared_memory_per_block` answer as on a GPU of that compute capability (Colab's T4), on a GPU
or in cpu mode, so that a notebook's skips can be checked without one.

``COURSE_GPU_PROFILE=t4`` (:data:`PROFILES`) goes further: every question of this module answers as the
profile's GPU (compute capability 7.5, 64 KB of shared memory per block, 40 SMs, 15 GiB of memory, so no
bf16, TF32, wgmma/TMA or SDPA flash/cuDNN), on a GPU or in cpu mode, so that each guard and each tile choice
follows a T4's limits. It is not a T4: the kernels still run on the GPU at hand, at its speed, and code
compiled ahead of time still targets it (``docs/GPU_PROFILE.md``).

>>> lookup("NVIDIA H100 80GB HBM3").sms, lookup("Tesla T4").cc, lookup("no such GPU")
(132, (7, 5), None)
>>> of_capability((8, 9))[0].name, arch_of((8, 9)).threads
('NVIDIA L4', 1536)
>>> supports("wgmma", (8, 0))[0], supports("wgmma", (9, 0))[0], supports("fp8", (8, 9))[0]
(False, True, True)
"""
from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass, field

import torch

from . import mode

KB = 1024
CC_ENV = "COURSE_FAKE_CC"  # e.g. "7.5": act as a GPU of that compute capability (to test the guards)
PROFILE_ENV = "COURSE_GPU_PROFILE"  # e.g. "t4": act as that GPU in every respect the guards ask about


@dataclass(frozen=True)
class Arch:
    """What one SM of every GPU of compute capability ``cc`` holds at once."""
    threads: int               # resident threads per SM
    blocks: int                # resident blocks per SM
    shared_per_sm: int         # bytes of shared memory per SM that blocks can use
    shared_per_block: int      # the most one block may use, bytes (above 48 KB with cudaFuncSetAttribute)
    registers: int = 65536     # 32-bit registers per SM
    registers_per_thread: int = 255
    reserved_shared: int = 0   # bytes the system reserves per resident block (1 KB from sm_80 on)
    register_unit: int = 256   # a warp's registers are allocated in multiples of this
    warp: int = 32


# CUDA C++ Programming Guide (12.x), "Technical Specifications per Compute Capability": maximum resident
# threads and blocks per SM, maximum shared memory per SM and per block (opt-in), 64 K registers per SM and
# 255 per thread for all of these; the 1 KB reserved per block: its "Shared Memory" sections for 8.x and 9.0.
ARCHS = {
    (7, 0): Arch(2048, 32, 96 * KB, 96 * KB),                                # Volta (V100)
    (7, 2): Arch(2048, 32, 96 * KB, 96 * KB),                                # Xavier
    (7, 5): Arch(1024, 16, 64 * KB, 64 * KB),                                # Turing (T4, RTX 20xx)
    (8, 0): Arch(2048, 32, 164 * KB, 163 * KB, reserved_shared=KB),          # Ampere (A100)
    (8, 6): Arch(1536, 16, 100 * KB, 99 * KB, reserved_shared=KB),           # Ampere (A10, RTX 30xx)
    (8, 7): Arch(1536, 16, 164 * KB, 163 * KB, reserved_shared=KB),          # Orin
    (8, 9): Arch(1536, 24, 100 * KB, 99 * KB, reserved_shared=KB),           # Ada (L4, L40S, RTX 40xx)
    (9, 0): Arch(2048, 32, 228 * KB, 227 * KB, reserved_shared=KB),          # Hopper (H100, H200)
    (10, 0): Arch(2048, 32, 228 * KB, 227 * KB, reserved_shared=KB),         # Blackwell (B200)
    (12, 0): Arch(1536, 32, 100 * KB, 99 * KB, reserved_shared=KB),          # Blackwell (RTX 50xx)
}


@dataclass(frozen=True)
class GPU:
    """One GPU: its name as torch reports it, a short name, its compute capability and SMs, and its
    spec-sheet figures (dense, no sparsity): ``peaks`` in TFLOP/s (``"int8"`` in TOPS) and ``"copy"``, the
    memory's bandwidth, in GB/s; links in GB/s in one direction (``None``: none). ``source`` names the
    datasheet of the peaks."""
    name: str
    short: str
    cc: tuple
    sms: int
    boost_mhz: int             # the fp32 peak is SMs x fp32 lanes per SM x 2 x this clock
    peaks: dict
    source: str
    nvlink_gbps: float | None
    pcie_gbps: float
    pcie: str
    arch: Arch = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "arch", arch_of(self.cc))

    @property
    def sm(self) -> str:
        """``"sm_90"``: the compute capability as nvcc's target names it."""
        return f"sm_{self.cc[0]}{self.cc[1]}"


def _by_capability(table: dict, cc: tuple):
    """The value of ``table`` (keyed by compute capability) for ``cc``: its own row, else the row below
    it, else ``None``.

    >>> _by_capability({(7, 5): "T4", (8, 0): "A100"}, (8, 6)), _by_capability({(7, 5): 1}, (6, 1))
    ('A100', None)
    """
    below = [k for k in table if k <= tuple(cc)]
    return table[max(below)] if below else None


def arch_of(cc: tuple) -> Arch:
    """The :data:`ARCHS` row of compute capability ``cc`` (between two rows, the row below).

    >>> arch_of((9, 0)).shared_per_block // KB, arch_of((8, 9)).blocks
    (227, 24)
    """
    row = _by_capability(ARCHS, cc)
    if row is None:
        raise ValueError(f"no GPU facts for compute capability {cc[0]}.{cc[1]}: the course knows "
                         f"{', '.join(f'{a}.{b}' for a, b in ARCHS)} and newer")
    return row


GPUS = {g.name: g for g in [
    # NVIDIA H100 Tensor Core GPU datasheet (H100 SXM, dense figures: the sheet's sparse ones halved); the H100
    # Tensor Core GPU Architecture whitepaper, table 3, for 132 SMs and the clock. NVLink 4: 18 links x 25 GB/s
    # each way (900 GB/s both ways); PCIe Gen5 x16: 128 GB/s both ways.
    GPU("NVIDIA H100 80GB HBM3", "H100 SXM", (9, 0), 132, 1980,
        dict(fp32=66.9, tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9, int8=1978.9, copy=3350.0),
        "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM5, dense", 450.0, 64.0, "PCIe Gen5 x16"),
    # the same datasheet, H100 PCIe column (dense); whitepaper table 3: 114 SMs, 1755 MHz. NVLink bridge
    # 600 GB/s both ways; PCIe Gen5 x16.
    GPU("NVIDIA H100 PCIe", "H100 PCIe", (9, 0), 114, 1755,
        dict(fp32=51.2, tf32=378.0, fp16=756.0, bf16=756.0, fp8=1513.0, int8=1513.0, copy=2000.0),
        "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe, dense", 300.0, 64.0, "PCIe Gen5 x16"),
    # NVIDIA H200 Tensor Core GPU datasheet (H200 SXM, dense): the H100 SXM's GH100 chip and clocks with faster
    # and larger memory (HBM3e, 4.8 TB/s); NVLink 900 GB/s and PCIe Gen5 128 GB/s both ways.
    GPU("NVIDIA H200", "H200", (9, 0), 132, 1980,
        dict(fp32=66.9, tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9, int8=1978.9, copy=4800.0),
        "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM, dense", 450.0, 64.0, "PCIe Gen5 x16"),
    # NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM, dense; no fp8) and the Ampere architecture
    # whitepaper (108 SMs, 1410 MHz). NVLink 3: 600 GB/s both ways; PCIe Gen4 x16: 64 GB/s both ways.
    GPU("NVIDIA A100-SXM4-80GB", "A100 SXM", (8, 0), 108, 1410,
        dict(fp32=19.5, tf32=156.0, fp16=312.0, bf16=312.0, int8=624.0, copy=2039.0),
        "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM, dense", 300.0, 32.0, "PCIe Gen4 x16"),
    # NVIDIA L4 Tensor Core GPU datasheet (dense: the sheet's sparse figures halved; 58 SMs, 2040 MHz boost);
    # no NVLink; PCIe Gen4 x16.
    GPU("NVIDIA L4", "L4", (8, 9), 58, 2040,
        dict(fp32=30.3, tf32=60.0, fp16=121.0, bf16=121.0, fp8=242.5, int8=242.5, copy=300.0),
        "NVIDIA L4 Tensor Core GPU datasheet, dense", None, 32.0, "PCIe Gen4 x16"),
    # NVIDIA T4 datasheet (fp16 is its mixed-precision tensor figure; no TF32, bf16 or fp8 on Turing) and the
    # Turing architecture whitepaper (40 SMs, 1590 MHz boost); no NVLink; PCIe Gen3 x16: 32 GB/s both ways.
    GPU("Tesla T4", "T4", (7, 5), 40, 1590,
        dict(fp32=8.1, fp16=65.0, int8=130.0, copy=320.0),
        "NVIDIA T4 Tensor Core GPU datasheet", None, 16.0, "PCIe Gen3 x16"),
]}

# The GPU whose figures stand in for one in cpu mode (occupancy's SM limits, the notebooks' quoted numbers).
REFERENCE = GPUS["NVIDIA H100 80GB HBM3"]


def lookup(name: str) -> GPU | None:
    """The :data:`GPUS` entry of the GPU torch names ``name``, or ``None`` where the course has none."""
    return GPUS.get(name)


def of_capability(cc: tuple) -> list:
    """The :data:`GPUS` entries of compute capability ``cc``, in table order.

    >>> [g.short for g in of_capability((9, 0))], [g.short for g in of_capability((7, 5))]
    (['H100 SXM', 'H100 PCIe', 'H200'], ['T4'])
    """
    return [g for g in GPUS.values() if g.cc == tuple(cc)]


def from_device(device=0) -> GPU:
    """The entry of the GPU ``device`` (a real one): its :data:`GPUS` entry, else one built from torch's
    device properties and the :data:`ARCHS` row of its compute capability, without spec-sheet figures."""
    p = torch.cuda.get_device_properties(device)
    return lookup(p.name) or GPU(p.name, p.name, (p.major, p.minor), p.multi_processor_count, 0, {},
                                 "", None, 0.0, "")


@dataclass(frozen=True)
class Profile:
    """A GPU to act as (``COURSE_GPU_PROFILE``): its :data:`GPUS` entry, the memory a learner's runtime
    shows (``total_memory``, bytes) and its L2 cache (bytes)."""
    key: str
    gpu: GPU
    total_memory: int
    l2_bytes: int


# Colab's free T4: 40 SMs, compute capability 7.5, 64 KB shared memory per block (T4 datasheet, Turing
# whitepaper); 16 GB of GDDR6 of which a Colab runtime reports 15 GiB, and 4 MB of L2 cache.
PROFILES = {"t4": Profile("t4", GPUS["Tesla T4"], 15 * 2**30, 4 * 2**20)}


def profile() -> Profile | None:
    """The :data:`PROFILES` entry ``COURSE_GPU_PROFILE`` names (``t4``), or ``None`` where it is unset.

    >>> with acting_as_profile("t4"):
    ...     profile().gpu.short, profile().gpu.sms
    ('T4', 40)
    """
    key = os.environ.get(PROFILE_ENV, "").strip().lower()
    if not key:
        return None
    if key not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={key!r}: the profiles are {', '.join(PROFILES)}")
    return PROFILES[key]


def acting() -> str:
    """What this GPU acts as, in words for a banner (``""`` where it acts as itself): the profile's
    GPU (``COURSE_GPU_PROFILE``) or a compute capability (``COURSE_FAKE_CC``)."""
    prof = profile()
    if prof is not None:
        g = prof.gpu
        return (f"Acting as a {g.short} ({PROFILE_ENV}={prof.key}: sm_{g.cc[0]}{g.cc[1]}, {g.sms} SMs, "
                f"{arch_of(g.cc).shared_per_block // KB} KB shared memory per block, "
                f"{prof.total_memory / 2**30:.0f} GiB): what it lacks is skipped; kernels still run on "
                "this device, at its speed.")
    if os.environ.get(CC_ENV):
        return (f"Acting as a GPU of compute capability {os.environ[CC_ENV]} ({CC_ENV}): what such a GPU "
                "lacks is skipped.")
    return ""


def this_gpu() -> GPU:
    """The running GPU's entry (:func:`from_device`); in cpu mode :data:`REFERENCE` (an H100 SXM), the GPU
    the course's figures stand for where there is none; the profile's GPU under ``COURSE_GPU_PROFILE``.

    >>> this_gpu().name == (torch.cuda.get_device_name() if mode.ON_GPU else "NVIDIA H100 80GB HBM3")
    True
    >>> with acting_as_profile("t4"):
    ...     this_gpu().short
    'T4'
    """
    prof = profile()
    if prof is not None:
        return prof.gpu
    return from_device(0) if mode.ON_GPU else REFERENCE


def spec_peaks() -> dict:
    """``{device name: {kind: peak, ..., "source": datasheet}}`` of every :data:`GPUS` entry, the kinds
    each has (a T4 has no tf32, bf16 or fp8)."""
    return {g.name: {**g.peaks, "source": g.source} for g in GPUS.values()}


def link_gbps(name: str, link: str = "nvlink") -> float | None:
    """The spec sheet's bandwidth in one direction (GB/s) of ``link`` (``"nvlink"`` or ``"pcie"``) of the
    GPU torch names ``name``; ``None`` where it has none or the course does not know the GPU.

    >>> link_gbps("NVIDIA H200"), link_gbps("NVIDIA L4"), link_gbps("NVIDIA L4", "pcie")
    (450.0, None, 32.0)
    """
    g = lookup(name)
    if g is None:
        return None
    return g.nvlink_gbps if link == "nvlink" else g.pcie_gbps


# ------------------------------------------------------------------------------ feature gates
# feature -> (lowest compute capability, highest or None, what a learner is told when the GPU lacks it)
FEATURES = {
    "bf16": ((8, 0), None, "bfloat16 arithmetic needs compute capability 8.0 (Ampere) or newer"),
    "flash_sdpa": ((8, 0), None, "SDPA's flash-attention backend needs compute capability 8.0 (Ampere) or newer"),
    "cudnn_sdpa": ((8, 0), None, "SDPA's cuDNN attention backend needs compute capability 8.0 (Ampere) or newer "
                                 "and a torch built with cuDNN 9"),
    "cp_async": ((8, 0), None, "cp.async copies need compute capability 8.0 (Ampere) or newer"),
    "wgmma": ((9, 0), None, "wgmma and TMA are Hopper instructions: compute capability 9.0 or newer"),
    "tf32": ((8, 0), None, "TF32 tensor cores need compute capability 8.0 (Ampere) or newer (here allow_tf32 and "
                           "input_precision='tf32' compute in plain fp32)"),
    "fp8": ((8, 9), None, "fp8 tensor cores need compute capability 8.9 (Ada) or newer"),
    # tensor-core instructions of notebook 12's ladder (PTX ISA, "Warp-level matrix instructions")
    "wmma": ((7, 0), None, "WMMA needs compute capability 7.0 (Volta) or newer"),
    "mma_fp16": ((8, 0), None, "mma.sync.m16n8k16 with fp16 inputs needs compute capability 8.0 (Ampere) or newer"),
    "sm90a": ((9, 0), (9, 0), "wgmma and TMA exist on Hopper (sm_90) only"),   # sm_90a code runs on 9.0 alone
}


def supports(feature: str, cc: tuple) -> tuple:
    """``(True, "")`` where a GPU of compute capability ``cc`` has ``feature`` (one of :data:`FEATURES`),
    else ``(False, reason)``, the reason one line."""
    if feature not in FEATURES:
        raise ValueError(f"gpu_supports: unknown feature {feature!r}; known: {', '.join(FEATURES)}")
    low, high, why = FEATURES[feature]
    if tuple(cc) < low or (high is not None and tuple(cc) > high):
        return False, f"skipped on this GPU (sm_{cc[0]}{cc[1]}): {why}"
    return True, ""


@contextlib.contextmanager
def temporary_env(name: str, value: str):
    """Within the block, the environment variable ``name`` is ``value``; after it, what it was (or unset)."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def acting_as(cc: str):
    """Within the block, answer as a GPU of compute capability ``cc`` (``"7.5"``: ``COURSE_FAKE_CC``), then as
    before the block."""
    return temporary_env(CC_ENV, cc)


def acting_as_profile(key: str):
    """Within the block, answer as the GPU of profile ``key`` (``"t4"``: ``COURSE_GPU_PROFILE``) in every
    respect, then as before the block."""
    return temporary_env(PROFILE_ENV, key)


def faked_capability() -> tuple | None:
    """The compute capability ``COURSE_FAKE_CC`` or, else, ``COURSE_GPU_PROFILE`` makes this GPU answer
    with; ``None`` where neither is set."""
    fake = os.environ.get(CC_ENV)
    if fake:
        try:
            major, minor = (int(v) for v in fake.split("."))
        except ValueError:
            raise ValueError(f"{CC_ENV}={fake!r}: write a compute capability as MAJOR.MINOR, e.g. 7.5") from None
        return major, minor
    prof = profile()
    return prof.gpu.cc if prof is not None else None


def compute_capability() -> tuple | None:
    """The GPU's compute capability as ``(major, minor)`` (``COURSE_FAKE_CC=7.5`` pretends), or
    ``None`` in cpu mode.

    >>> with acting_as("7.5"):
    ...     compute_capability()
    (7, 5)
    """
    fake = faked_capability()
    if fake is not None:
        return fake
    if not mode.ON_GPU:
        return None
    return tuple(torch.cuda.get_device_capability())


def gpu_supports(feature: str) -> tuple:
    """``(True, "")`` where this GPU has ``feature`` (one of :data:`FEATURES`), else ``(False, reason)``:
    a notebook skips what the GPU lacks (Colab's T4 is sm_75) with the reason in one line. In cpu mode
    every feature counts as present: the interpreters and the emulation run what they can and say
    themselves what they cannot.

    >>> with acting_as("7.5"):
    ...     gpu_supports("tf32")[0], gpu_supports("wmma")
    (False, (True, ''))
    """
    if feature not in FEATURES:
        raise ValueError(f"gpu_supports: unknown feature {feature!r}; known: {', '.join(FEATURES)}")
    cc = compute_capability()
    if cc is None:
        return True, ""
    ok, why = supports(feature, cc)
    if ok and feature == "cudnn_sdpa" and faked_capability() is None:
        v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        if not v or v < 90000:
            return False, f"skipped: {FEATURES[feature][2]} (this torch has cuDNN {v})"
    return ok, why


def gpu_has(feature: str) -> bool:
    """Whether this GPU has ``feature`` (as :func:`gpu_supports`); where it does not, print the one-line
    reason first, so that a notebook guards a section with ``if utils.gpu_has("tf32"):`` and says why
    it skips it. Prints nothing where the feature is there, and in cpu mode (unless ``COURSE_FAKE_CC`` or
    ``COURSE_GPU_PROFILE``).
    """
    ok, why = gpu_supports(feature)
    if not ok:
        print(why)
    return ok


@functools.lru_cache(maxsize=None)
def _device_sms(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def sm_count(device=None) -> int:
    """The SMs of ``device``'s GPU (default: the current one), asked of the driver once per device: a
    question costs ~6 µs, which a kernel launcher must not pay at every call. Under
    ``COURSE_GPU_PROFILE`` the profile's (a T4: 40), also in cpu mode.

    >>> with acting_as_profile("t4"):
    ...     sm_count()
    40
    """
    prof = profile()
    if prof is not None:
        return prof.gpu.sms
    return _device_sms(device)


def total_memory() -> int | None:
    """The GPU's memory in bytes (``torch.cuda.get_device_properties(0).total_memory``), the profile's
    under ``COURSE_GPU_PROFILE`` (a T4 in Colab: 15 GiB), ``None`` in cpu mode without a profile.

    >>> with acting_as_profile("t4"):
    ...     total_memory() // 2**30
    15
    """
    prof = profile()
    if prof is not None:
        return prof.total_memory
    return torch.cuda.get_device_properties(0).total_memory if mode.ON_GPU else None


def free_memory() -> int | None:
    """Bytes of GPU memory free now (``torch.cuda.mem_get_info``); under ``COURSE_GPU_PROFILE`` at most
    what the profile's GPU would have free (its memory less what this process holds); ``None`` in cpu mode."""
    if not mode.ON_GPU:
        return None
    free = torch.cuda.mem_get_info()[0]
    prof = profile()
    if prof is not None:
        free = min(free, max(0, prof.total_memory - torch.cuda.memory_reserved()))
    return free


def l2_cache_bytes() -> int | None:
    """The GPU's L2 cache in bytes; ``None`` in cpu mode, where a profile's (``COURSE_GPU_PROFILE``) is
    given instead. On a GPU it is the device's own even under a profile: the L2 shapes the timings of
    kernels that run on this device, not whether they run.

    >>> with acting_as_profile("t4"):
    ...     l2_cache_bytes() == (4 * 2**20 if not mode.ON_GPU else l2_cache_bytes())
    True
    """
    if mode.ON_GPU:
        return getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or None
    prof = profile()
    return prof.l2_bytes if prof is not None else None


def shared_memory_per_block() -> int | None:
    """The most shared memory one block may use on this GPU, in bytes (with the opt-in above 48 KB):
    the device's own figure, or the :data:`ARCHS` row's for a faked compute capability
    (``COURSE_FAKE_CC=7.5``: 64 KB, Colab's T4); ``None`` in cpu mode, where nothing limits it.

    >>> limit = shared_memory_per_block()
    >>> limit is None if compute_capability() is None else limit >= 48 * 1024
    True
    """
    cc = compute_capability()
    if cc is None:
        return None
    if mode.ON_GPU and faked_capability() is None:
        own = getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", None)
        if own:
            return int(own)
    row = _by_capability(ARCHS, cc)
    return row.shared_per_block if row else 48 * KB


def fits_shared_memory(nbytes: int, what: str) -> tuple:
    """``(True, "")`` where a block of ``what`` (e.g. ``"rung 10"``) that uses ``nbytes`` of shared memory
    can run on this GPU, else ``(False, reason)`` with the one-line reason a notebook prints.

    >>> fits_shared_memory(1024, "a small tile")
    (True, '')
    """
    limit = shared_memory_per_block()
    if limit is None or nbytes <= limit:
        return True, ""
    cc = compute_capability()
    return False, (f"{what}: skipped on this GPU (sm_{cc[0]}{cc[1]}): it needs {nbytes / 1024:.0f} KB of shared "
                   f"memory per block, this GPU gives a block at most {limit / 1024:.0f} KB")


def gpu_properties() -> dict | None:
    """The GPU's properties that matter for this course, or ``None`` in cpu mode; under
    ``COURSE_GPU_PROFILE`` the profile's, with the real device's name beside it (also in cpu mode).

    >>> with acting_as_profile("t4"):
    ...     p = gpu_properties()
    >>> p["compute capability"], p["SMs"], p["memory (GiB)"], p["max threads per SM"]
    ('7.5', 40, 15.0, 1024)
    """
    prof = profile()
    if prof is not None:
        g = prof.gpu
        return {"name": f"{g.name} (profile {prof.key} on {mode.device_name()})",
                "compute capability": f"{g.cc[0]}.{g.cc[1]}", "SMs": g.sms,
                "memory (GiB)": round(prof.total_memory / 2**30, 1),
                "L2 cache (MiB)": round(l2_cache_bytes() / 2**20, 1),   # the device's own on a GPU
                "max threads per SM": g.arch.threads, "warp size": g.arch.warp}
    if not mode.ON_GPU:
        return None
    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "compute capability": f"{p.major}.{p.minor}",
            "SMs": p.multi_processor_count, "memory (GiB)": round(p.total_memory / 2**30, 1),
            "L2 cache (MiB)": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
            "max threads per SM": getattr(p, "max_threads_per_multi_processor", None),
            "warp size": getattr(p, "warp_size", 32)}


def limit_triton_to_profile() -> bool:
    """Under ``COURSE_GPU_PROFILE`` on a GPU, make Triton's launcher see the profile's limits: a kernel
    whose compiled tiles need more shared memory per block than the profile's GPU gives (a T4: 64 KB)
    raises Triton's ``OutOfResources`` as it would there, and an autotuner drops that configuration.
    Returns whether it did (not in cpu mode, nor without a profile or Triton). Called when the package
    is imported; kernels still compile for, and run on, the GPU at hand."""
    prof = profile()
    if prof is None or not mode.ON_GPU:
        return False
    try:
        from triton.runtime import driver
        utils = driver.active.utils
    except Exception:   # no Triton, or none for this GPU
        return False
    own = utils.get_device_properties
    if getattr(own, "course_profile", None) == prof.key:
        return True
    limit, sms = arch_of(prof.gpu.cc).shared_per_block, prof.gpu.sms

    def as_profile(device):
        props = dict(own(device))
        props["max_shared_mem"] = min(props.get("max_shared_mem", limit), limit)
        props["multiprocessor_count"] = sms
        return props
    as_profile.course_profile = prof.key
    utils.get_device_properties = as_profile
    return True
