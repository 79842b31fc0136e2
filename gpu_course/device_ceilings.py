"""The device's measured ceilings (copy bandwidth, matmul rates) and the throughput a timing
achieves as a share of them."""
from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass

import torch

from . import hardware
from .hardware import gpu_supports
from .mode import DEVICE, ON_GPU, by_mode, device_name
from .paths import RESULTS_DIR, now, read_json
from .timing import Timing, bench, fmt_num
from .user_timing import UserTiming

CEILINGS_FILE = RESULTS_DIR / "ceilings.json"
CEILING_LABELS = {
    "copy": "copy bandwidth (bytes read + written)",
    "fp32": "fp32 matmul (TF32 off)",
    "tf32": "fp32 matmul with TF32 tensor cores",
    "fp16": "fp16 matmul",
    "bf16": "bf16 matmul",
}
_ceilings_cache: dict = {}

# Spec-sheet peaks (dense, no sparsity) of the GPUs in gpu_course.hardware's table, by device name, each with the
# datasheet it comes from: what the vendor promises, not a measurement. Rates in TFLOP/s, "copy" in GB/s (the
# memory's bandwidth: a copy reads and writes, and both count against it).
SPEC_PEAKS = hardware.spec_peaks()


def spec_peak(kind: str, device: str | None = None) -> float | None:
    """The spec-sheet peak of ``kind`` (``"fp16"``, ``"bf16"``, ``"tf32"``, ``"fp32"`` in TFLOP/s,
    ``"copy"`` in GB/s) for ``device`` (default: this one), or ``None`` if the course has no spec
    sheet for it (the CPU, or a GPU not in :data:`gpu_course.hardware.GPUS`).

    While ``COURSE_FAKE_CC`` or ``COURSE_GPU_PROFILE`` makes this GPU act as another, its own spec sheet does not apply: ``None``.

    >>> spec_peak("fp16", "NVIDIA H100 80GB HBM3"), spec_peak("fp16", "CPU (x86_64)")
    (989.4, None)
    """
    if device is None and hardware.faked_capability() is not None:
        return None
    gpu = hardware.lookup(device or device_name())
    return gpu.peaks.get(kind) if gpu else None


# The ceilings a GPU may lack, and the feature each needs (utils.gpu_supports): on a GPU older than Ampere
# (Colab's T4) there is no bf16 matmul, and allow_tf32 changes nothing, so a "tf32" ceiling would be fp32's.
CEILING_FEATURES = {"tf32": "tf32", "bf16": "bf16"}


def missing_ceilings() -> dict:
    """``{kind: one-line reason}`` for the ceilings this GPU lacks (see :data:`CEILING_FEATURES`); empty
    where it has them all, and in cpu mode (unless ``COURSE_FAKE_CC`` or ``COURSE_GPU_PROFILE`` says otherwise).

    >>> with hardware.acting_as("7.5"):
    ...     sorted(missing_ceilings())
    ['bf16', 'tf32']
    """
    out = {}
    for kind, feature in CEILING_FEATURES.items():
        ok, why = gpu_supports(feature)
        if not ok:
            out[kind] = why
    return out


def _measure_ceilings(rounds: int | None = None) -> tuple:
    """Measure copy bandwidth (GB/s) and matmul rates (TFLOP/s) of the current device: ``(ceilings, rounds)``.
    The copy and the matmuls run in ``rounds`` alternating rounds (4 on a GPU: copy fp32 tf32 fp16 bf16, then
    bf16 fp16 tf32 fp32 copy, ...), so that a drift of the clock over the measurement falls on every kind alike;
    each ceiling is the median of its rounds, and ``rounds`` maps each kind to its rounds' rates (GB/s for the
    copy, TFLOP/s for a matmul; their range is the spread)."""
    n_copy = by_mode(gpu=2**28, cpu=2**24)  # 1 GiB or 64 MiB of fp32 per buffer
    src = torch.rand(n_copy, device=DEVICE)
    dst = torch.empty_like(src)
    n = by_mode(gpu=8192, cpu=512)
    n_rounds = rounds or by_mode(gpu=4, cpu=1)
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
              "bf16": torch.bfloat16} if ON_GPU else {"fp32": torch.float32}
    for kind in missing_ceilings():   # what this GPU lacks is not measured (see CEILING_FEATURES)
        dtypes.pop(kind, None)
    inputs = {key: (torch.randn(n, n, device=DEVICE, dtype=dt), torch.randn(n, n, device=DEVICE, dtype=dt))
              for key, dt in dtypes.items()}
    kinds = ["copy"] + list(dtypes)
    per = {key: [] for key in kinds}
    budget = by_mode(gpu=80.0, cpu=50.0)
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for r in range(n_rounds):
            for key in (kinds if r % 2 == 0 else kinds[::-1]):
                if key == "copy":
                    t = bench(dst.copy_, src, budget_ms=budget)
                    per[key].append(2 * src.nbytes / (t.median * 1e-3) / 1e9)
                    continue
                torch.backends.cuda.matmul.allow_tf32 = key == "tf32"
                t = bench(torch.matmul, *inputs[key], budget_ms=budget)
                per[key].append(2 * n**3 / (t.median * 1e-3) / 1e12)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    del src, dst, inputs
    return {key: statistics.median(rates) for key, rates in per.items()}, per


_rounds_cache: dict = {}


def ceiling_rounds() -> dict:
    """The rates of each round of this device's last measurement in this session (``{kind: [a rate per
    round]}``: GB/s for ``"copy"``, TFLOP/s for a matmul; see :func:`ceilings`); empty when the ceilings were
    read from the file."""
    return _rounds_cache.get(device_name(), {})


def ceilings(refresh: bool = False) -> dict:
    """Measured ceilings of this device: ``{"copy": GB/s, "fp32": TFLOP/s, ...}``.

    Measured once per device name. A GPU's are kept in ``results/ceilings.json`` (a few
    seconds to measure; ``refresh=True`` measures again, and :func:`ceiling_rounds` then gives the
    rounds behind each ceiling); the CPU's only for this session. The kinds this GPU lacks
    (:func:`missing_ceilings`: tf32 and bf16 before Ampere) are left out.
    """
    name = device_name()
    if not refresh and name in _ceilings_cache:
        return _without_missing(_ceilings_cache[name])
    stored = read_json(CEILINGS_FILE)
    if ON_GPU and not refresh and name in stored:
        _ceilings_cache[name] = stored[name]["ceilings"]
        return _without_missing(_ceilings_cache[name])
    raw, per = _measure_ceilings()
    measured = {k: float(f"{v:.4g}") for k, v in raw.items()}
    _ceilings_cache[name], _rounds_cache[name] = measured, per
    if ON_GPU and hardware.faked_capability() is None:   # a GPU acting as another keeps its stored ceilings
        stored[name] = {"ceilings": measured, "measured": now(), "torch": torch.__version__}
        RESULTS_DIR.mkdir(exist_ok=True)
        CEILINGS_FILE.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    return _without_missing(measured)


def _without_missing(ceil: dict) -> dict:
    """``ceil`` without the kinds :func:`missing_ceilings` names (the same dict when none is missing)."""
    missing = missing_ceilings()
    return {k: v for k, v in ceil.items() if k not in missing} if missing else ceil


@dataclass
class Throughput:
    """An achieved rate beside two references: this device's measured best (``ceiling``: a large
    copy, cuBLAS at 8192³) and its spec-sheet peak (``spec``, ``None`` where the course has no spec
    sheet for the device). The measured figure is what a library reaches here, so a kernel can
    exceed it; the spec-sheet peak is the hardware's promise, which nothing exceeds."""
    value: float       # in GB/s or TFLOP/s
    unit: str          # "GB/s" or "TFLOP/s"
    ceiling: float
    ceiling_key: str
    spec: float | None = None

    @property
    def pct(self) -> float:
        """The % of the measured ceiling (above 100 when a kernel beats the library's best here)."""
        return 100 * self.value / self.ceiling

    @property
    def pct_spec(self) -> float | None:
        """The % of the spec-sheet peak, or ``None`` without a spec sheet."""
        return None if self.spec is None else 100 * self.value / self.spec

    def vs_measured(self, what: str) -> str:
        """This rate against the measured best, named ``what``: a % of it while it rounds to 100 % or
        less, a ratio above (a rate faster than the library's best is not "103 % of a ceiling", and one
        a hair above it is "100 %", not "1.00×").

        >>> Throughput(720.0, "TFLOP/s", 702.0, "fp16").vs_measured("cuBLAS")
        '1.03× cuBLAS'
        >>> Throughput(100.3, "GB/s", 100.0, "copy").vs_measured("the copy")
        '100 % of the copy'
        """
        return (f"{self.pct:.0f} % of {what}" if self.below_ratio else f"{self.value / self.ceiling:.2f}× {what}")

    @property
    def below_ratio(self) -> bool:
        """Whether :meth:`vs_measured` gives a % (the % rounds to 100 or less) rather than a ratio."""
        return self.pct < 100.5

    def __str__(self):
        if not ON_GPU:  # small CPU inputs sit in caches faster than its measured copy: no % here
            return f"{fmt_num(self.value)} {self.unit} (CPU: a % of a ceiling is reported on a GPU only)"
        label = CEILING_LABELS[self.ceiling_key]
        vs_measured = self.vs_measured(f"the best {label} measured here") + (
            f" ({fmt_num(self.ceiling)} {self.unit})" if self.below_ratio else f" ({fmt_num(self.ceiling)})")
        if self.spec is None:
            return f"{fmt_num(self.value)} {self.unit} = {vs_measured}"
        return (f"{fmt_num(self.value)} {self.unit} = {self.pct_spec:.0f} % of the spec-sheet peak "
                f"({fmt_num(self.spec)} {self.unit}), {vs_measured}")


def throughput(t, nbytes: int | None = None, flops: int | None = None, kind: str | None = None) -> Throughput:
    """Achieved GB/s (give ``nbytes`` moved) or TFLOP/s (give ``flops``) of a :class:`Timing`
    (or a time in ms), with the % of the measured ceiling: ``kind`` is ``"copy"`` for bytes and
    ``"fp32"`` (default), ``"tf32"``, ``"fp16"`` or ``"bf16"`` for flops."""
    if (nbytes is None) == (flops is None):
        raise ValueError("throughput: give exactly one of nbytes= or flops=")
    ms = t.median if isinstance(t, (Timing, UserTiming)) else float(t)
    if not ms > 0:
        raise ValueError(f"throughput: the time must be positive, got {ms} ms")
    if nbytes is not None:
        kind = kind or "copy"
        value, unit = nbytes / (ms * 1e-3) / 1e9, "GB/s"
    else:
        kind = kind or "fp32"
        value, unit = flops / (ms * 1e-3) / 1e12, "TFLOP/s"
    ceil = ceilings()
    if kind not in ceil:
        why = missing_ceilings().get(kind)
        raise ValueError(f"throughput: no measured ceiling {kind!r} on this device; have {sorted(ceil)}"
                         + (f" ({why})" if why else ""))
    return Throughput(value, unit, ceil[kind], kind, spec_peak(kind))
