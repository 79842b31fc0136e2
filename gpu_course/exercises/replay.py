"""The course's own launch of the learner's kernel: the launches the learner's code made (recorded
by :mod:`gpu_course.launches`) are made again by the check, with the same kernel, grid, block and
scalar arguments, on memory the check owns:

* the output (the tensor the learner's function returned) is replaced by fresh poisoned memory,
  so a value torch put there before or after the launch is not there;
* the inputs are replaced by copies of their values, so a kernel that writes into its inputs is
  seen (the copies are compared afterwards), and a copy made by the learner's function counts as
  the input it equals (inputs are matched by value, not by storage), and only that view of its storage
  keeps values: the rest of the storage is poisoned, so a result hidden past the copy's end is not there;
* every other buffer (scratch, or a result torch computed beforehand) is poisoned when the check
  names its inputs: a kernel must write it before it reads it.

While the course's launch runs in cpu mode, the Triton interpreter's stores and ``tl.dot`` calls are
counted per program, and the Numba simulator's shared arrays record which threads of which block
wrote and read them (:class:`Execution`); on a GPU the compiled code is what the evidence reads
(see :mod:`.compiled`).

>>> m = Memory(output=torch.zeros(3), inputs=[])
>>> m.tensor(torch.zeros(2)).isnan().all().item()  # not the output, no inputs named: copied
False
"""
from __future__ import annotations

import threading
from collections import defaultdict
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import mode

POISON = 0xFF  # every byte: NaN for floats, -1 for signed integers
# while the check launches a kernel on inputs with new values (:mod:`.fresh`): what :class:`Memory` needs to know
FRESH: list = []


@dataclass
class FreshState:
    """Under :func:`fresh_copies`: ``kept``, (tensor, its old values) of each input given new values (a copy of
    one that the learner's code made gets the new values too); ``inputs``, the tensors whose values agree with
    the reference's whether varied or not (those it reads); ``unknown``, the names of the arguments holding
    data that is neither an input nor a copy of one (something computed from the inputs beforehand, say: it
    keeps the old values)."""
    kept: list
    inputs: list
    unknown: list = field(default_factory=list)


@contextmanager
def fresh_copies(kept, inputs=()):
    """Inside the block :class:`Memory` follows :class:`FreshState`; yields it."""
    state = FreshState(list(kept), list(inputs))
    FRESH[:] = [state]
    try:
        yield state
    finally:
        FRESH.clear()


@dataclass
class SharedUse:
    """One Numba shared array in the simulator: its shape, and the (block, thread) pairs that
    wrote into it and read from it."""
    shape: tuple
    writers: set = field(default_factory=set)
    readers: set = field(default_factory=set)


@dataclass
class Execution:
    """What ran in the course's own launch (cpu mode; None/empty where not counted).

    ``programs``: Triton programs or Numba blocks launched; ``stored``: elements each Triton
    program stored ({program: count}); ``dots``: ``tl.dot`` calls each program executed; ``dot_macs``: the
    multiply-adds of those of them with a loaded operand ({(launch, program): count}); ``dot_spans``: the storage
    spans ``(lo, hi)`` of the tensor arguments those operands were loaded from; ``memory``: the :class:`Memory`;
    ``blocks``: the Numba blocks that ran (their (x, y, z)); ``threads``: threads per block;
    ``shared``: the Numba shared arrays, by where they are declared; ``barriers``: barriers each
    Numba thread passed; ``compiled``: the compiled Triton kernels (gpu mode)."""
    programs: int = 0
    stored: dict = field(default_factory=lambda: defaultdict(int))
    dots: dict = field(default_factory=lambda: defaultdict(int))
    dot_macs: dict = field(default_factory=lambda: defaultdict(int))
    dot_spans: set = field(default_factory=set)
    memory: object = None
    blocks: set = field(default_factory=set)
    threads: int = 0
    shared: dict = field(default_factory=dict)
    barriers: dict = field(default_factory=lambda: defaultdict(int))
    gloads: int = 0      # Numba (simulator): element loads from the arrays the check gave the kernel
    elements: int = 0    # Numba (simulator): elements of those arrays (inputs and output)
    compiled: list = field(default_factory=list)
    counted: bool = False
    # per (launch, program) of the Triton launches, whatever their number: elements loaded + stored +
    # touched by atomics (``work``), and stored or touched by atomics (``wrote``); ``launch`` is the one under way
    work: dict = field(default_factory=lambda: defaultdict(int))
    lanes: dict = field(default_factory=lambda: defaultdict(int))   # as ``work``, masked-off lanes included
    grids: list = field(default_factory=list)                        # each launch's grid
    wrote: dict = field(default_factory=lambda: defaultdict(int))
    atomics: dict = field(default_factory=lambda: defaultdict(int))   # as ``wrote``, by atomic operations only
    scalar_loads: dict = field(default_factory=lambda: defaultdict(int))   # tl.loads of one lane, per program
    launch: int = 0


def _raw(t: torch.Tensor) -> torch.Tensor:
    """The bytes of ``t``'s whole storage, as a uint8 tensor sharing them."""
    st = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(st, 0, (st.nbytes(),), (1,))


def _view(raw: torch.Tensor, dtype, byte_offset: int, shape, byte_strides) -> torch.Tensor:
    item = torch.empty(0, dtype=dtype).element_size()
    return torch.empty(0, dtype=dtype, device=raw.device).set_(
        raw.untyped_storage(), byte_offset // item, tuple(shape), tuple(s // item for s in byte_strides))


def _torch_dtype(np_dtype):
    import numpy as np
    return torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype


class Memory:
    """The check's memory for one replay: one replacement per storage the launches were given."""

    def __init__(self, output: torch.Tensor, inputs):
        self.out_raw = _raw(output)
        self.inputs = [(t, _raw(t).clone()) for t in inputs]
        self.named_inputs = bool(inputs)
        self.regions: dict[tuple, tuple] = {}  # (device, ptr) -> (replacement uint8, role, name)
        self._copies: set = set()  # the regions that hold copies of inputs (only their views keep values)
        self.role_of_output = None

    # which memory an argument is in -----------------------------------------------------------
    def _known(self, ptr: int, device: str):
        """The torch storage of the output or of a named input that holds ``ptr``, or None."""
        for raw, role in [(self.out_raw, "output")] + [(_raw(t), "input") for t, _ in self.inputs]:
            lo = raw.data_ptr()
            if raw.device.type == device and lo <= ptr < lo + raw.numel():
                return raw, role
        return None

    def _replacement(self, raw: torch.Tensor, role_hint, value_view, name: str):
        key = (raw.device.type, raw.data_ptr(), raw.numel())
        if key in self.regions:
            if key in self._copies and self._equals_an_input(value_view):
                self._keep_view(self.regions[key][0], raw, value_view)   # another input copied into this storage
            return self.regions[key][0]
        fresh = self._fresh_copy(raw, role_hint, value_view, name)
        if fresh is not None:
            new, role = fresh, "input"
        elif role_hint == "output":
            new, role = torch.full_like(raw, POISON), "output"
        elif role_hint == "input":
            pre = next((c for t, c in self.inputs if _raw(t).data_ptr() == raw.data_ptr()), None)
            new, role = (pre if pre is not None else raw).clone(), "input"
        elif not self.named_inputs:
            new, role = raw.clone(), "input"
        elif self._equals_an_input(value_view):
            # a copy of an input: the input, by value; only the view that equals it, not the rest of its storage,
            # where a result computed beforehand could wait (x_copy = torch.cat([x, result])[:n])
            new, role = torch.full_like(raw, POISON), "input"
            self._keep_view(new, raw, value_view)
            self._copies.add(key)
        else:
            new, role = torch.full_like(raw, POISON), "scratch"
        self.regions[key] = (new, role, name)
        return new

    def _fresh_copy(self, raw, role_hint, view, name: str = ""):
        """Under :func:`fresh_copies`: the replacement of a storage that is not an input's own but holds a copy
        of an input's old values, with the input's new values in that view (None otherwise). Data that the
        launch reads and that is neither an input of :class:`FreshState` nor such a copy (not all zeros, where
        it keeps its values) is noted in its ``unknown``."""
        if not FRESH or role_hint == "output":
            return None
        state = FRESH[0]
        if any(_raw(t).data_ptr() == raw.data_ptr() for t in state.inputs):
            return None
        if role_hint is None and view is not None:
            for t, old in state.kept:
                if same_values(view, old):
                    new = torch.full_like(raw, POISON) if self.named_inputs else raw.clone()
                    _view(new, view.dtype, view.data_ptr() - raw.data_ptr(), view.shape,
                          [st * view.element_size() for st in view.stride()]).copy_(t.detach())
                    return new
        if (role_hint == "input" or not self.named_inputs) and (view is None or bool(view.ne(0).any())):
            state.unknown.append(name or "an argument")
        return None

    def _equals_an_input(self, view) -> bool:
        return view is not None and any(same_values(view, t) for t, _ in self.inputs)

    @staticmethod
    def _keep_view(new: torch.Tensor, raw: torch.Tensor, view: torch.Tensor) -> None:
        """Copy the bytes of ``view`` (a view of ``raw``'s storage) into the same place of ``new``."""
        item, off = view.element_size(), view.data_ptr() - raw.data_ptr()
        if view.device != raw.device or not 0 <= off < raw.numel():   # not a view of it: keep the whole storage
            new.copy_(raw)
            return
        _view(new, view.dtype, off, view.shape, [st * item for st in view.stride()]).copy_(view)

    # replacements --------------------------------------------------------------------------
    def tensor(self, t: torch.Tensor, name: str = "") -> torch.Tensor:
        raw = _raw(t)
        known = self._known(raw.data_ptr(), t.device.type)
        if known is not None and known[0].data_ptr() != raw.data_ptr():
            raw = known[0]  # a view whose storage object differs (same memory)
        new = self._replacement(raw, known[1] if known else None, t.detach(), name)
        item = t.element_size()
        off = t.data_ptr() - raw.data_ptr()
        return _view(new, t.dtype, off, t.shape, [s * item for s in t.stride()])

    def array(self, a, name: str = ""):
        """A NumPy array (Numba simulator) or a CUDA array (Numba on a GPU) over the check's memory."""
        import numpy as np
        sim = getattr(a, "_ary", None)
        host = sim if sim is not None else a
        iface = getattr(host, "__array_interface__", None)
        device = "cpu"
        if iface is None:
            iface, device = a.__cuda_array_interface__, "cuda"
        ptr, shape = int(iface["data"][0] or 0), tuple(iface["shape"])
        dtype = np.dtype(iface["typestr"])
        strides = iface.get("strides") or tuple(int(s) for s in np.empty(shape, dtype).strides)
        known = self._known(ptr, device)
        if known is not None:
            raw, role = known
        else:  # memory of its own: a NumPy array's root, as bytes
            if device == "cpu":
                root = host
                while isinstance(getattr(root, "base", None), np.ndarray):
                    root = root.base
                raw = torch.from_numpy(root.reshape(-1).view(np.uint8)) if root.flags.c_contiguous else \
                    torch.from_numpy(np.ascontiguousarray(host).reshape(-1).view(np.uint8))
            else:
                from numba import cuda
                raw = _raw(torch.as_tensor(cuda.as_cuda_array(a), device="cuda"))
            role = None
        off = ptr - raw.data_ptr()
        value = None
        if role is None and device == "cpu":
            value = _view(raw, _torch_dtype(dtype), off, shape, strides)   # the array's values, over its memory
        new = self._replacement(raw, role, value, name)
        view = _view(new, _torch_dtype(dtype), off, shape, strides)
        if device == "cpu":
            arr = view.numpy()
            self.numba_elements = getattr(self, "numba_elements", 0) + arr.size
            # the simulator's device array over this memory (not a copy of it): each element the kernel loads
            # is an access event of the site ("global", name), counted by counting()
            from ..interpose.numba import _Reported
            try:
                from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
            except ImportError:
                return arr
            arr = arr.view(_Reported)
            arr._site = ("global", name)
            return FakeCUDAArray(arr)
        from numba import cuda
        return cuda.as_cuda_array(view)

    def substitute(self, value, name: str = ""):
        if isinstance(value, torch.Tensor):
            return self.tensor(value, name)
        if isinstance(value, tuple):
            return tuple(self.substitute(v, f"{name}[{i}]") for i, v in enumerate(value))
        if isinstance(value, list):
            return [self.substitute(v, f"{name}[{i}]") for i, v in enumerate(value)]
        if hasattr(value, "__array_interface__") or hasattr(value, "__cuda_array_interface__") \
                or hasattr(getattr(value, "_ary", None), "__array_interface__"):
            if not isinstance(value, (int, float, bool)):
                return self.array(value, name)
        if hasattr(value, "data_ptr") or isinstance(getattr(value, "base", None), torch.Tensor):
            return self.pointer_object(value, name)
        return value

    def pointer_object(self, value, name: str = ""):
        """A launch argument that is memory but not a torch tensor: Triton's ``reinterpret`` wrapper and a
        tensor descriptor get their tensor replaced like any other; anything else that hands a kernel an
        address (an object with ``data_ptr``) is refused, since the check cannot give it memory of its own.

        >>> class P:  # an address without a tensor
        ...     def data_ptr(self): return 0
        >>> Memory(output=torch.zeros(3), inputs=[]).pointer_object(P(), "x_ptr")
        Traceback (most recent call last):
        ...
        TypeError: x_ptr is not a torch tensor (it is a P): pass the kernel tensors themselves, so that the check can give it memory of its own
        """
        import dataclasses
        base = getattr(value, "base", None)
        if isinstance(base, torch.Tensor) and type(value).__name__ == "TensorWrapper":   # triton.reinterpret
            return type(value)(self.tensor(base, name), value.dtype)
        if isinstance(base, torch.Tensor) and dataclasses.is_dataclass(value):          # a TensorDescriptor
            return dataclasses.replace(value, base=self.tensor(base, name))
        raise TypeError(f"{name or 'an argument'} is not a torch tensor (it is a {type(value).__name__}): pass the "
                        f"kernel tensors themselves, so that the check can give it memory of its own")

    def replacement_of(self, t: torch.Tensor):
        """``(tensor, name)``: the memory the check gave in place of ``t`` (an input or the output) and the
        argument's name, or None where ``t`` was not an argument."""
        raw = _raw(t)
        hit = self.regions.get((raw.device.type, raw.data_ptr(), raw.numel()))
        return None if hit is None else (hit[0], hit[2])

    def output_view(self, output: torch.Tensor) -> torch.Tensor:
        return self.tensor(output, "the output")

    def changed_inputs(self) -> list[str]:
        """Names of the input copies that the replayed kernel wrote into."""
        return [name for (dev, ptr, n), (new, role, name) in self.regions.items()
                if role == "input" and not torch.equal(new, self._original(dev, ptr, n))]

    def _original(self, dev, ptr, n):
        for t, pre in self.inputs:
            r = _raw(t)
            if r.device.type == dev and r.data_ptr() == ptr:
                return pre
        self_copy = self._snap.get((dev, ptr, n)) if hasattr(self, "_snap") else None
        return self_copy if self_copy is not None else self.regions[(dev, ptr, n)][0]

    def freeze_inputs(self):
        """Keep the starting value of every input copy (to see writes into it afterwards)."""
        self._snap = {k: new.clone() for k, (new, role, name) in self.regions.items() if role == "input"}


def output_moved(before: torch.Tensor, after: torch.Tensor, rel: float = 1e-3) -> bool:
    """Whether a launch perturbed on purpose (its products doubled) changed the output: finite elements moved by
    more than ``rel`` of the largest, or an element became (or stopped being) finite."""
    b, g = before.detach().double(), after.detach().double()
    ok = torch.isfinite(b) & torch.isfinite(g)
    if bool((torch.isfinite(b) != torch.isfinite(g)).any()):
        return True
    if not bool(ok.any()):
        return False
    return float((g - b)[ok].abs().max()) > rel * float(b[ok].abs().max())


def same_values(view: torch.Tensor, t: torch.Tensor) -> bool:
    try:
        return view.shape == t.shape and view.dtype == t.dtype and bool(torch.equal(view, t.detach()))
    except Exception:  # noqa: BLE001
        return False


# ----------------------------------------------------------------------------------------------
# Counting what runs (cpu mode)

@contextmanager
def counting(ex: Execution):
    """While open (cpu mode), ``ex`` counts what runs, from the events of :mod:`gpu_course.interpose`:
    the Triton interpreter's stores and ``tl.dot`` calls per program, which threads of which block
    wrote and read each Numba shared array, and the barriers each Numba thread passed."""
    from ..interpose import numba as numba_events
    from ..interpose import triton as triton_events
    lock = threading.Lock()

    def stored(ev):
        if ev.op == "store" and ev.mask is not None:
            ex.stored[ev.builder.grid_idx] += int(ev.mask.data.sum())
        # elements are counted as distinct addresses: one load of the same address in 65,536 lanes is one
        # element of work, not 65,536 (a program's share cannot be padded with a broadcast load)
        ptrs = np.asarray(getattr(ev.ptrs, "data", 0)).ravel()
        on = np.asarray(ev.mask.data).ravel().astype(bool) if ev.mask is not None else None
        lanes = int(np.unique(ptrs).size)
        n = int(np.unique(ptrs[on]).size) if on is not None and on.size == ptrs.size else lanes
        key = (ex.launch, tuple(ev.builder.grid_idx))
        ex.work[key] += n
        ex.lanes[key] += lanes
        if ev.op != "load":
            ex.wrote[key] += n
            if ev.op.startswith("atomic"):
                ex.atomics[key] += n
        elif ptrs.size == 1:
            ex.scalar_loads[key] += 1

    def dot(ev):
        ex.dots[ev.builder.grid_idx] += 1
        # a product of data the kernel loaded, with nothing made up: a tile built from constants (an identity)
        # beside a loaded one moves data without multiplying it by data
        if getattr(ev, "loaded", 0) and not getattr(ev, "made_up", 0):
            ex.dot_macs[(ex.launch, tuple(ev.builder.grid_idx))] += getattr(ev, "macs", 0)
            ex.dot_spans.update((a.lo, a.hi) for a in getattr(ev, "inputs", ()))

    def shared(ev):
        ex.shared.setdefault(ev.site, SharedUse(ev.shape))

    def access(ev):
        if isinstance(ev.site, tuple) and ev.site[:1] == ("global",):
            if ev.op == "load" and not getattr(ev, "view", False):   # a view's elements count when read
                with lock:
                    ex.gloads += 1
            return
        use = ex.shared.get(ev.site)
        if use is not None:
            with lock:
                (use.writers if ev.op == "store" else use.readers).add((ev.block, ev.thread))

    def barrier(ev):
        with lock:
            ex.barriers[(ev.block, ev.thread)] += 1
    wanted = [(triton_events, "access", stored), (triton_events, "dot", dot), (numba_events, "shared", shared),
              (numba_events, "access", access), (numba_events, "barrier", barrier)]
    subs = []
    try:
        for bus, event, handler in wanted:
            subs.append((bus, bus.subscribe(event, handler)))
        ex.counted = True
        yield ex
    finally:
        for bus, sub in reversed(subs):
            bus.unsubscribe(sub)


# ----------------------------------------------------------------------------------------------
# The replay

class ReplayError(Exception):
    """The course's own launch could not be made (the message says why)."""


def _refuse_addresses_as_numbers(L, names) -> None:
    """A launch's integer argument that is an address inside one of its tensors' memory (``x.data_ptr()``
    passed as a number) would tell the kernel which launch it is in (the learner's, or the check's on fresh
    memory): refused."""
    spans = []
    for a in list(L.args) + list(L.kwargs.values()):
        if isinstance(a, torch.Tensor) and a.numel():
            st = a.untyped_storage()
            spans.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
    named = [(names[i] if i < len(names) else f"argument {i}", a) for i, a in enumerate(L.args)]
    for name, a in named + list(L.kwargs.items()):
        if isinstance(a, int) and not isinstance(a, bool) and a > 0 and any(lo <= a < hi for lo, hi in spans):
            raise TypeError(f"{L.name}'s {name} is the address of one of its tensors, passed as a number: a kernel "
                            f"reaches memory through its tensor arguments only")


def replay(launches, output: torch.Tensor, inputs=(), grid=None):
    """Launch the learner's recorded ``launches`` again, in order, each by its kind's ``launch_again``
    (:mod:`.kinds`: Triton, Numba), on the check's memory (see the module docstring); ``grid``, if given, replaces every launch's grid (a smaller
    grid shows how the work is split). Returns ``(output, execution, memory)``: the output as the
    replay wrote it, what ran (:class:`Execution`), and the :class:`Memory` used."""
    from . import kinds
    mem = Memory(output, list(inputs))
    calls = []
    for L in launches:
        kind = kinds.get(L.kind)
        if not callable(getattr(kind, "launch_again", None)):
            raise ReplayError(f"a {L.kind} launch is not replayed here")
        names = getattr(L, "arg_names", ())
        _refuse_addresses_as_numbers(L, names)
        args = [mem.substitute(a, f"{L.name}'s {names[i]}" if i < len(names) else f"argument {i}")
                for i, a in enumerate(L.args)]
        kwargs = {k: mem.substitute(v, k) for k, v in L.kwargs.items()}
        calls.append((kind, L, args, kwargs))
    out = mem.output_view(output)
    mem.freeze_inputs()
    ex = Execution()
    ex.memory = mem
    ex.elements = getattr(mem, "numba_elements", 0)
    with counting(ex) if not mode.ON_GPU else nullcontext():
        for i, (kind, L, args, kwargs) in enumerate(calls):
            ex.launch = i
            g = tuple(grid) if grid is not None else L.grid
            if g is None:
                raise ReplayError(f"the grid of {L.name}'s launch was not recorded")
            ex.programs += g[0] * g[1] * g[2]
            ex.grids.append(g)
            kind.launch_again(L, args, kwargs, g, ex)
    mode.synchronize()
    for kind in {id(k): k for k, _, _, _ in calls}.values():
        kind.finish_launches()
    return out, ex, mem


def written(out: torch.Tensor) -> torch.Tensor:
    """A bool tensor: which elements of ``out`` are not all poison bytes (were written)."""
    raw = out.detach().contiguous().view(torch.uint8).reshape(*out.shape, out.element_size()) \
        if out.dim() else out.detach().reshape(1).contiguous().view(torch.uint8).reshape(1, -1)
    return (raw != POISON).any(dim=-1)
