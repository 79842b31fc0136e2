"""Reference solutions of notebook 01's exercises, and answers its checks must refuse."""

SOLUTIONS = {
    "ex01-1-answer": '''
def flops_to_compute_bound(tflops, gbs, dtype, inputs):
    ridge = tflops * 1e12 / (gbs * 1e9)               # FLOP the device does per byte it moves
    bytes_per_element = (inputs + 1) * dtype.itemsize  # each input read once, the output written once
    return ridge * bytes_per_element                   # intensity = FLOP / bytes reaches the ridge
''',
    "ex01-2-answer": '''
def cpu_ms_per_call(fn, calls):
    utils.synchronize()                 # start with an empty queue: earlier work does not count
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()                            # back to back: the CPU does not wait for the GPU
    t1 = time.perf_counter()            # the last call has returned; its work may still be running
    return (t1 - t0) * 1e3 / calls
''',
    "ex01-3-answer": '''
def mean_bytes(t, dim):
    out = t.numel() // t.shape[dim]            # one result per position of the other dimensions
    return (t.numel() + out) * t.element_size()
''',
}

CHEATS = {
    "ex01-1-answer": {
        "the ridge point of section 4, typed in": "flops_to_compute_bound = lambda tflops, gbs, dtype, inputs: 17.2",
        "the ridge point in FLOP per byte, not per element": (
            "flops_to_compute_bound = lambda tflops, gbs, dtype, inputs: tflops * 1e12 / (gbs * 1e9)"),
        "fp32 and one input assumed (the square's 8 bytes)": (
            "flops_to_compute_bound = lambda tflops, gbs, dtype, inputs: tflops * 1e12 / (gbs * 1e9) * 8"),
        "the write forgotten": (
            "flops_to_compute_bound = lambda tflops, gbs, dtype, inputs: "
            "tflops * 1e12 / (gbs * 1e9) * inputs * dtype.itemsize"),
        "the course's reference called": "flops_to_compute_bound = timing_exercises.flops_per_element_at_ridge",
    },
    "ex01-2-answer": {
        "section 2b's wall_ms for each call": "cpu_ms_per_call = lambda fn, calls: sum(wall_ms(fn) for _ in range(calls)) / calls",
        "section 1's stopwatch, the returned clock of each call": '''
def cpu_ms_per_call(fn, calls):
    total = 0.0
    for _ in range(calls):
        utils.synchronize()
        t0 = time.perf_counter()
        fn()
        total += time.perf_counter() - t0
    return total * 1e3 / calls
''',
        "a synchronize before the clock stops": '''
def cpu_ms_per_call(fn, calls):
    utils.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    utils.synchronize()
    return (time.perf_counter() - t0) * 1e3 / calls
''',
        "the clock started before the wait for earlier work": '''
def cpu_ms_per_call(fn, calls):
    t0 = time.perf_counter()
    utils.synchronize()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) * 1e3 / calls
''',
        "one call timed": '''
def cpu_ms_per_call(fn, calls):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3
''',
        "the loop's total, not per call": '''
def cpu_ms_per_call(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) * 1e3
''',
        "seconds, not milliseconds": '''
def cpu_ms_per_call(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls
''',
        "the course's own loop called": "cpu_ms_per_call = lambda fn, calls: utils.cpu_ms_per_call(fn, n=calls, rounds=1)",
        "a constant": "cpu_ms_per_call = lambda fn, calls: 5.0",
    },
    "ex01-3-answer": {
        "the square's count (read once, write once)": "mean_bytes = lambda t, dim: 2 * t.nbytes",
        "the full mean's count (the one-number write ignored)": "mean_bytes = lambda t, dim: t.nbytes",
        "fp32 assumed": "mean_bytes = lambda t, dim: (t.numel() + t.numel() // t.shape[dim]) * 4",
        "the wrong dimension kept": "mean_bytes = lambda t, dim: (t.numel() + t.shape[dim]) * t.element_size()",
        "the course's reference called": "mean_bytes = timing_exercises.reduction_bytes",
    },
}

UNUSUAL = {
    "ex01-2-answer": {
        "no wait at all: the clock starts at the first call, so earlier work cannot count": '''
def cpu_ms_per_call(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e3 * (time.perf_counter() - start) / calls
''',
        "a while loop and time.perf_counter_ns": '''
def cpu_ms_per_call(fn, calls):
    utils.synchronize()
    n, t0 = 0, time.perf_counter_ns()
    while n < calls:
        fn()
        n += 1
    return (time.perf_counter_ns() - t0) / 1e6 / calls
''',
    },
}
