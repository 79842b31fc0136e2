"""The check's launch on inputs with new values: after the course's own launch has reproduced the result, the
floating-point tensors that both the exercise's ``run`` and its ``reference`` read get new values in place (their
own, shuffled and scaled by 3/4), the reference is computed again, the learner's kernel is launched once more by
the course (its grid, its scalar arguments, fresh memory) and must return the new result. A kernel that computes
from what it reads passes whatever the values; one whose result was computed beforehand (by a host function's
C++ loop kept in a ``__device__`` array, by NumPy in a launch function, by torch and passed as a number) returns
the old result and is refused.

What is varied, and when the step stands aside (it must never refuse a right answer):

* only floating-point tensors, by a shuffle times 3/4 (:data:`SCALES`; values in the same range, with the same
  signs), and bytes (uint8: an image, packed weights), moved round 0..255: other integer tensors are often
  lengths, offsets or page tables whose values must agree with each other and with the memory they index;
* only a tensor whose new values change the reference by more than the exercise's tolerance (so that the old
  result would be refused): a max or a sum changes with the scale, a normalisation with the order;
* a copy of an input that the learner's code made (``x.contiguous()``, ``x.clone()``) gets the new values too
  (:class:`.replay.FreshState`);
* where the launch was given other data that the check does not count as an input (a log-sum-exp or a row
  sum computed from the inputs before the kernel ran, say), the kernel cannot be judged on new inputs with
  that old data, and the step passes it by; so it does where the reference fails on the new values.

>>> x = torch.arange(6.0)
>>> def run(f): return f(x)
>>> varied_names(run, lambda: x * 2) == [x]
True
"""
from __future__ import annotations

import types
from contextlib import contextmanager

import torch

__all__ = ["varied_names", "vary", "varied", "fresh_problem"]


def _names_read(code: types.CodeType) -> set:
    """Global and free names read by ``code`` and the functions defined inside it."""
    names = set(code.co_names) | set(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names_read(c)
    return names


def _tensors_read(fn) -> list:
    """The tensors ``fn`` (a function) reads through its globals and closure, directly or one level down in a
    tuple, list or dict."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    scope = dict(getattr(fn, "__globals__", {}))
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:   # an empty cell
            pass
    found = []
    for name in _names_read(code):
        v = scope.get(name)
        vs = list(v.values()) if isinstance(v, dict) else list(v) if isinstance(v, (tuple, list)) else [v]
        found += [t for t in vs if isinstance(t, torch.Tensor)]
    return found


def varied_names(run, reference, named=()) -> list:
    """The tensors that both ``run`` and ``reference`` read (the check's inputs), with ``named`` ones, once
    each."""
    ref = _tensors_read(reference) if callable(reference) and not isinstance(reference, torch.Tensor) else []
    ref_ids = {id(t) for t in ref}
    out, seen = [], set()
    for t in list(named) + [t for t in _tensors_read(run) if id(t) in ref_ids]:
        if id(t) not in seen and t.numel() > 1:
            seen.add(id(t))
            out.append(t)
    return out


def vary(t: torch.Tensor, gen: torch.Generator, scale: float = 1.0) -> torch.Tensor | None:
    """New values for ``t`` (same shape and dtype): a floating-point tensor's values shuffled, then times
    ``scale``; a byte tensor's (uint8) moved round 0..255 by a random step; None for any other (see the module
    docstring)."""
    if t.dtype == torch.uint8 and t.numel() > 1:   # bytes are data (an image, packed weights), not indices
        step = int(torch.randint(1, 256, (1,), generator=gen))
        return ((t.detach().to(torch.int16) + step) % 256).to(torch.uint8)
    if not t.is_floating_point() or t.numel() < 2:
        return None
    flat = t.detach().reshape(-1)
    perm = torch.randperm(flat.numel(), generator=gen).to(t.device)
    new = flat[perm].reshape(t.shape)
    return new if scale == 1.0 else new * scale


def _differs(a, b) -> bool:
    return not _same(a, b)


def _same(a, b) -> bool:
    try:
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
            and torch.equal(a.detach().cpu(), b.detach().cpu())
    except Exception:  # noqa: BLE001
        return False


# the shuffled values times 3/4 (the same signs, no overflow: what is computed from the values' order and from
# their size, a sum or a max passed in as a number, both change), then as they are (for a reference that does
# not change with the size, a normalisation)
SCALES = (0.75, 1.0)


@contextmanager
def varied(tensors, reference, ref_before, seed: int | None = None, differs=None):
    """Inside the block each of ``tensors`` whose new values (:func:`vary`) change ``reference()`` holds them
    (``differs(new reference, ref_before)`` says whether it changed; by default any change counts);
    yields ``(the reference on the new values, [(tensor, its old values)])`` (None and [] where none changed
    it). Every tensor gets its old values back at the end."""
    gen = torch.Generator()
    gen.manual_seed(seed if seed is not None else int(torch.randint(1 << 30, (1,))))
    kept, new_ref = [], None
    try:
        for t in tensors:
            old = t.detach().clone()
            for scale in SCALES:
                new = vary(t, gen, scale)
                if new is None:
                    break
                with torch.no_grad():
                    t.copy_(new)
                try:
                    now = reference()
                except Exception:  # noqa: BLE001  a reference that fails on these values: leave them be
                    now = ref_before
                if (differs or _differs)(now, ref_before):
                    kept.append((t, old))
                    new_ref = now   # the reference on every kept tensor's new values (one left be is put back)
                    break
                with torch.no_grad():
                    t.copy_(old)
        yield new_ref, kept
    finally:
        with torch.no_grad():
            for t, old in kept:
                t.copy_(old)


def fresh_problem(trial) -> str | None:
    """Why the learner's kernel, launched by the course on the check's inputs with new values, does not return
    the reference on those values; None when it does, or where nothing can be varied or relaunched."""
    from .kinds import result_problem
    from .replay import fresh_copies
    relaunch = getattr(trial.kind, "fresh_output", None)
    p = trial.problem
    if relaunch is None or not callable(p.reference) or isinstance(p.reference, torch.Tensor):
        return None
    tensors = varied_names(p.run, p.reference, p.inputs)
    if not tensors:
        return None
    old_ref = trial.ref
    with varied(tensors, p.reference, old_ref, differs=_refused_now(p)) as (new_ref, kept):
        if not kept:
            return None
        what = ", ".join(_describe(t, old) for t, old in kept)
        trial.ref, error, got = new_ref, None, None
        try:
            read = {id(r) for r in _tensors_read(p.reference)} | {id(t) for t, _ in kept}
            with fresh_copies(kept, [t for t in tensors if id(t) in read]) as state:
                got = relaunch(trial)
        except Exception as e:  # noqa: BLE001  the learner's kernel may fail in any way
            error = e
        try:
            if state.unknown or (error is None and got is None):   # see the module docstring
                return None
            why = result_problem(trial, got) if error is None else None
        finally:
            trial.ref = old_ref
    if error is not None:
        from .runner import first_line
        return (f"the check launched {trial.label} again on inputs with new values ({what}) and it "
                f"raised {first_line(error)}")
    if why:
        return (f"the check launched {trial.label} again, with your launch configuration and arguments, on "
                f"inputs whose values it changed ({what}), and it did not compute the result for the new "
                f"values: {why}. The result must come from what the kernel reads when it runs, not from "
                f"anything computed beforehand and kept (in a global or __device__ array, or passed as a "
                f"number)")
    return None


def _refused_now(p):
    """``differs(new reference, old reference)`` for :func:`varied`: whether the old result would be refused
    against the new reference at the exercise ``p``'s tolerance."""
    def differs(new, old) -> bool:
        from ..checking import check
        try:
            check(old, new, atol=p.atol, rtol=p.rtol, name="the reference")
        except Exception:  # noqa: BLE001  refused (or not comparable: then it changed)
            return True
        return False
    return differs


def _describe(t: torch.Tensor, old: torch.Tensor) -> str:
    """What was done to ``t`` (its values now, ``old`` before), for the learner."""
    shape = "×".join(str(n) for n in t.shape) or "scalar"
    if not t.is_floating_point():
        how = "moved round 0..255"
    else:
        how = "shuffled" if torch.equal(t.detach().reshape(-1).sort().values, old.reshape(-1).sort().values) \
            else "shuffled and scaled by 3/4"
    return f"the {shape} {str(t.dtype).replace('torch.', '')} tensor's values {how}"
