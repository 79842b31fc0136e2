"""Moving data between the host and the GPU (notebook 14): the link, copy bandwidth (pageable and
pinned, both directions, against the device-to-device copy) and what ``non_blocking`` does. Streams,
events and a copy overlapped with compute are in :mod:`gpu_course.streams`.

In cpu mode there is no link and no copy engine: every "copy" is a plain copy between two places in
host memory and "pinned" memory is ordinary memory (``pin_memory()`` needs CUDA). The code runs and
its results are checked the same way; its timings say nothing about a GPU.

>>> float(copy_pair("H2D pinned", 16)[1].sum())
16.0
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass

import torch

from .mode import DEVICE, ON_GPU, synchronize

# PCIe transfer rate per lane, GT/s, by generation (PCI-SIG). A ×16 link moves rate × 16 / 8 GB/s per
# direction before encoding: Gen5 ×16 = 64 GB/s, the figure spec sheets quote.
PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
KINDS = ("H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned", "D2D")


# ------------------------------------------------------------------------------------------- the link
@dataclass
class Link:
    """The host-GPU link: what it is (``name``), its spec per direction (``spec_gbs``, None in cpu
    mode) and where that was read (``source``)."""
    name: str
    spec_gbs: float | None
    source: str

    def __str__(self):
        spec = f"{self.spec_gbs:.0f} GB/s per direction by the PCIe spec" if self.spec_gbs else "no spec"
        return f"{self.name}: {spec} (read from {self.source})"


def pcie_spec_gbs(gen: int, width: int) -> float:
    """Raw bandwidth per direction of a PCIe link, GB/s: ``GT/s × lanes / 8``.

    >>> pcie_spec_gbs(5, 16), pcie_spec_gbs(4, 16)
    (64.0, 32.0)
    """
    return PCIE_GTS[gen] * width / 8


def host_link() -> Link:
    """The host-GPU link of this machine, read from ``nvidia-smi`` (the generation and width the GPU
    and the system support, ``pcie.link.gen.max``/``width.max``; the current ones drop when idle). In
    cpu mode: no link.

    >>> host_link().name if not ON_GPU else "GPU"  # doctest: +ELLIPSIS
    'none...'
    """
    if not ON_GPU:
        return Link("none (cpu mode: a copy is host memory to host memory)", None, "cpu mode")
    smi = shutil.which("nvidia-smi")
    if smi:
        q = "pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current"
        r = subprocess.run([smi, f"--query-gpu={q}", "--format=csv,noheader,nounits", "-i",
                            str(torch.cuda.current_device())], capture_output=True, text=True)
        try:
            gen, width, gen_now, width_now = (int(v) for v in r.stdout.strip().split(","))
            return Link(f"PCIe Gen{gen} x{width} (now Gen{gen_now} x{width_now})",
                        pcie_spec_gbs(gen, width), "nvidia-smi")
        except ValueError:
            pass
    return Link("unknown link (nvidia-smi gave no PCIe figures)", None, "nothing")


# ------------------------------------------------------------------------------------------- copies
def host_buffer(nbytes: int, pinned: bool) -> torch.Tensor:
    """``nbytes`` of host memory, page-locked if ``pinned`` (on a GPU machine; plain memory in cpu mode).

    >>> host_buffer(4096, pinned=True).numel()
    4096
    """
    t = torch.ones(nbytes, dtype=torch.uint8)
    return t.pin_memory() if pinned and ON_GPU else t


def copy_pair(kind: str, nbytes: int) -> tuple:
    """``(dst, src)`` for a copy of ``kind`` (one of :data:`KINDS`) of ``nbytes``."""
    dev = lambda: torch.ones(nbytes, dtype=torch.uint8, device=DEVICE)  # noqa: E731
    if kind == "D2D":
        return dev(), dev()
    host = host_buffer(nbytes, pinned=kind.endswith("pinned"))
    return (dev(), host) if kind.startswith("H2D") else (host, dev())


def time_copy_ms(dst: torch.Tensor, src: torch.Tensor, reps: int = 10, per_event: int | None = None) -> list:
    """Times of one ``dst.copy_(src, non_blocking=True)``, ms each, after one warm-up. On a GPU each
    figure is ``per_event`` copies queued back to back between two CUDA events, divided by
    ``per_event``, with a short spin queued on the GPU before the first event: the GPU is kept busy
    while the CPU queues the copies, so the events time the copies and not the CPU's time to issue
    them (a single copy between two events on an idle GPU times mostly the CPU's launch). By default
    as many copies as make about 64 MB (1 to 32). A pageable copy is synchronous whatever
    ``non_blocking`` says, so its figure includes the CPU's staging. In cpu mode: the CPU's wall clock.

    >>> len(time_copy_ms(torch.empty(64), torch.ones(64), reps=3))
    3
    """
    nbytes = src.numel() * src.element_size()
    k = per_event or max(1, min(32, (64 << 20) // max(nbytes, 1)))
    dst.copy_(src, non_blocking=True)
    synchronize()
    out = []
    for _ in range(reps):
        if ON_GPU:
            from .timing import spin_gpu
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            spin_gpu(0.2 + 0.02 * k)                  # the GPU is busy while the copies are queued
            a.record()
            for _ in range(k):
                dst.copy_(src, non_blocking=True)
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b) / k)
        else:
            t0 = time.perf_counter()
            dst.copy_(src)
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def copy_sweep(sizes, kinds=KINDS, reps: int = 10) -> dict:
    """``{kind: [(nbytes, median ms, GB/s)]}`` for every size (bytes) and kind of copy; GB/s is bytes
    delivered per second (10⁹), so a D2D copy moves twice that through HBM (a read and a write). Fewer
    repeats above 64 MB (at least 3).

    >>> sw = copy_sweep([4096], kinds=("H2D pinned",), reps=2)
    >>> [n for n, ms, gbs in sw["H2D pinned"]]
    [4096]
    """
    out = {k: [] for k in kinds}
    for n in sizes:
        for k in kinds:
            dst, src = copy_pair(k, n)
            ms = statistics.median(time_copy_ms(dst, src, reps if n <= 64 << 20 else max(3, reps // 3)))
            out[k].append((n, ms, n / ms / 1e6))
            del dst, src
    return out


def sweep_ms(sweep: dict, kind: str, nbytes: int) -> float | None:
    """The median ms of one copy of ``kind`` of ``nbytes`` in ``sweep`` (None if that size was not swept).

    >>> sweep_ms({"D2D": [(4096, 0.5, 8.2)]}, "D2D", 4096)
    0.5
    """
    return next((ms for n, ms, _ in sweep[kind] if n == nbytes), None)


def staged_copy_ms(nbytes: int, chunk: int, memcpy_gbs: float, link_gbs: float) -> float:
    """The time of a pageable host-to-device copy of ``nbytes`` (a multiple of ``chunk``) staged chunk
    by chunk through two pinned buffers: the CPU copies chunk k+1 into one buffer while the copy
    engine moves chunk k from the other over the link, ms (GB/s are 10⁹ bytes/s)."""
    m, l = chunk / memcpy_gbs / 1e6, chunk / link_gbs / 1e6
    return m + l + (nbytes // chunk - 1) * max(m, l)


def fmt_bytes(n: int) -> str:
    """``4 KB``, ``64 MB``, ``1 GB`` (powers of 1024).

    >>> fmt_bytes(4096), fmt_bytes(64 << 20), fmt_bytes(1 << 30)
    ('4 KB', '64 MB', '1 GB')
    """
    for unit, s in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << s:
            return f"{n / (1 << s):g} {unit}"
    return f"{n} B"


def sweep_table(sweep: dict, link: Link) -> str:
    """The sweep as a table of GB/s, and the % of the link's spec of the largest pinned copies."""
    kinds = list(sweep)
    lines = [f"{'size':>8}" + "".join(f"{k:>14}" for k in kinds) + "   (GB/s)"]
    for i, (n, _, _) in enumerate(sweep[kinds[0]]):
        lines.append(f"{fmt_bytes(n):>8}" + "".join(f"{sweep[k][i][2]:>14.2f}" for k in kinds))
    if not ON_GPU:
        lines.append("(cpu mode: host-to-host copies on the CPU's clock: these figures say nothing about a GPU)")
    return "\n".join(lines)


def best_gbs(sweep: dict, kind: str, at_least: int = 64 << 20) -> float:
    """The highest GB/s of ``kind`` at sizes of ``at_least`` bytes or more (the largest size if none)."""
    rows = [r for r in sweep[kind] if r[0] >= at_least] or sweep[kind][-1:]
    return max(r[2] for r in rows)


def plot_sweep(sweep: dict, link: Link, device: str):
    """GB/s against size for each kind, log-log, with the link's spec as a line."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, rows in sweep.items():
        ax.plot([r[0] for r in rows], [r[2] for r in rows], marker="o", ms=3, label=k)
    if link.spec_gbs:
        ax.axhline(link.spec_gbs, ls="--", c="k", lw=1)
        ax.text(sweep[next(iter(sweep))][0][0], link.spec_gbs * 1.1, f"{link.name.split(' (')[0]} spec", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="bytes per copy", ylabel="GB/s (bytes delivered / time)",
           title=f"copy bandwidth on {device}")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------- non_blocking
def call_return_ms(nbytes: int, pinned: bool) -> float:
    """How long ``d.copy_(h, non_blocking=True)`` (host to device) takes to *return* to Python, ms:
    with pageable ``h`` the call waits for the copy; with pinned ``h`` it only queues it.

    >>> call_return_ms(4096, pinned=True) >= 0
    True
    """
    d, h = copy_pair("H2D pinned" if pinned else "H2D pageable", nbytes)
    synchronize()
    t0 = time.perf_counter()
    d.copy_(h, non_blocking=True)
    ms = (time.perf_counter() - t0) * 1e3
    synchronize()
    return ms


def read_too_early(n: int, busy_ms: float = 20.0, fix: bool = False) -> float:
    """Copy ``n`` floats of 1.0 from the GPU into pinned host memory with ``non_blocking=True``, after
    ``busy_ms`` of other GPU work, and sum the host buffer at once on the CPU. Without ``fix`` the CPU
    reads while the copy has not finished: the sum counts whatever ones had landed by then (0 if the
    copy had not started, less than ``n`` if the read overlapped the copy: a torn read); with ``fix``
    an event recorded after the copy is waited for first. Returns the sum (``n`` is right). In cpu
    mode the copy is synchronous.

    >>> read_too_early(100, fix=True)
    100.0
    """
    from .timing import spin_gpu
    host = host_buffer(n * 4, pinned=True).view(torch.float32).zero_()
    d = torch.ones(n, device=DEVICE)
    synchronize()
    if ON_GPU:
        spin_gpu(busy_ms)                  # the GPU is busy: the copy below waits its turn
    host.copy_(d, non_blocking=True)
    if fix:
        from .streams import Event
        done = Event()
        done.record()
        done.synchronize()                 # the CPU waits for the copy only
    total = float(host.double().sum())     # the CPU reads the host buffer now
    synchronize()
    return total


