"""Reference solutions of notebook 01's exercises, and answers its checks must refuse."""

SOLUTIONS = {
    "ex01-1-answer": '''
def relu_vs_clamp(x):
    t_relu = utils.bench(torch.relu, x)
    t_clamp = utils.bench(lambda: x.clamp(min=0))
    # one comparison per element for 8 bytes moved: far below the ridge point of section 4
    return t_relu, t_clamp, "memory"
''',
    "ex01-2-answer": '''
def my_timer(fn):
    utils.synchronize()                 # nothing queued before counts
    t0 = time.perf_counter()
    fn()
    utils.synchronize()                 # wait for the work fn queued
    return (time.perf_counter() - t0) * 1e3
''',
    "ex01-3-answer": "square_bytes = lambda t: 2 * t.numel() * t.element_size()   # read once, write once",
}

CHEATS = {
    "ex01-1-answer": {
        "the conclusion without measuring": "relu_vs_clamp = lambda x: (None, None, 'memory')",
        "the H100's timings typed in": '''
def relu_vs_clamp(x):
    typed = utils.Timing([0.142] * 100, "CUDA events", "NVIDIA H100 80GB HBM3", True)
    return typed, utils.Timing([0.143] * 100, "CUDA events", "NVIDIA H100 80GB HBM3", True), "memory"
''',
        "one measurement returned twice": '''
def relu_vs_clamp(x):
    t = utils.bench(torch.relu, x)
    return t, t, "memory"
''',
        "timed something else": '''
def relu_vs_clamp(x):
    return utils.bench(torch.square, x), utils.bench(torch.abs, x), "memory"
''',
        "the wrong conclusion": '''
def relu_vs_clamp(x):
    return utils.bench(torch.relu, x), utils.bench(lambda: x.clamp(min=0)), "compute"
''',
    },
    "ex01-2-answer": {
        "no synchronize": '''
def my_timer(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3
''',
        "synchronize before the call only": '''
def my_timer(fn):
    utils.synchronize()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3
''',
        "seconds, not milliseconds": '''
def my_timer(fn):
    utils.synchronize()
    t0 = time.perf_counter()
    fn()
    utils.synchronize()
    return time.perf_counter() - t0
''',
        "a constant": "my_timer = lambda fn: 50.0",
    },
    "ex01-3-answer": {
        "the number for a, copied": "square_bytes = 2 * a.numel() * 4",
        "fp32 assumed": "square_bytes = lambda t: 2 * t.numel() * 4",
        "forgets the write": "square_bytes = lambda t: t.numel() * t.element_size()",
    },
}
