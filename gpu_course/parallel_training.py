"""Training one model on several ranks (each function runs on every rank, through
:meth:`gpu_course.distributed.Ranks.run`): data parallelism with DDP, and sharding with FSDP
(``fully_shard``).

* :func:`mlp`: the model, the same on every rank (seeded), and :func:`batch`, the global batch;
* :func:`ddp_gradients`: one step of DDP, each rank on its slice of the batch: the gradients it
  ends with (all ranks hold the same: the mean over the whole batch);
* :func:`step_time`: seconds per training step, alone on rank 0 or with DDP on every rank, with a
  given gradient bucket size (``bucket_cap_mb``); :func:`overlap`: on a GPU, how much of the
  all-reduce kernels' time ran while backward kernels ran (from a torch.profiler trace);
* :func:`state_bytes`: the bytes of parameters, gradients and Adam's state each rank holds under
  DDP and under FSDP, and :func:`losses`, the first steps' losses of either;
* :func:`comm_bytes_per_step`: what each rank sends per step, as a formula.
"""
from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .distributed import rank_device, sync_device
from .timeline import union


def mlp(d: int, layers: int, seed: int = 0) -> torch.nn.Sequential:
    """``layers`` blocks of Linear(d, d) + GELU, then Linear(d, d); the same weights on every rank."""
    g = torch.Generator().manual_seed(seed)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(d, d), torch.nn.GELU()]
    mods.append(torch.nn.Linear(d, d))
    model = torch.nn.Sequential(*mods)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / d ** 0.5)
    return model


def batch(rows: int, d: int, seed: int = 1) -> tuple:
    """The global batch (inputs, targets), the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, d, generator=g)
    return x, torch.sin(x)


def _my_rows(x: torch.Tensor) -> torch.Tensor:
    n, r = dist.get_world_size(), dist.get_rank()
    if x.shape[0] % n:
        raise ValueError(f"the batch of {x.shape[0]} rows does not split evenly over {n} ranks")
    return x.chunk(n)[r]


def _ddp(model, device, bucket_cap_mb: float = 25.0):
    from torch.nn.parallel import DistributedDataParallel as DDP
    ids = [device.index] if device.type == "cuda" else None
    return DDP(model.to(device), device_ids=ids, bucket_cap_mb=bucket_cap_mb)


def ddp_gradients(d: int, layers: int, rows: int) -> dict:
    """One DDP step: each rank takes its slice of the global batch; DDP all-reduces (averages) the
    gradients during backward. Returns this rank's gradients by parameter name, on the CPU."""
    device = rank_device()
    model = _ddp(mlp(d, layers), device)
    x, y = (t.to(device) for t in batch(rows, d))
    F.mse_loss(model(_my_rows(x)), _my_rows(y)).backward()
    return {name: p.grad.detach().cpu() for name, p in model.module.named_parameters()}


def full_batch_gradients(d: int, layers: int, rows: int) -> dict:
    """The same step in one process on the whole batch (no ranks): the reference for DDP."""
    model = mlp(d, layers)
    x, y = batch(rows, d)
    F.mse_loss(model(x), y).backward()
    return {name: p.grad.detach() for name, p in model.named_parameters()}


def _train_steps(model, opt, x, y, steps: int) -> None:
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()


def step_time(d: int, layers: int, rows_per_rank: int, steps: int, ddp: bool = True,
              bucket_cap_mb: float = 25.0, warmup: int = 3):
    """Seconds per training step (forward, backward, SGD) with ``rows_per_rank`` rows on each rank:
    with DDP on every rank, or (``ddp=False``) the model alone on rank 0, the others idle (None).
    Matmuls in TF32 on a GPU."""
    if not ddp and dist.get_rank() != 0:
        return None
    with _tf32():
        return _step_time(d, layers, rows_per_rank, steps, ddp, bucket_cap_mb, warmup)


def _step_time(d, layers, rows_per_rank, steps, ddp, bucket_cap_mb, warmup):
    device = rank_device()
    model = _ddp(mlp(d, layers), device, bucket_cap_mb) if ddp else mlp(d, layers).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(rows_per_rank, d, generator=g).to(device)
    y = torch.sin(x)
    _train_steps(model, opt, x, y, warmup)
    sync_device(device)
    if ddp:
        dist.barrier()
    t0 = time.perf_counter()
    _train_steps(model, opt, x, y, steps)
    sync_device(device)
    return (time.perf_counter() - t0) / steps


@contextlib.contextmanager
def _tf32():
    """TF32 matmuls while the block runs (the timed training steps), the setting as it was after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def overlap(d: int, layers: int, rows_per_rank: int, bucket_cap_mb: float = 25.0, steps: int = 3):
    """On a GPU: ``(share, comm_ms)``: the share of the all-reduce kernels' time (NCCL's kernels, per
    step) during which some other kernel ran (backward's: DDP waits for its all-reduces before backward
    returns, so the optimizer's kernels come after them), from a
    torch.profiler trace of rank 0, and the NCCL kernels' milliseconds per step. None on the CPU,
    where gloo's all-reduce runs in threads, not as kernels."""
    device = rank_device()
    if device.type != "cuda":
        return None
    with _tf32():
        return _overlap(d, layers, rows_per_rank, bucket_cap_mb, steps, device)


def _overlap(d, layers, rows_per_rank, bucket_cap_mb, steps, device):
    from torch.profiler import ProfilerActivity, profile
    model = _ddp(mlp(d, layers), device, bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(rows_per_rank, d, device=device)
    y = torch.sin(x)
    _train_steps(model, opt, x, y, 3)
    sync_device(device)
    dist.barrier()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _train_steps(model, opt, x, y, steps)
        sync_device(device)
    kernels = [(e.time_range.start, e.time_range.end, e.name) for e in prof.events()
               if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start]
    comm = [(a, b) for a, b, n in kernels if "nccl" in n.lower()]
    other = union([(a, b) for a, b, n in kernels if "nccl" not in n.lower()])
    total = sum(b - a for a, b in comm)
    if dist.get_rank() != 0 or not total:
        return None
    covered = sum(_intersection(a, b, other) for a, b in comm)
    return covered / total, total / 1e3 / steps


def _intersection(a, b, spans) -> float:
    return sum(max(0, min(b, hi) - max(a, lo)) for lo, hi in spans)


def _fsdp(model, device):
    """``model`` on ``device``, each Linear and then the whole sharded over every rank (``fully_shard``) on a
    mesh of the rank's own device type: left to choose, ``fully_shard`` puts its mesh on the accelerator
    whenever torch sees one, so on a machine with one GPU, whose ranks run on the CPU with gloo, the second
    rank would select GPU 1, which does not exist."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    model = model.to(device)
    for m in model:
        if isinstance(m, torch.nn.Linear):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _local_bytes(t) -> int:
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.numel() * t.element_size()


def state_bytes(d: int, layers: int, rows: int, sharded: bool) -> dict:
    """After one Adam step on this rank's slice of the batch, under FSDP (``sharded``) or DDP: the
    bytes of parameters, gradients and optimizer state this rank holds (its shards under FSDP), and
    on a GPU the allocator's peak during the step ("peak"; None on the CPU). The model is built on
    the CPU and moved: the peak counts what the GPU held, not the CPU's copy."""
    device = rank_device()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    model = _fsdp(mlp(d, layers), device) if sharded else _ddp(mlp(d, layers), device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = (_my_rows(t).to(device) for t in batch(rows, d))
    _train_steps(model, opt, x, y, 1)
    params = list(model.parameters())
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return {"peak": peak, "parameters": sum(_local_bytes(p) for p in params),
            "gradients": sum(_local_bytes(p.grad) for p in params if p.grad is not None),
            "optimizer": sum(_local_bytes(v) for s in opt.state.values() for v in s.values()
                             if isinstance(v, torch.Tensor) and v.dim() > 0)}


def losses(d: int, layers: int, rows: int, sharded: bool, steps: int = 3) -> list:
    """The loss of the whole batch (mean over ranks of each slice's loss) at each of ``steps`` Adam
    steps under FSDP (``sharded``) or DDP: the two must agree (the same model, data and updates)."""
    device = rank_device()
    model = _fsdp(mlp(d, layers), device) if sharded else _ddp(mlp(d, layers), device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = (_my_rows(t).to(device) for t in batch(rows, d))
    out = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        out.append(mean.item() / dist.get_world_size())
    return out


def comm_bytes_per_step(param_bytes: float, n: int, sharded: bool) -> float:
    """Bytes each rank sends per training step: DDP all-reduces the gradients once, ``2 (n-1)/n P``;
    FSDP all-gathers the parameters for forward and again for backward and reduce-scatters the
    gradients, ``3 (n-1)/n P``.

    >>> comm_bytes_per_step(1e9, 2, sharded=False), comm_bytes_per_step(1e9, 2, sharded=True)
    (1000000000.0, 1500000000.0)
    """
    return (3 if sharded else 2) * (n - 1) / n * param_bytes
