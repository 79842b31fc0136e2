"""Hints kept out of the notebooks, keyed by exercise title: a check cell that passes no ``hint=``
registers the one here, so the learner sees it only by asking (``utils.hint(title)``), never in the
check cell's source. Titles are unique across the course."""

HINTS: dict[str, str] = {
    # 04 · Matrix multiplication and shared memory
    "global loads of a tiled product": (
        "count per strip, not per block: how many blocks share a row of m (the grid's columns), and how many "
        "share a column of n? A partial tile loads only the rows or columns inside the matrix"),
    # 05 · Numba CUDA
    "blocks of 8 x 32 threads": "a launch gives threads and blocks as (x, y), and x runs along the columns of out",
    "dynamic shared memory of rectangular tiles": "count the floats of both tiles; the launch value is in bytes",
    "rectangular 8 x 16 tiled kernel": (
        "in each phase, thread row tr fills row tr of the m tile and rows tr and tr + TH of the n tile; a barrier "
        "before the products, another after"),
    "tiled kernel on a transposed B": (
        "the n tile holds n[ph + i, c] = nt[c, ph + i]. Let threadIdx.x run along k when you read nt (neighbouring "
        "threads then read neighbouring addresses of a row of nt), and store the value where the products expect it"),
    # 06 · Triton basics
    "fused add + ReLU": (
        "each program owns a block of flat offsets, as in square_kernel_1d. The rows of x lie end to end, w values "
        "each: for the element at flat offset i, which column is it in?"),
    "row-wise max, rows wider than a block": (
        "mean_serial_kernel walks n elements a block at a time with a running block of sums; here each "
        "program walks its own row, and the running block holds maxima. What must it start from, and what "
        "must the masked-off lanes hold?"),
    "layer norm forward": ("compare your kernel with torch on a row whose length is a power of two, then on one "
                           "that is not: if only the second is off, look at every lane a tl.sum adds"),
    "global max in two passes": (
        "section 3's two-pass mean: pass 1 gives every program its own block and writes one number per "
        "program; pass 2, one program, reduces those numbers. Which combining operation, and which value "
        "can never win it?"),
    # 08 · torch.compile
    "loads of the GeLU kernel for a slice of x": (
        "section 3's slices of x show what decides the loads. Try it on two of the check's cases, (2, 1600) "
        "and (8, 1600): how many bytes past x's start does each slice begin, and what does Triton know about "
        "that address and about the length at launch? How many floats does each thread hold, and how many "
        "can one load instruction move in each case?"),
    "clip without a graph break": (
        "section 5 fixed a branch on a tensor's value by computing on the device what Python decided. Which "
        "torch operations choose between values, or bound them, without leaving the device?"),
    "one kernel, and the line still printed": (
        "the print splits the graph wherever it sits inside the compiled function. Where else can Python "
        "run, before or after the compiled part?"),
    "compilations for a list of sizes": (
        "a dynamic graph's size is a symbol, but not every value is left to the symbol: which sizes does "
        "Dynamo always specialize, and what does a size it specializes need?"),
    # 11 · FlashAttention
    "FLOPs the forward's tiles execute": (
        "_key_bounds (section 3) gives the key range a query block visits; a key block the range only touches "
        "is still multiplied whole, and so is the last query block's padding"),
    "a sliding-window mask": (
        "section 2's online_softmax_attention meets the same danger in its causal case: a row whose keys so far "
        "were all masked. What is its running maximum then, and what does exp of (that maximum minus itself) give?"),
    "an ALiBi bias": ("the bias is a function of a row's index, a column's index and one number per head: all "
                      "three are at hand in the program; where in the loop must it enter, relative to the mask "
                      "and the row maximum?"),
    "the gradient of ALiBi's slopes": (
        "a slope enters every score of its head; section 4 gives the gradient with respect to each score, and "
        "what each score's derivative with respect to the slope is, you can read off the bias itself"),
    "the dQ kernel, computing its own δ": (
        "δ of a row needs only that row of dO and of O, both of which the program loads for its own rows before "
        "the loop; inside the loop, P = exp(s - LSE) needs no running maximum, and dQ's tile needs the scale once"),
    # 15 · Below bf16
    "an int4 GEMV on the Q4_0 layout": (
        "take a block of 32 columns a step: load a (BLOCK_N, 16) tile of its bytes; the low nibbles are the block's "
        "columns 0-15 and the high ones its columns 16-31, so load x's two halves of the block as two vectors of 16; "
        "each row's scale of the block multiplies that block's partial sum once"),
    "the first scales within an error budget": (
        "section 2's table is the model: for each granularity, quantise x with its first block and w with its "
        "second, multiply the dequantised operands in float64, and take the largest of the rows' relative errors"),
    "the batch where a weight-only layer turns compute-bound": (
        "write both times as functions of M: the bytes are the weights (once) plus M rows in and M rows out; set "
        "them equal and solve the linear equation for M. Mind the units: TFLOP/s and GB/s"),
    # 10 · Backward passes and custom ops
    "add + ReLU with a Triton backward": (
        "section 1's GeLU is the model: what must forward keep for the backward, and could the output itself "
        "tell the backward where the gradient passes? One gradient tensor may serve both inputs"),
    "a fake for the backward's partial sums": (
        "no kernel, no data: new_empty with the real outputs' shapes and dtypes. Is dx contiguous when x is a "
        "transposed view? How many rows has part, and in which dtype does the kernel keep sums of fp16?"),
    "bytes moved by the LayerNorm backward": (
        "go through each kernel's pointer arguments in section 3's source: which does it load, which does it "
        "store, and how many elements of which dtype does each hold?"),
    "the backward's time predicted by its bytes": (
        "a kernel limited by memory takes bytes / rate; if the rate does not change with GROUPS, what does the "
        "time at one program per SM tell you about the rate?"),
    "the GROUPS the bytes explain": (
        "predict each GROUPS' time from the time at sms programs as in 3b (the bytes at sms programs, not at 132), "
        "then keep the GROUPS whose prediction is within 10 % of the time measured there"),
    # 07 · Triton matmul
    "the last round's share of the GPU": (
        "count the programs first (a tile that sticks out is still a program), then the rounds of sms × per_sm "
        "programs; how many programs do the rounds before the last one take?"),
    "stages that fit in shared memory": (
        "one stage holds a block of a and a block of b: how many bytes for inputs of dtype (a torch dtype knows "
        "its itemsize)? Then count only whole stages"),
    "the program of a tile": (
        "start from the first program of the tile's group of rows: how many programs do the groups above it "
        "hold? Mind the last group, which may be shorter"),
    "matmul + ReLU + residual, fused": (
        "section 5's bias is the model: it meets acc in registers, between the loop and the store. The residual "
        "is a whole h × w tensor, not a row: which offsets and which mask does reading it need?"),
    # 12 · Tensor cores
    "where wgmma reads through a descriptor": (
        "first the address without the swizzle: which index moves by 128 bytes, which by SBO, which (MN-major) by "
        "LBO, and which by 2 bytes? Then swizzle that whole address, not its offset from the start: which bits of "
        "an address are the 16-byte piece within a 128-byte row, and which the row within 1024 bytes?"),
    # 13 · Several GPUs
    "the buckets DDP all-reduces": (
        "walk the parameters from the last to the first, adding each one's bytes to the open bucket; a bucket "
        "closes as soon as it reaches its cap (the first bucket's cap, then the general one), and what is left "
        "open at the end is a bucket too"),
    # 14 · Data movement and the whole training step
    "results copied back on a side stream": (
        "section 3's overlapped runs the other way round: there the compute waited for an event behind each copy; "
        "here each copy back must wait for its chunk's compute. And the caller reads outs as soon as you return"),
    "a training loop without hidden synchronisations": (
        "float() and int() of a GPU tensor wait for it; keep both on the GPU and let the caller read them"),
    "a pageable copy staged chunk by chunk": (
        "section 3's pipeline again, with the CPU's memcpy and the link as its two stages: the first chunk's "
        "memcpy and the last chunk's transfer overlap nothing; in between, the slower stage sets the pace"),
    # 09 · Reductions, scans and histograms
    "first index of the largest |x|": (
        "rung 6's warp_sum moves one value down the warp; here each lane holds a pair. Shuffle both halves with "
        "the same offset, and decide which pair wins when the two values are equal"),
    "32-bin histogram with aggregation": (
        "a run needs neighbouring bytes in the same thread: which bytes does a grid-stride loop give one thread, "
        "and which would it get with a slice of its own? What must a thread keep in registers while a run lasts?"),
    "segmented exclusive scan": (
        "scan pairs (sum, a segment starts in here) instead of sums: when the right-hand pair has its flag set, "
        "what does the left-hand sum contribute? The carry from the warps before follows the same rule"),
    # 01 · Timing
    "FLOP per element at the ridge point": (
        "section 4's ridge point is FLOP per byte; how many bytes does one output element cost, counting each "
        "input read and the output written? torch.float16.itemsize is 2"),
    "the CPU's time per call of a loop": (
        "what should the clock include: the time the GPU takes to run what the calls queued, or only the time "
        "the CPU takes to make the calls? Section 2c's definition decides"),
    "bytes moved by t.mean(dim)": (
        "every element is read once; how many results are there when the dimension dim disappears from the "
        "shape, and how many bytes is each?"),
    # 02 · Profiling
    "operators under an operator": (
        "cpu_children gives one level; a function that calls itself on each child reaches every level"),
    "who calls an operator": (
        "follow cpu_parent upwards from each call of op until you meet a row whose name starts with aten:: "
        "(a record_function range is a row too, but not an operator); no such row above it means Python"),
    "steps a repeating schedule records": (
        "each cycle is wait + warmup + active steps, and every cycle starts with its own wait; a warm-up step "
        "runs the profiler but throws its events away"),
    # 17 · Helion
    "what the masks throw away": (
        "count the tiles along each dimension first: a tile that sticks out past the edge is still a whole tile"),
    "the 128-byte swizzle": (
        "write the offsets of (1, 0) and (1, 8) of section 7's fp16 tile in binary, before and after the swizzle: "
        "which bits say the row (mod 8), which the 16-byte piece? Then: how many elements make a 16-byte piece "
        "at other sizes?"),
    "matmul + ReLU + residual in Helion": (
        "start from section 3's matmul_bias_gelu (hk.matmul_bias_gelu.fn, printed there): the same loops and "
        "accumulator; only the line before the store changes, and res is read with the output tile's indices"),
    "a row in registers": (
        "first the lanes one row takes (Triton's blocks are powers of two: how do you find the next one in Python?), "
        "then the lanes a program holds; then share them among its threads"),
}
