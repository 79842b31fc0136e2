"""Reference solutions of notebook 13 (several GPUs) and the cheats its checks refuse."""

SOLUTIONS = {
    "ex13-1-answer": '''
def ring_bytes(size, n):
    return 2 * (n - 1) * size / n   # n - 1 steps of each phase, one size / n chunk sent per step
''',
    "ex13-2-answer": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
    gd.reduce_scatter_into(part, t)     # rank r: the sum over ranks of part r of t
    out = torch.empty_like(t)
    gd.all_gather_into(out, part)       # every rank: all the summed parts, side by side
    return out
''',
}

CHEATS = {
    "ex13-1-answer": {
        "the course's own function": "ring_bytes = gd.ring_bytes_per_rank",
        "the whole buffer, twice": "def ring_bytes(size, n):\n    return 2 * size",
        "one phase only": "def ring_bytes(size, n):\n    return (n - 1) * size / n",
    },
    "ex13-2-answer": {
        "dist.all_reduce itself": "def my_all_reduce(t):\n    dist.all_reduce(t)\n    return t",
        "all-gather every whole tensor and add them": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    every = torch.empty(n * t.numel(), dtype=t.dtype, device=t.device)
    gd.all_gather_into(every, t)
    return every.view(n, -1).sum(0)
''',
        "a reduce-scatter, then an all-gather of the whole tensor": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
    gd.reduce_scatter_into(part, t)
    every = torch.empty(n * t.numel(), dtype=t.dtype, device=t.device)
    gd.all_gather_into(every, t)
    return every.view(n, -1).sum(0)
''',
        "no communication: t times n": "def my_all_reduce(t):\n    return t * dist.get_world_size()",
        "the two collectives, then a broadcast of rank 0's result": '''
def my_all_reduce(t):
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
    gd.reduce_scatter_into(part, t)
    out = torch.empty_like(t)
    gd.all_gather_into(out, part)
    dist.broadcast(out, src=0)
    return out
''',
    },
}
