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
