"""Notebook 17's row softmax in CuTe DSL (NVIDIA's CUTLASS Python DSL): the kernel of
:mod:`gpu_course.kernels.triton_softmax` and ``helion_kernels.softmax_rows``, written with layouts.

Each program (a CUDA *block*, a CTA in CuTe's words) owns ``ROWS`` whole rows, read once and written once.
What Triton's compiler chose for you is written here:

* **128-bit accesses.** A thread copies ``VEC`` consecutive elements at a time (8 halves, 4 floats: 16 bytes, one
  ``ld.global.v4``), through a copy atom of 128 bits. The ``THREADS_PER_ROW`` threads of a row take consecutive
  16-byte pieces, so a warp's access covers whole 128-byte lines; each thread holds ``VECS`` such pieces of its row.
* **Masks are predicates.** A piece is loaded and stored only where its coordinate (from an *identity tensor*, which
  maps each position of the tile to its ``(row, col)`` in the matrix) is inside ``h x w``; lanes not loaded keep
  ``-inf``, which the max ignores and ``exp`` turns into 0 for the sum (notebook 06's trick).
* **Reductions in three levels.** A thread reduces its own values in registers, the threads of a row within a warp
  with butterfly shuffles (``shfl.sync.bfly``), and, when a row spans several warps, the warps through a few floats
  of shared memory.

Sizes: any ``h``; any ``w`` up to :data:`MAX_W`. ``VEC`` shrinks to a divisor of ``w`` (a row of 4097 halves starts
at an address that is not 16-byte aligned, so its pieces are single elements: correct, slower). The compiled kernel
is kept per (shape, dtype, strides) in :data:`_compiled`: a new shape compiles again (about a second), as the course's
autotuned Triton kernels tune again for a new key.

CuTe DSL is optional (``pip install nvidia-cutlass-dsl``, Linux); without it, importing this module raises
ImportError.
"""
from __future__ import annotations

import math

import torch

try:
    import cutlass
    import cutlass.cute as cute
    import cuda.bindings.driver as cuda
    from cutlass.cute.runtime import from_dlpack, make_fake_stream, make_fake_tensor
    from cutlass.memory import SmemAllocator
except ImportError as e:   # keep name="cutlass", which the notebooks' skip machinery reads
    raise ModuleNotFoundError("gpu_course.kernels.cute_softmax needs CuTe DSL: pip install nvidia-cutlass-dsl "
                      f"(Linux, Python 3.10+); {e}", name="cutlass") from e

MAX_W = 16384                 # longer rows no longer fit one program's registers (they need an online softmax)
LOG2_E = 1.4426950408889634   # exp(x) = 2 ** (x log2 e): ex2 is one instruction of the special-function unit
TORCH_TO_CUTE = {torch.float32: cutlass.Float32, torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16}


def softmax_config(w: int, itemsize: int) -> dict:
    """The shape of a program for rows of ``w`` elements of ``itemsize`` bytes:
    ``VEC`` elements per access (16 bytes where ``w`` allows), ``THREADS_PER_ROW`` threads on a row (a power of two,
    about 4 pieces each, at most 1024), ``VECS`` pieces per thread, and ``ROWS`` rows per program so that a program
    has at least 128 threads (short rows are packed, as in the Triton softmax). Rows of 4096 bf16: 8 a piece, 128
    threads of 4 pieces, one row a program; rows of 300 fp32: 4 a piece, 32 threads of 3 pieces, 4 rows a program.
    """
    VEC = math.gcd(w, 16 // itemsize)                       # whole 16-byte pieces only where every row starts on one
    pieces = -(-w // VEC)
    THREADS_PER_ROW = min(1024, 1 << max(0, math.ceil(math.log2(max(1, pieces / 4)))))
    VECS = -(-pieces // THREADS_PER_ROW)
    ROWS = max(1, 128 // THREADS_PER_ROW)
    return dict(VEC=VEC, THREADS_PER_ROW=THREADS_PER_ROW, VECS=VECS, ROWS=ROWS,
                BLOCK_W=THREADS_PER_ROW * VEC * VECS)


@cute.jit
def _row_reduce(val, op, THREADS_PER_ROW: int, scratch, row: int, warp_in_row: int, lane: int):
    """``op`` over the ``THREADS_PER_ROW`` threads of a row, each holding ``val`` (already reduced over its own
    values): shuffles within a warp, then, for a row wider than a warp, its warps' results through ``scratch``
    (a ROWS x warps-per-row shared tensor) and a barrier. Every thread of the row returns the result."""
    val = cute.arch.warp_reduction(val, op, threads_in_group=min(32, THREADS_PER_ROW))
    if cutlass.const_expr(THREADS_PER_ROW > 32):
        if lane == 0:
            scratch[row, warp_in_row] = val
        cute.arch.barrier()
        val = scratch[row, 0]
        for i in cutlass.range_constexpr(1, THREADS_PER_ROW // 32):
            val = op(val, scratch[row, i])
        cute.arch.barrier()   # the scratch is read before the next reduction writes it again
    return val


@cute.kernel
def softmax_rows_kernel(mX: cute.Tensor, mOut: cute.Tensor, tiled_copy: cute.TiledCopy,
                        ROWS: cutlass.Constexpr, BLOCK_W: cutlass.Constexpr, THREADS_PER_ROW: cutlass.Constexpr):
    """``mOut = softmax(mX, dim=1)`` for this program's ``ROWS`` rows, in fp32 between the load and the store."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    h, w = mX.shape
    # this program's ROWS x BLOCK_W tile of x, of out, and of the coordinates (row, col) of each element
    gX = cute.local_tile(mX, (ROWS, BLOCK_W), (bidx, 0))
    gOut = cute.local_tile(mOut, (ROWS, BLOCK_W), (bidx, 0))
    gC = cute.local_tile(cute.make_identity_tensor(mX.shape), (ROWS, BLOCK_W), (bidx, 0))
    thr = tiled_copy.get_slice(tidx)
    tXgX, tXgOut, tXcX = thr.partition_S(gX), thr.partition_D(gOut), thr.partition_S(gC)   # (VEC, 1, VECS) each
    tXrX = cute.make_fragment_like(tXgX)                       # this thread's values, in registers

    tXrX.fill(-math.inf)                                       # what a piece past the row's end holds
    for j in cutlass.range_constexpr(cute.size(tXgX, mode=[2])):
        r, c = tXcX[0, 0, j]                                   # the first element of piece j
        if cute.elem_less((r, c), (h, w)):                     # w is a multiple of VEC: a piece is all in or all out
            cute.copy(tiled_copy, tXgX[None, None, j], tXrX[None, None, j])

    warp, lane = tidx // 32, tidx % 32
    warps_per_row = max(1, THREADS_PER_ROW // 32)
    row, warp_in_row = warp // warps_per_row, warp % warps_per_row
    if cutlass.const_expr(THREADS_PER_ROW > 32):               # a row over several warps: their partial results
        smem = SmemAllocator()
        scratch = smem.allocate_tensor(cutlass.Float32, cute.make_layout((ROWS, warps_per_row)), 16)
    else:                                                      # a row within a warp: shuffles are enough
        scratch = None

    x = tXrX.load().to(cutlass.Float32)
    row_max = _row_reduce(x.reduce(cute.ReductionOp.MAX, -math.inf, 0), cute.arch.fmax,
                          THREADS_PER_ROW, scratch, row, warp_in_row, lane)
    num = cute.math.exp2((x - row_max) * LOG2_E, fastmath=True)   # ex2.approx: within 2 ulp of fp32's exp
    row_sum = _row_reduce(num.reduce(cute.ReductionOp.ADD, 0.0, 0), lambda a, b: a + b,
                          THREADS_PER_ROW, scratch, row, warp_in_row, lane)
    tXrOut = cute.make_fragment_like(tXgOut)
    tXrOut.store((num * (1.0 / row_sum)).to(mOut.element_type))   # one division a row, a multiply an element

    for j in cutlass.range_constexpr(cute.size(tXgOut, mode=[2])):
        r, c = tXcX[0, 0, j]
        if cute.elem_less((r, c), (h, w)):                     # rows past h (the last program's) are never stored
            cute.copy(tiled_copy, tXrOut[None, None, j], tXgOut[None, None, j])


@cute.jit
def softmax_rows(mX: cute.Tensor, mOut: cute.Tensor, stream: cuda.CUstream, VEC: cutlass.Constexpr,
                 THREADS_PER_ROW: cutlass.Constexpr, VECS: cutlass.Constexpr, ROWS: cutlass.Constexpr,
                 BLOCK_W: cutlass.Constexpr):
    """The host side: the copy that hands each thread its pieces, and the launch, one program per ``ROWS`` rows."""
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type,
                               num_bits_per_copy=VEC * mX.element_type.width)
    threads = cute.make_ordered_layout((ROWS, THREADS_PER_ROW), order=(1, 0))   # thread t: row t // TPR, t % TPR
    values = cute.make_layout((1, VEC))                                          # a thread's piece: VEC in a row
    tiled_copy = cute.make_tiled_copy_tv(atom, threads, values)
    h = mX.shape[0]
    softmax_rows_kernel(mX, mOut, tiled_copy, ROWS, BLOCK_W, THREADS_PER_ROW).launch(
        grid=[(h + ROWS - 1) // ROWS, 1, 1], block=[ROWS * THREADS_PER_ROW, 1, 1], stream=stream)


_compiled: dict = {}


def _fake(t_shape, t_stride, dtype):
    """A stand-in for a tensor of this shape, strides and dtype: what ``cute.compile`` needs, no memory, no GPU."""
    return make_fake_tensor(TORCH_TO_CUTE[dtype], tuple(t_shape), tuple(t_stride), assumed_align=16)


def compile_softmax(shape, dtype, x_stride=None, out_stride=None, options: str = "", ffi: bool = False):
    """The compiled kernel for ``shape`` and ``dtype`` (row-major strides unless given), from the cache or compiled
    now, from stand-ins of the tensors: no GPU needed, with ``options="--gpu-arch sm_90a"`` to name the target;
    ``--keep-ptx --dump-dir DIR`` keeps the PTX (``cute_kernels.ptx`` reads it). With ``ffi`` the compiled function
    is called with torch tensors directly, on torch's current stream (TVM-FFI's C++ calling convention, as
    ``quack``'s kernels are): what :func:`softmax` uses, so that a call costs the CPU no Python conversions."""
    h, w = shape
    x_stride = tuple(x_stride or (w, 1))
    out_stride = tuple(out_stride or (w, 1))
    key = (h, w, dtype, x_stride, out_stride, options, ffi)
    if key not in _compiled:
        cfg = softmax_config(w, torch.tensor([], dtype=dtype).element_size())
        cfg.pop("BLOCK_W")
        args = (_fake(shape, x_stride, dtype), _fake(shape, out_stride, dtype),
                make_fake_stream(use_tvm_ffi_env_stream=ffi))
        _compiled[key] = cute.compile(softmax_rows, *args, **cfg,
                                      BLOCK_W=cfg["THREADS_PER_ROW"] * cfg["VEC"] * cfg["VECS"],
                                      options=f"{options} --enable-tvm-ffi" if ffi else options)
    return _compiled[key]

def _check(x: torch.Tensor, out: torch.Tensor) -> None:
    """What the kernel assumes, as a ValueError that names it: 2-D CUDA tensors of one shape and dtype, rows of at
    most MAX_W, contiguous rows whose starts are as aligned as the pieces ``softmax_config`` cuts them into."""
    if x.ndim != 2 or out.shape != x.shape or out.dtype != x.dtype:
        raise ValueError(f"softmax: x and out must be 2-D of one shape and dtype, got {tuple(x.shape)} {x.dtype} and "
                         f"{tuple(out.shape)} {out.dtype}")
    if x.dtype not in TORCH_TO_CUTE:
        raise ValueError(f"softmax: dtype must be one of {list(TORCH_TO_CUTE)}, got {x.dtype}")
    if x.shape[1] > MAX_W:
        raise ValueError(f"softmax: rows of {x.shape[1]} elements do not fit one program's registers (at most {MAX_W});"
                         " that needs a loop over the row (an online softmax)")
    for name, t in (("x", x), ("out", out)):
        if not t.is_cuda:
            raise ValueError(f"softmax: {name} must be on the GPU (a CUDA tensor), got {t.device}")
        if t.stride(1) != 1 or t.data_ptr() % 16 or (t.stride(0) * t.element_size()) % math.gcd(
                16, x.shape[1] * x.element_size()):
            raise ValueError(f"softmax: {name} must have contiguous rows, start on a 16-byte boundary and have rows "
                             "as aligned as their length (take .contiguous())")


def softmax(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out = softmax(x, dim=1)`` for a 2-D fp32, fp16 or bf16 ``x`` on the GPU, written into the ``out`` the caller
    gives (same shape and dtype) and returned; computed in fp32."""
    _check(x, out)
    if x.numel() == 0:
        return out
    # TVM-FFI takes the torch tensors as they are and launches on torch's current stream (ordered with its ops)
    compile_softmax(tuple(x.shape), x.dtype, x.stride(), out.stride(), ffi=True)(x, out)
    return out


def softmax_dlpack(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """:func:`softmax` called the DSL's default way, to compare what a call costs the CPU: each call wraps ``x``
    and ``out`` in CuTe tensors through DLPack (the common in-memory description of a tensor that libraries
    exchange) and a stream object, in Python, then calls a kernel compiled from those tensors. Same kernel, same
    result."""
    _check(x, out)
    if x.numel() == 0:
        return out
    stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
    tensors = (from_dlpack(x, assumed_align=16), from_dlpack(out, assumed_align=16), stream)
    key = (*x.shape, x.dtype, x.stride(), out.stride(), "dlpack")
    if key not in _compiled:
        cfg = softmax_config(x.shape[1], x.element_size())
        cfg.pop("BLOCK_W")
        _compiled[key] = cute.compile(softmax_rows, *tensors, **cfg,
                                      BLOCK_W=cfg["THREADS_PER_ROW"] * cfg["VEC"] * cfg["VECS"])
    _compiled[key](*tensors)
    return out
