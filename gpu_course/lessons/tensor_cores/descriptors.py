"""Where Hopper's ``wgmma`` reads its operands in shared memory, from a matrix descriptor with the 128-byte swizzle,
and where the TMA copies of rung 5 (``05_wgmma_tma.cu``) put them: notebook 12's exercise 4 and its cases.

A descriptor (``wg_desc``) gives a start address, a leading byte offset (LBO) and a stride byte offset (SBO); with the
128-byte swizzle the operand is stored in rows of 128 bytes (64 halves), 8 rows to a 1024-byte group, and the hardware
swizzles the *address*: bits 4-6 (the 16-byte piece within a row) are XORed with bits 7-9 (the row within the group),
section 6's ``piece ^ (row % 8)``. K-major (``m``'s tile, and ``n``'s in cfg 2): one row per index i along M (or N),
the rows running along k; SBO is the step from 8 rows of i to the next 8; LBO is unused (a 16-step of k, 32 bytes,
lies within one row). MN-major (``n``'s tile in cfgs 0 and 1): one row per k, the rows running along N; SBO is the
step from 8 rows of k to the next 8, LBO the step from 64 columns of N to the next 64 (the next TMA box).
"""
from __future__ import annotations

import random

# rung 5's cfg 0 (and cfg 2): a block tile of 128 x 256, k-tiles of 64; each stage holds m's tile (128 rows of 64 k)
# and n's: BN / 64 boxes of 64 k-rows x 64 columns (MN-major), or one box of BN rows x 64 k (cfg 2, K-major)
BM, BN, BK = 128, 256, 64
BOX_N = 64 * 128                 # bytes of one 64 x 64 box of n
STAGE_BASE = 0x8400              # a 1024-byte-aligned shared address, as the kernel aligns its stages


def swizzle_128b(addr: int) -> int:
    """The 128-byte swizzle of a shared-memory byte address: its 16-byte piece (bits 4-6) XOR its row within the
    1024-byte group (bits 7-9).

    >>> swizzle_128b(0), swizzle_128b(128), swizzle_128b(128 + 16), swizzle_128b(1024 + 7 * 128 + 2)
    (0, 144, 128, 2034)
    """
    return addr ^ (((addr >> 7) & 7) << 4)


def wgmma_address(start: int, lbo: int, sbo: int, mn_major: bool, k: int, i: int) -> int:
    """The shared-memory byte address from which ``wgmma`` reads element (k, i) (k: 0 to 15 within the k-step; i along
    M or N) of a fp16 operand whose descriptor has start address ``start``, offsets ``lbo`` and ``sbo`` and the
    128-byte swizzle.

    >>> wgmma_address(0x8400, 16, 1024, False, 0, 1), wgmma_address(0x8400 + 32, 16, 1024, False, 0, 1)
    (33936, 33968)
    """
    if mn_major:
        linear = start + (i // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + 2 * (i % 64)
    else:
        linear = start + (i // 8) * sbo + (i % 8) * 128 + 2 * k
    return swizzle_128b(linear)


def tma_address(box_start: int, row: int, col: int) -> int:
    """Where a TMA copy with ``CU_TENSOR_MAP_SWIZZLE_128B`` puts element (row, col) of a box of 64-half rows that
    it writes at ``box_start`` (1024-byte aligned)."""
    return box_start + swizzle_128b(row * 128 + 2 * col)


def rung5_reads(sample: int | None = None, seed: int = 0) -> list:
    """The reads of rung 5's ``wgmma``s in one stage: ``((start, lbo, sbo, mn_major, k, i), address the TMA copy
    wrote that element to, what it is)`` for A (each consumer's 64 rows, each 16-step of k), B MN-major (cfg 0) and B
    K-major (cfg 2), with the descriptors the kernel builds; ``sample`` of them, at random, if given."""
    a, b = STAGE_BASE, STAGE_BASE + BM * BK * 2
    reads = []
    for kk in range(BK // 16):
        for c in range(2):                       # consumer c: rows 64c .. 64c + 63 of m's tile
            for i in range(64):
                for k in range(16):
                    reads.append(((a + c * 64 * 128 + kk * 32, 16, 1024, False, k, i),
                                  tma_address(a, c * 64 + i, kk * 16 + k), f"A, consumer {c}, k-step {kk}"))
        for j in range(BN):
            for k in range(16):
                reads.append(((b + kk * 16 * 128, BOX_N, 1024, True, k, j),
                              tma_address(b + (j // 64) * BOX_N, kk * 16 + k, j % 64), f"B (MN-major), k-step {kk}"))
                reads.append(((b + kk * 32, 16, 1024, False, k, j), tma_address(b, j, kk * 16 + k),
                              f"B (K-major, cfg 2), k-step {kk}"))
    if sample is not None:
        reads = random.Random(seed).sample(reads, sample)
    return reads


def wgmma_address_cases(seed: int = 12) -> tuple:
    """(cases, labels) for the exercise: a sample of rung 5's reads, then descriptors the notebook does not show
    (other starts, some 32 or 64 bytes into a 1024-byte group, other LBO and SBO, both majors)."""
    cases, labels = [], []
    for args, _, what in rung5_reads(sample=48, seed=seed):
        cases.append(args)
        labels.append(f"rung 5's {what}: {_describe(*args)}")
    rng = random.Random(seed)
    for _ in range(60):
        mn_major = rng.random() < 0.5
        start = 1024 * rng.randint(1, 200) + (0 if mn_major else 32 * rng.randint(0, 3))
        lbo = 1024 * rng.choice([2, 4, 8, 16, 24]) if mn_major else 16
        sbo = 1024 * rng.choice([1, 2, 3])
        k, i = rng.randint(0, 15), rng.randint(0, 255 if mn_major else 63)
        cases.append((start, lbo, sbo, mn_major, k, i))
        labels.append(_describe(start, lbo, sbo, mn_major, k, i))
    return cases, labels


def _describe(start, lbo, sbo, mn_major, k, i) -> str:
    return f"start={start}, lbo={lbo}, sbo={sbo}, mn_major={mn_major}, k={k}, i={i}"
