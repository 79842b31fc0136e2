"""gpu_course.distributed on the CPU: two gloo ranks, kept alive between runs; functions of a notebook
shipped by their source; a rank's error and a hang give a clear Python error and new ranks next time;
the hand-written ring all-reduce agrees with gloo's; the sweep's bandwidths follow nccl-tests."""
import linecache
import sys

import pytest
import torch
import torch.distributed as dist

import utils  # noqa: F401  the mode first
from gpu_course import collective_check, collectives as coll, distributed as gd, ring_all_reduce as ring_ar
from gpu_course import parallel_training as pt

pytestmark = pytest.mark.slow   # each start of the ranks is two fresh interpreters importing torch


@pytest.fixture(scope="module")
def ranks():
    with gd.Ranks(plan_=gd.plan(gpus=0), timeout_s=120) as r:
        yield r


def where_am_i():
    return dist.get_rank(), dist.get_world_size(), dist.get_backend()


def ring_against_gloo(n, seed):
    g = torch.Generator().manual_seed(seed + dist.get_rank())
    x = torch.randn(n, generator=g, dtype=torch.float64)
    ref = x.clone()
    dist.all_reduce(ref)
    return ring_ar.ring_all_reduce(x.clone()), ref


def fails_on_rank_1():
    if dist.get_rank() == 1:
        raise ValueError("rank 1 cannot")
    dist.barrier()          # rank 0 waits for rank 1 forever: the ranks must be stopped
    return "unreachable"


def recv_without_send():
    if dist.get_rank() == 0:
        dist.recv(torch.empty(4), src=1)   # rank 1 never sends
    return dist.get_rank()


def notebook_function(src: str, name: str, **globals_):
    """A function as a notebook cell defines it: module __main__, its source in linecache (the
    cell's other functions, if ``src`` has several, share its globals)."""
    filename = f"<ipython-input-{name}-{abs(hash(src))}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"__name__": "__main__", **globals_}
    exec(compile(src, filename, "exec"), ns)
    return ns[name]


def test_results_come_back_in_rank_order(ranks):
    assert ranks.run(where_am_i) == [(0, 2, "gloo"), (1, 2, "gloo")]


@pytest.mark.parametrize("n", [1, 2, 1001, 4096])
def test_the_hand_written_ring_sums_as_gloo_does(ranks, n):
    for mine, ref in ranks.run(ring_against_gloo, n, seed=n):
        torch.testing.assert_close(mine, ref, rtol=1e-12, atol=1e-12)


def test_a_notebooks_function_is_shipped_with_what_it_reads(ranks):
    helper = notebook_function("def scaled(x):\n    return x * SCALE\n", "scaled", SCALE=10)
    fn = notebook_function(
        "def total(n):\n"
        "    t = torch.full((n,), float(dist.get_rank() + 1))\n"
        "    dist.all_reduce(t)\n"
        "    return scaled(t)\n", "total", torch=torch, dist=dist, scaled=helper)
    assert fn.__module__ == "__main__"
    out = ranks.run(fn, 3)
    assert [t.tolist() for t in out] == [[30.0] * 3, [30.0] * 3]   # (1 + 2) * SCALE on each rank


def says_hello_and_warns():
    import warnings
    warnings.warn("a warning goes to the rank's log")
    print(f"hello from rank {dist.get_rank()}")
    return dist.get_rank()


def test_prints_come_back_rank_by_rank_and_the_rest_goes_to_the_log(ranks, capsys):
    assert ranks.run(says_hello_and_warns) == [0, 1]
    assert capsys.readouterr().out == "[rank 0] hello from rank 0\n[rank 1] hello from rank 1\n"
    assert "a warning goes to the rank's log" in ranks.log(1)


def test_notebook_functions_that_call_each_other_and_themselves_are_shipped(ranks):
    src = ("def even(n):\n    return True if n == 0 else odd(n - 1)\n\n\n"
           "def odd(n):\n    return False if n == 0 else even(n - 1)\n\n\n"
           "def factorial(n):\n    return 1 if n <= 1 else n * factorial(n - 1)\n\n\n"
           "def both(n):\n    return even(n), factorial(n) + dist.get_rank()\n")
    fn = notebook_function(src, "both", dist=dist)
    assert ranks.run(fn, 5) == [(False, 120), (False, 121)]


def test_a_class_of_the_notebook_gives_a_reason_and_the_ranks_live_on(ranks, monkeypatch):
    ns = {"__name__": "__main__"}
    exec("class Point:\n    pass\n", ns)
    monkeypatch.setattr(sys.modules["__main__"], "Point", ns["Point"], raising=False)   # as a cell defines it
    fn = notebook_function("def make():\n    return Point()\n", "make", Point=ns["Point"])
    with pytest.raises(gd.RankError, match="a class defined in the notebook cannot travel"):
        ranks.run(fn)
    assert ranks.run(where_am_i)[0] == (0, 2, "gloo")


def test_a_closure_is_refused_with_a_reason(ranks):
    k = 3

    def inner():
        return k
    with pytest.raises(TypeError, match="enclosing function"):
        ranks.run(inner)
    with pytest.raises(TypeError, match="with def"):
        ranks.run(notebook_function("f = lambda: 1\n", "f"))
    with pytest.raises(TypeError, match="cannot be sent to the ranks"):
        ranks.run(where_am_i, (i for i in range(3)))   # a generator cannot be pickled
    assert ranks.run(where_am_i)[1] == (1, 2, "gloo")   # and no rank was left waiting


def test_a_rank_that_raises_gives_its_error_and_new_ranks_next_time(ranks):
    with pytest.raises(gd.RankError, match=r"rank 1 of 2 raised in fails_on_rank_1: ValueError: rank 1 cannot"):
        ranks.run(fails_on_rank_1)
    assert ranks.run(where_am_i)[1] == (1, 2, "gloo")


def test_a_hang_gives_a_timeout_and_new_ranks_next_time(ranks):
    with pytest.raises(gd.RanksTimeout, match=r"rank 0 of 2 did not finish recv_without_send in 3 s"):
        ranks.run(recv_without_send, timeout_s=3)
    assert ranks.run(where_am_i)[0] == (0, 2, "gloo")


def test_sweep_reports_bandwidths_as_nccl_tests_define_them(ranks):
    for op in coll.COLLECTIVES:
        rows = coll.sweep(ranks, op, [4096, 65536], iters=2, warmup=1)
        assert [r.nbytes for r in rows] == [4096, 65536] and all(r.seconds > 0 for r in rows)
        for r in rows:
            assert r.busbw == pytest.approx(r.algbw * coll.bus_factor(op, 2))
            assert r.algbw == pytest.approx(r.nbytes / r.seconds / 1e9)


def test_three_ways_has_no_graph_time_on_cpu_ranks(ranks, capsys):
    out = ring_ar.three_ways_table(ranks, [4096], iters=2)
    loop, gpu, cpu = out[4096]
    assert loop > 0 and cpu > 0 and gpu is None       # no CUDA graphs on CPU ranks: said with a dash
    assert "-" in capsys.readouterr().out.splitlines()[1].split()


def test_bus_factor_and_plan_refuse_nonsense():
    with pytest.raises(ValueError, match="one of"):
        coll.bus_factor("all_to_all", 2)
    with pytest.raises(ValueError, match="at least 1"):
        gd.plan(world=0)
    assert ring_ar.ring_bytes_per_rank(1e9, 2) == 1e9 and ring_ar.ring_bytes_per_rank(1e9, 8) == 1.75e9
    assert gd.plan(gpus=1).backend == "gloo" and "one GPU" in gd.plan(gpus=1).note


def test_ddp_gives_every_rank_the_gradient_of_the_whole_batch(ranks):
    ref = pt.full_batch_gradients(16, 2, 8)
    for grads in ranks.run(pt.ddp_gradients, 16, 2, 8):
        assert grads.keys() == ref.keys()
        for k in ref:
            torch.testing.assert_close(grads[k], ref[k], rtol=1e-5, atol=1e-6)


def test_fsdp_holds_half_of_what_ddp_holds_and_trains_the_same(ranks):
    ddp, fsdp = (ranks.run(pt.state_bytes, 16, 2, 8, sharded=s) for s in (False, True))
    assert ddp[0]["parameters"] == 3 * (16 * 16 + 16) * 4 and ddp[0]["peak"] is None
    for what in ("parameters", "gradients", "optimizer"):
        assert [f[what] for f in fsdp] == [ddp[0][what] // 2] * 2
    a, b = (ranks.run(pt.losses, 16, 2, 8, sharded=s)[0] for s in (False, True))
    assert a[2] < a[0] and max(abs(x - y) for x, y in zip(a, b)) < 1e-6


def state_bytes_where_torch_sees_a_gpu(*args, **kw):
    """pt.state_bytes on a rank of a machine whose torch reports an accelerator (one GPU: the ranks run on the
    CPU with gloo), where a mesh left to fully_shard's default would select a GPU per rank."""
    real = torch._C._get_accelerator
    torch._C._get_accelerator = lambda *a: torch.device("cuda")
    try:
        return pt.state_bytes(*args, **kw)
    finally:
        torch._C._get_accelerator = real


def test_fsdp_shards_on_the_ranks_device_even_where_torch_sees_a_gpu(ranks):
    held = ranks.run(state_bytes_where_torch_sees_a_gpu, 16, 2, 8, sharded=True)
    assert [h["parameters"] for h in held] == [3 * (16 * 16 + 16) * 4 // 2] * 2


def test_step_time_alone_runs_on_rank_0_only_and_overlap_needs_nccl(ranks):
    alone = ranks.run(pt.step_time, 16, 1, 4, 2, ddp=False, warmup=1)
    assert alone[0] > 0 and alone[1] is None
    assert ranks.run(pt.overlap, 16, 1, 4) == [None, None]
    assert ranks.run(tf32_is_on) == [False, False]   # TF32 only while the steps are timed


def tf32_is_on():
    return torch.backends.cuda.matmul.allow_tf32


def answer(src: str, name: str = "my_all_reduce"):
    """A function of notebook 13's solutions file, as the notebook's cell would define it."""
    return notebook_function(src, name, torch=torch, dist=dist, coll=coll)


def gathers_everything(t):
    n = dist.get_world_size()
    every = torch.empty(n * t.numel(), dtype=t.dtype, device=t.device)
    coll.reduce_scatter_into(torch.empty(t.numel() // n, dtype=t.dtype), t)
    coll.all_gather_into(every, t)
    return every.view(n, -1).sum(0)


def gathered_into_a_list(t):   # the list forms, the parts joined by torch.cat: a copy of what was gathered
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
    dist.reduce_scatter(part, list(t.chunk(n)))
    parts = [torch.empty_like(part) for _ in range(n)]
    dist.all_gather(parts, part)
    return torch.cat(parts)


def gathers_a_clone(t):   # the reduce-scatter writes into this rank's slot of the result; a clone of it is gathered
    n = dist.get_world_size()
    out = torch.empty_like(t)
    part = out.view(n, -1)[dist.get_rank()]
    dist.reduce_scatter_tensor(part, t)
    dist.all_gather_into_tensor(out, part.clone())
    return out


def test_the_composed_all_reduce_check_accepts_the_method_and_names_each_shortcut(ranks):
    from solutions import nb13
    collective_check.check_composed_all_reduce(ranks, answer(nb13.SOLUTIONS["ex13-2-answer"]))
    for copies in (gathered_into_a_list, gathers_a_clone):   # copies between the collectives: values, not addresses
        collective_check.check_composed_all_reduce(ranks, copies)
    with pytest.raises(AssertionError, match="all-gathers the whole tensor"):
        collective_check.check_composed_all_reduce(ranks, gathers_everything)
    with pytest.raises(AssertionError, match="calls dist.all_reduce"):
        collective_check.check_composed_all_reduce(ranks, answer(nb13.CHEATS["ex13-2-answer"]["dist.all_reduce itself"]))
    with pytest.raises(AssertionError, match="exactly one of each"):
        collective_check.check_composed_all_reduce(ranks, answer(nb13.CHEATS["ex13-2-answer"][
            "a reduce-scatter for show, then an all-gather of each raw chunk of t, summed locally"]))
    with pytest.raises(AssertionError, match="also calls broadcast"):
        collective_check.check_composed_all_reduce(ranks, answer(
            nb13.CHEATS["ex13-2-answer"]["the two collectives, then a broadcast of rank 0's result"]))


def test_ring_seconds_pays_the_latency_at_every_step():
    assert ring_ar.ring_seconds(1000, 1, 1e-5, 1e9) == 0
    assert ring_ar.ring_seconds(2**30, 2, 0.0, 1e11) == ring_ar.ring_bytes_per_rank(2**30, 2) / 1e11
    assert abs(ring_ar.ring_seconds(4096, 8, 1e-5, 1e11) - 14 * (1e-5 + 512 / 1e11)) < 1e-15


def test_ddp_buckets_are_torchs_assignment_and_the_check_names_what_differs(ranks):
    from gpu_course import ddp_buckets as buckets
    from solutions import nb13
    mib = buckets.MiB
    # the ranks' model: the reducer's buckets after its rebuild are torch's assignment in backward's order
    assert ranks.run(buckets.observed_buckets) == [[[8, 7, 6], [5, 4, 3], [2, 1, 0]]] * 2
    assert buckets.torch_assignment(buckets.param_bytes_of(), buckets.CAP, buckets.FIRST_CAP) == [[8, 7, 6], [5, 4, 3],
                                                                                                  [2, 1, 0]]
    assert buckets.torch_assignment([mib] * 3, cap=mib, first_cap=mib) == [[2], [1], [0]]   # reaching the cap closes
    buckets.check_bucket_assignment(ranks, answer(nb13.SOLUTIONS["ex13-3-answer"], "ddp_buckets"))
    cheats = nb13.CHEATS["ex13-3-answer"]
    with pytest.raises(AssertionError, match="calls torch's own bucket assignment"):
        buckets.check_bucket_assignment(ranks, lambda s, cap, first: buckets.torch_assignment(s, cap, first))
    with pytest.raises(AssertionError, match=r"it gives \[\[0\], \[1, 2, 3, 4\]\], DDP makes \[\[4, 3\], \[2, 1, 0\]\]"):
        buckets.check_bucket_assignment(ranks, answer(cheats["the parameters in forward order"], "ddp_buckets"))
    with pytest.raises(AssertionError, match="hand in a function"):
        buckets.check_bucket_assignment(ranks, [[0]])


def _c10d_all_reduce_beside_the_two(t):   # the sum from distributed_c10d's all_reduce, the collectives for show
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype)
    coll.reduce_scatter_into(part, t)
    coll.all_gather_into(torch.empty_like(t), part)
    dist.distributed_c10d.all_reduce(t)
    return t


def _group_all_reduce(t):                   # the default group's own method, no torch.distributed function
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype)
    coll.reduce_scatter_into(part, t)
    coll.all_gather_into(torch.empty_like(t), part)
    dist.distributed_c10d._get_default_group().allreduce([t]).wait()
    return t


def _through_the_store(t):                  # the collectives for show, the sum exchanged through the store
    n, r = dist.get_world_size(), dist.get_rank()
    part = torch.empty(t.numel() // n, dtype=t.dtype)
    coll.reduce_scatter_into(part, t)
    coll.all_gather_into(torch.empty_like(t), part)
    store = dist.distributed_c10d._get_default_store()
    key = f"cheat-{t.numel()}"
    store.set(f"{key}-{r}", t.numpy().tobytes())
    return sum(torch.frombuffer(bytearray(store.get(f"{key}-{i}")), dtype=t.dtype) for i in range(n))


def _gathered_into_t(t):                    # unusual but right: the all-gather writes into t itself
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype)
    coll.reduce_scatter_into(part, t)
    coll.all_gather_into(t, part)
    return t


def _as_a_view(t):                          # unusual but right: gathered into a slice of a larger buffer
    n = dist.get_world_size()
    part = torch.empty(t.numel() // n, dtype=t.dtype)
    dist.distributed_c10d.reduce_scatter_tensor(part, t)
    out = torch.empty(2 * t.numel(), dtype=t.dtype)[t.numel():]
    dist.all_gather_into_tensor(out, part)
    return out


def test_collectives_are_watched_at_the_c10d_level_and_must_feed_the_answer(ranks):
    check = collective_check.check_composed_all_reduce
    for right in (_gathered_into_t, _as_a_view):
        check(ranks, right)
    for cheat in (_c10d_all_reduce_beside_the_two, _group_all_reduce):
        with pytest.raises(AssertionError, match="calls dist.all_reduce"):
            check(ranks, cheat)
    with pytest.raises(AssertionError, match="does not return what its all-gather wrote"):
        check(ranks, _through_the_store)


def _the_checks_sum_from_a_frame(t):        # the collectives for show on one element each; the sum read from a frame
    import sys
    n = dist.get_world_size()
    one = torch.empty(1, dtype=t.dtype)
    coll.reduce_scatter_into(one, t[:n].contiguous())
    big = torch.empty_like(t)
    coll.all_gather_into(big[:n], one)
    f = sys._getframe(1)
    while f is not None and not isinstance(f.f_locals.get("ref"), torch.Tensor):
        f = f.f_back
    return big.copy_(f.f_locals["ref"] if f is not None else torch.zeros_like(t))


def _whole_collectives_then_overwritten(t):   # both collectives in full, their result overwritten from the store
    n, r = dist.get_world_size(), dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    store.set(f"over-{t.numel()}-{r}", t.numpy().tobytes())
    out = _gathered_into_t(t.clone())
    return out.copy_(sum(torch.frombuffer(bytearray(store.get(f"over-{t.numel()}-{i}")), dtype=t.dtype)
                         for i in range(n)))


def test_the_sum_from_a_frame_or_the_store_beside_the_collectives_is_refused(ranks):
    check = collective_check.check_composed_all_reduce
    with pytest.raises(AssertionError, match="differs from the sum over ranks"):   # the sum is made after fn returns
        check(ranks, _the_checks_sum_from_a_frame)
    with pytest.raises(AssertionError, match="must move the whole tensor between them"):
        check(ranks, _tiny_collectives_through_the_store)
    with pytest.raises(AssertionError, match="does not return what its all-gather wrote"):
        check(ranks, _whole_collectives_then_overwritten)


def _tiny_collectives_through_the_store(t):   # each collective on n elements, the sum through the store
    n = dist.get_world_size()
    one = torch.empty(1, dtype=t.dtype)
    coll.reduce_scatter_into(one, t[:n].contiguous())
    coll.all_gather_into(torch.empty(n, dtype=t.dtype), one)
    store, r = dist.distributed_c10d._get_default_store(), dist.get_rank()
    store.set(f"tiny-{t.numel()}-{r}", t.numpy().tobytes())
    return sum(torch.frombuffer(bytearray(store.get(f"tiny-{t.numel()}-{i}")), dtype=t.dtype) for i in range(n))


def test_a_freed_collective_output_does_not_lend_its_mark_to_the_next_tensor_at_its_address():
    # The allocator hands a freed block to the next tensor of its size: the flow must keep what it marked alive,
    # or a sum built elsewhere would pass for the all-gather's output (it did, on one machine's allocator).
    flow = collective_check._Flow()
    for _ in range(20):
        part = torch.empty(4099 * 2, dtype=torch.float64)
        flow.mark("gathered", [part])
        del part
        assert not flow.holds("gathered", torch.empty(4099 * 2, dtype=torch.float64))
