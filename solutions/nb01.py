"""Reference solutions of notebook 01's exercises, and answers its checks must refuse."""

SOLUTIONS = {
    "ex01-1-answer": '''
def flops_to_compute_bound(tflops, gbs, dtype, inputs):
    ridge = tflops * 1e12 / (gbs * 1e9)               # FLOP the device does per byte it moves
    bytes_per_element = (inputs + 1) * dtype.itemsize  # each input read once, the output written once
    return ridge * bytes_per_element                   # intensity = FLOP / bytes reaches the ridge
''',
    "ex01-2-answer": '''
def two_clocks(fn):
    utils.synchronize()                 # nothing queued before counts
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()            # the call has returned: its work is only queued
    utils.synchronize()                 # wait for the work fn queued
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3
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
        "section 2b's wall_ms for both": "two_clocks = lambda fn: (wall_ms(fn), wall_ms(fn))",
        "section 3's benchmark for both": '''
def two_clocks(fn):
    ms = benchmark("", fn, num_warmups=0, num_trials=1)
    return ms, ms
''',
        "no synchronize": '''
def two_clocks(fn):
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    return (t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3
''',
        "synchronize before the first clock stops": '''
def two_clocks(fn):
    utils.synchronize()
    t0 = time.perf_counter()
    fn()
    utils.synchronize()
    t1 = time.perf_counter()
    return (t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3
''',
        "seconds, not milliseconds": '''
def two_clocks(fn):
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    utils.synchronize()
    return t1 - t0, time.perf_counter() - t0
''',
        "constants": "two_clocks = lambda fn: (10.0, 60.0)",
    },
    "ex01-3-answer": {
        "the square's count (read once, write once)": "mean_bytes = lambda t, dim: 2 * t.nbytes",
        "the full mean's count (the one-number write ignored)": "mean_bytes = lambda t, dim: t.nbytes",
        "fp32 assumed": "mean_bytes = lambda t, dim: (t.numel() + t.numel() // t.shape[dim]) * 4",
        "the wrong dimension kept": "mean_bytes = lambda t, dim: (t.numel() + t.shape[dim]) * t.element_size()",
        "the course's reference called": "mean_bytes = timing_exercises.reduction_bytes",
    },
}
