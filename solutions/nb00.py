"""Reference solutions of notebook 00's exercises, and answers its checks must refuse."""

SOLUTIONS = {
    "ex00-1-answer": "blocks_needed = lambda n, threads: (n + threads - 1) // threads",
    "ex00-2-answer": "bytes_moved = lambda n, itemsize: 3 * n * itemsize   # read a, read b, write out",
    "ex00-3-answer": "fastest_ms = lambda nbytes, gb_per_s: nbytes / (gb_per_s * 1e9) * 1e3",
}

CHEATS = {
    "ex00-1-answer": {
        "the number for 1,000,000 elements, copied": "blocks_needed = 3907",
        "rounds down": "blocks_needed = lambda n, threads: n // threads",
        "always one more block": "blocks_needed = lambda n, threads: n // threads + 1",
        "the course's cdiv itself": "blocks_needed = utils.cdiv",
        "a function that calls utils.cdiv": "blocks_needed = lambda n, threads: utils.cdiv(n, threads)",
    },
    "ex00-2-answer": {
        "the number for 10**8 fp32, copied": "bytes_moved = 1_200_000_000",
        "forgets the write": "bytes_moved = lambda n, itemsize: 2 * n * itemsize",
        "a function returning the copied number": "bytes_moved = lambda n, itemsize: 1_200_000_000",
    },
    "ex00-3-answer": {
        "a number": "fastest_ms = 0.4",
        "seconds, not milliseconds": "fastest_ms = lambda nbytes, gb_per_s: nbytes / (gb_per_s * 1e9)",
        "GB/s taken as bytes/s": "fastest_ms = lambda nbytes, gb_per_s: nbytes / gb_per_s * 1e3",
    },
}
