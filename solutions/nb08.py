"""Reference solutions of notebook 08 (torch.compile) and the cheats its checks refuse."""

SOLUTIONS = {
    "ex08-1-answer": '''
def ptx_load(nbytes):
    words = nbytes // 4  # 32-bit values
    return "ld.global.b32" if words == 1 else f"ld.global.v{words}.b32"
''',
    "ex08-2-answer": '''
def clip_rows_fixed(x):
    return x / torch.clamp(x.abs().max(), min=1.0)  # divides by 1 when nothing exceeds 1: no branch
''',
    "ex08-3-answer": '''
add_relu_compiled = torch.compile(lambda a, b: torch.relu(a + b))
''',
    "ex08-4-answer": '''
def compilations(sizes):
    # the first size compiles a static graph; a second, different size compiles a dynamic one that serves the rest
    return 1 if len(set(sizes)) == 1 else 2
''',
}

CHEATS = {
    "ex08-1-answer": {
        "the string copied from section 3's output": 'ptx_load = "ld.global.v4.b32"',
        "one instruction for every size": 'ptx_load = lambda nbytes: "ld.global.v4.b32"',
        "bytes counted as values": 'ptx_load = lambda nbytes: f"ld.global.v{nbytes}.b32"',
    },
    "ex08-2-answer": {
        "the original, with its branch": "clip_rows_fixed = clip_rows",
        "the branch decided on the host with .item()": '''
def clip_rows_fixed(x):
    return x / max(x.abs().max().item(), 1.0)
''',
        "a clamp of the values instead of a scaling": "clip_rows_fixed = lambda x: x.clamp(-1, 1)",
    },
    "ex08-3-answer": {
        "eager, not compiled": "add_relu_compiled = lambda a, b: torch.relu(a + b)",
        "compiled without Inductor": 'add_relu_compiled = torch.compile(lambda a, b: torch.relu(a + b), backend="eager")',
        "a graph break between the add and the ReLU": '''
def _add_then_relu(a, b):
    y = a + b
    print(end="")  # a side effect: Dynamo breaks the graph here
    return torch.relu(y)


add_relu_compiled = torch.compile(_add_then_relu)
''',
    },
    "ex08-4-answer": {
        "a number, not a function": "compilations = 2",
        "the printed answer for five sizes, for any list": "compilations = lambda sizes: 2",
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
