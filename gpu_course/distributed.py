"""Several processes working together through ``torch.distributed``: one process per GPU with NCCL
where there are two GPUs or more, else two processes on the CPU with gloo (small sizes; no link to
measure).

* :func:`plan`: which backend, how many ranks, on what device, and what this machine cannot show;
* :class:`Ranks`: the ranks, started once and kept alive, each with its process group set up;
  ``ranks.run(fn, *args)`` runs ``fn(*args)`` on every rank and returns the results in rank order.
  A function defined in a notebook is shipped by its source. A rank that raises gives
  :class:`RankError` with its traceback; ranks that do not finish in time (a ``recv`` without its
  ``send``, a collective that only some ranks call) give :class:`RanksTimeout`. Either way the
  ranks are stopped and the next ``run`` starts new ones: the notebook's kernel lives on;
* collectives and their cost as ``nccl-tests`` defines it: :data:`COLLECTIVES`, :func:`bus_factor`,
  :func:`time_collective` (run on every rank), :func:`sweep` (algorithm and bus bandwidth by size);
* :func:`ring_all_reduce`: the ring all-reduce written with ``isend``/``irecv`` (a reduce-scatter,
  then an all-gather, each of ``n - 1`` steps), and :func:`ring_bytes_per_rank`, what it sends.

Every process with NCCL gets :data:`NCCL_ENV` (NVLink multicast off).

>>> bus_factor("all_reduce", 2), bus_factor("all_gather", 4), bus_factor("broadcast", 8)
(1.0, 0.75, 1.0)
>>> ring_bytes_per_rank(1000, 4)
1500.0
"""
from __future__ import annotations

import builtins
import contextlib
import inspect
import io
import multiprocessing as mp
import os
import pickle
import shutil
import socket
import tempfile
import textwrap
import time
import traceback
import types
from dataclasses import dataclass
from multiprocessing.connection import wait

import torch
import torch.distributed as dist

from . import hardware, mode
from .timing import fmt_ms

# NVLink SHARP (NCCL's NVLS algorithm, NVSwitch multicast) off in every rank: every machine then runs the ring and
# tree algorithms, whose bytes the bus factor counts (with NVLS, busbw can pass the link: notebook 13, section 4).
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

def link_spec_gbps(name: str | None = None) -> float | None:
    """The spec sheet's NVLink bandwidth in one direction (GB/s) of GPU ``name`` (default: this one; from
    :mod:`gpu_course.hardware`), or None where it is not known (the CPU, a GPU without NVLink or not in the table).

    >>> link_spec_gbps("NVIDIA H100 80GB HBM3"), link_spec_gbps("cpu")
    (450.0, None)
    """
    return hardware.link_gbps(name if name is not None else mode.device_name())


# ------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Plan:
    """How the ranks run here: ``backend`` ("nccl" or "gloo"), ``world`` (ranks), ``device``
    ("cuda" or "cpu") and ``note``, one line on what that shows and what it cannot."""
    backend: str
    world: int
    device: str
    note: str


def plan(world: int | None = None, gpus: int | None = None) -> Plan:
    """NCCL with one rank per GPU where there are two GPUs or more (``world`` of them at most), else
    ``world`` (default 2) gloo ranks on the CPU.

    >>> plan(gpus=0).backend, plan(gpus=0).world, plan(gpus=2).backend, plan(world=2, gpus=8).world
    ('gloo', 2, 'nccl', 2)
    """
    gpus = (torch.cuda.device_count() if mode.ON_GPU else 0) if gpus is None else gpus
    if world is not None and world < 1:
        raise ValueError(f"plan: world is the number of ranks, at least 1; got {world}")
    if gpus >= 2:
        n = min(world or gpus, gpus)
        return Plan("nccl", n, "cuda", f"{n} GPUs, one rank each, NCCL")
    n = world or 2
    why = "one GPU" if gpus == 1 else "no GPU"
    return Plan("gloo", n, "cpu", f"{why} here: {n} ranks on the CPU with gloo, at small sizes; their times say "
                                  f"nothing about NVLink or NCCL")


# ------------------------------------------------------------------------------------------ the ranks
class RankError(RuntimeError):
    """A rank raised: the message holds its rank and traceback."""


class RanksTimeout(RuntimeError):
    """Some ranks did not finish in time."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shipped(fn) -> tuple:
    """What a rank needs to call ``fn``: the function itself when a fresh process can import it by
    name, else the sources of ``fn`` and of the notebook's functions it calls (directly or through
    each other), and the other globals they read: modules by name, importable functions and picklable
    values as they are. The rank runs all the sources in one namespace, so functions that call each
    other (or themselves) find each other there."""
    if _importable(fn):
        return ("ref", fn)
    sources, names, todo = {}, {}, [fn]
    while todo:
        f = todo.pop()
        if f.__name__ in sources:
            continue
        sources[f.__name__] = _source(f)
        for name in _global_names(f.__code__):
            if name not in f.__globals__ or name in names or name in sources:
                continue
            v = f.__globals__[name]
            if isinstance(v, types.ModuleType):
                names[name] = ("module", v.__name__)
            elif isinstance(v, types.FunctionType) and not _importable(v):
                todo.append(v)
            else:
                names[name] = ("value", v)
    return ("src", fn.__name__, sources, names)


def _importable(fn) -> bool:
    mod = getattr(fn, "__module__", None)
    return bool(mod) and mod != "__main__" and not mod.startswith("__") and "<locals>" not in \
        getattr(fn, "__qualname__", "<locals>")


def _source(fn) -> str:
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"Ranks.run needs a function, got {type(fn).__name__}")
    if fn.__name__ == "<lambda>":
        raise TypeError("Ranks.run: define the function with def (a lambda cannot be shipped by its source)")
    if fn.__closure__:
        raise TypeError(f"Ranks.run: {fn.__name__} reads variables of an enclosing function; define it at the "
                        f"top level of a cell, and pass what it needs as arguments")
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        raise TypeError(f"Ranks.run: the source of {fn.__name__} cannot be read ({e}); define it with def in a "
                        f"cell or a file") from None


def _global_names(code) -> set:
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _global_names(c)
    return out - set(dir(builtins))


def _rebuilt(shipped):
    if shipped[0] == "ref":
        return shipped[1]
    _, name, sources, names = shipped
    ns = {"__name__": "__rank__"}
    for k, (kind, v) in names.items():
        ns[k] = __import__(v, fromlist=["_"]) if kind == "module" else v
    for fname, src in sources.items():
        exec(compile(src, f"<{fname}>", "exec"), ns)
    return ns[name]


@dataclass(frozen=True)
class _Fn:
    """A function passed as an argument of :meth:`Ranks.run`, shipped as :func:`_shipped` says."""
    shipped: tuple


def _ship_args(args):
    return tuple(_Fn(_shipped(a)) if isinstance(a, types.FunctionType) else a for a in args)


def _unship_args(args):
    return tuple(_rebuilt(a.shipped) if isinstance(a, _Fn) else a for a in args)


def _to_cpu(x):
    """Results travel between processes on the CPU."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_cpu(v) for k, v in x.items()}
    return x


_UNPICKLABLE = ("A rank could not unpack what was sent: a class defined in the notebook cannot travel to the "
                "ranks (they import modules, not cells); define it inside the function, or pass tensors and numbers\n")


def _serve(rank: int, world: int, backend: str, port: int, conn, env: dict, log_path: str) -> None:
    """A rank's process: set up the process group, then run what arrives until ``None`` does. What
    the function prints goes back with its result; everything else the process writes (warnings,
    NCCL's and gloo's own lines) goes to its log file, not into the notebook."""
    log = open(log_path, "a", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    os.environ.update(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, rank=rank, world_size=world,
                                **({"device_id": torch.device("cuda", rank)} if backend == "nccl" else {}))
        conn.send(("ready", None, ""))
    except BaseException:  # noqa: BLE001  told to the parent, which raises it
        conn.send(("error", traceback.format_exc(), ""))
        return
    while True:
        try:
            raw = conn.recv_bytes()
        except (EOFError, OSError):   # the parent is gone
            break
        try:
            msg = pickle.loads(raw)
        except Exception:  # noqa: BLE001  what arrived cannot be unpickled here
            conn.send(("error", traceback.format_exc() + _UNPICKLABLE, ""))
            continue
        if msg is None:
            break
        shipped, args, kwargs = msg
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                out = _rebuilt(shipped)(*_unship_args(args), **kwargs)
            conn.send(("ok", _to_cpu(out), printed.getvalue()))
        except BaseException:  # noqa: BLE001
            conn.send(("error", traceback.format_exc(), printed.getvalue()))
    dist.destroy_process_group()


class Ranks:
    """``world`` processes (see :func:`plan`), each a rank of one process group, kept alive between
    calls of :meth:`run` (starting them costs seconds: each imports torch and sets up the group).

    Use it as a context manager or call :meth:`close`; a ``Ranks`` left open is closed at exit."""

    def __init__(self, world: int | None = None, timeout_s: float = 120.0, plan_: Plan | None = None):
        self.plan = plan_ or plan(world)
        self.world, self.backend, self.device = self.plan.world, self.plan.backend, self.plan.device
        self.timeout_s = timeout_s
        self._procs, self._conns = [], []
        self._log_dir = None

    # starting and stopping -----------------------------------------------------------------
    def start(self) -> "Ranks":
        if self._procs:
            return self
        ctx = mp.get_context("spawn")   # a rank is a fresh interpreter: no CUDA state copied by fork
        port = _free_port()
        env = {**(NCCL_ENV if self.backend == "nccl" else {}), mode.MODE_ENV: mode.MODE}
        self._log_dir = self._log_dir or tempfile.mkdtemp(prefix="ranks-")
        for rank in range(self.world):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(rank, self.world, self.backend, port, child, env,
                                                 self._log_path(rank)), daemon=True)
            p.start()
            child.close()
            self._procs.append(p)
            self._conns.append(parent)
        self._gather("setting up the process group", self.timeout_s)
        return self

    def close(self) -> None:
        """Stop the ranks (a later :meth:`run` starts new ones) and remove their logs."""
        for c in self._conns:
            try:
                c.send_bytes(pickle.dumps(None))
            except (OSError, EOFError, BrokenPipeError):
                pass
        for p in self._procs:
            p.join(timeout=5)
        self._kill()
        if self._log_dir:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    def _log_path(self, rank: int) -> str:
        return os.path.join(self._log_dir, f"rank{rank}.log")

    def log(self, rank: int) -> str:
        """What rank ``rank``'s processes wrote besides the functions' prints (warnings, NCCL's lines),
        since the ranks were first started."""
        try:
            with open(self._log_path(rank)) as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def _kill(self) -> None:
        for p in self._procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
        for c in self._conns:
            c.close()
        self._procs, self._conns = [], []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self._kill()
        except Exception:  # noqa: BLE001  interpreter shutdown
            pass

    def by_backend(self, nccl, gloo):
        """``nccl`` where the ranks are GPUs with NCCL, else ``gloo`` (sizes, repeats: the CPU's are small)."""
        return nccl if self.backend == "nccl" else gloo

    # running --------------------------------------------------------------------------------
    def run(self, fn, *args, timeout_s: float | None = None, **kwargs) -> list:
        """``fn(*args, **kwargs)`` on every rank; the results in rank order (tensors on the CPU).
        Inside ``fn``, ``dist.get_rank()`` and ``dist.get_world_size()`` say which rank it is."""
        shipped, args = _shipped(fn), _ship_args(args)   # functions among the arguments travel too
        self.start()
        try:
            message = pickle.dumps((shipped, args, kwargs))
        except Exception as e:  # noqa: BLE001  a value that cannot travel: say which, before any rank waits
            raise TypeError(f"Ranks.run: {getattr(fn, '__name__', 'the function')} or its arguments cannot be sent "
                            f"to the ranks ({type(e).__name__}: {e}); pass tensors, numbers and functions") from None
        for c in self._conns:
            c.send_bytes(message)
        return self._gather(getattr(fn, "__name__", "the function"), timeout_s or self.timeout_s)

    def _gather(self, what: str, timeout_s: float) -> list:
        results, errors, printed = {}, {}, {}
        pending = dict(enumerate(self._conns))
        deadline = time.monotonic() + timeout_s
        try:
            while pending:
                left = deadline - time.monotonic()
                if errors:   # the others may wait for the failed rank forever: a short grace
                    left = min(left, 3.0)
                ready = wait(list(pending.values()), timeout=max(left, 0))
                if not ready:
                    break
                for rank, c in list(pending.items()):
                    if c in ready:
                        try:
                            kind, value, printed[rank] = c.recv()
                        except (EOFError, OSError):
                            kind, value = "error", _ended(rank, self._procs[rank], what)
                        del pending[rank]
                        if kind == "error":
                            errors[rank] = value
                        else:
                            results[rank] = value
        except BaseException:   # Ctrl-C in the notebook: the ranks go too
            self._kill()
            raise
        for rank in sorted(printed):   # what each rank printed, rank by rank
            for line in printed[rank].splitlines():
                print(f"[rank {rank}] {line}")
        if errors or pending:
            self._kill()
        if errors:
            rank = min(errors)
            tail = errors[rank].rstrip().splitlines()
            raise RankError(f"rank {rank} of {self.world} raised in {what}: {tail[-1]}\n"
                            + "\n".join(tail[-12:]) + f"\n(the ranks were stopped; the next run starts new ones; "
                            f"Ranks.log({rank}) shows what the process wrote besides prints)")
        if pending:
            raise RanksTimeout(
                f"rank{'s' if len(pending) > 1 else ''} {', '.join(map(str, sorted(pending)))} of {self.world} did not "
                f"finish {what} in {timeout_s:g} s: a recv without its send, or a collective that not every rank "
                f"calls, waits forever. The ranks were stopped; the next run starts new ones.")
        return [results[r] for r in range(self.world)]


def _ended(rank: int, proc, what: str) -> str:
    proc.join(timeout=5)
    why = f"rank {rank}'s process ended (exit code {proc.exitcode})"
    if what.startswith("setting up"):   # a script's ranks import the script (spawn) and start ranks again
        why += ("; in a script, start the ranks under `if __name__ == \"__main__\":` (each rank imports the "
                f"script); the rank's own error is above, or in Ranks.log({rank})")
    return why + "\n"


# ------------------------------------------------------------------------------------ collectives
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def bus_factor(op: str, n: int) -> float:
    """Bus bandwidth over algorithm bandwidth, as ``nccl-tests`` defines them: the share of the data
    each rank must send (and receive) for the collective, whatever the algorithm. ``algbw`` is the
    size over the time; ``busbw = algbw * bus_factor`` is comparable with a link's bandwidth.

    >>> [bus_factor(op, 2) for op in COLLECTIVES]
    [1.0, 0.5, 0.5, 1.0]
    """
    if op not in COLLECTIVES:
        raise ValueError(f"bus_factor: op is one of {COLLECTIVES}, got {op!r}")
    if n < 1:
        raise ValueError(f"bus_factor: n is the number of ranks, at least 1; got {n}")
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "broadcast": 1.0}[op]


def _gather_fn():
    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor   # renamed in torch 2.13


def _scatter_fn():
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def all_gather_into(out: torch.Tensor, inp: torch.Tensor) -> None:
    """Every rank's ``inp`` side by side in ``out`` (``n`` times its size), on every rank."""
    _gather_fn()(out, inp)


def reduce_scatter_into(out: torch.Tensor, inp: torch.Tensor) -> None:
    """The sum over ranks of ``inp``, cut in ``n`` parts: part ``rank`` into ``out``."""
    _scatter_fn()(out, inp)


def _operation(op: str, nbytes: int, device):
    """The call that ``time_collective`` repeats, on buffers as ``nccl-tests`` sizes them: ``nbytes``
    is the whole buffer of all_reduce and broadcast, the output of all_gather, the input of
    reduce_scatter (float32 elements, a multiple of the world's size)."""
    n = dist.get_world_size()
    count = max(n, nbytes // 4 // n * n)
    big = torch.ones(count, device=device)
    part = torch.ones(count // n, device=device)
    return {"all_reduce": lambda: dist.all_reduce(big),
            "all_gather": lambda: all_gather_into(big, part),
            "reduce_scatter": lambda: reduce_scatter_into(part, big),
            "broadcast": lambda: dist.broadcast(big, 0)}[op], count * 4


def time_collective(op: str, nbytes: int, iters: int = 20, warmup: int = 5) -> tuple:
    """On every rank: ``(seconds per call, bytes)`` of ``iters`` back-to-back calls of collective ``op``
    on a buffer of about ``nbytes``, after ``warmup`` calls and a barrier; the calls are queued
    without waiting, as a training step queues them, and the time ends when the last has finished
    on this rank."""
    device = rank_device()
    call, size = _operation(op, nbytes, device)
    return loop_seconds(call, iters, warmup, device), size


def loop_seconds(call, iters: int, warmup: int, device) -> float:
    """On every rank: seconds per call of ``call()`` made ``iters`` times back to back (queued without
    waiting, as a training step queues them), after ``warmup`` calls and a barrier; the time ends when
    the last call has finished on this rank."""
    for _ in range(warmup):
        call()
    sync_device(device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    sync_device(device)
    return (time.perf_counter() - t0) / iters


def rank_device() -> torch.device:
    """The device of this rank: its GPU with NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def sync_device(device) -> None:
    """Wait for the GPU's queued work where ``device`` is a GPU (nothing to wait for on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class CollectiveTime:
    """One collective at one size: the slowest rank's time per call, and the bandwidths."""
    op: str
    nbytes: int
    seconds: float
    world: int

    @property
    def algbw(self) -> float:
        """Algorithm bandwidth, GB/s: the size over the time."""
        return self.nbytes / self.seconds / 1e9

    @property
    def busbw(self) -> float:
        """Bus bandwidth, GB/s: comparable with a link's bandwidth in one direction."""
        return self.algbw * bus_factor(self.op, self.world)


def sweep(ranks: Ranks, op: str, sizes, iters: int = 20, warmup: int = 5) -> list:
    """:func:`time_collective` of ``op`` at each size on ``ranks``: :class:`CollectiveTime` rows (the
    time of the slowest rank, which is when the collective is done for everyone)."""
    rows = []
    for nbytes in sizes:
        per_rank = ranks.run(time_collective, op, int(nbytes), iters, warmup)
        rows.append(CollectiveTime(op, per_rank[0][1], max(t for t, _ in per_rank), ranks.world))
    return rows


def sizes(lo: int, hi: int, factor: int = 4) -> list:
    """Sizes in bytes from ``lo`` to ``hi``, each ``factor`` times the last.

    >>> sizes(4096, 65536)
    [4096, 16384, 65536]
    """
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def fmt_bytes(n: float) -> str:
    """Bytes in binary units.

    >>> fmt_bytes(4096), fmt_bytes(2**30), fmt_bytes(100)
    ('4 KB', '1 GB', '100 B')
    """
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


def half_bandwidth_size(rows) -> int:
    """The first size of a sweep whose bus bandwidth reaches half the sweep's best: below it the
    latency dominates, above it the bandwidth."""
    best = max(r.busbw for r in rows)
    return next(r.nbytes for r in rows if r.busbw >= best / 2)


def sweep_table(sweeps: dict, spec_gbps: float | None = None) -> str:
    """A table of :func:`sweep` results by size: each collective's time per call and bus bandwidth
    (and its % of ``spec_gbps``, the link's spec-sheet bandwidth in one direction, if given)."""
    ops = list(sweeps)
    head = f"{'size':>8}" + "".join(f" {op + ' time, busbw':>30}" for op in ops)
    lines = [head]
    for i, r0 in enumerate(sweeps[ops[0]]):
        cells = []
        for op in ops:
            r = sweeps[op][i]
            pct = f" {100 * r.busbw / spec_gbps:3.0f}%" if spec_gbps else ""
            cells.append(f"{fmt_ms(r.seconds * 1e3):>11}, {r.busbw:8.2f} GB/s{pct}")
        lines.append(f"{fmt_bytes(r0.nbytes):>8}" + "".join(f" {c:>30}" for c in cells))
    if spec_gbps:
        lines.append(f"(% of the link's {spec_gbps:g} GB/s in one direction, spec sheet)")
    return "\n".join(lines)


def claim_on_nccl(ranks: "Ranks", statement: str, holds, evidence: str = "") -> None:
    """:func:`utils.claim` for a sentence about NCCL between GPUs: checked where the ranks are GPUs
    with NCCL (a false one fails the cell on the GPUs the notebook's stored outputs come from);
    elsewhere printed as such, unchecked."""
    if ranks.backend == "nccl":
        from .claims import claim
        claim(statement, holds, evidence=evidence)
    else:
        print(f"(with NCCL between GPUs: {statement}. Not checked here: the ranks are CPU processes.)")


def torchrun(script, nproc: int, args=(), timeout_s: float = 300.0) -> str:
    """Run ``script`` with ``torchrun --standalone --nproc_per_node=nproc`` (``python -m
    torch.distributed.run``), with NCCL's environment as the ranks get it; returns what the ranks
    printed, rank 0's lines first (torchrun writes each rank's output to its own file: their lines
    cannot mix). Raises with the end of the ranks' errors if it fails."""
    import subprocess
    import sys
    from pathlib import Path
    from .paths import ROOT
    env = {**os.environ, **NCCL_ENV, mode.MODE_ENV: mode.MODE,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory(prefix="torchrun-") as logs:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "--log-dir", logs, "--redirects", "3", str(script), *map(str, args)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RanksTimeout(f"torchrun {script}: the ranks did not finish in {timeout_s:g} s") from None

        def by_rank(name):
            files = sorted(Path(logs).glob(f"*/attempt_*/*/{name}"), key=lambda f: int(f.parent.name))
            return [f.read_text() for f in files]
        if r.returncode:
            errors = "".join(by_rank("stderr.log")) or r.stderr
            raise RankError(f"torchrun {script} failed (exit code {r.returncode}):\n"
                            + "\n".join(errors.rstrip().splitlines()[-15:]))
        return "".join(by_rank("stdout.log")).rstrip("\n")


# ------------------------------------------------------------------------- a ring all-reduce by hand
def ring_bytes_per_rank(nbytes: float, n: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``nbytes``: ``n - 1`` steps of a reduce-scatter,
    then ``n - 1`` of an all-gather, each step one ``nbytes / n`` chunk: ``2 (n - 1) / n * nbytes``."""
    return 2 * (n - 1) / n * nbytes


def ring_seconds(nbytes: float, n: int, alpha: float, bandwidth: float) -> float:
    """Time of the ring all-reduce by hand (:func:`ring_all_reduce`) of ``nbytes`` over ``n`` ranks when each of its
    ``2 (n - 1)`` steps, one after another, costs a latency ``alpha`` (s) plus its ``nbytes / n`` chunk over a link
    of ``bandwidth`` bytes/s: ``2 (n - 1) (alpha + nbytes / (n bandwidth))``.

    >>> ring_seconds(1e9, 2, 50e-6, 1e11) * 1e3
    10.1
    """
    return 2 * (n - 1) * (alpha + nbytes / (n * bandwidth))


def exchange(send: torch.Tensor, recv: torch.Tensor, right: int, left: int) -> None:
    """Send ``send`` to rank ``right`` while receiving ``recv`` from rank ``left`` (both posted
    before either waits: each rank sends first and receives first at once, so none blocks)."""
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]):
        w.wait()


def ring_all_reduce(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over the ranks, in place, by a ring: cut ``t`` in ``n`` chunks; in the reduce-scatter
    each rank sends a chunk to its right neighbour and adds the one from its left, ``n - 1`` times,
    after which rank ``r`` holds the full sum of chunk ``(r + 1) % n``; in the all-gather the summed
    chunks go round the ring ``n - 1`` times, each rank keeping what it receives."""
    n, r = dist.get_world_size(), dist.get_rank()
    if n == 1:
        return t
    if not t.is_contiguous():
        raise ValueError("ring_all_reduce: t must be contiguous (it is sent chunk by chunk, in place)")
    chunks = t.view(-1).tensor_split(n)
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):              # reduce-scatter
        send, recv = (r - s) % n, (r - s - 1) % n
        buf = torch.empty_like(chunks[recv])
        exchange(chunks[send], buf, right, left)
        chunks[recv].add_(buf)
    for s in range(n - 1):              # all-gather
        send, recv = (r - s + 1) % n, (r - s) % n
        exchange(chunks[send], chunks[recv], right, left)
    return t


def time_all_reduce(which: str, nbytes: int, iters: int) -> tuple:
    """On every rank: ``(loop seconds per call, CPU seconds per call)`` of ``which`` ("library":
    ``dist.all_reduce``; "ring": :func:`ring_all_reduce`) on about ``nbytes`` of float32: the loop
    queues ``iters`` calls back to back and waits once; the CPU figure is the median time for one call
    to return, started together on every rank (NCCL's all_reduce returns once its kernel is queued)."""
    device = rank_device()
    g = torch.Generator(device).manual_seed(dist.get_rank())
    work = torch.randn(max(dist.get_world_size(), nbytes // 4), device=device, generator=g)
    call = ring_all_reduce if which == "ring" else dist.all_reduce
    loop = loop_seconds(lambda: call(work), iters, 3, device)
    cpu = []
    for _ in range(iters):
        sync_device(device)
        dist.barrier()
        t0 = time.perf_counter()
        call(work)
        cpu.append(time.perf_counter() - t0)
    sync_device(device)
    return loop, sorted(cpu)[len(cpu) // 2]


def graph_seconds(call, iters: int, device, replays: int = 5) -> float | None:
    """On every rank: seconds per call of ``call()`` with the CPU's cost hidden: ``iters`` calls
    captured once in a CUDA graph (NCCL's collectives can be: the graph holds their kernels) and the
    graph replayed ``replays`` times back to back, after a barrier. What is left is the GPUs' own time:
    NCCL's kernel, the handshake over the link and the data. None where the rank has no GPU."""
    if torch.device(device).type != "cuda":
        return None
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):          # a capture is made after warm-up calls on a side stream
        for _ in range(3):
            call()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: NCCL's watchdog thread may query events while this thread captures
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(iters):
            call()
    graph.replay()
    sync_device(device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    sync_device(device)
    return (time.perf_counter() - t0) / (replays * iters)


def all_reduce_three_ways(nbytes: int, iters: int = 20) -> tuple:
    """On every rank: ``(loop, gpu, cpu)`` seconds per ``dist.all_reduce`` of about ``nbytes`` of
    float32: the loop of back-to-back calls and the CPU's time for one call to return
    (:func:`time_all_reduce`), and the GPU's own time with the launches hidden (:func:`graph_seconds`;
    None on CPU ranks)."""
    loop, cpu = time_all_reduce("library", nbytes, iters)
    device = rank_device()
    work = torch.ones(max(dist.get_world_size(), nbytes // 4), device=device)
    return loop, graph_seconds(lambda: dist.all_reduce(work), iters, device), cpu


def three_ways_table(ranks: "Ranks", sizes_: list, iters: int = 20) -> dict:
    """:func:`all_reduce_three_ways` at each size on ``ranks`` (the slowest rank's figures), printed as
    a table; returns ``{nbytes: (loop, gpu, cpu)}`` in seconds (gpu None on CPU ranks)."""
    out = {}
    for nbytes in sizes_:
        per_rank = ranks.run(all_reduce_three_ways, int(nbytes), iters)
        gpus = [r[1] for r in per_rank]
        out[int(nbytes)] = (max(r[0] for r in per_rank), None if None in gpus else max(gpus),
                            max(r[2] for r in per_rank))
    print(f"{'size':>8} {'loop/call':>11} {'GPU (graph)':>12} {'CPU/call':>11}")
    for nbytes, (loop, gpu, cpu) in out.items():
        g = fmt_ms(gpu * 1e3) if gpu is not None else "-"
        print(f"{fmt_bytes(nbytes):>8} {fmt_ms(loop * 1e3):>11} {g:>12} {fmt_ms(cpu * 1e3):>11}")
    return out


def ring_error(n: int) -> float:
    """On every rank: the largest difference between :func:`ring_all_reduce` and ``dist.all_reduce``
    on ``n`` fresh random float64 numbers per rank, relative to the largest sum."""
    g = torch.Generator().manual_seed(1000 + dist.get_rank())
    x = torch.randn(n, generator=g, dtype=torch.float64).to(rank_device())
    ref = x.clone()
    dist.all_reduce(ref)
    return ((ring_all_reduce(x.clone()) - ref).abs().max() / ref.abs().max()).item()


@dataclass(frozen=True)
class RingRow:
    """One size: the library's and the hand ring's (loop, CPU) seconds per call (the slowest rank's)."""
    nbytes: int
    library: tuple
    ring: tuple


def compare_ring(ranks: Ranks, sizes_: list, iters: int) -> list:
    """:func:`time_all_reduce` of the library and of the ring at each size, interleaved size by size."""
    rows = []
    for nbytes in sizes_:
        got = {w: ranks.run(time_all_reduce, w, int(nbytes), iters) for w in ("library", "ring")}
        rows.append(RingRow(int(nbytes), *(tuple(max(r[i] for r in got[w]) for i in (0, 1))
                                           for w in ("library", "ring"))))
    return rows


def ring_table(rows: list, library: str) -> str:
    """The hand ring against ``library``'s all_reduce: loop and CPU time per call, and the ring's loop
    time over the library's."""
    lines = [f"{'size':>8} {'':>18} {'loop/call':>11} {'CPU/call':>11}  ring / library (loop)"]
    for r in rows:
        for name, (loop, cpu) in ((f"{library} all_reduce", r.library), ("ring by hand", r.ring)):
            lines.append(f"{fmt_bytes(r.nbytes):>8} {name:>18} {fmt_ms(loop * 1e3):>11} {fmt_ms(cpu * 1e3):>11}  "
                         f"{loop / r.library[0]:19.2f}×")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- judging an answer
# torch.distributed's communication calls, watched while a learner's function runs on the ranks
_GATHERS = ("all_gather", "all_gather_into_tensor", "all_gather_single")
_SCATTERS = ("reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single")
_OTHERS = ("all_reduce", "broadcast", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single",
           "send", "recv", "isend", "irecv", "batch_isend_irecv")


def run_watched(fn, numel: int) -> tuple:
    """On every rank: ``fn(t)`` on a fresh float64 ``t`` of ``numel`` random numbers, with every
    communication call of ``torch.distributed`` recorded (the calls ``fn`` makes, not those one of them makes
    inside). Returns ``(fn's result, the sum over ranks of t computed by dist.all_reduce beforehand, [(call, [numel
    of each tensor argument], [data_ptr of each]), ...])``."""
    g = torch.Generator().manual_seed(7 + dist.get_rank())
    t = torch.randn(numel, generator=g, dtype=torch.float64).to(rank_device())
    ref = t.clone()
    dist.all_reduce(ref)
    seen, depth = [], [0]

    def watched(name, f):
        def call(*args, **kwargs):
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            if not depth[0]:
                seen.append((name, [a.numel() for a in tensors], [a.data_ptr() for a in tensors]))
            depth[0] += 1
            try:
                return f(*args, **kwargs)
            finally:
                depth[0] -= 1
        return call
    originals = {n: getattr(dist, n) for n in _GATHERS + _SCATTERS + _OTHERS if hasattr(dist, n)}
    for n, f in originals.items():
        setattr(dist, n, watched(n, f))
    try:
        out = fn(t.clone())
    finally:
        for n, f in originals.items():
            setattr(dist, n, f)
    return out, ref, seen


def check_composed_all_reduce(ranks: Ranks, fn, timeout_s: float = 60.0) -> None:
    """The check of an all-reduce built from one reduce-scatter and one all-gather: run on every rank by
    :func:`run_watched` at two lengths (multiples of the number of ranks); raises AssertionError saying
    what is wrong (a wrong sum, an all_reduce, not exactly one reduce-scatter and one all-gather, an
    all-gather of anything but the reduce-scatter's output, other communication). A function that makes the ranks wait forever gives
    :class:`RanksTimeout` after ``timeout_s``."""
    n, name = ranks.world, getattr(fn, "__name__", "your function")
    for numel in (3 * n, 4099 * n):
        for rank, (out, ref, seen) in enumerate(ranks.run(run_watched, fn, numel, timeout_s=timeout_s)):
            calls = [c for c, _, _ in seen]
            assert "all_reduce" not in calls, f"{name} calls dist.all_reduce: build the sum from a reduce-scatter " \
                                              f"and an all-gather"
            assert isinstance(out, torch.Tensor) and out.shape == ref.shape, \
                f"{name} must return the summed tensor, of t's shape {tuple(ref.shape)}; it returned " \
                f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}"
            bad = (out.double() - ref).abs().max().item()
            assert bad <= 1e-9 * ref.abs().max().item(), \
                f"on rank {rank}, {numel} elements: the result differs from the sum over ranks by up to {bad:.3g}"
            scatters = [s for s in seen if s[0] in _SCATTERS]
            gathers = [s for s in seen if s[0] in _GATHERS]
            assert scatters, f"{name} runs no reduce-scatter (gd.reduce_scatter_into)"
            assert gathers, f"{name} runs no all-gather (gd.all_gather_into)"
            whole = [c for c, sizes, _ in gathers if min(sizes, default=0) >= numel]
            assert not whole, f"{name} all-gathers the whole tensor: each rank then receives n times the data; " \
                              f"gather only the summed parts (numel / n each)"
            assert len(scatters) == 1 and len(gathers) == 1, \
                f"{name} runs {len(scatters)} reduce-scatter(s) and {len(gathers)} all-gather(s): the all-reduce is " \
                f"exactly one of each"
            assert scatters[0][2][0] == gathers[0][2][-1], \
                f"{name}'s all-gather does not gather the reduce-scatter's output: gather the summed part that the " \
                f"reduce-scatter wrote, so that every rank receives every summed part"
            others = sorted({c for c in calls if c in _OTHERS})
            assert not others, f"{name} also calls {', '.join(others)}: one reduce-scatter and one all-gather " \
                               f"are the whole all-reduce"
