"""The course's own launch of a learner's CUDA C kernel, and what it executed.

A CUDA C exercise hands in a source whose host function launches the kernel. The check runs that
host function (the learner's launch), and then launches the kernel itself:

* :func:`launcher_source` writes a small host function for one ``__global__`` kernel of the source,
  ``course_launch_<kernel>(config, memory, offsets, ints, reals)``, whose parameters match the
  kernel's parameter list (pointers from tensors plus a byte offset, numbers cast to the parameter's
  type); :func:`launcher` builds the learner's source with it appended (``load_cuda``: the CPU
  emulation in cpu mode, the split nvcc build on a GPU), cached.
* :func:`own_launch` makes each of the learner's recorded launches of that kernel again (its grid,
  block, shared bytes and scalar arguments, from the module's launch log, see
  :class:`gpu_course.launches.KernelCall`), on memory the check owns (see :mod:`.replay`): the
  output is fresh poisoned memory (zeroed when the learner's host function zeroed it before the
  launch), the inputs are copies. A pointer into none of the host function's tensors (a tensor
  the host function made itself, such as a transposed copy) cannot be replaced and is refused.
* What ran (:class:`CudaExecution`): in cpu mode the emulation counts, per thread, global and
  shared loads and stores, atomics in global and shared memory, barriers passed and warp shuffles
  (``_cuda_emu_count``); on a GPU the kernel's SASS (``cuobjdump -sass`` of the built module) says
  which instructions the compiled kernel holds, where dead code is gone.

>>> params = kernel_params(r'''
... __global__ void axpb_k(const float* __restrict__ x, float* out, int n, float a) { }''', "axpb_k")
>>> [(p.name, p.ctype, p.kind) for p in params]
[('x', 'const float*', 'pointer'), ('out', 'float*', 'pointer'), ('n', 'int', 'int'), ('a', 'float', 'real')]
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch

from .. import mode
from ..launches import tensor_extent

__all__ = ["CudaLaunchError", "Param", "kernel_params", "launcher_source", "launcher", "build_with_launcher",
           "own_launch", "CudaExecution", "CountedLaunch"]


class CudaLaunchError(Exception):
    """The course cannot launch the kernel itself (the message says why, to the learner)."""


@dataclass
class Param:
    """One parameter of a kernel: its name, its C type as the launcher casts to it, and its kind:
    ``"pointer"``, ``"int"`` (also bool and enums of integer type), ``"real"``."""
    name: str
    ctype: str
    kind: str


_QUALS = {"__restrict__", "__restrict", "restrict", "__grid_constant__"}
_REAL = {"float", "double"}
_INT_WORDS = {"int", "unsigned", "signed", "short", "long", "char", "bool", "size_t", "ptrdiff_t",
              "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
              "uint", "ssize_t", "intptr_t", "uintptr_t", "std", "::"}


def _kernel_definitions(source: str, name: str):
    """[(Decl, statement)] of every definition of ``__global__`` function ``name``."""
    from ..cuda.parsed import parse
    p = parse(source)  # the same parse as load_cuda's and the other checks'
    found = [d for _, d in p.declarations
             if d.kind == "function" and d.name == name and "__global__" in d.specifiers and d.body]
    return p.toks, p.match, found


def kernel_params(source: str, name: str) -> list[Param]:
    """The parameters of ``__global__`` kernel ``name`` of ``source``; :class:`CudaLaunchError` for a
    kernel the course cannot launch itself (a template, overloads, a parameter that is neither a
    pointer nor a number)."""
    from ..cuda import cxx
    toks, match, defs = _kernel_definitions(source, name)
    if not defs:
        raise CudaLaunchError(f"the source defines no __global__ function {name} at file or namespace scope")
    if len(defs) > 1:
        raise CudaLaunchError(f"{name} is defined {len(defs)} times: the check launches one kernel of that "
                              f"name itself, so define it once")
    d = defs[0]
    if d.template:
        raise CudaLaunchError(f"{name} is a template: the check launches your kernel itself and can only "
                              f"launch a plain __global__ function; make the template parameters constants "
                              f"(constexpr int TW = 16;)")
    out = []
    for k, (a, b) in enumerate(cxx.split_args(toks, d.lparen, d.rparen, match)):
        ptoks = [t for t in toks[a:b] if t.text not in _QUALS]
        if not ptoks or (len(ptoks) == 1 and ptoks[0].text == "void"):
            continue
        if any(t.text in ("=", "&", "&&", "...", "(") for t in ptoks):
            raise CudaLaunchError(f"parameter {k + 1} of {name} ({cxx.text_of(toks, a, b)}) is not a pointer or a "
                                  f"number: the check launches your kernel itself with pointers and numbers only")
        pname = ""
        body = list(ptoks)
        array = False
        while body and body[-1].text == "]":
            array = True
            body = body[:max(i for i, t in enumerate(body) if t.text == "[")]
        if len(body) >= 2 and body[-1].kind == "id" and body[-1].text not in cxx.KEYWORDS:
            pname = body[-1].text
            body = body[:-1]
        ctype = " ".join(t.text for t in body).replace(" *", "*").replace(" ::", "::").replace(":: ", "::")
        words = {t.text for t in body if t.kind == "id"} - {"const", "volatile"}
        if array or any(t.text == "*" for t in body):
            kind = "pointer"
            ctype += "*" if array else ""
        elif words and words <= _REAL:
            kind = "real"
        elif words and words <= _INT_WORDS:
            kind = "int"
        else:
            raise CudaLaunchError(f"parameter {k + 1} of {name} ({cxx.text_of(toks, a, b)}) is not a pointer or a "
                                  f"number: the check launches your kernel itself with pointers and numbers only")
        out.append(Param(pname or f"argument {k + 1}", ctype, kind))
    return out


def _qualified(source: str, name: str) -> str:
    """``ns::name`` when the kernel is defined inside namespace ``ns`` (the launcher is at file scope)."""
    _, _, defs = _kernel_definitions(source, name)
    scope = [n for n in defs[0].scope if n and not n.startswith("extern")] if defs else []
    if defs and "" in defs[0].scope:
        raise CudaLaunchError(f"{name} is in an anonymous namespace: the check cannot name it to launch it; "
                              f"move it out of the namespace")
    return "::".join(scope + [name])


def launcher_source(source: str, name: str) -> tuple[str, str, str]:
    """(the host function that launches kernel ``name``, its declaration for cpp_src, its name).

    >>> code, decl, fn = launcher_source("__global__ void k(float* out, int n) { }", "k")
    >>> fn, decl
    ('course_launch_k', 'void course_launch_k(std::vector<int64_t> course_cfg, std::vector<torch::Tensor> course_mem, std::vector<int64_t> course_off, std::vector<int64_t> course_int, std::vector<double> course_real);')
    """
    params = kernel_params(source, name)
    fn = f"course_launch_{name}"
    sig = (f"void {fn}(std::vector<int64_t> course_cfg, std::vector<torch::Tensor> course_mem, "
           f"std::vector<int64_t> course_off, std::vector<int64_t> course_int, std::vector<double> course_real)")
    args = []
    for i, p in enumerate(params):
        if p.kind == "pointer":
            args.append(f"({p.ctype})course_exercise_ptr(course_mem[{i}], course_off[{i}])")
        elif p.kind == "real":
            args.append(f"({p.ctype})course_real[{i}]")
        else:
            args.append(f"({p.ctype})course_int[{i}]")
    n = len(params)
    k = _qualified(source, name)
    code = f"""
// the course's own launch of {name} (gpu_course/exercises/cuda_launch.py): the exercise check's memory,
// on torch's current stream (the learner's own launch is checked on whichever stream it names)
#include <c10/cuda/CUDAStream.h>
static inline void* course_exercise_ptr(torch::Tensor& t, int64_t off) {{
    return off < 0 ? nullptr : (void*)((char*)t.data_ptr() + off);
}}
{sig} {{
    TORCH_CHECK(course_cfg.size() == 7 && course_mem.size() == {n} && course_off.size() == {n} &&
                course_int.size() == {n} && course_real.size() == {n}, "{fn}: wrong number of arguments");
    if (course_cfg[6] > 48 * 1024)  // as the learner's host function allowed it (this module's own copy)
        cudaFuncSetAttribute({k}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)course_cfg[6]);
    {k}<<<dim3(course_cfg[0], course_cfg[1], course_cfg[2]),
        dim3(course_cfg[3], course_cfg[4], course_cfg[5]), (size_t)course_cfg[6],
        at::cuda::getCurrentCUDAStream()>>>({", ".join(args)});
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}}
"""
    return code, sig + ";", fn


_LAUNCHERS: dict = {}


def launcher(source: str, name: str):
    """The module of ``source`` with :func:`launcher_source`'s host function for ``name`` (built by
    ``load_cuda``, once per source in a session). Its build error, if any, is raised."""
    key = (source, name)
    if key not in _LAUNCHERS:
        from ..cuda import load_cuda
        code, decl, fn = launcher_source(source, name)
        mod = load_cuda(source + "\n" + code, decl, [fn])
        _LAUNCHERS.clear()  # one at a time: an exercise's check and its retries
        _LAUNCHERS[key] = (mod, fn)
    return _LAUNCHERS[key]


def build_with_launcher(build, source: str, name: str):
    """``build(source)``, the learner's build, in cpu mode with :func:`launcher_source`'s function for
    kernel ``name`` compiled into the same module, which :func:`launcher` then uses: one emulated
    build where there were two. Where the launcher cannot be written, or the module with it does not
    build, the learner's build alone (and :func:`launcher` builds its own, and says why it cannot).
    On a GPU the learner's build alone: its launcher is built apart."""
    if mode.ON_GPU:
        return build(source)
    try:
        code, decl, fn = launcher_source(source, name)
    except CudaLaunchError:
        return build(source)
    from ..cuda import appending
    try:
        with appending(source, code, decl, fn):
            mod = build(source)
    except Exception:  # noqa: BLE001  the learner's build alone, and its own error if it has one
        return build(source)
    if hasattr(mod, fn):
        _LAUNCHERS.clear()
        _LAUNCHERS[(source, name)] = (mod, fn)
    return mod


# ------------------------------------------------------------------------------------------------
# What ran

def counted_launches(mod, name: str) -> list:
    """The counted launches of kernel ``name`` since ``mod._cuda_emu_count(True)`` (cpu mode)."""
    fields, counted = mod._cuda_emu_counts()
    fields = tuple(fields.split(","))
    out = []
    for kname, grid, block, raw in counted:
        if kname != name:
            continue
        nb, nt = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
        counts = torch.frombuffer(bytearray(raw), dtype=torch.int32).to(torch.int64).view(nb, nt, len(fields))
        out.append(CountedLaunch(kname, tuple(grid), tuple(block), counts, fields))
    return out


@dataclass
class CountedLaunch:
    """One counted launch (cpu mode): its grid and block, and ``counts``, an int64 tensor of shape
    (blocks, threads per block, fields) in the order of ``fields``."""
    name: str
    grid: tuple
    block: tuple
    counts: torch.Tensor
    fields: tuple

    def field(self, *names) -> torch.Tensor:
        """The sum of ``names`` per thread: (blocks, threads)."""
        idx = [self.fields.index(n) for n in names]
        return self.counts[..., idx].sum(-1)

    def where(self, b: int, t: int) -> str:
        """``thread (3,0) of block (1,2)`` for block b and thread t (linear, x fastest), with as many
        coordinates as the launch uses (``thread 3 of block 1`` in 1-D)."""
        return f"thread {_coords(t, self.block)} of block {_coords(b, self.grid)}"


def _coords(i: int, dims: tuple) -> str:
    x, y, z = i % dims[0], (i // dims[0]) % dims[1], i // (dims[0] * dims[1])
    if dims[2] > 1:
        return f"({x},{y},{z})"
    if dims[1] > 1:
        return f"({x},{y})"
    return str(x)


@dataclass
class CudaExecution:
    """What ran in the course's own launch of a CUDA C kernel: ``launches`` (counted per thread,
    :class:`CountedLaunch`, by the emulation: in cpu mode, and on a GPU by :mod:`.cuda_emulated`'s second
    run), ``sass`` (gpu mode: kinds of instructions of the compiled kernel, see :func:`.compiled.sass_ops`;
    None where it could not be read, ``sass_error`` says why)."""
    kernel: str
    launches: list = field(default_factory=list)
    sass: Counter | None = None
    sass_error: str = ""
    elements: int = 0   # elements of the distinct buffers the launches were given (inputs and output)
    learner: "CudaExecution | None" = None   # the learner's own launches of the kernel, counted too
    again: object = None    # launches it again on the counted memory (returns the output): the products doubled
    first: object = None    # the output of the counted launch (on a GPU, the emulation's), to compare with again's
    note: str = ""          # on a GPU, why nothing was counted (no host compiler for the emulation), for the verdict

    @property
    def counted(self) -> bool:
        return bool(self.launches)


def _sass_of(mod, name: str) -> Counter:
    from .compiled import cuobjdump_sass, sass_of_kernel, sass_ops
    path = getattr(mod, "__file__", None)
    if not path:
        raise RuntimeError("the built module has no file to read the compiled kernel from")
    part = sass_of_kernel(cuobjdump_sass(path), name)
    if not part.strip():
        raise RuntimeError(f"no SASS of {name} was found in {path}")
    return sass_ops(part)


# ------------------------------------------------------------------------------------------------
# The launch

def _host_tensors(launch) -> list:
    out = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
    walk(list(launch.args))
    walk(launch.kwargs)
    walk(launch.result)
    return out


def _holder(ptr: int, tensors: list, device: str):
    """The tensor whose elements hold address ``ptr`` (else the one whose storage does), and the
    byte offset of ptr in it; None if none does."""
    for t in tensors:
        lo, hi = tensor_extent(t)
        if t.device.type == device and lo <= ptr < hi:
            return t, ptr - t.data_ptr()
    for t in tensors:
        st = t.untyped_storage()
        if t.device.type == device and st.data_ptr() <= ptr < st.data_ptr() + st.nbytes():
            raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st, 0, (st.nbytes(),), (1,))
            return raw, ptr - st.data_ptr()
    return None


def own_launch(source: str, name: str, launch, output: torch.Tensor, inputs=(), zeroed: bool = False,
               module=None):
    """Make the learner's launches of kernel ``name`` recorded in ``launch`` (a CUDA C
    :class:`~gpu_course.launches.Launch` with ``calls``) again on the check's memory; return
    ``(output as the kernel wrote it, CudaExecution, memory)``. Raises :class:`CudaLaunchError`
    when the launch cannot be made (with a message for the learner); errors of the kernel itself
    (an out-of-bounds access ...) propagate. ``module``: ``(module, launcher function)`` to launch
    it with (on a GPU, the emulated build of :mod:`.cuda_emulated`, whose launches are counted as in
    cpu mode), else :func:`launcher`'s."""
    from .replay import Memory
    calls = [c for c in launch.calls if c.name == name]
    if not calls:
        raise CudaLaunchError(f"the module recorded no launch configuration of {name} (it keeps no launch log)")
    params = kernel_params(source, name)
    mod, fn = module if module is not None else launcher(source, name)
    emulated = hasattr(mod, "_cuda_emu_count")
    device = output.device.type
    tensors = _host_tensors(launch)
    mem = Memory(output, list(inputs))
    prepared = []
    for c in calls:
        if len(c.args) != len(params):
            raise CudaLaunchError(f"{name} takes {len(params)} arguments and was launched with {len(c.args)}")
        bufs, offs, ints, reals = [], [], [], []
        for i, (p, (kind, value)) in enumerate(zip(params, c.args)):
            t, off, iv, rv = torch.empty(0, device=output.device), -1, 0, 0.0
            if p.kind == "pointer":
                if kind not in ("p", "i", "u") or (kind != "p" and value != 0):
                    raise CudaLaunchError(f"argument {i + 1} of {name} ({p.name}) is a pointer, but the launch "
                                          f"gave it a {'number' if kind in 'iufb' else 'value'}")
                if value:
                    held = _holder(int(value), tensors, device)
                    if held is None:
                        raise CudaLaunchError(
                            f"your host function gave {name} memory that is none of its tensors ({p.name}, "
                            f"argument {i + 1}: a tensor made inside the host function?); the check gives it "
                            f"its own copies of the inputs and the output only, so pass the tensors "
                            f"themselves (their data_ptr) and compute inside the kernel")
                    holder, off = held
                    t = mem.tensor(holder, p.name)
            elif kind not in ("i", "u", "f", "b"):
                raise CudaLaunchError(f"argument {i + 1} of {name} ({p.name}) is a number, but the launch gave it "
                                      f"{'a pointer' if kind == 'p' else 'something else'}")
            elif p.kind == "real":
                rv = float(value)
            else:
                iv = int(value)  # as C++ converts: a float argument to an int parameter truncates
            bufs.append(t)
            offs.append(int(off))
            ints.append(iv)
            reals.append(rv)
        prepared.append((list(c.grid) + list(c.block) + [c.smem], bufs, offs, ints, reals, c))
    out = mem.output_view(output)
    if zeroed:
        for (dev, ptr, n), (new, role, _) in mem.regions.items():
            if role == "output":
                new.zero_()
    mem.freeze_inputs()
    ex = CudaExecution(name)
    distinct = {(b.data_ptr(), b.numel()) for _, bufs, *_ in prepared for b in bufs if b.numel()}
    ex.elements = sum(n for _, n in distinct)
    counting = emulated and (module is not None or not mode.ON_GPU)
    if counting:
        mod._cuda_emu_count(True)
    try:
        for cfg, bufs, offs, ints, reals, c in prepared:
            getattr(mod, fn)(cfg, bufs, offs, ints, reals)
        mode.synchronize()
        if counting:
            fields, counted = mod._cuda_emu_counts()
            fields = tuple(fields.split(","))
            for kname, grid, block, raw in counted:
                nb, nt = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
                counts = torch.frombuffer(bytearray(raw), dtype=torch.int32).to(torch.int64) \
                    .view(nb, nt, len(fields))
                ex.launches.append(CountedLaunch(kname, tuple(grid), tuple(block), counts, fields))
    finally:
        if counting:
            mod._cuda_emu_count(False)
    if mode.ON_GPU and not counting:
        try:
            ex.sass = _sass_of(mod, name)
        except Exception as e:  # noqa: BLE001  no cuobjdump, a module without a file ...
            ex.sass_error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return out, ex, mem
