"""gpu_course.interpose: the one layer that patches Triton and Numba. A patch point is there while
someone listens and gone after; a handler's exception reaches the launch; an unknown event or a
library without the patch points is refused clearly."""
import types

import numpy as np
import pytest
import torch

import utils  # noqa: F401  first: cpu mode, the simulator switch
import triton
import triton.language as tl
from gpu_course import interpose
from gpu_course.interpose import numba as numba_events
from gpu_course.interpose import triton as triton_events
from numba import cuda

pytestmark = pytest.mark.skipif(utils.ON_GPU, reason="the interpreter and the simulator run in cpu mode")


@triton.jit
def copy_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@cuda.jit
def tile_copy(x, out):
    s = cuda.shared.array(4, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[3 - t]


@cuda.jit
def tile_reversed_twice(x, out):
    s = cuda.shared.array(4, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    s[t] = s[t] + x[t]    # a second read of x and of s, a second write of s
    cuda.syncthreads()
    out[t] = s[3 - t] + s[t]


def _triton_attrs():
    from triton.runtime.interpreter import InterpretedFunction, InterpreterBuilder
    return {a: vars(InterpretedFunction).get(a) for a in ("run", "__getitem__")} | \
        {a: vars(InterpreterBuilder).get(a) for a in ("create_dot",)}


def test_patch_points_are_there_while_someone_listens():
    before = _triton_attrs()
    seen = []
    with triton_events.subscribed("launch", lambda ev: seen.append((ev.kind, ev.fn.__name__, ev.grid))):
        assert _triton_attrs()["run"] is not before["run"]
        x, o = torch.arange(10.0), torch.zeros(10)
        copy_kernel[(3,)](x, o, 10, BLOCK=4)
    assert _triton_attrs() == before and seen == [("triton", "copy_kernel", (3,))]
    copy_kernel[(3,)](x, o, 10, BLOCK=4)   # nobody listens: not seen
    assert len(seen) == 1 and torch.equal(o, x)


def test_accesses_and_the_error_a_handler_raises_reach_the_launch():
    ops = []

    def refuse_stores(ev):
        ops.append((ev.op, ev.origin.name if ev.origin else None))
        if ev.op == "store":
            raise LookupError("no stores today")
    x, o = torch.arange(4.0), torch.zeros(4)
    with triton_events.subscribed("access", refuse_stores):
        with pytest.raises(LookupError, match="no stores today"):
            copy_kernel[(1,)](x, o, 4, BLOCK=4)
    assert ops == [("load", "x_ptr"), ("store", "o_ptr")]


def test_simulator_events_shared_access_barrier():
    got = {"shared": [], "access": [], "barrier": []}
    subs = [numba_events.subscribe(e, got[e].append) for e in got]
    try:
        x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
        tile_copy[1, 4](x, out)
    finally:
        for s in subs:
            numba_events.unsubscribe(s)
    assert out.tolist() == [3, 2, 1, 0]
    assert [ev.new for ev in got["shared"]].count(True) == 1 and len(got["shared"]) == 4   # one array, 4 threads
    assert all(ev.array is got["shared"][0].array and ev.shape == (4,) for ev in got["shared"])
    assert sorted(ev.op for ev in got["access"]) == ["load"] * 4 + ["store"] * 4
    assert sorted(ev.thread for ev in got["barrier"]) == [(t, 0, 0) for t in range(4)]


def test_unknown_events_and_versions_are_refused():
    with pytest.raises(ValueError, match="triton has no event 'store'"):
        triton_events.subscribe("store", print)
    fake = types.ModuleType("fake_interpreter")
    fake.GridExecutor, fake._implicit_cvt, fake.InterpreterError = object, lambda a: a, RuntimeError
    fake.InterpreterBuilder = type("InterpreterBuilder", (), {"create_masked_load": lambda *a: 0})
    with pytest.raises(interpose.UnknownVersion, match="no InterpreterBuilder.create_masked_store"):
        triton_events.check_interpreter(fake)


def test_patches_put_back_what_was_there():
    owner = types.SimpleNamespace(f=lambda: 1)
    cls = type("C", (), {})
    patches = interpose.Patches()
    patches.put(owner, "f", lambda orig: lambda: orig() + 1)
    patches.put(owner, "f", lambda orig: lambda: 100)   # once per attribute
    patches.put(cls, "__repr__", lambda orig: lambda self: "C!")   # inherited from object, not its own
    assert owner.f() == 2 and owner.f.__wrapped__() == 1 and repr(cls()) == "C!"
    patches.undo_all()
    assert owner.f() == 1 and "__repr__" not in vars(cls) and repr(cls()) != "C!"


def test_a_thread_reports_its_first_read_and_write_of_a_shared_array_and_every_global_read():
    """Which threads read and wrote a shared array is what its events tell: each thread reports its first read
    and first write of it only. A kernel's global arguments, whose reads are counted, report every read."""
    from gpu_course.exercises.kinds.numba import learner_counting
    got = []
    with numba_events.subscribed("access", got.append):
        x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
        tile_reversed_twice[1, 4](x, out)
    assert out.tolist() == [3 * 2 + 0, 2 * 2 + 2, 1 * 2 + 4, 0 * 2 + 6]
    per_thread = {}
    for ev in got:
        per_thread.setdefault(ev.thread, []).append(ev.op)
    assert sorted(per_thread) == [(t, 0, 0) for t in range(4)]
    assert all(sorted(ops) == ["load", "store"] for ops in per_thread.values()), per_thread
    with learner_counting("tile_reversed_twice") as ex:
        tile_reversed_twice[1, 4](x, out)
    assert ex.gloads == 8   # x read twice by each of 4 threads
    (use,) = ex.shared.values()
    assert len(use.readers) == len(use.writers) == 4
