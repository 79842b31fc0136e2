"""Reference solutions of notebook 13 (several GPUs) and the cheats its checks refuse."""

SOLUTIONS = {
    "ex13-1-answer": '''
def ring_time(size, n, alpha, bw):
    return 2 * (n - 1) * (alpha + size / n / bw)   # n - 1 steps of each phase, one after another, one chunk each
''',
    "ex13-2-answer": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
    coll.reduce_scatter_into(part, t)     # rank r: the sum over ranks of part r of t
    out = torch.empty_like(t)
    coll.all_gather_into(out, part)       # every rank: all the summed parts, side by side
    return out
''',
}

CHEATS = {
    "ex13-1-answer": {
        "the course's own function": "ring_time = ring_ar.ring_seconds",
        "a pipelined all-reduce: the latency once": "def ring_time(size, n, alpha, bw):\n    return alpha + 2 * (n - 1) / n * size / bw",
        "the bytes over the link, no latency": "def ring_time(size, n, alpha, bw):\n    return 2 * (n - 1) / n * size / bw",
        "one phase only": "def ring_time(size, n, alpha, bw):\n    return (n - 1) * (alpha + size / n / bw)",
        "the bytes a rank sends, from the course": "def ring_time(size, n, alpha, bw):\n    return ring_ar.ring_bytes_per_rank(size, n) / bw + 2 * (n - 1) * alpha",
    },
    "ex13-2-answer": {
        "dist.all_reduce itself": "def my_all_reduce(t):\n    dist.all_reduce(t)\n    return t",
        "all-gather every whole tensor and add them": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    every = torch.empty(n * t.numel(), dtype=t.dtype, device=t.device)
    coll.all_gather_into(every, t)
    return every.view(n, -1).sum(0)
''',
        "a reduce-scatter, then an all-gather of the whole tensor": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
    coll.reduce_scatter_into(part, t)
    every = torch.empty(n * t.numel(), dtype=t.dtype, device=t.device)
    coll.all_gather_into(every, t)
    return every.view(n, -1).sum(0)
''',
        "no communication: t times n": "def my_all_reduce(t):\n    return t * dist.get_world_size()",
        "a reduce-scatter for show, then an all-gather of each raw chunk of t, summed locally": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    coll.reduce_scatter_into(torch.empty(t.numel() // n, dtype=t.dtype, device=t.device), t)
    parts = []
    for chunk in t.chunk(n):
        every = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
        coll.all_gather_into(every, chunk.contiguous())
        parts.append(every.view(n, -1).sum(0))
    return torch.cat(parts)
''',
        "each collective on n elements for show, the sum exchanged through the key-value store": '''
def my_all_reduce(t):
    n, r = dist.get_world_size(), dist.get_rank()
    one = torch.empty(1, dtype=t.dtype, device=t.device)
    coll.reduce_scatter_into(one, t[:n].contiguous())
    coll.all_gather_into(torch.empty(n, dtype=t.dtype, device=t.device), one)
    store = dist.distributed_c10d._get_default_store()
    store.set(f"sum-{t.numel()}-{r}", t.cpu().numpy().tobytes())
    parts = [torch.frombuffer(bytearray(store.get(f"sum-{t.numel()}-{q}")), dtype=t.dtype) for q in range(n)]
    return sum(parts).to(t.device)
''',
        "the two collectives, then a broadcast of rank 0's result": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
    coll.reduce_scatter_into(part, t)
    out = torch.empty_like(t)
    coll.all_gather_into(out, part)
    dist.broadcast(out, src=0)
    return out
''',
    },
}


# exercise 3: the buckets DDP all-reduces ({order}, {limit}, {full}, {rest} are replaced by the cheats)
_BUCKETS = '''
def ddp_buckets(param_bytes, cap, first_cap):
    buckets, open_, size, limit = [], [], 0, {first}
    for j in {order}:                   # backward produces the last layer's gradients first
        open_.append(j)
        size += param_bytes[j]
        if {full}:                      # the bucket closes once it holds its cap
            buckets.append(open_)
            open_, size, limit = [], 0, cap
{rest}    return buckets
'''
_REST = "    if open_:\n        buckets.append(open_)\n"


def _buckets(first="first_cap", order="reversed(range(len(param_bytes)))", full="size >= limit", rest=_REST):
    return _BUCKETS.format(first=first, order=order, full=full, rest=rest)


SOLUTIONS["ex13-3-answer"] = _buckets()
CHEATS["ex13-3-answer"] = {
    "torch's own assignment, through the course's function": '''
from gpu_course import ddp_buckets as buckets
ddp_buckets = lambda param_bytes, cap, first_cap: buckets.torch_assignment(param_bytes, cap, first_cap)
''',
    "the parameters in forward order": _buckets(order="range(len(param_bytes))"),
    "one cap for every bucket (no smaller first one)": _buckets(first="cap"),
    "closes only above the cap": _buckets(full="size > limit"),
    "the last bucket, below its cap, left out": _buckets(rest=""),
    "a bucket never passes its cap (the parameter that would pass it starts the next)": '''
def ddp_buckets(param_bytes, cap, first_cap):
    buckets, open_, size, limit = [], [], 0, first_cap
    for j in reversed(range(len(param_bytes))):
        if open_ and size + param_bytes[j] > limit:
            buckets.append(open_)
            open_, size, limit = [], 0, cap
        open_.append(j)
        size += param_bytes[j]
    return buckets + [open_]
''',
}
