"""Reference solutions of notebook 08 (torch.compile) and the cheats its checks refuse."""

SOLUTIONS = {
    "ex08-1-answer": '''
def gelu_loads(offset, n):
    # a 16-byte load needs a 16-byte-aligned start (offset a multiple of 4 floats) and a length that is a
    # multiple of 16 (else the mask offs < n is not known constant over 4 elements); 8 floats a thread
    if offset % 4 == 0 and n % 16 == 0:
        return ("ld.global.v4.b32", 2)
    return ("ld.global.b32", 8)
''',
    "ex08-2-answer": '''
def clip_scale_fixed(x):
    return x / torch.clamp(x.abs().max(), min=1.0)  # divides by 1 when nothing exceeds 1: no branch
''',
    "ex08-3-answer": '''
_add_relu_compiled = torch.compile(lambda a, b: torch.relu(a + b))


def add_relu_fused(a, b):
    out = _add_relu_compiled(a, b)  # one graph: the add and the ReLU fused
    print("y computed")             # Python's part, outside the compiled function
    return out
''',
    "ex08-4-answer": '''
def compilations(sizes):
    # a first size compiles a static graph; a second size marks the dimension dynamic, and the dynamic graph
    # serves every size >= 2; sizes 0 and 1 are always specialized: each gets a static graph of its own
    graphs, dynamic = [], False
    for s in sizes:
        if s in graphs or (dynamic and s >= 2 and "dynamic" in graphs):
            continue
        dynamic = dynamic or bool(graphs)
        graphs.append("dynamic" if dynamic and s >= 2 else s)
    return len(graphs)
''',
}

CHEATS = {
    "ex08-1-answer": {
        "the tuple copied from section 3's output": 'gelu_loads = ("ld.global.v4.b32", 2)',
        "one answer for every slice": 'gelu_loads = lambda offset, n: ("ld.global.v4.b32", 2)',
        "only the start's alignment": '''
def gelu_loads(offset, n):
    return ("ld.global.v4.b32", 2) if offset % 4 == 0 else ("ld.global.b32", 8)
''',
        "only the length": '''
def gelu_loads(offset, n):
    return ("ld.global.v4.b32", 2) if n % 16 == 0 else ("ld.global.b32", 8)
''',
        "the course's rule, called": "gelu_loads = lambda offset, n: slice_loads(offset, n)",
    },
    "ex08-2-answer": {
        "the original, with its branch": "clip_scale_fixed = clip_scale",
        "the branch decided on the host with .item()": '''
def clip_scale_fixed(x):
    return x / max(x.abs().max().item(), 1.0)
''',
        "a clamp of the values instead of a scaling": "clip_scale_fixed = lambda x: x.clamp(-1, 1)",
    },
    "ex08-3-answer": {
        "the logged function compiled as it is": "add_relu_fused = torch.compile(add_relu_logged)",
        "the print dropped": "add_relu_fused = torch.compile(lambda a, b: torch.relu(a + b))",
        "eager, not compiled": "add_relu_fused = add_relu_logged",
        "compiled without Inductor": '''
_eager_backend = torch.compile(lambda a, b: torch.relu(a + b), backend="eager")


def add_relu_fused(a, b):
    print("y computed")
    return _eager_backend(a, b)
''',
    },
    "ex08-4-answer": {
        "a number, not a function": "compilations = 2",
        "section 6's rule, without sizes 0 and 1": "compilations = lambda sizes: 1 if len(set(sizes)) == 1 else 2",
        "one compilation per distinct size": "compilations = lambda sizes: len(set(sizes))",
        "measured with torch.compile instead of predicted": '''
def compilations(sizes):
    torch._dynamo.reset()
    seen = []
    f = torch.compile(lambda t: t * 2, backend=lambda gm, ex: seen.append(1) or gm.forward)
    for s in sizes:
        f(torch.randn(s))
    return len(seen)
''',
        "measured with the notebook's counting_backend": '''
def compilations(sizes):
    torch._dynamo.reset()
    before = len(compiles)
    f = torch.compile(lambda t: t * 2, backend=counting_backend)
    for s in sizes:
        f(torch.randn(s))
    return len(compiles) - before
''',
    },
}
