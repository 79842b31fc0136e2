"""Notebook 14's helpers: the sync counter, the exercises' checks, the copy sweep (cpu mode)."""
import torch

from gpu_course import data_movement as dm
from gpu_course import streams
from gpu_course import training_step as ts


def test_sync_counter_counts_a_planted_item_and_a_mask():
    x = torch.ones(8)
    r = ts.count_syncs(lambda: [x.sum().item() for _ in range(3)] + [x[x > 0].numel()])
    assert r.count == 4 and r.ops.count("item") == 3


def test_sync_counter_sees_nothing_in_a_sync_free_loop():
    b = ts.make_batches(2, 8, 16)
    assert ts.count_syncs(ts.loop_without_syncs, *ts.setup(16, 1), b).count == 0
    assert ts.count_syncs(ts.loop_with_syncs, *ts.setup(16, 1), b).count == 6


def test_sync_exercise_refuses_the_given_loop_and_accepts_a_fix():
    b = ts.make_batches(2, 8, 16)
    try:
        ts.check_sync_free(ts.loop_to_fix, 16, 1, b)
        raise RuntimeError("not refused")
    except AssertionError as e:
        assert "synchronisation" in str(e)

    def fixed(model, opt, batches):
        losses, correct = [], 0
        for x, y in batches:
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
            losses.append(loss.detach()); correct = correct + (logits.argmax(1) == y).sum()
        return torch.stack(losses), correct
    ts.check_sync_free(fixed, 16, 1, b)


def test_overlap_exercise_refuses_one_stream():
    chunks, w = streams.overlap_fixture(2, 4096, 32)
    try:
        streams.check_back_overlap(streams.back_serial, chunks, w, 1)
        raise RuntimeError("not refused")
    except AssertionError as e:
        assert "side stream" in str(e)


def test_overlap_exercise_accepts_a_side_stream_made_once_and_kept():
    """The side stream may be made before the check runs (as streams.overlapped keeps its own)."""
    chunks, w = streams.overlap_fixture(3, 4096, 32)
    side = streams.Stream()

    def kept(chunks, w, reps, outs):
        main = streams.current_stream()
        for d, h in zip(chunks, outs):
            y = streams.transform(d, w, reps)
            done = streams.Event()
            done.record(main)
            side.wait_event(done)
            with streams.stream(side):
                h.copy_(y, non_blocking=True)
            streams.record_stream(y, side)
        side.synchronize()
    streams.check_back_overlap(kept, chunks, w, 1)

    def no_wait(chunks, w, reps, outs):
        for d, h in zip(chunks, outs):
            y = streams.transform(d, w, reps)
            with streams.stream(side):
                h.copy_(y, non_blocking=True)
    try:
        streams.check_back_overlap(no_wait, chunks, w, 1)
        raise RuntimeError("not refused")
    except AssertionError as e:
        assert "no wait" in str(e)


def test_copy_sweep_and_overlapped_result():
    sw = dm.copy_sweep([4096, 8192], reps=2)
    assert set(sw) == set(dm.KINDS) and all(len(v) == 2 for v in sw.values())
    chunks, w = streams.overlap_fixture(3, 4096, 32)
    assert torch.equal(streams.overlapped(chunks, w, 1), streams.serial(chunks, w, 1))


def test_fresh_stream_variant_and_queue_time_give_the_same_sums():
    chunks, w = streams.overlap_fixture(3, 4096, 32)
    assert torch.equal(streams.overlapped_fresh(chunks, w, 1), streams.serial(chunks, w, 1))
    assert streams.queue_ms(streams.overlapped, chunks, w, 1) >= 0


def test_input_pipeline_helpers_in_cpu_mode():
    from gpu_course import step_pipeline as sp
    ds = sp.SlowDataset(40, 16, work=1)
    model, opt = ts.setup(16, 1)
    assert sp.steady_ms_per_step(model, opt, sp.loader(ds, 4, 0, False), skip=2) > 0
    assert sp.first_batch_ms(lambda: sp.loader(ds, 4, 0, False)) > 0
    assert sp.batch_cpu_ms(ds, 4, reps=2) > 0


def test_allocation_bands_stack_in_order_and_slide_down():
    from gpu_course import step_memory as mem
    hist = {"before": [("p", 8, "parameter")], "marks": {"forward": 2, "backward": 4, "optimizer": 4},
            "events": [("alloc", "a", 4, "activation"), ("alloc", "g", 8, "gradient"),
                       ("free", "a", 0, ""), ("free", "g", 0, "")]}
    bands, totals = mem.allocation_bands(hist["before"], hist["events"])
    assert totals == [8, 12, 20, 16, 8]
    assert [b[2] for b in bands if b[0] == "gradient"] == [[12, 8]]
    at_peak, largest = mem.by_category(hist)
    assert at_peak == {"parameter": 8 / 2**20, "activation": 4 / 2**20, "gradient": 8 / 2**20}
    import matplotlib
    matplotlib.use("Agg")
    assert mem.plot_allocations(hist, "t").axes


def test_staged_copy_model_pipelines_the_chunks():
    one = dm.staged_copy_ms(4 << 20, 4 << 20, 10.0, 40.0)
    assert abs(one - ((4 << 20) / 10e6 + (4 << 20) / 40e6)) < 1e-12       # one chunk: the two steps in turn
    four = dm.staged_copy_ms(16 << 20, 4 << 20, 10.0, 40.0)
    assert abs(four - one - 3 * (4 << 20) / 10e6) < 1e-12                 # then the slower stage sets the pace


def test_saved_mb_leaves_out_parameters_and_checkpoint_recomputes_early():
    from gpu_course import step_memory as mem
    lin = torch.nn.Linear(512, 512, bias=False)
    assert mem.saved_mb(lin, torch.ones(4, 512)) < 0.01
    m, x = mem.Blocks(16, 2, checkpoint=True), torch.ones(4, 16)
    n_on, _ = mem.matmul_work(lambda: m(x).sum().backward())
    n_off, _ = mem.matmul_work(lambda: m(x).sum().backward(), early_stop=False)
    assert (n_on, n_off) == (6, 8)


def test_host_work_and_loops_with_cpu_work():
    import time
    t0 = time.perf_counter()
    ts.host_work(5.0)
    assert time.perf_counter() - t0 >= 0.005
    b = ts.make_batches(2, 8, 16)
    assert ts.count_syncs(ts.loop_with_syncs, *ts.setup(16, 1), b, 0.1).count == 6
    assert ts.issue_ms(ts.loop_without_syncs, 16, 1, b) > 0


def test_input_ablation_interleaves_its_rounds_and_reports_medians_and_ranges(monkeypatch):
    """Rounds in the order A B, B A, A B: a drift of the host falls on both configurations alike."""
    from gpu_course import step_pipeline as sp
    seen, clock = [], iter([1.0, 5.0, 6.0, 2.0, 3.0, 7.0])
    monkeypatch.setattr(sp, "loader", lambda ds, batch, workers, pin: workers)
    monkeypatch.setattr(sp, "steady_ms_per_step", lambda model, opt, ld, **kw: seen.append(ld) or next(clock))
    med, spread = sp.input_ablation(None, None, None, 8, {"A": (0, False, False), "B": (4, True, True)}, rounds=3)
    assert seen == [0, 4, 4, 0, 0, 4]
    assert med == {"A": 2.0, "B": 6.0} and spread == {"A": "1.00-3.00", "B": "5.00-7.00"}
