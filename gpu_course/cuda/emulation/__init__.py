"""Build and run the course's CUDA C on a CPU: an emulation for machines without a GPU.

``gpu_course.load_cuda`` (``utils.load_cuda`` in the notebooks) calls :func:`load` in cpu mode. It takes the same sources as
``torch.utils.cpp_extension.load_inline`` and returns a module exposing ``funcs``:

>>> from gpu_course.cuda import emulation, cuda_begin                                                       # doctest: +SKIP
>>> src = cuda_begin + r'''                                                    # doctest: +SKIP
... __global__ void square_k(const float* __restrict__ x, float* __restrict__ out, int n) {
...     int i = blockIdx.x * blockDim.x + threadIdx.x;
...     if (i < n) out[i] = x[i] * x[i];
... }
... torch::Tensor square(torch::Tensor x) {
...     CHECK_INPUT(x);
...     auto out = torch::empty_like(x);
...     int n = x.numel(), threads = 256;
...     square_k<<<cdiv(n, threads), threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
...     C10_CUDA_KERNEL_LAUNCH_CHECK();
...     return out;
... }'''
>>> m = emulation.load(src, "torch::Tensor square(torch::Tensor x);", ["square"])  # doctest: +SKIP
>>> m.square(torch.arange(4.0))                                                  # doctest: +SKIP
tensor([0., 1., 4., 9.])

How it runs
-----------
Blocks run one after another.  The threads of a block run as cooperative fibers on one OS
thread (a 20-instruction context switch on x86-64, ucontext elsewhere) and switch only at
``__syncthreads()`` and warp-level calls: between two of them a thread runs alone, from where it
was to its next one, in thread order.  So a missing barrier gives a real race, the same every
run (which ``racecheck``, below, reports as an error).  Only a thread that stays in a loop for
more than ~10 ms without reaching one of them (a spin-wait on a flag that another thread of the
block sets later) yields to the others, as a GPU with independent thread scheduling (Volta and
later) lets them run: such a wait ends.  A barrier
that only part of a block reaches (e.g. after an early ``return``), or threads waiting at
different ``__syncthreads()``, raise :class:`CudaEmulationError` naming the line, block and
threads: no hang.  (``CUDA_EMU_STRICT_BARRIERS=0`` lets returned threads count as arrived, as
most GPUs do in practice.)

Warps are the 32 consecutive threads of the block's linear thread index (x fastest); the last
warp of a block whose size is no multiple of 32 is partial (its missing lanes do not exist).  A
warp-level call (``__shfl_*_sync``, ``__ballot_sync``, ``__syncwarp`` ...) is a rendezvous of the
lanes named in its mask: each lane deposits its value and switches fiber until the last one
arrives, which computes every lane's result.  Those lanes must all reach the same call (same
line; ``__syncwarp`` may differ, as on sm_70+) with the same mask: a lane that exited, waits at
``__syncthreads()`` or at another warp-level call, a mask naming a lane that does not exist or
leaving out the caller raise :class:`CudaEmulationError` naming the kernel, block, warp, lanes and
lines, never hang.  A shuffle reading a lane outside the mask gets all-ones bits (NaN, -1), as
for unwritten shared memory.  ``__activemask()`` returns the lanes that have not exited: the
emulation does not track divergence, so inside an ``if`` pass an explicit mask (e.g. from
``__ballot_sync``) rather than ``__activemask()``.

Asynchronous copies (cp.async through ``<cuda_pipeline.h>``): ``__pipeline_memcpy_async(dst,
src, size, zfill)`` is checked when issued (size 4, 8 or 16; ``dst`` in shared memory, ``src`` not;
both aligned to ``size``; ``dst`` inside its array; the ``size - zfill`` bytes it reads inside the
tensor of a kernel pointer parameter, even if they are never used) and reads its source then, but
its shared-memory write happens only when the issuing thread waits for its batch
(``__pipeline_commit()`` closes a batch, ``__pipeline_wait_prior(N)`` completes all but the newest
``N``; copies issued after the last commit belong to the next batch and stay in flight), the latest
moment a GPU allows.  So reading the destination before the wait gives the
poison (or a previous tile), and with racecheck the write counts as the issuing thread's at the
issue and again at the wait: another thread reading it without a ``__syncthreads()`` after the
wait is a race.  Copies still in flight when a thread exits are dropped (as on a GPU, harmless).
A source pointer copied into a plain ``const float*`` is checked against the kernel parameter whose
tensor contains it (or the nearest one); memory the emulation cannot bound is not checked.

Tensor cores and fp16: ``<cuda_fp16.h>`` gives ``__half``/``half`` and ``__half2``/``half2`` with their
conversions, arithmetic (computed in float, rounded once to fp16, as a GPU does), comparisons, shuffles and
``atomicAdd`` (include/emu_fp16.h); ``<mma.h>`` gives ``nvcuda::wmma`` for 16x16x16 tiles of ``__half`` with float or
``__half`` accumulators, row- or column-major (include/emu_wmma.h). ``load_matrix_sync``, ``store_matrix_sync`` and
``mma_sync`` are warp-collective like the shuffles: all 32 lanes of a full warp must reach the same call; each lane
moves its own elements through checked accesses (a tile reaching outside its tensor, or a row not on a 16-byte
boundary, is an error naming the line and the element), and ``mma_sync`` is computed once per warp from every lane's
fragments. Which lane holds which element: the accumulator as ``mma.m16n8k16``'s C layout twice (what sm_80 and
later GPUs do), A and B as that instruction's A and B operands (CUDA leaves them unspecified). The counted launches
count each lane's ``mma_sync`` calls (field ``mma``).

Every module counts its launches, as the split GPU build's do, under the names of
gpu_course/cuda/counters.py: ``gpu_course.cuda.launch_counts(mod)`` is {kernel name: launches} since
load (a templated kernel under ``matmul_k`` and ``matmul_k<16>``), ``gpu_course.cuda.reset_launches(mod)``
sets them to zero.  ``gpu_course.cuda.launch_log(mod, since)`` is ``(launches so far, [(seq, kernel, grid,
block, shared bytes, ((kind, size, bits), ...)), ...])`` of the latest 256 launches numbered ``since``
or later, each argument as the host code gave it (``p`` a pointer, ``i``/``u`` an integer, ``f`` a
float's double bits, ``b`` a bool).  An
exercise check makes the learner's launch again from it (gpu_course/exercises/cuda_launch.py).
``mod._cuda_emu_count(True)`` makes the launches that follow count, per thread, its global and
shared loads and stores, atomics in global and shared memory, barriers passed, shuffles by kind and
other warp-level calls (one pointer test per access when off). An access counts whatever it goes
through: a checked pointer, a raw one (a struct's member ``io.out[j]``, ``p->v``, ``*b++`` in a helper),
``memcpy``/``memmove``/``memset`` in device code (the bytes moved, as accesses of at most 16 bytes); where
it lies decides global or shared, a thread's local variables are not counted. ``mod._cuda_emu_counts()`` returns
``(field names, [(kernel, grid, block, bytes of uint32 counts per thread), ...])``.

The rewriting is plain text (:func:`transform`; each build keeps it in ``main.cpp``): a kernel's pointer
parameters become checked pointers, and an access names its line, array and index:

>>> print(transform("__global__ void k(float* x, int n) { x[0] = n; }").text)
__global__ void k(::cuda_emu::gptr<float> x, int n) { ::cuda_emu::gat<1>(x, 1, "x", (0)) = n; }

Checks a GPU would not make (``checked=True``, the default):

* kernel pointer parameters become bounds-checked pointers (``cuda_emu::gptr<T>``): an access
  outside the tensor that ``data_ptr()`` came from raises an error naming the kernel, block,
  thread, parameter and index, before the bad write happens.  So do the pointers derived from
  them: local pointers (``float* row = out + r * w;``, ``const float4* q =
  reinterpret_cast<const float4*>(p);``, then ``p++``, ``p += k``), the pointer parameters of
  ``__device__`` functions (those whose type names a template parameter excepted), ``&out[i]``,
  and pointers into ``__shared__`` arrays and the dynamic shared memory (bounded by the whole
  variable).  ``p[i]``, ``*p``, ``*(p + k)`` and ``*reinterpret_cast<float4*>(q)`` name the line
  and the element reached: "out-of-bounds access to row[3] ... at cuda_src line 7: row[3] is
  out[8] (row points to out[5]), past the end of out, which points to a Float tensor of 8
  elements (valid indices 0..7)";
* ``__shared__`` arrays are bounds-checked, ``extern __shared__`` against the launch's size;
* shared memory is filled with all-ones bits (NaN for float, -1 for int) at the start of every
  block, so reading shared memory that no thread wrote shows up;
* a ``reinterpret_cast`` of a kernel pointer to ``float4*`` etc. checks the alignment;
* a segfault, stack overflow or integer division by zero inside a kernel raises instead of
  killing Python; so do ``assert``, ``exit`` and ``abort``.  The divisor of ``/`` and ``%`` in
  device code is checked where it is a name, a call or a parenthesized expression, so a division
  by zero (a literal ``0`` too, which gcc compiles into a trap) names the line;
* races (``racecheck``, on by default; ``racecheck=False`` or ``CUDA_EMU_RACECHECK=0`` turns it
  off, ``"warn"`` warns instead): ``tile[r][c]`` on a ``__shared__`` array (with all its indices)
  is recorded per 4-byte word between barriers, and two threads of a block touching one word, at
  least one writing, with no ``__syncthreads()`` between them (for two lanes of one warp, no
  ``__syncwarp()`` naming both) raise an error with the array, the index, both threads and both
  lines.  A ``+=``/``++`` on a kernel's pointer parameter (``out[0] += v``) by two threads of one
  launch (in any blocks) is reported too.  Not followed: atomics and other accesses through
  ``&a[i]`` or a pointer into the array, elements smaller than 4 bytes, ``volatile`` arrays, plain
  ``=`` or reads on global memory, ``out[i] = out[i] + v``.  It costs ~4x on a kernel that does
  nothing but shared-memory reads (the 16x16 tiled matmul at 128x128: ~55 ms instead of ~14 ms)
  and ~20 % on reductions.

Ctrl-C (SIGINT, also JupyterLab's "interrupt kernel") stops a launch within milliseconds with a
``KeyboardInterrupt`` that names the kernel, the block and what its threads do ("thread (0,0,0)
runs the loop at cuda_src line 5; threads (1,0,0)..(31,0,0) wait at __syncthreads() at cuda_src
line 6"); the module stays usable.  Every ``while``/``do`` loop and every ``for`` loop of device
code that does not surely end (a counting loop whose variable and bound the body leaves alone
surely ends) polls a flag for it, and the scheduler checks it at every barrier; a second Ctrl-C
half a second after an unanswered first one stops code that loops some other way (``goto``).

Pointers the emulation cannot bound (computed in host code, not from ``data_ptr``, into local
arrays, or made by a C-style cast) are not checked.  A build that fails only because of the
checked types (e.g. a helper template deducing ``T`` from a ``T*``) is retried unchecked.

Not modelled: concurrency between threads between barriers (without racecheck, a non-atomic
``x += 1`` from many threads gives the right answer here, unlike on a GPU, and a missing barrier
gives a wrong answer that is the same every run), warp lockstep outside warp-level calls (a
legacy warp-synchronous reduction through ``volatile`` shared memory without ``__syncwarp`` gives
a wrong answer), timing, the memory hierarchy.

What is supported, what is refused
----------------------------------
The emulation stands for an sm_80 GPU (Ampere, A100): ``__CUDA_ARCH__`` is 800 in every part of the
source, so ``#if __CUDA_ARCH__ >= 800`` takes the branch a modern GPU takes (``__reduce_add_sync``, cp.async,
bfloat16, independent thread scheduling are emulated); sm_90's own features (clusters, TMA, wgmma) are not.

Supported: ``__global__ / __device__ / __host__ / __forceinline__ / __noinline__ /
__launch_bounds__ / __constant__ / __restrict__``; ``dim3``, ``threadIdx / blockIdx / blockDim /
gridDim`` in 1-3 dimensions, ``warpSize``; launches ``k<<<grid, block[, smem[, 0]]>>>(...)``
including templated kernels ``k<16><<<...>>>`` (launch limits are checked as on a GPU: more than
48 KiB of dynamic shared memory needs ``cudaFuncSetAttribute(k,
cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)`` on that kernel first, at most 227 KiB, an
H100's limit; ``cudaFuncAttributePreferredSharedMemoryCarveout`` is accepted and ignored);
``__pipeline_memcpy_async / __pipeline_commit / __pipeline_wait_prior`` (cp.async, see above);
static ``__shared__`` (also at file scope) and ``extern __shared__``; ``__syncthreads()`` and
``__syncthreads_count/and/or``, ``__threadfence*``; warp-level ``__shfl_sync``, ``__shfl_up_sync``,
``__shfl_down_sync``, ``__shfl_xor_sync`` (with ``width``; int, unsigned, long long, float,
double...), ``__ballot_sync``, ``__all_sync``, ``__any_sync``, ``__syncwarp``, ``__activemask`` (the lanes that
execute that call together, as on sm_70+: inside a branch, the lanes that took it; a shuffle that reads a
lane outside its mask is an error naming both lanes and the line),
``__reduce_add/min/max_sync`` (int, unsigned), ``__reduce_and/or/xor_sync``,
``__match_any_sync``, ``__match_all_sync``; ``atomicAdd/Sub/Exch/Min/Max/Inc/Dec/CAS/And/
Or/Xor`` (int, unsigned, unsigned long long, float, double; ``_block``/``_system``); ``printf``
(flushed at the end of every launch, so ``wurlitzer.pipes()`` sees it); device math (``expf``,
``tanhf``, ``__expf``, ``rsqrtf``, ``fmaxf``, ``min/max`` on mixed types, ``__fdividef``,
``__float_as_int``, ``__popc``...); vector types ``float4`` & co with ``make_float4`` (CUDA's
alignment); ``__ldg`` and the other cache-hint loads; ``cudaGetLastError / cudaDeviceSynchronize
/ cudaGetErrorString``; ``cudaMemcpyToSymbol / cudaMemcpyFromSymbol`` on ``__constant__`` and
``__device__`` variables of the source (checked: the symbol must be one, the copy must fit in it);
cooperative groups within a block (``<cooperative_groups.h>``, ``<cooperative_groups/reduce.h>``:
``this_thread_block()`` with ``sync / thread_rank / size / thread_index / group_index``,
``tiled_partition<N>`` for N a power of 2 up to 32 with ``sync``, ``shfl / shfl_up / shfl_down / shfl_xor``,
``any / all / ballot / match_any``, ``meta_group_rank / meta_group_size``; ``coalesced_threads()``;
``cg::reduce`` with ``cg::plus / less / greater / bit_and / bit_or / bit_xor``; ``this_grid()`` without its
``sync()``, which is an error when it runs: it needs a cooperative launch); ``__half`` / ``__half2``
(``<cuda_fp16.h>``) and ``__nv_bfloat16`` / ``__nv_bfloat162`` (``<cuda_bf16.h>``) with their conversions,
arithmetic (rounded once, to nearest even, as a GPU does), comparisons, shuffles and ``atomicAdd``, on
``data_ptr<at::Half>()`` / ``data_ptr<at::BFloat16>()``; nvcuda::wmma 16x16x16 ``__half`` tiles;
host code with ``torch::Tensor``, ``data_ptr``, ``TORCH_CHECK``,
``C10_CUDA_KERNEL_LAUNCH_CHECK()``, ``C10_CUDA_CHECK``, ``AT_CUDA_CHECK``, ``AT_DISPATCH_*``, tensor accessors;
torch's CUDA headers as extensions include them (``<ATen/cuda/CUDAContext.h>``, ``<c10/cuda/CUDAStream.h>``,
``<c10/cuda/CUDAGuard.h>``): the current stream ``at::cuda::getCurrentCUDAStream()`` and a ``cudaStream_t``
from it (the 4th ``<<<>>>`` argument, ``cudaStreamSynchronize``), ``at::cuda::CUDAGuard`` /
``OptionalCUDAGuard`` / ``CUDAStreamGuard``, and ``cudaMemsetAsync`` / ``cudaMemcpyAsync`` (and ``cudaMemset``
/ ``cudaMemcpy``) on it, done in order when they return, their ranges checked against the tensor the pointer
is in.
Functions in ``funcs`` (declared in ``cpp_src``, as on a GPU) may take tensors, ints, floats,
bools, strings, ``std::vector`` and ``std::optional`` of those, and return those, ``void`` or
``std::tuple``.

Host code is mapped to the CPU: ``x.is_cuda()`` becomes ``x.is_cpu()``, ``kCUDA`` becomes
``kCPU``, ``DeviceType::CUDA`` becomes ``DeviceType::CPU`` and ``x.cuda()`` becomes ``x.cpu()``
(also inside ``#define`` macros), so ``CHECK_CUDA`` accepts the CPU tensors of CPU mode.

Refused at build time with :class:`CudaEmulationError` ("<feature> (<name>) is not supported by
the CPU emulation; run on a GPU", with the line): the warp intrinsics without ``_sync``
(``__shfl_down``, ``__ballot``..., removed for sm_70+) and lane-mask intrinsics; multi-grid and cluster groups; ``cudaMalloc/cudaFree`` and every other CUDA
runtime call not listed above; streams other than torch's current one (``cudaStreamCreate``,
``getStreamFromPool``: a 4th launch argument other than 0 or the current stream, which every launch runs on,
in order) and events;
the compiler's tensor-core builtins; inline ``asm`` (PTX: the message names the instruction, e.g.
``mma.sync.aligned.m16n8k16...``); fp8 types; textures;
``__managed__``; ``clock()``; asynchronous copies other than the pipeline primitives
(``cuda::memcpy_async``, ``cuda::pipeline``, ``__pipeline_arrive_on``, ``<cuda_awbarrier.h>``,
inline ``cp.async`` PTX); launches inside kernels or inside ``#define``s; CUDA
library headers (cub, thrust, cutlass, cuBLAS, cuRAND, ...) and the ``ATen/cuda`` headers not named above.

When ``nvcc`` is on PATH, the device part of the source (the GPU build's own device unit, without
torch) is also compiled with ``nvcc --ptx -arch=sm_80``, alongside the CPU build (~0.5 s): a kernel
that the emulation accepts but a GPU would not (e.g. calling a host function) raises.  Sources
that the GPU build would build as one unit (e.g. device code that uses torch types, packed
accessors) skip this check, and only errors that the GPU build would call the learner's count.
``nvcc_check=False`` or ``CUDA_EMU_NVCC=0`` turns it off.

Builds
------
The host C++ compiler builds the source against a precompiled header (the emulator plus a
"lite" slice of ATen: Tensor, its methods and operators, factories, AT_DISPATCH) and links a
precompiled runtime object; the binding to Python uses the CPython API (no pybind11).  A typical
small source builds in ~1 s; the header and runtime are built once per machine (~10 s, ~150 MB
under the cache directory).  A source that uses more of torch (``torch::matmul``,
``torch::tensor``, ``#include <ATen/...>``) is built against all of ATen (another precompiled
header, built once, ~15 s and ~400 MB; then ~4 s per build), or against ``torch/all.h`` (no
precompiled header, ~25 s), escalating automatically.  Builds are named by a hash of the sources,
options and emulator, and cached in ``$CUDA_EMU_CACHE`` (default ``~/.cache/gpu-course/cuda_emu``):
an unchanged source reloads in milliseconds; each build directory keeps the generated
``main.cpp`` and, after a failure, ``build.log``.  Compile errors show the compiler's own error
lines first, as ``cuda_src:LINE:COL: error: ...`` with the learner's line under each.

Environment: ``CUDA_EMU_CACHE`` (cache directory), ``CUDA_EMU_CHECKED=0`` (no bounds checks),
``CUDA_EMU_NVCC=0`` (no nvcc check), ``CUDA_EMU_RACECHECK=0`` or ``warn`` (see above),
``CUDA_EMU_STRICT_BARRIERS=0`` (see above),
``CUDA_EMU_STACK_KB`` (stack per emulated thread, default 256), ``CUDA_EMU_FIBERS=ucontext``
(portable fiber switch), ``CUDA_EMU_PCH=0`` (no precompiled headers), ``CXX`` (compiler).
Linux with g++ is what is tested; other compilers build without precompiled headers.
"""
from __future__ import annotations

from ..errors import CudaEmulationError
from .loading import load, race_mode
from .source import transform
from .toolchain import HEADER_DIR, cache_dir

__all__ = ["load", "race_mode", "CudaEmulationError", "HEADER_DIR", "cache_dir", "transform"]
