"""Notebook 17's fp16 matmul for Hopper (sm_90a) in CuTe DSL: notebook 12's wgmma + TMA kernel
(``cuda/tensor_cores/05_wgmma_tma.cu``) with CuTe's objects in place of its hand-written PTX, and notebook 07's
bias + GeLU epilogue (``triton_matmul.matmul_kernel``'s ``HAS_BIAS`` and ``ACTIVATION="gelu"``) as a switch.

What the CUDA C wrote out, and what stands for it here:

* **TMA copy atom** (``CopyBulkTensorTileG2SOp``): ``make_tiled_tma_atom`` builds, from ``a`` and the shared layout
  of one stage, what the CUDA C's ``tensor_map`` + ``tma_load_2d`` did: a ``BLOCK_M x BLOCK_K`` box of ``a`` (and a
  ``BLOCK_N x BLOCK_K`` box of ``b``) copied by the copy engine, zeros outside the matrix, the 128-byte swizzle
  chosen by ``make_smem_layout_a/b`` to match what wgmma reads. Its descriptor is made by the host code of the
  compiled function at each call, from the tensor's address: no CUDA driver is needed to compile.
* **wgmma MMA atom** (``make_trivial_tiled_mma``): ``m64nBLOCK_Nk16`` for fp16 inputs, fp32 accumulator, one atom
  per warpgroup, ``BLOCK_M // 64`` warpgroups down the tile (the CUDA C's two consumer warpgroups of 64 rows).
  ``cute.gemm`` over a stage's ``BLOCK_K / 16`` k-steps issues the ``wgmma.mma_async`` instructions whose
  descriptors ``wg_desc`` built by hand; the PTX holds the same ones (``cute_kernels.wgmma_descriptors``): ``a``'s
  with byte offsets 16 and 1024, ``b``'s 8192 and 1024, both 128-byte swizzled, ``b`` read transposed.
* **The pipeline** (``PipelineTmaAsync``): ``num_stages`` buffers, each with a *full* mbarrier (the copies' bytes
  arrived) and an *empty* one (every consumer warp is done reading): the CUDA C's ``full[s]``/``empty[s]`` ring,
  its waits and arrives behind ``producer_acquire``/``producer_commit`` and ``consumer_wait``/``consumer_release``.
* **Warp specialisation, as in the CUDA C** (:func:`matmul_kernel_ws`, the default): warpgroup 0 copies (one thread
  issues TMA, ``setmaxnreg`` gives its registers away), warpgroups 1 and 2 multiply. One step further: the
  programs are *persistent*, one per SM, each looping over tiles, so that the copies of a program's next tile start
  while its warpgroups store the last one. :func:`matmul_kernel` (``warp_specialized=False``) is the simpler design
  of the first CUTLASS Hopper kernels, one program per tile, warp 0 issuing the copies between its wgmmas: the
  same pipeline, wgmma loop and epilogue functions, to compare.
* **The epilogue** (:func:`store_tile`): the fp32 accumulator (plus ``bias``, through GeLU's erf form, when switched
  on) is rounded to fp16, written to shared memory with ``stmatrix`` and stored by TMA in ``epi_tile`` pieces. A
  TMA store writes only the part of a box inside the matrix: that is the masking of the last row and column of
  tiles. (The CUDA C stored from registers, each thread its pairs of columns.)

Sizes: any ``h``; ``k`` and ``w`` multiples of 8, because TMA needs every row of ``a``, ``b`` and ``out`` to start on
a 16-byte boundary (a :class:`ValueError` says so otherwise); ``k`` and ``w`` need not be multiples of the tile
(TMA's zeros pad them). The compiled kernel is kept per (shapes, switches) in :data:`_compiled`.

CuTe DSL is optional (``pip install nvidia-cutlass-dsl``, Linux); without it, importing this module raises
ImportError.
"""
from __future__ import annotations

import torch

try:
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    import cutlass.pipeline as pipeline
    import cutlass.utils.hopper_helpers as sm90
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor
    from cutlass.memory import SmemAllocator
    from cutlass.tensor_utils import LayoutEnum
except ImportError as e:   # keep name="cutlass", which the notebooks' skip machinery reads
    raise ModuleNotFoundError("gpu_course.kernels.cute_matmul needs CuTe DSL: pip install nvidia-cutlass-dsl "
                      f"(Linux, Python 3.10+); {e}", name="cutlass") from e

ACTIVATIONS = ("", "gelu")
# The CUDA C's cfg 0: 128 x 256 tiles, 64 deep, 4 stages of (128 + 256) x 64 halves = 48 KB (192 KB of 227)
CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=4, GROUP_M=8, warp_specialized=True)
EPI_STAGES = 2      # epilogue buffers: one is stored by TMA while the next is written
SQRT_HALF = 0.7071067811865476
F16 = cutlass.Float16   # a, b and out (inside the kernel, mA, mB and mC are TMA coordinate tensors, without a dtype)


@cute.jit
def gelu(x: cutlass.Float32) -> cutlass.Float32:
    """GeLU in its erf form, torch.nn.functional.gelu's default."""
    return 0.5 * x * (1.0 + cute.math.erf(x * SQRT_HALF))


@cute.jit
def tile_of(pid, tiles_m: cutlass.Constexpr, tiles_n: cutlass.Constexpr, GROUP_M: cutlass.Constexpr):
    """Tile ``(pid_m, pid_n)`` of program ``pid`` in notebook 07's grouped order (the formula of
    ``gpu_course/tile_order.py``): ``GROUP_M`` tile rows walked a column at a time, so that the programs running
    together share strips of ``a`` and ``b`` in the L2 cache."""
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = cutlass.min(tiles_m - first_m, GROUP_M)            # the last group may be shorter
    return first_m + (pid % in_group) % group_m, (pid % in_group) // group_m


@cute.jit
def load_k_tile(ring, producer, tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, pid_m, pid_n, kt):
    """One stage of the ring: wait until it is free (``empty``), then two TMA copies, of k-tile ``kt`` of this tile's
    strip of ``a`` and of ``b``, whose bytes complete its ``full`` barrier. One warp runs it; the DSL elects one of
    its threads to arrive on the barrier and issue the copies (``elect.sync`` in the PTX)."""
    ring.producer_acquire(producer)
    bar = ring.producer_get_barrier(producer)
    cute.copy(tma_atom_a, tAgA[None, pid_m, kt], tAsA[None, producer.index], tma_bar_ptr=bar)
    cute.copy(tma_atom_b, tBgB[None, pid_n, kt], tBsB[None, producer.index], tma_bar_ptr=bar)
    ring.producer_commit(producer)


@cute.jit
def mma_k_tile(tiled_mma, acc, tCrA, tCrB, stage):
    """``acc += a_tile @ b_tile`` for the k-tile in ``stage``: ``BLOCK_K / 16`` wgmmas, issued and committed as one
    group (asynchronous: the caller waits for the group with ``wait_group``)."""
    cute.nvgpu.warpgroup.fence()
    for kk in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
        cute.gemm(tiled_mma, acc, tCrA[None, None, kk, stage], tCrB[None, None, kk, stage], acc)
    cute.nvgpu.warpgroup.commit_group()


def operands_and_ring(smem, tma_atom_a, mA, tma_atom_b, mB, a_smem_layout, b_smem_layout, tiled_mma,
                      BLOCK_M, BLOCK_N, BLOCK_K, num_stages):
    """Both kernels' start (a plain function: it runs as the kernel is traced, its operations into the kernel):
    the ring's barriers (full[s] and empty[s]) and the ``num_stages`` stages of ``a`` and ``b`` in shared memory,
    the ring over them (full: one arrive and a stage's bytes; empty: an arrive from every multiplying warp), and
    every tile's strips of ``a`` and ``b`` split into TMA boxes: (TMA, tile row or column, k-tile). Returns
    ``sA, sB, ring, tAsA, tAgA, tBsB, tBgB, k_tiles``."""
    barriers = smem.allocate_array(cutlass.Int64, 2 * num_stages)
    sA = smem.allocate_tensor(F16, a_smem_layout.outer, 1024, swizzle=a_smem_layout.inner)
    sB = smem.allocate_tensor(F16, b_smem_layout.outer, 1024, swizzle=b_smem_layout.inner)
    stage_bytes = cute.size_in_bytes(F16, cute.slice_(a_smem_layout, (None, None, 0))) + \
        cute.size_in_bytes(F16, cute.slice_(b_smem_layout, (None, None, 0)))
    ring = pipeline.PipelineTmaAsync.create(
        barrier_storage=barriers, num_stages=num_stages, tx_count=stage_bytes,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, cute.size(tiled_mma) // 32),
        cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)), defer_sync=True)
    pipeline.pipeline_init_arrive(is_relaxed=True)
    tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
        tma_atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
        cute.group_modes(cute.local_tile(mA, (BLOCK_M, BLOCK_K), (None, None)), 0, 2))
    tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
        tma_atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
        cute.group_modes(cute.local_tile(mB, (BLOCK_N, BLOCK_K), (None, None)), 0, 2))
    return sA, sB, ring, tAsA, tAgA, tBsB, tBgB, cute.size(tAgA, mode=[2])


def warpgroup_operands(tiled_mma, warpgroup, sA, sB, mC, BLOCK_M, BLOCK_N):
    """What multiplying warpgroup ``warpgroup`` (0, 1, ...) hands its wgmmas (a plain function, as above): the
    descriptors of its slice of the shared tiles, one a stage (a wgmma reads them for the whole warpgroup), and its
    fp32 accumulator, the shape of its part of a tile. Returns ``tCrA, tCrB, acc``."""
    thr_mma = tiled_mma.get_slice(cute.make_layout(BLOCK_M // 64, stride=128)(warpgroup))
    acc = cute.make_rmem_tensor(thr_mma.partition_C(cute.local_tile(mC, (BLOCK_M, BLOCK_N), (0, 0))).shape,
                                cutlass.Float32)
    return tiled_mma.make_fragment_A(thr_mma.partition_A(sA)), tiled_mma.make_fragment_B(thr_mma.partition_B(sB)), acc


@cute.jit
def store_tile(acc, tiled_mma, mma_tidx, mC, mBias, sC, tma_atom_c, store_ring, epi_sync, is_store_thread,
               pid_m, pid_n, epi_tile: cutlass.Constexpr, BLOCK_M: cutlass.Constexpr, BLOCK_N: cutlass.Constexpr,
               HAS_BIAS: cutlass.Constexpr, ACTIVATION: cutlass.Constexpr):
    """The epilogue of one tile: bias and GeLU on the fp32 accumulator (switched at compile time), one rounding to
    fp16, then ``epi_tile`` pieces through shared memory (``stmatrix``, in the swizzled layout TMA reads) to global
    memory (a TMA store, which writes only the part of a piece inside ``h x w``: the edge tiles' masking)."""
    h, w = mC.shape
    gC = cute.local_tile(mC, (BLOCK_M, BLOCK_N), (pid_m, pid_n))
    if cutlass.const_expr(HAS_BIAS or ACTIVATION == "gelu"):
        # (row, col) of each value of acc, from this thread's slice (mma_tidx). The kernels' thr_mma is their
        # warpgroup's slice: right for A and B, which a wgmma reads for the whole warpgroup, and for acc's shape,
        # but its partition_C holds the coordinates of the warpgroup's first thread
        tCcC = tiled_mma.get_slice(mma_tidx).partition_C(
            cute.local_tile(cute.make_identity_tensor((h, w)), (BLOCK_M, BLOCK_N), (pid_m, pid_n)))
        for i in cutlass.range(cute.size(acc), unroll_full=True):
            v = acc[i]
            if cutlass.const_expr(HAS_BIAS):
                v = v + mBias[cutlass.min(tCcC[i][1], w - 1)].to(cutlass.Float32)   # columns past w: never stored
            if cutlass.const_expr(ACTIVATION == "gelu"):
                v = gelu(v)
            acc[i] = v
    r2s = cute.make_tiled_copy_S(
        sm90.sm90_get_smem_store_op(LayoutEnum.ROW_MAJOR, elem_ty_d=F16, elem_ty_acc=cutlass.Float32),
        cute.make_tiled_copy_C_atom(cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), F16), tiled_mma))
    thr_r2s = r2s.get_slice(mma_tidx)
    tRS_sC = thr_r2s.partition_D(sC)                 # (R2S, R2S_M, R2S_N, buffer)
    tRS_acc = r2s.retile(acc)                        # acc, in the order the pieces take it
    piece_layout = cute.make_layout(cute.shape(thr_r2s.partition_S(sC))[:3])
    piece32 = cute.make_rmem_tensor(piece_layout.shape, cutlass.Float32)
    piece16 = cute.make_rmem_tensor(piece_layout.shape, F16)
    per_piece = cute.size(piece32)
    gC_pieces = cute.zipped_divide(gC, epi_tile)     # ((epi tile), (pieces down, pieces across))
    bSG_sC, bSG_gC = cute.nvgpu.cpasync.tma_partition(tma_atom_c, 0, cute.make_layout(1),
                                                      cute.group_modes(sC, 0, 2), gC_pieces)
    across = gC_pieces.shape[1][1]
    if cutlass.const_expr(cute.size(gC_pieces, mode=[1]) % EPI_STAGES != 0):   # buffers alternate across tiles
        raise ValueError(f"matmul: a tile must hold a multiple of {EPI_STAGES} epilogue pieces")
    for p in cutlass.range_constexpr(cute.size(gC_pieces, mode=[1])):
        for v in cutlass.range_constexpr(per_piece):
            piece32[v] = tRS_acc[p * per_piece + v]
        piece16.store(piece32.load().to(F16))        # the one rounding, at the store
        buf = p % EPI_STAGES                         # pieces per tile are a multiple of EPI_STAGES
        cute.copy(r2s, piece16, tRS_sC[None, None, None, buf])
        cute.arch.fence_proxy("async.shared", space="cta")   # these writes, made visible to the TMA engine
        epi_sync.arrive_and_wait()                   # the whole piece is in shared memory
        if is_store_thread:                          # one thread: each thread that runs a TMA store issues one
            cute.copy(tma_atom_c, bSG_sC[None, buf], bSG_gC[None, (p // across, p % across)])
            store_ring.producer_commit()
            store_ring.producer_acquire()            # the store of EPI_STAGES pieces ago has read its buffer
        epi_sync.arrive_and_wait()                   # so buffer `buf` may be written again


@cute.kernel
def matmul_kernel(tma_atom_a: cute.CopyAtom, mA: cute.Tensor, tma_atom_b: cute.CopyAtom, mB: cute.Tensor,
                  tma_atom_c: cute.CopyAtom, mC: cute.Tensor, mBias: cute.Tensor, tiled_mma: cute.TiledMma,
                  a_smem_layout: cute.ComposedLayout, b_smem_layout: cute.ComposedLayout,
                  epi_smem_layout: cute.ComposedLayout, epi_tile: cutlass.Constexpr,
                  BLOCK_M: cutlass.Constexpr, BLOCK_N: cutlass.Constexpr, BLOCK_K: cutlass.Constexpr,
                  num_stages: cutlass.Constexpr, GROUP_M: cutlass.Constexpr,
                  HAS_BIAS: cutlass.Constexpr, ACTIVATION: cutlass.Constexpr):
    """One ``BLOCK_M x BLOCK_N`` tile of ``mC = act(mA @ mB.T + bias)`` a program, no warp specialisation: every
    warpgroup multiplies, and warp 0 also issues the copies, ``num_stages`` k-tiles ahead, between its wgmmas (the
    first CUTLASS Hopper kernels' design; :func:`matmul_kernel_ws` is notebook 12's). The pipeline, the wgmma loop
    and the epilogue are the same functions."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    h, w = mC.shape
    tiles_m, tiles_n = (h + BLOCK_M - 1) // BLOCK_M, (w + BLOCK_N - 1) // BLOCK_N
    pid_m, pid_n = tile_of(bidx, tiles_m, tiles_n, GROUP_M)
    if warp == 0:
        cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_a)
        cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_b)

    sA, sB, ring, tAsA, tAgA, tBsB, tBgB, k_tiles = operands_and_ring(
        SmemAllocator(), tma_atom_a, mA, tma_atom_b, mB, a_smem_layout, b_smem_layout, tiled_mma,
        BLOCK_M, BLOCK_N, BLOCK_K, num_stages)
    mma_threads = cute.size(tiled_mma)
    tCrA, tCrB, acc = warpgroup_operands(tiled_mma, cute.arch.make_warp_uniform(tidx // 128), sA, sB, mC,
                                         BLOCK_M, BLOCK_N)
    pipeline.pipeline_init_wait()

    producer = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, num_stages)
    consumer = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, num_stages)
    released = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, num_stages)
    if warp == 0:                                    # fill the ring: k-tiles 0 .. num_stages - 1 in flight
        for kt in cutlass.range(cutlass.min(num_stages, k_tiles), unroll=1):
            load_k_tile(ring, producer, tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, pid_m, pid_n, kt)
            producer.advance()
    acc.fill(0.0)
    tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
    for kt in cutlass.range(k_tiles, unroll=1):
        ring.consumer_wait(consumer)                 # full[s]: k-tile kt has landed
        mma_k_tile(tiled_mma, acc, tCrA, tCrB, consumer.index)
        cute.nvgpu.warpgroup.wait_group(1)           # k-tile kt - 1's wgmmas are done reading ...
        if kt > 0:
            ring.consumer_release(released)          # ... so its stage may be refilled (empty[s])
            released.advance()
            # refill that stage, with k-tile kt - 1 + num_stages. Only after this iteration's release: warp 0
            # waiting for a stage that its own warpgroup has yet to release would wait for ever
            if warp == 0 and producer.count < k_tiles:
                load_k_tile(ring, producer, tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, pid_m, pid_n,
                            producer.count)
                producer.advance()
        consumer.advance()
    cute.nvgpu.warpgroup.wait_group(0)
    cute.arch.sync_threads()                         # all wgmmas have read sA: the epilogue's buffers reuse it
    sC = cute.make_tensor(cute.recast_ptr(sA.iterator, epi_smem_layout.inner, dtype=F16), epi_smem_layout.outer)
    store_ring = pipeline.PipelineTmaStore.create(
        num_stages=EPI_STAGES, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, mma_threads))
    epi_sync = pipeline.NamedBarrier(barrier_id=1, num_threads=mma_threads)
    store_tile(acc, tiled_mma, tidx, mC, mBias, sC, tma_atom_c, store_ring, epi_sync, tidx == 0,
               pid_m, pid_n, epi_tile, BLOCK_M, BLOCK_N, HAS_BIAS, ACTIVATION)
    if tidx == 0:
        store_ring.producer_tail()


@cute.kernel
def matmul_kernel_ws(tma_atom_a: cute.CopyAtom, mA: cute.Tensor, tma_atom_b: cute.CopyAtom, mB: cute.Tensor,
                     tma_atom_c: cute.CopyAtom, mC: cute.Tensor, mBias: cute.Tensor, tiled_mma: cute.TiledMma,
                     a_smem_layout: cute.ComposedLayout, b_smem_layout: cute.ComposedLayout,
                     epi_smem_layout: cute.ComposedLayout, epi_tile: cutlass.Constexpr,
                     BLOCK_M: cutlass.Constexpr, BLOCK_N: cutlass.Constexpr, BLOCK_K: cutlass.Constexpr,
                     num_stages: cutlass.Constexpr, GROUP_M: cutlass.Constexpr,
                     HAS_BIAS: cutlass.Constexpr, ACTIVATION: cutlass.Constexpr):
    """``mC = act(mA @ mB.T + bias)``, notebook 12's design made persistent: warpgroup 0 copies (one thread issues
    TMA; ``setmaxnreg`` gives its registers away), warpgroups 1.. multiply, 64 rows of the tile each (``setmaxnreg``
    takes the registers), and each program loops over tiles ``bidx, bidx + grid, ...``: the copies of a program's
    next tile start while its warpgroups store the last one. ``mA`` is ``h x k``, ``mB`` ``w x k`` (MN-major)."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    grid, _, _ = cute.arch.grid_dim()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    warpgroup = cute.arch.make_warp_uniform(tidx // 128)
    h, w = mC.shape
    tiles_m, tiles_n = (h + BLOCK_M - 1) // BLOCK_M, (w + BLOCK_N - 1) // BLOCK_N
    if warp == 0:
        cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_a)
        cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_b)

    smem = SmemAllocator()
    sA, sB, ring, tAsA, tAgA, tBsB, tBgB, k_tiles = operands_and_ring(
        smem, tma_atom_a, mA, tma_atom_b, mB, a_smem_layout, b_smem_layout, tiled_mma,
        BLOCK_M, BLOCK_N, BLOCK_K, num_stages)
    # the epilogue's buffers are its own here: the copies of the next tile go on while a tile is stored
    sC = smem.allocate_tensor(F16, epi_smem_layout.outer, 1024, swizzle=epi_smem_layout.inner)
    mma_threads = cute.size(tiled_mma)
    tiles = tiles_m * tiles_n
    pipeline.pipeline_init_wait()

    if warpgroup == 0:                               # the producer
        cute.arch.setmaxregister_decrease(40)
        if warp == 0:
            producer = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, num_stages)
            for tile in cutlass.range(bidx, tiles, grid, unroll=1):
                pid_m, pid_n = tile_of(tile, tiles_m, tiles_n, GROUP_M)
                for kt in cutlass.range(k_tiles, unroll=1):
                    load_k_tile(ring, producer, tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, pid_m, pid_n, kt)
                    producer.advance()
            ring.producer_tail(producer)             # wait for the last stages to be read before leaving
    else:                                            # the consumers: 64 rows of each tile a warpgroup
        cute.arch.setmaxregister_increase(232)
        mma_tidx = tidx - 128
        tCrA, tCrB, acc = warpgroup_operands(tiled_mma, warpgroup - 1, sA, sB, mC, BLOCK_M, BLOCK_N)
        consumer = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, num_stages)
        released = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, num_stages)
        store_ring = pipeline.PipelineTmaStore.create(
            num_stages=EPI_STAGES, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, mma_threads))
        epi_sync = pipeline.NamedBarrier(barrier_id=1, num_threads=mma_threads)   # the consumers only
        is_store_thread = mma_tidx == 0              # the first consumer thread issues the TMA stores
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        for tile in cutlass.range(bidx, tiles, grid, unroll=1):
            pid_m, pid_n = tile_of(tile, tiles_m, tiles_n, GROUP_M)
            acc.fill(0.0)
            for kt in cutlass.range(k_tiles, unroll=1):
                ring.consumer_wait(consumer)         # full[s]: k-tile kt has landed
                mma_k_tile(tiled_mma, acc, tCrA, tCrB, consumer.index)
                cute.nvgpu.warpgroup.wait_group(1)   # k-tile kt - 1's wgmmas are done reading ...
                if kt > 0:
                    ring.consumer_release(released)  # ... so its stage may be refilled (empty[s])
                    released.advance()
                consumer.advance()
            cute.nvgpu.warpgroup.wait_group(0)
            ring.consumer_release(released)          # the tile's last stage
            released.advance()
            store_tile(acc, tiled_mma, mma_tidx, mC, mBias, sC, tma_atom_c, store_ring, epi_sync,
                       is_store_thread, pid_m, pid_n, epi_tile, BLOCK_M, BLOCK_N, HAS_BIAS, ACTIVATION)
        if is_store_thread:
            store_ring.producer_tail()               # the last stores have left shared memory


@cute.jit
def matmul_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mBias: cute.Tensor, stream: cuda.CUstream,
                BLOCK_M: cutlass.Constexpr, BLOCK_N: cutlass.Constexpr, BLOCK_K: cutlass.Constexpr,
                num_stages: cutlass.Constexpr, GROUP_M: cutlass.Constexpr, warp_specialized: cutlass.Constexpr,
                SMS: cutlass.Constexpr, HAS_BIAS: cutlass.Constexpr, ACTIVATION: cutlass.Constexpr):
    """The host side, traced at compile time: the MMA atom, the shared layouts, the three TMA atoms and the launch
    (warp-specialised: ``min(SMS, tiles)`` persistent programs of 1 + ``BLOCK_M // 64`` warpgroups; otherwise one
    program per tile). ``mB`` is ``w x k``, the course's ``b`` seen transposed (MN-major)."""
    tiled_mma = sm90.make_trivial_tiled_mma(F16, F16, LayoutEnum.from_tensor(mA).sm90_mma_major_mode(),
                                            LayoutEnum.from_tensor(mB).sm90_mma_major_mode(), cutlass.Float32,
                                            (BLOCK_M // 64, 1, 1), tiler_mn=(64, BLOCK_N))   # a warpgroup per 64 rows
    tile = (BLOCK_M, BLOCK_N, BLOCK_K)
    a_smem_layout = sm90.make_smem_layout_a(LayoutEnum.from_tensor(mA), tile, F16, num_stages)   # 128B swizzle
    b_smem_layout = sm90.make_smem_layout_b(LayoutEnum.from_tensor(mB), tile, F16, num_stages)
    epi_tile = sm90.compute_tile_shape_or_override(tile, F16, is_cooperative=BLOCK_M > 64)
    epi_smem_layout = sm90.make_smem_layout_epi(F16, LayoutEnum.ROW_MAJOR, epi_tile, EPI_STAGES)
    g2s = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
    tma_atom_a, tma_a = cute.nvgpu.cpasync.make_tiled_tma_atom(
        g2s, mA, cute.slice_(a_smem_layout, (None, None, 0)), (BLOCK_M, BLOCK_K))
    tma_atom_b, tma_b = cute.nvgpu.cpasync.make_tiled_tma_atom(
        g2s, mB, cute.slice_(b_smem_layout, (None, None, 0)), (BLOCK_N, BLOCK_K))
    tma_atom_c, tma_c = cute.nvgpu.cpasync.make_tiled_tma_atom(
        cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), mC, cute.slice_(epi_smem_layout, (None, None, 0)), epi_tile)
    h, w = mC.shape
    tiles = ((h + BLOCK_M - 1) // BLOCK_M) * ((w + BLOCK_N - 1) // BLOCK_N)
    args = (tma_atom_a, tma_a, tma_atom_b, tma_b, tma_atom_c, tma_c, mBias, tiled_mma,
            a_smem_layout, b_smem_layout, epi_smem_layout, epi_tile,
            BLOCK_M, BLOCK_N, BLOCK_K, num_stages, GROUP_M, HAS_BIAS, ACTIVATION)
    if cutlass.const_expr(warp_specialized):
        matmul_kernel_ws(*args).launch(grid=[min(SMS, tiles), 1, 1], block=[128 + cute.size(tiled_mma), 1, 1],
                                       stream=stream)
    else:
        matmul_kernel(*args).launch(grid=[tiles, 1, 1], block=[cute.size(tiled_mma), 1, 1], stream=stream)


_compiled: dict = {}


def _fake(shape, stride, align=16):
    """A stand-in for an fp16 tensor of this shape and strides: what ``cute.compile`` needs, no memory, no GPU."""
    return make_fake_tensor(F16, tuple(shape), tuple(stride), assumed_align=align)


def compile_matmul(h: int, w: int, k: int, has_bias: bool = False, activation: str = "", cfg=None, sms: int = 132,
                   options: str = "", ffi: bool = False):
    """The compiled kernel for ``(h x k) @ (k x w)`` in fp16 with these switches and ``cfg`` (default
    :data:`CONFIG`), for a GPU of ``sms`` SMs, from the cache or compiled now, from stand-ins of the tensors: no GPU
    needed, with ``options="--gpu-arch sm_90a"`` to name the target; ``--keep-ptx --dump-dir DIR`` keeps the PTX
    (``cute_kernels.ptx`` reads it). With ``ffi`` the compiled function is called with torch tensors directly
    (``a``, ``b.t()``, ``out``, ``bias``), on torch's current stream (TVM-FFI's C++ calling convention)."""
    check_sizes(h, w, k)
    if activation not in ACTIVATIONS:
        raise ValueError(f"matmul: activation must be one of {ACTIVATIONS}, got {activation!r}")
    cfg = {**CONFIG, **(cfg or {})}
    check_config(cfg)
    key = (h, w, k, has_bias, activation, tuple(sorted(cfg.items())), sms, options, ffi)
    if key not in _compiled:
        args = (_fake((h, k), (k, 1)), _fake((w, k), (1, w)), _fake((h, w), (w, 1)),
                _fake((w,), (1,), align=2),   # the bias: read an element at a time
                make_fake_stream(use_tvm_ffi_env_stream=ffi))
        _compiled[key] = cute.compile(matmul_host, *args, **cfg, SMS=sms, HAS_BIAS=has_bias, ACTIVATION=activation,
                                      options=f"{options} --enable-tvm-ffi" if ffi else options)
    return _compiled[key]


SMEM_PER_BLOCK = 232448   # bytes of shared memory a block may have on Hopper (227 KB)


def shared_bytes(cfg: dict) -> int:
    """Shared memory of a configuration: ``num_stages`` tiles of ``a`` and ``b``, the epilogue's buffers (their own
    in the warp-specialised kernel: ``EPI_STAGES`` pieces of ``BLOCK_M x 32`` halves), 1 KB for alignment and
    the barriers."""
    ring = cfg["num_stages"] * (cfg["BLOCK_M"] + cfg["BLOCK_N"]) * cfg["BLOCK_K"] * 2
    return ring + (EPI_STAGES * cfg["BLOCK_M"] * 32 * 2 if cfg["warp_specialized"] else 0) + 1024


def check_config(cfg: dict) -> None:
    """The tiles this kernel is written for: a warpgroup per 64 rows (``BLOCK_M`` 64 or 128), one wgmma as wide as
    ``BLOCK_N`` (64, 128 or 256), ``BLOCK_K = 64`` halves (a 128-byte row: the swizzle's width), and a ring that fits
    in shared memory."""
    if cfg["BLOCK_M"] not in (64, 128) or cfg["BLOCK_N"] not in (64, 128, 256) or cfg["BLOCK_K"] != 64:
        raise ValueError(f"matmul: BLOCK_M must be 64 or 128, BLOCK_N 64, 128 or 256, BLOCK_K 64; got {cfg}")
    if shared_bytes(cfg) > SMEM_PER_BLOCK:
        raise ValueError(f"matmul: {cfg['num_stages']} stages need {shared_bytes(cfg)} bytes of shared memory, "
                         f"more than the {SMEM_PER_BLOCK} a block may have: take fewer stages")


def check_sizes(h: int, w: int, k: int) -> None:
    """TMA's constraint: every row of ``a`` (``k`` halves), ``b`` and ``out`` (``w`` halves) starts on a 16-byte
    boundary, so ``k`` and ``w`` are multiples of 8."""
    if k % 8 or w % 8 or min(h, w, k) < 1:
        raise ValueError(f"matmul: k = {k} and w = {w} must be positive multiples of 8: TMA copies rows that start on "
                         "16-byte boundaries (8 halves); pad them, or use torch.matmul")


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, bias: torch.Tensor | None = None,
           activation: str = "", cfg=None) -> torch.Tensor:
    """``out = activation(a @ b + bias)`` for fp16 ``a`` (``h x k``) and ``b`` (``k x w``), both row-major, on a Hopper
    GPU; fp32 accumulation, one rounding at the store, into the ``out`` (``h x w`` fp16, row-major) the caller gives."""
    if a.dtype != torch.float16 or b.dtype != torch.float16 or out.dtype != torch.float16:
        raise ValueError(f"matmul: a, b and out must be fp16, got {a.dtype}, {b.dtype}, {out.dtype}")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or out.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"matmul: shapes {tuple(a.shape)} @ {tuple(b.shape)} -> {tuple(out.shape)} do not match")
    h, k = a.shape
    w = b.shape[1]
    check_sizes(h, w, k)
    for name, t in (("a", a), ("b", b), ("out", out)):
        if not t.is_cuda:
            raise ValueError(f"matmul: {name} must be on the GPU (a CUDA tensor), got {t.device}")
        if not t.is_contiguous() or t.data_ptr() % 16:
            raise ValueError(f"matmul: {name} must be contiguous (row-major) and 16-byte aligned")
    if bias is not None and (bias.shape != (w,) or bias.dtype != torch.float16 or not bias.is_contiguous()):
        raise ValueError(f"matmul: bias must be a contiguous fp16 tensor of shape ({w},)")
    sms = _hopper_sms(a.device)
    if h == 1:
        # The shapes are compiled in, and CuTe drops a mode of static size 1 when it builds a TMA atom: a one-row a
        # or out would get 1-D copies whose box no longer matches the tile (an illegal instruction on the GPU). So
        # one row is computed as the first of two; a single row is a matrix-vector product, which this kernel,
        # built for tiles of 128 rows, is the wrong tool for anyway.
        two = torch.empty(2, w, device=out.device, dtype=out.dtype)
        matmul(torch.cat([a, a]), b, two, bias, activation, cfg)
        return out.copy_(two[:1])
    kernel = _launchers.get((h, w, k, bias is not None, activation, sms)) if cfg is None else None
    if kernel is None:   # the first call of these shapes (or a config of the caller's): compile, or find it cached
        kernel = compile_matmul(h, w, k, bias is not None, activation, cfg, sms, ffi=True)
        if cfg is None:
            _launchers[(h, w, k, bias is not None, activation, sms)] = kernel
    # TVM-FFI takes the torch tensors as they are and launches on torch's current stream (ordered with its ops)
    kernel(a, b.t(), out, out[0] if bias is None else bias)   # b.t(): w x k, MN-major; without a bias it is never read
    return out


_launchers: dict = {}   # (h, w, k, has_bias, activation, sms) -> the compiled kernel of the default CONFIG
_sms: dict = {}         # device index -> its SM count, once it is known to be a Hopper GPU


def _hopper_sms(device: torch.device) -> int:
    """The SM count of ``device``, after checking it is a Hopper GPU; asked of the driver once per device (each
    question costs the CPU microseconds, and a call of :func:`matmul` should cost it as little as possible)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sms:
        if torch.cuda.get_device_capability(index) != (9, 0):
            raise RuntimeError("matmul: wgmma and TMA exist on Hopper GPUs (sm_90) only")
        _sms[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sms[index]


def tflops(h: int, w: int, k: int, ms: float) -> float:
    """TFLOP/s of an ``h x k @ k x w`` matmul that took ``ms`` milliseconds (2 flops a multiply-add)."""
    return 2 * h * w * k / (ms * 1e-3) / 1e12
