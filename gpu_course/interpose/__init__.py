"""The one layer that reaches into Triton's and Numba's internals: every patch point, its version
check and its undo live in :mod:`.triton` and :mod:`.numba`; the rest of the course subscribes to the
events they emit instead of patching anything itself.

Each library module has its own :class:`Bus` and offers the same small API::

    from gpu_course.interpose import triton as tri
    def on_access(ev):                     # ev: an Event, its fields named per event below
        print(ev.op, ev.program)
    sub = tri.subscribe("access", on_access)
    ...                                    # launches run; handlers are called synchronously
    tri.unsubscribe(sub)
    with tri.subscribed("access", on_access):   # the same, for the length of a block
        ...

A patch point is installed when the first handler of an event it emits subscribes (or right after
its library is imported, if it is not yet), and put back when the last one unsubscribes: with no
subscriber, Triton and Numba run their own code, unpatched. A handler may raise: the exception
reaches the code that launched the kernel (the Triton interpreter's wrapping of it is removed).
A library version whose internals lack a patch point raises :class:`UnknownVersion` at install,
naming what is missing, instead of failing somewhere later.

The events of :mod:`.triton`: ``launch`` and ``launched`` (before and after ``kernel[grid](...)``),
``access`` (a load, store or atomic of the interpreter), ``dot`` (the interpreter's ``tl.dot``).
The events of :mod:`.numba`: ``launch`` and ``launched`` (``kernel[blocks, threads](...)`` on a GPU
and in the simulator), ``configure`` (the simulator's ``kernel[blocks, threads]``), ``shared`` (the
simulator allocated a ``cuda.shared.array``), ``access`` (a thread of the simulator read or wrote
one, or an array of the check's: ``view`` is True where the read took a view, ``m[r]``, whose elements
are events when read), ``barrier`` (a thread of the simulator passed ``cuda.syncthreads()``).
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from contextlib import contextmanager
from types import SimpleNamespace

__all__ = ["Bus", "Event", "Subscription", "UnknownVersion", "Patches", "patch_when_imported", "loaded", "waiting",
           "raised_by_handler"]


class UnknownVersion(RuntimeError):
    """A library whose internals lack a patch point the course needs (the message names them)."""


class Event(SimpleNamespace):
    """One event: its fields are attributes (see the module docstring for each event's fields)."""


class Subscription:
    """What :meth:`Bus.subscribe` returns; give it to :meth:`Bus.unsubscribe`."""

    def __init__(self, event: str, handler):
        self.event, self.handler = event, handler

    def __repr__(self):
        return f"<subscription of {getattr(self.handler, '__name__', self.handler)!r} to {self.event!r}>"


_RAISED = "_course_raised_by_handler"


def raised_by_handler(e: BaseException | None) -> BaseException | None:
    """The exception a handler raised, found in ``e``'s chain of causes (the Triton interpreter wraps
    what a kernel raised), or None."""
    seen = set()
    while e is not None and id(e) not in seen:
        if getattr(e, _RAISED, False):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


class Bus:
    """The events of one library: ``subscribe`` / ``unsubscribe`` / ``subscribed`` for the rest of the
    course, ``emit`` / ``listening`` for the patch points. ``on_change`` is called after a
    subscription changes, to install or put back the patch points."""

    def __init__(self, library: str, events, on_change=None):
        self.library = library
        self.events = tuple(events)
        self._handlers: dict[str, tuple] = {e: () for e in self.events}
        self._live: frozenset = frozenset()   # the events with a subscriber (read on every launch)
        self._lock = threading.RLock()
        self._on_change = on_change

    def subscribe(self, event: str, handler) -> Subscription:
        """Call ``handler(ev)`` at each ``event`` from now on (installing its patch points)."""
        if event not in self._handlers:
            raise ValueError(f"{self.library} has no event {event!r}: one of {', '.join(self.events)}")
        sub = Subscription(event, handler)
        with self._lock:
            self._handlers[event] += (sub,)
            self._changed()
            try:
                if self._on_change is not None:
                    self._on_change()
            except BaseException:
                self._handlers[event] = tuple(s for s in self._handlers[event] if s is not sub)
                self._changed()
                raise
        return sub

    def _changed(self) -> None:
        self._live = frozenset(e for e, subs in self._handlers.items() if subs)

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop calling ``sub``'s handler (its patch points are put back when nobody listens)."""
        with self._lock:
            self._handlers[sub.event] = tuple(s for s in self._handlers[sub.event] if s is not sub)
            self._changed()
            if self._on_change is not None:
                self._on_change()

    @contextmanager
    def subscribed(self, event: str, handler):
        """``handler`` subscribed to ``event`` for the length of a ``with`` block."""
        sub = self.subscribe(event, handler)
        try:
            yield sub
        finally:
            self.unsubscribe(sub)

    def listening(self, *events: str) -> bool:
        """Whether any of ``events`` has a subscriber."""
        return not self._live.isdisjoint(events)

    def around(self, ev: Event, call):
        """Emit ``launch``, run ``call()``, emit ``launched`` (with ``ev.error`` set if it raised): a launch
        as both libraries' patch points report it."""
        self.emit("launch", ev)
        try:
            result = call()
        except BaseException as e:
            ev.error = type(e).__name__
            self.emit("launched", ev)
            raise
        self.emit("launched", ev)
        return result

    def emit(self, event: str, ev: Event) -> None:
        """Call ``event``'s handlers with ``ev``; an exception a handler raises is marked (see
        :func:`raised_by_handler`) and propagates."""
        for sub in self._handlers[event]:
            try:
                sub.handler(ev)
            except BaseException as e:
                try:
                    setattr(e, _RAISED, True)
                except AttributeError:
                    pass
                raise


class Patches:
    """The patch points a library module installed: ``put(owner, attr, value)`` replaces an
    attribute (once per owner and attribute) and ``undo(owner, attr)`` / ``undo_all()`` put it back."""

    def __init__(self):
        self._installed: dict[tuple, tuple] = {}

    def installed(self, owner, attr: str) -> bool:
        return (id(owner), attr) in self._installed

    def put(self, owner, attr: str, make) -> None:
        """Replace ``owner.attr`` with ``make(original)`` (nothing if it is already replaced)."""
        key = (id(owner), attr)
        if key in self._installed:
            return
        had_own = attr in vars(owner)
        original = getattr(owner, attr)
        replacement = make(original)
        try:
            replacement.__wrapped__ = original
        except AttributeError:
            pass
        self._installed[key] = (owner, attr, had_own, original)
        setattr(owner, attr, replacement)

    def undo(self, owner, attr: str) -> None:
        entry = self._installed.pop((id(owner), attr), None)
        if entry is None:
            return
        owner, attr, had_own, original = entry
        if had_own:
            setattr(owner, attr, original)
        else:
            delattr(owner, attr)

    def undo_all(self) -> None:
        for owner, attr, _, _ in reversed(list(self._installed.values())):
            self.undo(owner, attr)


_FINISHING: set = set()   # modules that ran, whose patches are being applied


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; when ``module`` is about to load, wraps its loader so that ``patch`` is
    applied to it right after the module runs, then steps aside."""

    def __init__(self, module: str, patch):
        self.module, self.patch = module, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)   # one shot; and the search below must not find this finder
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, patch = spec.loader.exec_module, self.patch

        def exec_module(module):
            run(module)
            _FINISHING.add(fullname)   # ran: loaded() counts it, though importlib has not marked it yet
            try:
                patch(module)
            finally:
                _FINISHING.discard(fullname)

        spec.loader.exec_module = exec_module
        return spec


def patch_when_imported(module: str, patch) -> None:
    """Call ``patch(module)`` now if ``module`` is imported, else right after it is (once: a second
    call for the same module while the first waits adds nothing)."""
    if module in sys.modules:
        patch(sys.modules[module])
    elif not waiting(module):
        sys.meta_path.insert(0, _PatchOnImport(module, patch))


def loaded(module: str):
    """``module`` if it is imported and done running (not one still being imported), else None."""
    m = sys.modules.get(module)
    if m is None or (module not in _FINISHING and getattr(getattr(m, "__spec__", None), "_initializing", False)):
        return None
    return m


def waiting(module: str) -> bool:
    """Whether a patch waits for ``module`` to be imported."""
    return any(isinstance(f, _PatchOnImport) and f.module == module for f in sys.meta_path)
