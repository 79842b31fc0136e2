"""Collectives across ranks, measured as nccl-tests measures them, and a ring all-reduce by hand.

    python bench/collectives.py                     # every GPU of the machine (NCCL), 4 KB to 1 GB
    python bench/collectives.py --max-bytes 64M --ops all_reduce

With two GPUs or more, one rank per GPU with NCCL (NVLink multicast off); otherwise two ranks on the
CPU with gloo at small sizes, which checks the script only: those times say nothing about NCCL or a link.
For each collective and size: the time per call of a back-to-back loop (the slowest rank's) and the
bus bandwidth: the algorithm bandwidth (size / time) times nccl-tests' factor (2(n-1)/n for all-reduce,
(n-1)/n for all-gather and reduce-scatter, 1 for broadcast), which compares with the link's spec-sheet
bandwidth in one direction; then the latency floor (the smallest size's time) and the size
where the bus bandwidth first reaches half its best. Last, the hand-written ring all-reduce
(gpu_course.distributed.ring_all_reduce, isend/irecv) checked against all_reduce and timed beside it:
time per call in a loop, and CPU time per call (the call's return; NCCL's all_reduce only queues work).
A collective has no GPU time with the launch hidden: it ends when the last rank is done, so the loop is
the figure. It records nothing in results/: the rows are bandwidths of a machine's links, not a kernel's
time against a library's; notebook 13 prints them beside the spec.
"""
import argparse

import utils  # first: chooses the mode

from gpu_course import collectives as coll, distributed as gd, ring_all_reduce as ring_ar


def parse_bytes(s: str) -> int:
    """'4K', '64M', '1G' or a number of bytes."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(s[:-1]) * units[s[-1].upper()]) if s[-1].upper() in units else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="+", default=list(coll.COLLECTIVES), choices=coll.COLLECTIVES)
    ap.add_argument("--min-bytes", default="4K")
    ap.add_argument("--max-bytes", default=None, help="default: 1G with NCCL, 1M on the CPU")
    ap.add_argument("--iters", type=int, default=None, help="calls per size (default 20 with NCCL, 3 on the CPU)")
    args = ap.parse_args()
    with gd.Ranks(timeout_s=600) as ranks:
        nccl = ranks.backend == "nccl"
        print(f"{ranks.plan.note}; {utils.device_name()}")
        if not nccl:
            print("cpu mode: gloo on the CPU checks the script; these times say nothing about a GPU, NCCL or NVLink")
        spec = coll.link_spec_gbps() if nccl else None
        print(f"link: {spec:g} GB/s in each direction (spec sheet, NVLink)" if spec else
              "link: no spec-sheet bandwidth known here (the bus bandwidths are not compared with one)")
        hi = parse_bytes(args.max_bytes or ("1G" if nccl else "1M"))
        iters = args.iters or ranks.by_backend(nccl=20, gloo=3)
        sweeps = {op: coll.sweep(ranks, op, coll.sizes(parse_bytes(args.min_bytes), hi), iters=iters,
                               warmup=ranks.by_backend(nccl=5, gloo=1)) for op in args.ops}
        print(f"\n{ranks.world} ranks: time per call in a back-to-back loop (the slowest rank's), bus bandwidth")
        print(coll.sweep_table(sweeps, spec))
        for op, rows in sweeps.items():
            print(f"{op}: latency floor {utils.fmt_ms(rows[0].seconds * 1e3)} at {coll.fmt_bytes(rows[0].nbytes)}; half "
                  f"the best bus bandwidth from {coll.fmt_bytes(coll.half_bandwidth_size(rows))}; best "
                  f"{max(r.busbw for r in rows):.3g} GB/s")
        err = max(e for n in (1, 1001, 65539) for e in ranks.run(ring_ar.ring_error, n))
        assert err < 1e-12, f"the ring all-reduce differs from all_reduce by {err:.2e} (relative, float64)"
        print(f"\nall_reduce by hand (a ring of isend/irecv; equal to {ranks.backend}'s within 1e-12, float64) "
              f"against {ranks.backend}'s, {ranks.world} ranks")
        sizes = [2**20, 2**26, 2**30] if nccl else [2**12, 2**20]
        print(ring_ar.ring_table(ring_ar.compare_ring(ranks, [s for s in sizes if s <= max(hi, 2**12)], iters), ranks.backend))


if __name__ == "__main__":
    main()
