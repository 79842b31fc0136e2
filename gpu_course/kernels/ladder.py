"""A CUDA C ladder declared once: its rungs (one idea each, the name a rung is reported under), the files
each rung builds from, the host functions a build exposes and the compiled shapes (configurations) of the
rungs that have several; and what every ladder does with them: give a rung's file and its source, join the
source of some rungs for ``load_cuda``, build them, say which rungs run here, and autotune a rung's shapes
(each checked against float64 into a poisoned output, then timed; the fastest kept per size).

Notebook 04's fp32 matmul (:mod:`.matmul_ladder`), notebook 09's sums (:mod:`.reductions`), notebook 03's
elementwise steps (:mod:`.elementwise`) and notebook 12's tensor cores (:mod:`.tensor_cores`) each declare
one :class:`Ladder`; their modules keep their public functions, which call it.

>>> steps = Ladder("demo", {1: "rung 1 naive"}, numbered("matmul"))
>>> steps.rung_file(1)
'matmul/01_naive.cu'
>>> steps.rung_file(2)
Traceback (most recent call last):
...
ValueError: rung_file: no rung 2; the ladder has rungs [1]
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ..checking import check, poisoned
from ..cuda import get_sig
from ..mode import ON_GPU
from ..timing import Timing, bench as _bench, fmt_ms
from . import CUDA_DIR, build_source, cuda_source, cuda_unit


def numbered(folder: str) -> Callable:
    """The files of a ladder whose rung ``r`` is the one file ``folder/0r_*.cu`` (under ``cuda/``): a function
    ``rung -> [that file]`` (``[]`` where there is none, or several)."""
    def files(rung) -> list:
        found = sorted(CUDA_DIR.glob(f"{folder}/{rung:02d}_*.cu")) if isinstance(rung, int) else []
        return [str(found[0].relative_to(CUDA_DIR))] if len(found) == 1 else []
    return files


def _everywhere(rung, cfg=0) -> tuple:
    """Every rung in every shape runs everywhere: ``(True, "")``."""
    return True, ""


@dataclass
class Ladder:
    """One ladder of CUDA C kernels, each rung one idea, and what is done with them.

    ``rungs``: rung -> the name its results are reported under; ``files``: rung -> the files (under ``cuda/``)
    it builds from, in order, its own file last; ``funcs``: the rungs of a build (a sorted list, or None: the
    whole ladder) -> the host functions the build exposes; ``configs``: rung -> the names of its compiled shapes
    in cfg order (cfg 0 the default), for the rungs that have several; ``runs_here``: ``(rung) -> (ok, reason)``
    on this machine; ``unit``: files -> one source for ``load_cuda`` (default :func:`cuda_unit`); ``whole``:
    the files the whole ladder builds from where that is not every rung's (e.g. a dispatcher that includes
    them); ``what``: how messages name the ladder."""
    name: str
    rungs: dict
    files: Callable
    funcs: Callable = None
    configs: dict = field(default_factory=dict)
    runs_here: Callable = _everywhere
    unit: Callable = cuda_unit
    whole: Callable = None
    what: str = "the ladder"
    tuned: dict = field(default_factory=dict)   # (rung, h, w, k) -> Tuned, for this process

    def check_rung(self, rung, who: str) -> None:
        """Raise a ValueError naming ``who`` unless ``rung`` is a rung of this ladder."""
        if rung not in self.rungs:
            raise ValueError(f"{who}: no rung {rung!r}; {self.what} has rungs {sorted(self.rungs)}")

    def rung_files(self, rung, who: str = "rung_file") -> list:
        """The files (under ``gpu_course/kernels/cuda/``) rung ``rung`` builds from, in order."""
        found = self.files(rung) if rung in self.rungs else []
        if not found:
            raise ValueError(f"{who}: no rung {rung!r}; {self.what} has rungs {sorted(self.rungs)}")
        return list(found)

    def rung_file(self, rung) -> str:
        """The file (under ``gpu_course/kernels/cuda/``) that holds rung ``rung``'s kernels."""
        return self.rung_files(rung)[-1]

    def rung_source(self, rung) -> str:
        """The CUDA C of rung ``rung``'s own file, as a notebook prints it."""
        return cuda_source(self.rung_file(rung)).rstrip()

    def build_files(self, rungs=None) -> list:
        """The files a build of ``rungs`` reads (default: the whole ladder), each once, in order."""
        if rungs is None and self.whole is not None:
            return list(self.whole())
        rungs = sorted(self.rungs) if rungs is None else rungs
        return list(dict.fromkeys(f for r in rungs for f in self.rung_files(r)))

    def source(self, rungs=None) -> str:
        """The CUDA C of ``rungs`` (default: the whole ladder), ready for ``load_cuda``."""
        return self.unit(*self.build_files(rungs))

    def cpp_source(self, funcs: list, src: str) -> str:
        """The declarations of the host functions ``funcs`` of ``src``, for ``load_cuda``'s ``cpp_src``."""
        return "\n".join(get_sig(f, src) for f in funcs)

    def build(self, rungs=None, **load_cuda_kwargs):
        """Build (or load from the cache) ``rungs`` (default: the whole ladder): a module with ``funcs(rungs)``."""
        return build_source(self.source(rungs), self.funcs(rungs), **load_cuda_kwargs)

    def rungs_here(self, quiet: bool = False) -> dict:
        """:attr:`rungs` without those that cannot run here (``runs_here``), printing one line for each one left
        out (unless ``quiet``)."""
        out = {}
        for rung, name in self.rungs.items():
            ok, why = self.runs_here(rung)
            if ok:
                out[rung] = name
            elif not quiet:
                print(why)
        return out

    def autotune(self, rung: int, m, n, call: Callable, *, cfgs, tol: dict, who: str, out=None, bench=_bench,
                 retune: bool = False, style: dict = None) -> "Tuned":
        """Check every shape ``cfgs`` of rung ``rung`` on ``m`` (h x k) @ ``n`` (k x w) against the product in
        float64 (tolerances ``tol``, a poisoned output), time each with ``bench`` and return the fastest with the
        table (a :class:`Tuned`, formatted by ``style``). ``call(out, cfg)`` gives ``(function, arguments)`` that
        write rung ``rung``'s product in shape ``cfg`` into ``out``; ``out`` is what the timed runs write (default:
        a poisoned tensor). On the CPU one run each (``bench`` left as ``utils.bench``): emulation times say
        nothing about a GPU. Cached per (rung, h, w, k) for this process; ``retune=True`` times again."""
        h, k = m.shape
        w = n.shape[1]
        key = (rung, h, w, k)
        if key in self.tuned and not retune:
            return self.tuned[key]
        if not ON_GPU and bench is _bench:
            bench = functools.partial(_bench, warmup=0, reps=1)
        ref = m.double() @ n.double()
        out = poisoned(h, w, dtype=m.dtype, device=m.device) if out is None else out
        table = []
        for cfg in cfgs:
            name = self.configs[rung][cfg]
            fn, args = call(poisoned(h, w, dtype=m.dtype, device=m.device), cfg)
            check(fn(*args), ref, **tol, name=f"rung {rung} cfg {cfg} ({name})")
            fn, args = call(out, cfg)
            t = bench(fn, *args)
            if not isinstance(t, Timing):
                raise TypeError(f"{who}: bench must return a Timing, got {type(t).__name__}")
            table.append((cfg, name, t))
        best = min(table, key=lambda row: row[2].median)[0]
        self.tuned[key] = Tuned(rung, (h, w, k), best, table, **(style or {}))
        return self.tuned[key]


class Tuned(NamedTuple):
    """What :meth:`Ladder.autotune` found for one rung at one size: the fastest cfg and every cfg's row; the
    last fields say how ``print`` shows it."""
    rung: int
    size: tuple        # (h, w, k)
    best: int          # the cfg to run
    table: list        # one (cfg, name, Timing) per shape timed, in cfg order
    shapes: str = "every shape"   # what the title says was checked and timed
    cfg_width: int = 0            # the cfg column's width
    name_width: int = 46          # the shape name column's width
    cpu_note: str = "cpu mode: the emulation picked cfg {best}; its times say nothing about a GPU"  # {best}, {t}

    def __str__(self):
        h, w, k = self.size
        lines = [f"rung {self.rung} at h={h}, w={w}, k={k}: {self.shapes} checked against float64, then timed"]
        for cfg, name, t in self.table:
            rate = f"{2 * h * w * k / t.median / 1e9:8.1f} TFLOP/s" if t.on_gpu else ""
            lines.append(f"{'*' if cfg == self.best else ' '} cfg {cfg:{self.cfg_width}d} {name:{self.name_width}s} "
                         f"{fmt_ms(t.median):>10s} {rate}")
        best = next(row for row in self.table if row[0] == self.best)
        lines.append(f"best: cfg {self.best} ({best[1]})")
        if not best[2].on_gpu:
            lines.append(self.cpu_note.format(best=self.best, t=best[2]))
        return "\n".join(lines)
