"""Several processes working together through ``torch.distributed``: one process per GPU with NCCL
where there are two GPUs or more, else two processes on the CPU with gloo (small sizes; no link to
measure).

* :func:`plan`: which backend, how many ranks, on what device, and what this machine cannot show;
* :class:`Ranks`: the ranks, started once and kept alive, each with its process group set up;
  ``ranks.run(fn, *args)`` runs ``fn(*args)`` on every rank and returns the results in rank order.
  A function defined in a notebook is shipped by its source (:mod:`gpu_course.shipping`). A rank that
  raises gives :class:`RankError` with its traceback; ranks that do not finish in time (a ``recv``
  without its ``send``, a collective that only some ranks call) give :class:`RanksTimeout`. Either way
  the ranks are stopped and the next ``run`` starts new ones: the notebook's kernel lives on;
* :func:`torchrun`: a script on ``nproc`` ranks, as ``torchrun`` starts them; :func:`rank_device`,
  :func:`sync_device`, :func:`claim_on_nccl`: what a function running on the ranks needs.

What runs on the ranks is elsewhere: collectives and their cost as ``nccl-tests`` defines it in
:mod:`gpu_course.collectives`, the ring all-reduce by hand in :mod:`gpu_course.ring_all_reduce`, the check
of a composed all-reduce in :mod:`gpu_course.collective_check`.

Every process with NCCL gets :data:`NCCL_ENV` (NVLink multicast off).

>>> plan(gpus=0).backend, plan(gpus=2).world
('gloo', 2)
"""
from __future__ import annotations

import contextlib
import io
import multiprocessing as mp
import os
import pickle
import shutil
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait

import torch
import torch.distributed as dist

from . import mode
from .shipping import UNPICKLABLE, rebuilt, ship_args, shipped, to_cpu, unship_args

# NVLink SHARP (NCCL's NVLS algorithm, NVSwitch multicast) off in every rank: every machine then runs the ring and
# tree algorithms, whose bytes the bus factor counts (with NVLS, busbw can pass the link: notebook 13, section 4).
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}



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
            conn.send(("error", traceback.format_exc() + UNPICKLABLE, ""))
            continue
        if msg is None:
            break
        sent, args, kwargs = msg
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                out = rebuilt(sent)(*unship_args(args), **kwargs)
            conn.send(("ok", to_cpu(out), printed.getvalue()))
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
        sent, args = shipped(fn), ship_args(args)   # functions among the arguments travel too
        self.start()
        try:
            message = pickle.dumps((sent, args, kwargs))
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



def rank_device() -> torch.device:
    """The device of this rank: its GPU with NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def sync_device(device) -> None:
    """Wait for the GPU's queued work where ``device`` is a GPU (nothing to wait for on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)



def claim_on_nccl(ranks: "Ranks", statement: str, holds, evidence: str = "") -> None:
    """:func:`utils.claim` for a sentence about NCCL between GPUs: checked where the ranks are GPUs
    with NCCL (a false one fails the cell on the GPUs the notebook's stored outputs come from);
    elsewhere printed as such, unchecked."""
    if ranks.backend == "nccl":
        from .claims import claim
        claim(statement, holds, evidence=evidence)
    else:
        print(f"(with NCCL between GPUs: {statement}. Not checked here: the ranks are CPU processes.)")
