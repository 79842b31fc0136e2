"""gpu_course.distributed and parallel_training with NCCL, one rank per GPU: the hand ring and the
composed all-reduce agree with NCCL's, the sweep's bandwidths come out of real kernels, DDP's
gradients are the whole batch's, FSDP holds 1/n of DDP's state, the overlap is read from a trace.
Skipped without two GPUs (tests/unit/test_distributed.py covers the same code with gloo)."""
import pytest
import torch
import torch.distributed as dist

import utils
from gpu_course import collective_check, collectives as coll, distributed as gd, ring_all_reduce as ring_ar
from gpu_course import parallel_training as pt

GPUS = torch.cuda.device_count() if utils.ON_GPU else 0
pytestmark = pytest.mark.skipif(GPUS < 2, reason="needs two GPUs (gpu mode)")


@pytest.fixture(scope="module")
def ranks():
    with gd.Ranks(world=2, timeout_s=300) as r:
        yield r


def on_which_gpu():
    return dist.get_backend(), torch.cuda.current_device(), gd.rank_device().type


def test_each_rank_has_its_own_gpu_and_nccl(ranks):
    assert ranks.backend == "nccl"
    assert ranks.run(on_which_gpu) == [("nccl", 0, "cuda"), ("nccl", 1, "cuda")]


@pytest.mark.parametrize("n", [1, 1001, 2**20 + 3])
def test_the_ring_equals_nccls_all_reduce(ranks, n):
    assert max(ranks.run(ring_ar.ring_error, n)) < 1e-12


def test_a_sweep_on_gpus(ranks):
    rows = coll.sweep(ranks, "all_reduce", [4096, 2**26], iters=5, warmup=2)
    assert rows[1].busbw > 10 * rows[0].busbw   # a 64 MB all-reduce is bandwidth-bound, 4 KB latency-bound
    assert rows[1].busbw < 2 * coll.link_spec_gbps(utils.device_name())   # and no faster than the link


def test_a_captured_all_reduce_hides_the_launch(ranks):
    loop, gpu, cpu = ring_ar.three_ways_table(ranks, [4096], iters=10)[4096]
    assert gpu is not None and 0 < gpu < loop   # the graph's replay leaves the GPUs' own time


def test_ddp_gradients_are_the_whole_batchs(ranks):
    ref = pt.full_batch_gradients(256, 2, 64)
    for grads in ranks.run(pt.ddp_gradients, 256, 2, 64):
        for k in ref:
            assert (grads[k] - ref[k]).abs().max() <= 1e-4 * ref[k].abs().max()


def test_fsdp_state_and_peak(ranks):
    ddp, fsdp = (ranks.run(pt.state_bytes, 1024, 4, 64, sharded=s)[0] for s in (False, True))
    for what in ("parameters", "gradients", "optimizer"):
        assert fsdp[what] == ddp[what] // 2
    assert fsdp["peak"] < ddp["peak"]


def test_overlap_is_read_from_the_trace(ranks):
    share, comm_ms = ranks.run(pt.overlap, 1024, 4, 256)[0]
    assert 0 <= share <= 1 and comm_ms > 0


def test_the_exercise_check_with_nccl(ranks):
    from solutions import nb13
    from tests.unit.test_distributed import answer
    collective_check.check_composed_all_reduce(ranks, answer(nb13.SOLUTIONS["ex13-2-answer"]))
    with pytest.raises(AssertionError, match="calls dist.all_reduce"):
        collective_check.check_composed_all_reduce(ranks, answer(nb13.CHEATS["ex13-2-answer"]["dist.all_reduce itself"]))



def test_ddp_buckets_with_nccl_are_torchs_assignment(ranks):
    from gpu_course import ddp_buckets as buckets
    from solutions import nb13
    from tests.unit.test_distributed import answer
    assert ranks.run(buckets.observed_buckets) == [[[8, 7, 6], [5, 4, 3], [2, 1, 0]]] * 2
    buckets.check_bucket_assignment(ranks, answer(nb13.SOLUTIONS["ex13-3-answer"], "ddp_buckets"))

def test_torchrun_on_gpus():
    out = gd.torchrun(gd.__file__.replace("distributed.py", "hello_ranks.py"), nproc=2)
    assert out.splitlines() == ["rank 0 of 2: my number is 1; all_reduce gives 3",
                                "rank 1 of 2: my number is 2; all_reduce gives 3"]
