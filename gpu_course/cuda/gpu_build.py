"""Fast builds of CUDA C from a notebook: the GPU side of ``load_cuda`` (gpu_course/cuda/__init__.py).

Why not plain ``torch.utils.cpp_extension.load_inline``? Measured on an H100 machine, four small
kernels took 55 s to build and 48 s to rebuild after a one-line edit: nvcc spends nearly all of it
parsing ``torch/extension.h``, and load_inline rebuilds both translation units on every change.
Here the learner's source is split at top level (read by :mod:`.cxx`, the parser the CPU emulation
uses too) into three translation units, each compiled only when its own text changes (objects are
cached by content hash):

* **device** (nvcc, no torch headers, ~1 s): kernels, ``__device__`` functions and variables,
  shared declarations, one generated *launch stub* per ``kernel<<<...>>>`` call site (it counts
  the launches, see ``_course_launches``), one *symbol stub* per ``__constant__`` /
  ``__device__`` variable and one *attribute stub* per ``cudaFuncSetAttribute(kernel, ...)`` call;
* **host** (g++ with ``ATen/ATen.h`` instead of ``torch/extension.h``): the torch wrappers and
  other host code, each ``<<<...>>>`` launch rewritten into a call of its stub, each device
  variable a reference to the host shadow that nvcc registered (so ``cudaMemcpyToSymbol(mask,
  ...)`` and ``sizeof(mask)`` work as in one nvcc unit), each ``cudaFuncSetAttribute(kernel, attr,
  value)`` a call of its attribute stub (e.g. to allow a kernel over 48 KB of dynamic shared memory);
* **binding** (g++ with ``torch/python.h``): the pybind11 module for ``funcs`` plus
  ``_course_launches()`` / ``_course_reset_launches()`` and ``_course_launch_log(since)`` (grid,
  block, shared bytes and arguments of the latest launches, recorded by the launch stubs: what an
  exercise check needs to make the learner's launch again); it depends only on ``cpp_src`` and so is
  reused across kernel and wrapper edits.

Editing a kernel recompiles only the device unit. Launch semantics are those of ``<<<>>>``: errors
are reported by ``cudaGetLastError`` (so ``C10_CUDA_KERNEL_LAUNCH_CHECK()`` works as usual).

Anything the split cannot handle with certainty raises :class:`NeedsClassicBuild`, and
``load_cuda`` builds the source as one nvcc unit (slower, equivalent): found while splitting (a
templated host function that launches a kernel, a kernel whose template arguments are local names,
device code that uses torch, host code that uses device built-ins, ``__managed__``, dynamic
parallelism, a launch through a macro parameter ...), or when a unit fails to compile only
outside the statements it owns (an error the split made, not the learner), fails to link, or
misses a symbol that is not one of ``funcs``. Errors in the learner's own statements are reported.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import cache_files, cxx
from .errors import CudaBuildError, diagnostics, format_compile_errors

CACHE = Path(os.environ.get("COURSE_CUDA_CACHE",
                            Path.home() / ".cache" / "gpu-course" / "cuda"))
SOURCE_NAME = "cuda_src"  # what compiler messages call the learner's source (via #line)
GENERATED = "course_generated"  # and the code this module generates
COMPILE_TIMEOUT_S = 600


class NeedsClassicBuild(Exception):
    """The split build cannot handle this source; build it as one nvcc unit."""


# ------------------------------------------------------------------------------------------------
# What belongs where
# ------------------------------------------------------------------------------------------------
_TORCH_IDS = {"torch", "at", "c10", "pybind11", "py", "Tensor", "TensorOptions", "IntArrayRef",
              "ScalarType", "PackedTensorAccessor32", "PackedTensorAccessor64", "CUDA_CHECK",
              "data_ptr", "mutable_data_ptr", "const_data_ptr", "packed_accessor32",
              "packed_accessor64", "getCurrentCUDAStream"}
_TORCH_ID_RE = re.compile(r"(TORCH|AT|C10)_\w+|CHECK_(INPUT|CUDA|CONTIGUOUS)$")
_HEAVY_TORCH = {"nn", "optim", "autograd", "jit", "data"}  # torch:: namespaces ATen lacks
_LIGHT_INCLUDES = {"torch/extension.h", "torch/types.h", "ATen/ATen.h", "c10/cuda/CUDAException.h"}
# device built-ins: host code that names them is device code the split did not recognise
_DEVICE_ONLY_RE = re.compile(r"threadIdx|blockIdx|blockDim|gridDim|warpSize|__syncthreads\w*|"
                             r"__syncwarp|__shfl\w*|__ballot\w*|__activemask|atomic[A-Z]\w*|__ldg$")
_INCLUDE_RE = re.compile(r'\s*#\s*include\s*[<"]([^>"]+)[>"]')
# headers of device-only APIs (cp.async pipelines, barriers, cooperative groups, warp matrix ops): a host
# compiler fails on them, and host code has no use for them, so only the device unit includes them
_DEVICE_HEADER_RE = re.compile(r"(cuda_pipeline\w*|cuda_awbarrier\w*|cooperative_groups(/.*)?|mma|"
                               r"sm_\d+_intrinsics)\.h$|cuda/(pipeline|barrier|annotated_ptr)$")
_DEFINE_RE = re.compile(r"\s*#\s*define\s+(\w+)(\(([^)]*)\))?")


def _uses_torch(toks, a: int, b: int) -> str | None:
    """The first torch name among toks[a:b] (None if none)."""
    for t in toks[a:b]:
        if t.kind == "id" and (t.text in _TORCH_IDS or _TORCH_ID_RE.match(t.text)):
            return t.text
    return None


def _ids(toks, a: int, b: int) -> set:
    return {t.text for t in toks[a:b] if t.kind == "id"}


@dataclass
class _Kernel:
    name: str
    decls: list = field(default_factory=list)  # cxx.Decl of each definition / declaration


@dataclass
class _Symbol:
    """A __constant__ / __device__ variable the host unit can name (through its stub)."""
    name: str
    qualified: str  # as seen from global scope
    index: int


class _Splitter:
    """Walks the learner's top-level statements once and fills the three units."""

    def __init__(self, src: str):
        self.src = src
        self.toks = cxx.tokenize(src)
        self.match = cxx.match_brackets(self.toks)
        self.stmts = cxx.statements(self.toks, self.match)
        self.decls = {id(s): cxx.analyze(self.toks, self.match, s)
                      for s in self.stmts if s.kind == "decl"}
        self.device, self.host, self.host_decls = [], [], []
        self.device_lines, self.host_lines = set(), set()
        self.launch_names, self.launch_stubs, self.symbol_stubs = [], [], []
        self.attr_stubs = []   # one per cudaFuncSetAttribute(kernel, ...) in host code
        self.heavy = False
        toks = self.toks
        for i in range(len(toks) - 2):
            if toks[i].text == "torch" and toks[i + 1].text == "::" and toks[i + 2].text in _HEAVY_TORCH:
                self.heavy = True
        # names known at file scope: macros and everything declared at top level
        self.top_names, self.kernels, self.symbols, self.hidden_vars = set(), {}, {}, set()
        self.macro_at = 0  # the directive whose launches launch_edit is rewriting
        self.host_only = set()  # names declared in the host unit only
        for s in self.stmts:
            if s.kind == "pp":
                m = _DEFINE_RE.match(toks[s.a].text)
                if m:
                    self.top_names.add(m.group(1))
                continue
            d = self.decls.get(id(s))
            if d is None:
                continue
            self.top_names.add(d.name)
            self.top_names.update(toks[q].text for q, _ in d.names)
            if d.kind == "function" and "__global__" in d.specifiers:
                self.kernels.setdefault(d.name, _Kernel(d.name)).decls.append(d)

    # ---- small helpers
    def text(self, a: int, b: int) -> str:
        """The learner's text of tokens [a, b), comments and layout kept."""
        return self.src[self.toks[a].start:self.toks[b - 1].end]

    def lines(self, a: int, b: int) -> set:
        last = self.toks[b - 1]
        return set(range(self.toks[a].line, last.line + last.text.count("\n") + 1))

    def put(self, unit: list, a: int, b: int, text: str | None = None) -> None:
        unit.append(f'#line {self.toks[a].line} "{SOURCE_NAME}"\n'
                    f'{self.text(a, b) if text is None else text}\n')

    @staticmethod
    def generated(unit: list, text: str) -> None:
        unit.append(f'#line 1 "{GENERATED}"\n{text}\n')

    def where(self, i: int) -> str:
        return f"line {self.toks[i].line}"

    # ---- the walk
    def split(self) -> None:
        for s in self.stmts:
            if s.kind in ("open", "close"):
                self.put(self.device, s.a, s.b)
                self.put(self.host, s.a, s.b)
            elif s.kind == "pp":
                self.directive(s)
            else:
                self.declaration(s, self.decls[id(s)])

    def directive(self, s) -> None:
        t = self.toks[s.a]
        m = _INCLUDE_RE.match(t.text)
        if m and re.match(r"(torch|ATen|c10|pybind11)/|Python\.h$", m.group(1)):
            if m.group(1) not in _LIGHT_INCLUDES:
                self.put(self.host, s.a, s.b)  # e.g. ATen/cuda/CUDAContext.h, after the base
            return
        self.put(self.device, s.a, s.b)
        if m and _DEVICE_HEADER_RE.match(m.group(1)):
            return
        d = _DEFINE_RE.match(t.text)
        if "<<<" in t.text and d:  # a launch inside a macro: rewrite it for the host unit
            params = {p.strip() for p in (d.group(3) or "").split(",")} | {"__VA_ARGS__"}
            mtoks = cxx.tokenize(t.text, directives=False)
            mmatch = cxx.match_brackets(mtoks)
            try:
                launches = cxx.find_launches(mtoks, mmatch)
            except cxx.LaunchSyntaxError:
                raise NeedsClassicBuild(f"{self.where(s.a)}: a launch inside #define {d.group(1)}") from None
            edits = []
            for L in launches:
                if _ids(mtoks, L.start, L.lt) & params:
                    raise NeedsClassicBuild(f"{self.where(s.a)}: #define {d.group(1)} launches a "
                                            f"kernel named by a macro parameter")
                self.macro_at = s.a
                edits.append(self.launch_edit(mtoks, mmatch, t.text, L, (), (0, len(mtoks)), keep_lines=False))
            self.put(self.host, s.a, s.b, _apply(t.text, edits))
        else:
            self.put(self.host, s.a, s.b)

    def declaration(self, s, d: cxx.Decl) -> None:
        toks, spec = self.toks, d.specifiers
        ids = _ids(toks, s.a, s.b)
        if "__managed__" in ids:
            raise NeedsClassicBuild(f"{self.where(s.a)}: __managed__ memory")
        launches = self.find_launches(s.a, s.b)
        if d.kind == "function" and spec & {"__global__", "__device__"}:
            if launches:
                raise NeedsClassicBuild(f"{self.where(s.a)}: a launch inside a kernel (dynamic parallelism)")
            self.device_code(s, d)
            if "__global__" in spec:  # the host unit declares it (launches take its address)
                proto = self.text(s.a, d.head_end) + ";" if d.body else None
                self.put(self.host, s.a, s.b, proto)
            elif "__host__" in spec:
                self.host_code(s, d, launches, own=False)
            return
        if d.kind == "variable" and spec & {"__device__", "__constant__", "__shared__"}:
            self.device_code(s, d)
            if "constexpr" in spec:
                self.host_code(s, d, launches, own=False)  # the same value on both sides
            elif "__shared__" not in spec:
                self.device_variable(s, d)
            return
        if "__device__" in ids and d.kind != "type":
            raise NeedsClassicBuild(f"{self.where(s.a)}: device code the split does not recognise "
                                    f"(e.g. a __device__ lambda)")
        if _uses_torch(toks, s.a, s.b) or launches or ids & set(self.symbols) or \
                d.kind == "other" and ids & self.host_only:  # e.g. using ops::square;
            if launches and d.template:
                raise NeedsClassicBuild(f"{self.where(s.a)}: a templated host function launches a kernel")
            self.host_code(s, d, launches, own=True)
            self.host_only.add(d.name)
            self.host_only.update(toks[q].text for q, _ in d.names)
            return
        # shared by both units: types, macros' users, inline helpers, constants, declarations
        self.host_code(s, d, launches, own=False)
        if d.kind == "function" and d.body and not d.template and \
                not spec & {"inline", "static", "constexpr", "__forceinline__"}:
            # a plain host function: one definition (host); the device unit gets its declaration
            self.put(self.device, s.a, s.b, self.text(s.a, d.head_end) + ";")
        elif d.kind == "variable" and not self.internal_linkage(s, d) and "" not in s.scope:
            # a global of the host: defined once (host); device code cannot use it anyway, but
            # the shared statements that follow may name it
            decl = None if "auto" in spec else self.extern_declaration(d)
            if decl:
                self.put(self.device, s.a, s.b, decl)
        else:
            self.device_code(s, d, own=False)

    def internal_linkage(self, s, d) -> bool:
        """Whether a namespace-scope variable is private to each unit (``static``, ``constexpr``,
        ``extern``-declared elsewhere, or a ``const`` object): such a statement may stand in both
        units. ``const char* p`` is *not* const (its characters are): it has external linkage."""
        spec = set(d.specifiers)
        if spec & {"constexpr", "static", "extern"}:
            return True
        if "const" not in spec:
            return False
        first_name = min((q for q, _ in d.names), default=s.b)
        return not any(self.toks[k].text in ("*", "&", "&&") for k in range(s.a, first_name))

    def find_launches(self, a: int, b: int) -> list:
        try:
            return cxx.find_launches(self.toks, self.match, a, b)
        except cxx.LaunchSyntaxError as e:
            raise NeedsClassicBuild(str(e)) from None

    def device_code(self, s, d, own: bool = True) -> None:
        name = _uses_torch(self.toks, s.a, s.b)
        if name:
            raise NeedsClassicBuild(f"{self.where(s.a)}: device code uses torch ({name})")
        self.put(self.device, s.a, s.b)
        if own:
            self.device_lines |= self.lines(s.a, s.b)

    def host_code(self, s, d, launches, own: bool) -> None:
        toks, edits = self.toks, []
        for L in launches:
            edits.append(self.launch_edit(toks, self.match, self.src, L, s.scope, (s.a, s.b)))
        edits += self.func_attribute_edits(s)
        if d.kind == "type" and d.body:  # device-only member functions: declarations only
            for f in cxx.find_functions(toks, self.match, ("__device__",)):
                if f.body and d.body[0] < f.lparen < d.body[1] and not self.host_too(f.lparen):
                    edits.append((toks[f.body[0]].start, toks[f.body[1]].end, ";"))
        stripped = {k for k in range(s.a, s.b) if any(e[0] <= toks[k].start < e[1] for e in edits)}
        for k in range(s.a, s.b):
            if k not in stripped and toks[k].kind == "id" and _DEVICE_ONLY_RE.match(toks[k].text):
                raise NeedsClassicBuild(f"{self.where(k)}: host code names {toks[k].text}")
        other_symbol_api = {x for x in _ids(toks, s.a, s.b) if "Symbol" in x and x.startswith("cuda")} \
            - _SYMBOL_API
        if other_symbol_api:
            raise NeedsClassicBuild(f"{self.where(s.a)}: {sorted(other_symbol_api)[0]}")
        hidden = _ids(toks, s.a, s.b) & self.hidden_vars
        if hidden:
            raise NeedsClassicBuild(f"{self.where(s.a)}: host code uses {sorted(hidden)[0]}, a device "
                                    f"variable the split cannot reach")
        start, end = toks[s.a].start, toks[s.b - 1].end
        text = _apply(self.src[start:end], [(x - start, y - start, r) for x, y, r in edits])
        self.put(self.host, s.a, s.b, text)
        if own:
            self.host_lines |= self.lines(s.a, s.b)

    def host_too(self, lparen: int) -> bool:
        """Does the head of the member function whose '(' is at lparen say __host__?"""
        k = lparen
        while k > 0 and self.toks[k - 1].text not in (";", "{", "}", ":"):
            k -= 1
            if self.toks[k].text == "__host__":
                return True
        return False

    def launch_edit(self, toks, match, text: str, L: cxx.Launch, scope: tuple, stmt: tuple,
                    keep_lines: bool = True) -> tuple:
        """(start, end, replacement) of one launch in ``text`` (tokens ``toks``; the enclosing
        statement is toks[stmt[0]:stmt[1]]), and its stub in the device unit."""
        at = stmt[0] if keep_lines else self.macro_at
        callee = text[toks[L.start].start:toks[L.lt - 1].end]
        kernel = self.defined_kernel(L.name, at, f"{callee} is launched but no __global__ function of that "
                                                 f"name is defined here")
        tmpl = next((d.template for d in kernel.decls if d.template), None)
        if tmpl:
            params = cxx.split_args(self.toks, tmpl[0], tmpl[1], self.match)
            required = [p for p in params if not any(self.toks[q].text in ("=", "...") for q in range(*p))]
            given = cxx.split_args(toks, *L.template_args, match) if L.template_args else []
            if len(given) < len(required) or any(self.toks[q].text == "..." for p in params for q in range(*p)):
                raise NeedsClassicBuild(f"{self.where(at)}: {callee} leaves template arguments to deduction")
            # template arguments must mean the same at file scope, where the stub is: a name
            # that the enclosing statement also uses elsewhere is local to it (or a parameter)
            local = _ids(toks, *L.template_args) - self.top_names - cxx.KEYWORDS if L.template_args else set()
            a, b = stmt
            outside = {toks[k].text for k in range(a, b) if not L.start <= k <= L.rparen}
            if local & outside:
                raise NeedsClassicBuild(f"{self.where(at)}: {callee} uses the local name "
                                        f"{sorted(local & outside)[0]}")
        cfg = [text[toks[a].start:toks[b - 1].end] for a, b in L.config]
        if not 2 <= len(cfg) <= 4:
            raise NeedsClassicBuild(f"{self.where(at)}: launch configuration with {len(cfg)} values")
        cfg += ["0"] * (4 - len(cfg))
        idx = len(self.launch_stubs)
        self.launch_stubs.append(_in_namespaces(scope, (
            f'extern "C" cudaError_t __course_launch_{idx}(dim3 course_g, dim3 course_b, '
            f'size_t course_s, cudaStream_t course_st, void** course_args) {{\n'
            f'    cudaError_t e = cudaLaunchKernel(&{callee}, course_g, course_b, course_args, course_s, course_st);\n'
            f'    if (e == cudaSuccess) {{\n'
            f'        __atomic_fetch_add(&__course_launch_counts[{idx}], 1ull, __ATOMIC_RELAXED);\n'
            f'        ::course_launch_log::record<decltype(&{callee})>({idx}, course_g, course_b, course_s, course_args);\n'
            f'    }}\n'
            f'    return e;\n}}')))
        self.launch_names.append(L.name)
        args = text[toks[L.lparen].end:toks[L.rparen].start]
        start, end = toks[L.start].start, toks[L.rparen].end
        new = (f"__course_launch_{idx}(dim3({cfg[0]}), dim3({cfg[1]}), (size_t)({cfg[2]}), "
               f"(cudaStream_t)({cfg[3]}), course_launch::pack<decltype(&{callee})>({args}).ptrs)")
        if keep_lines:  # the lines after it keep their numbers
            new += "\n" * (text.count("\n", start, end) - new.count("\n"))
        return start, end, new

    def defined_kernel(self, name: str, at: int, missing: str):
        """The one ``__global__`` function ``name`` defined here (what a stub can name), else
        :class:`NeedsClassicBuild` (``missing`` says why at token ``at``)."""
        kernel = self.kernels.get(name)
        if kernel is None:
            raise NeedsClassicBuild(f"{self.where(at)}: {missing}")
        if len([d for d in kernel.decls if d.body]) > 1:
            raise NeedsClassicBuild(f"{self.where(at)}: {name} is overloaded")
        return kernel

    def func_attribute_edits(self, s) -> list:
        """``cudaFuncSetAttribute(kernel, attr, value)`` in host code names a kernel that only the
        device unit defines: each such call becomes a call of a stub in the device unit, which sets
        the attribute there (as a launch does). ``kernel`` is a name defined here, with all its
        template arguments given, file-scope names only."""
        toks, edits = self.toks, []
        for k in range(s.a, s.b - 1):
            if toks[k].text != "cudaFuncSetAttribute" or toks[k + 1].text != "(" or k + 1 not in self.match:
                continue
            rp = self.match[k + 1]
            args = cxx.split_args(toks, k + 1, rp, self.match)
            if len(args) != 3:
                raise NeedsClassicBuild(f"{self.where(k)}: cudaFuncSetAttribute with {len(args)} arguments")
            a, b = args[0]
            a += toks[a].text == "&"
            j = a
            while j + 2 < b and toks[j + 1].text == "::":   # ns::kernel<...>: the kernel's own name
                j += 2
            name = toks[j].text
            kernel = self.defined_kernel(name, k, f"cudaFuncSetAttribute of {name}, not a __global__ function "
                                                  f"defined here")
            local = _ids(toks, j + 1, b) - self.top_names - cxx.KEYWORDS
            if local:
                raise NeedsClassicBuild(f"{self.where(k)}: cudaFuncSetAttribute of {name} uses the local "
                                        f"name {sorted(local)[0]}")
            if any(d.template for d in kernel.decls) and (b == j + 1 or toks[j + 1].text != "<"):
                raise NeedsClassicBuild(f"{self.where(k)}: cudaFuncSetAttribute of {name} leaves template "
                                        f"arguments to deduction")
            callee = self.src[toks[a].start:toks[b - 1].end]
            idx = len(self.attr_stubs)
            self.attr_stubs.append(_in_namespaces(s.scope, (
                f'extern "C" cudaError_t __course_func_attr_{idx}(cudaFuncAttribute course_a, int course_v) {{\n'
                f'    return cudaFuncSetAttribute(&{callee}, course_a, course_v);\n}}')))
            rest = [self.src[toks[x].start:toks[y - 1].end] for x, y in args[1:]]
            start, end = toks[k].start, toks[rp].end
            new = f"__course_func_attr_{idx}((cudaFuncAttribute)({rest[0]}), (int)({rest[1]}))"
            new += "\n" * (self.src.count("\n", start, end) - new.count("\n"))   # keep line numbers
            edits.append((start, end, new))
        return edits

    def extern_declaration(self, d: cxx.Decl) -> str | None:
        """``extern`` + the declaration without initializers and CUDA/storage qualifiers."""
        toks = self.toks
        drop = set()
        for q, init in d.names:
            if init:
                drop.update(range(*init))
            k = q + 1  # an empty bound with an initializer: the size comes from it, not known here
            while k < d.b and toks[k].text == "[":
                if self.match.get(k) == k + 1:
                    return None
                k = self.match.get(k, k) + 1
        out, k = [], d.a
        end = d.b - 1 if toks[d.b - 1].text == ";" else d.b
        while k < end:
            x = toks[k].text
            if k in drop:
                k += 1
                continue
            if x in ("__align__", "alignas") and k + 1 < end and k + 1 in self.match:
                k = self.match[k + 1] + 1
                continue
            if x not in cxx.CUDA_QUALIFIERS | {"static", "extern", "inline", "thread_local"}:
                out.append(k)
            k += 1
        if not out or toks[out[0]].text == "template":
            return None
        parts, prev = [], None
        for k in out:
            if prev is not None and toks[k].start > toks[prev].end:
                parts.append(" ")
            parts.append(toks[k].text)
            prev = k
        return "extern " + "".join(parts).rstrip(", ") + ";"

    def device_variable(self, s, d: cxx.Decl) -> None:
        """A __constant__ / __device__ variable: a stub returning its host shadow (device unit) and
        a reference of the same name and type bound to it (host unit)."""
        decl = None if d.template else self.extern_declaration(d)
        names = [self.toks[q].text for q, _ in d.names]
        if decl is None or not names:
            self.hidden_vars.update(names)
            return
        ns = [n for n in s.scope if n and not n.startswith("extern")]
        holder = f"course_symbol_decl_{len(self.symbol_stubs)}"
        refs = [f"namespace {holder} {{ {decl} }}"]
        for name in names:
            if name in self.symbols:  # the same name in two namespaces: the host cannot tell
                raise NeedsClassicBuild(f"{self.where(s.a)}: two device variables named {name}")
            idx = len(self.symbol_stubs)
            sym = _Symbol(name, "::".join(ns + [name]), idx)
            self.symbols[name] = sym
            self.symbol_stubs.append(f'extern "C" void* __course_symbol_{idx}() '
                                     f'{{ return (void*)&::{sym.qualified}; }}')
            self.host_decls.append(f'extern "C" void* __course_symbol_{idx}();')
            t = f"decltype({holder}::{name})"
            refs.append(f"static {t}& {name} = *static_cast<std::remove_reference_t<{t}>*>"
                        f"(__course_symbol_{idx}());")
        self.generated(self.host, "\n".join(refs))


def _in_namespaces(scope: tuple, code: str) -> str:
    """``code`` (a stub) inside the named namespaces of ``scope``, where the statement it serves is."""
    for n in reversed([n for n in scope if n and not n.startswith("extern")]):
        code = f"namespace {n} {{\n{code}\n}}"
    return code


def _apply(text: str, edits: list) -> str:
    """``text`` with each (start, end, replacement) applied (non-overlapping, any order)."""
    out, pos = [], 0
    for start, end, new in sorted(edits):
        if start < pos:
            continue
        out += [text[pos:start], new]
        pos = end
    return "".join(out) + text[pos:]


# ------------------------------------------------------------------------------------------------
# The units
# ------------------------------------------------------------------------------------------------
LAUNCH_HELPER = r"""
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <cuda_runtime.h>
// Arguments of a kernel launch, converted to the kernel's parameter types (as <<<>>> would) and
// laid out for cudaLaunchKernel: one pointer per argument.
namespace course_launch {
template <typename F> struct pack;
template <typename... P> struct pack<void (*)(P...)> {
    std::tuple<std::decay_t<P>...> vals;
    void* ptrs[sizeof...(P) + 1];
    template <typename... A> explicit pack(A&&... a) : vals(std::forward<A>(a)...) {
        fill(std::index_sequence_for<P...>{});
    }
    template <std::size_t... I> void fill(std::index_sequence<I...>) {
        ((ptrs[I] = (void*)&std::get<I>(vals)), ...);
    }
};
}  // namespace course_launch
"""
HOST_PRELUDE = r"""
// CUDA keywords mean nothing to the host compiler: kernels appear here only as declarations.
#undef __global__
#undef __host__
#undef __device__
#undef __constant__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __host__
#define __device__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
// nvcc gives host code min() and max() over mixed integer types; a plain C++ compiler does not.
// (by value: a conditional of two lvalues is itself an lvalue, so decltype(a > b ? a : b) would be a
// reference to a parameter that dies on return)
template <typename A, typename B> inline std::common_type_t<A, B> max(A a, B b) { return a > b ? a : b; }
template <typename A, typename B> inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
// The symbol API's C++ overloads, which cuda_runtime.h declares for nvcc only: they take the
// variable itself (here a reference to the host shadow nvcc registered, see make_units).
template <class T> inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    return ::cudaMemcpyToSymbol((const void*)&symbol, src, count, offset, kind);
}
template <class T> inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t stream = 0) {
    return ::cudaMemcpyToSymbolAsync((const void*)&symbol, src, count, offset, kind, stream);
}
template <class T> inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    return ::cudaMemcpyFromSymbol(dst, (const void*)&symbol, count, offset, kind);
}
template <class T> inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count,
        size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t stream = 0) {
    return ::cudaMemcpyFromSymbolAsync(dst, (const void*)&symbol, count, offset, kind, stream);
}
template <class T> inline cudaError_t cudaGetSymbolAddress(void** devPtr, const T& symbol) {
    return ::cudaGetSymbolAddress(devPtr, (const void*)&symbol);
}
template <class T> inline cudaError_t cudaGetSymbolSize(size_t* size, const T& symbol) {
    return ::cudaGetSymbolSize(size, (const void*)&symbol);
}
"""
_SYMBOL_API = {"cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync", "cudaMemcpyFromSymbol",
               "cudaMemcpyFromSymbolAsync", "cudaGetSymbolAddress", "cudaGetSymbolSize"}
LIGHT_TORCH = ("#include <ATen/ATen.h>\n#include <c10/cuda/CUDAException.h>\n"
               "namespace torch { using namespace at; }  // torch::Tensor, torch::empty, ...\n")
# the launch log of the device unit: the latest launches (kernel, grid, block, shared bytes and the
# arguments as the kernel received them), read through the binding unit as _course_launch_log(since)
# (the format of the CPU emulation's _cuda_emu_launch_log), so that an exercise check can make the same
# launch on memory of its own (gpu_course.exercises.cuda_launch)
LAUNCH_LOG = r"""
#include <cstdint>
#include <cstring>
#include <type_traits>
namespace course_launch_log {
struct Arg { char kind; unsigned char size; unsigned long long bits; };
struct Rec { long long seq; int site; unsigned dims[6]; unsigned long long smem; int nargs; Arg args[24]; };
static Rec recs[256];
static long long total = 0;
// one argument, read where cudaLaunchKernel's argument array points: 'p' pointer, 'i'/'u' signed /
// unsigned integer, 'f' floating point (a double's bits), 'b' bool, '?' anything else
template <typename T> inline Arg arg(void* p) {
    typedef typename std::decay<T>::type D;
    Arg r = {'?', (unsigned char)(sizeof(D) < 255 ? sizeof(D) : 255), 0ull};
    if constexpr (std::is_pointer<D>::value) {
        r.kind = 'p'; r.bits = (unsigned long long)(uintptr_t)(*static_cast<D*>(p));
    } else if constexpr (std::is_same<D, bool>::value) {
        r.kind = 'b'; r.bits = *static_cast<D*>(p) ? 1ull : 0ull;
    } else if constexpr (std::is_enum<D>::value) {
        r.kind = 'i'; r.bits = (unsigned long long)(long long)(*static_cast<D*>(p));
    } else if constexpr (std::is_integral<D>::value && std::is_signed<D>::value) {
        r.kind = 'i'; r.bits = (unsigned long long)(long long)(*static_cast<D*>(p));
    } else if constexpr (std::is_integral<D>::value) {
        r.kind = 'u'; r.bits = (unsigned long long)(*static_cast<D*>(p));
    } else if constexpr (std::is_floating_point<D>::value) {
        double v = (double)(*static_cast<D*>(p));
        r.kind = 'f'; std::memcpy(&r.bits, &v, sizeof v);
    }
    return r;
}
template <typename T> inline void put(void** a, Rec& r, int& i) {
    if (i < 24) r.args[i] = arg<T>(a[i]);
    ++i;
}
template <typename F> struct args_of;
template <typename... P> struct args_of<void (*)(P...)> {
    static int fill(void** a, Rec& r) {
        int i = 0;
        (void)a; (void)r;
        (put<P>(a, r, i), ...);
        return i < 24 ? i : 24;
    }
};
template <typename F> inline void record(int site, dim3 g, dim3 b, size_t s, void** a) {
    long long seq = __atomic_fetch_add(&total, 1ll, __ATOMIC_RELAXED);
    Rec& r = recs[seq % 256];
    r.site = site;
    r.dims[0] = g.x; r.dims[1] = g.y; r.dims[2] = g.z; r.dims[3] = b.x; r.dims[4] = b.y; r.dims[5] = b.z;
    r.smem = s;
    r.nargs = args_of<F>::fill(a, r);
    __atomic_store_n(&r.seq, seq, __ATOMIC_RELEASE);
}
}  // namespace course_launch_log
"""
LAUNCH_LOG_TABLE = r"""
extern "C" long long __course_launch_log_total() { return __atomic_load_n(&course_launch_log::total, __ATOMIC_ACQUIRE); }
extern "C" int __course_launch_log_get(long long seq, const char** name, unsigned* dims, unsigned long long* smem,
                                       char* kinds, unsigned char* sizes, unsigned long long* bits) {
    if (seq < 0) return -1;
    const course_launch_log::Rec& r = course_launch_log::recs[seq % 256];
    if (__atomic_load_n(&r.seq, __ATOMIC_ACQUIRE) != seq) return -1;
    *name = __course_launch_names[r.site];
    for (int k = 0; k < 6; ++k) dims[k] = r.dims[k];
    *smem = r.smem;
    for (int k = 0; k < r.nargs; ++k) { kinds[k] = r.args[k].kind; sizes[k] = r.args[k].size; bits[k] = r.args[k].bits; }
    return r.nargs;
}
"""
# the launch counters, read through the binding unit (see gpu_course.cuda.kernel_launches)
LAUNCH_TABLE = r"""
extern "C" int __course_launch_table(const char* const** names, unsigned long long** counts) {
    *names = __course_launch_names;
    *counts = __course_launch_counts;
    return __course_launch_n;
}
"""
BINDING_LAUNCHES = r"""
// the launch counts of the device unit's stubs, by kernel (gpu_course.cuda.kernel_launches)
extern "C" int __course_launch_table(const char* const** names, unsigned long long** counts);
extern "C" long long __course_launch_log_total();
extern "C" int __course_launch_log_get(long long seq, const char** name, unsigned* dims, unsigned long long* smem,
                                       char* kinds, unsigned char* sizes, unsigned long long* bits);
// (launches so far, [(seq, kernel, grid, block, shared bytes, ((kind, size, bits), ...)), ...]) of the
// latest launches whose seq >= since: what the CPU emulation's _cuda_emu_launch_log returns
static pybind11::tuple course_launch_log(long long since) {
    long long total = __course_launch_log_total();
    pybind11::list out;
    for (long long s = since > total - 256 ? since : total - 256; s < total; ++s) {
        const char* name = ""; unsigned d[6]; unsigned long long smem = 0; char kinds[24];
        unsigned char sizes[24]; unsigned long long bits[24];
        int n = __course_launch_log_get(s, &name, d, &smem, kinds, sizes, bits);
        if (n < 0) continue;
        pybind11::tuple args(n);
        for (int k = 0; k < n; ++k) args[k] = pybind11::make_tuple(std::string(1, kinds[k]), (int)sizes[k], bits[k]);
        out.append(pybind11::make_tuple(s, std::string(name), pybind11::make_tuple(d[0], d[1], d[2]),
                                        pybind11::make_tuple(d[3], d[4], d[5]), smem, args));
    }
    return pybind11::make_tuple(total, out);
}
static pybind11::dict course_launches(bool reset) {
    const char* const* names; unsigned long long* counts; pybind11::dict d;
    for (int i = 0, n = __course_launch_table(&names, &counts); i < n; ++i) {
        unsigned long long c = reset ? __atomic_exchange_n(&counts[i], 0ull, __ATOMIC_RELAXED)
                                     : __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
        pybind11::str k(names[i]);
        d[k] = c + (d.contains(k) ? d[k].cast<unsigned long long>() : 0ull);
    }
    return d;
}
"""


BINDING_MAKE_MODULE = r"""
static pybind11::module_::module_def course_module_def;  // this library's own (static: never shared)
extern "C" PyObject* course_make_module(const char* name) {
    try {
        auto m = pybind11::module_::create_extension_module(name, nullptr, &course_module_def);
        course_bind(m);
        return m.release().ptr();
    } catch (pybind11::error_already_set& e) {
        e.restore();
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_ImportError, e.what());
    }
    return nullptr;
}
"""


def init_unit(module: str) -> str:
    """The two-line unit that names a build's module: ``PyInit_<module>`` asks the binding unit to
    make it under that name.

    >>> "PyInit_course_cuda_ab12(void)" in init_unit("course_cuda_ab12")
    True
    """
    return ("// init unit (g++), generated by gpu_course/cuda/gpu_build.py\n#include <Python.h>\n"
            'extern "C" PyObject* course_make_module(const char* name);\n'
            f'extern "C" __attribute__((visibility("default"))) PyObject* PyInit_{module}(void) '
            f'{{ return course_make_module("{module}"); }}\n')


@dataclass
class Units:
    """The three generated translation units, the module name, and which lines of cuda_src each
    compiled unit owns (an error there is the learner's; elsewhere, the split's)."""
    device: str
    host: str
    binding: str
    module: str  # a name from cpp_src and funcs; the loaded module is named after its build (build_split)
    device_lines: set = field(default_factory=set)
    host_lines: set = field(default_factory=set)
    kernels: tuple = ()


def make_units(cuda_src: str, cpp_src: str, funcs: list) -> Units:
    """Split the learner's source into device, host and binding translation units; raises
    :class:`NeedsClassicBuild` for sources the split cannot handle with certainty."""
    try:
        sp = _Splitter(cuda_src)
        sp.split()
    except NeedsClassicBuild:
        raise
    except (IndexError, KeyError, ValueError, TypeError, AttributeError) as e:  # source it misread
        raise NeedsClassicBuild(f"the split could not read the source ({type(e).__name__}: {e})") from e
    n = len(sp.launch_stubs)
    names = ", ".join(f'"{x}"' for x in sp.launch_names) or "nullptr"
    device_tu = ("// device unit (nvcc, no torch headers), generated by gpu_course/cuda/gpu_build.py\n"
                 "#include <cuda_runtime.h>\n#include <cstdio>\n" + "".join(sp.device)
                 + f'#line 1 "{GENERATED}"\n'
                 + "// launch stubs: one per <<<>>>, each counting its launches\n"
                 + f"static const char* const __course_launch_names[] = {{{names}}};\n"
                 + f"static unsigned long long __course_launch_counts[{max(n, 1)}];\n"
                 + f"static const int __course_launch_n = {n};\n"
                 + LAUNCH_LOG + LAUNCH_LOG_TABLE
                 + "\n".join(sp.launch_stubs) + LAUNCH_TABLE
                 + ("// attribute stubs: cudaFuncSetAttribute of a kernel, for the host unit\n"
                    + "\n".join(sp.attr_stubs) + "\n" if sp.attr_stubs else "")
                 + ("// symbol stubs: the host shadow of each __constant__ / __device__ variable\n"
                    + "\n".join(sp.symbol_stubs) + "\n" if sp.symbol_stubs else ""))
    decls = [f'extern "C" cudaError_t __course_launch_{i}(dim3, dim3, size_t, cudaStream_t, void**);'
             for i in range(n)] + \
        [f'extern "C" cudaError_t __course_func_attr_{i}(cudaFuncAttribute, int);'
         for i in range(len(sp.attr_stubs))] + sp.host_decls
    base = "#include <torch/extension.h>\n" if sp.heavy else LIGHT_TORCH
    host_tu = ("// host unit (g++), generated by gpu_course/cuda/gpu_build.py\n" + base
               + LAUNCH_HELPER + HOST_PRELUDE + "\n".join(decls) + "\n" + "".join(sp.host))
    module = "course_cuda_" + hashlib.sha256((cpp_src + "|" + ",".join(funcs)).encode()) \
        .hexdigest()[:12]
    defs = "\n".join(f'    m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in funcs)
    # The binding makes the module under the name its caller gives (course_make_module): the name is
    # unique to each build (an init unit of two lines, made at the link, holds it), while this unit stays
    # the same, and cached, across every edit of the kernels. A module name shared by two builds would make
    # pybind11 hand back the first build's module.
    binding_tu = (f"// binding unit (g++), generated by gpu_course/cuda/gpu_build.py\n#include <torch/python.h>\n"
                  f'#line 1 "cpp_src"\n{cpp_src}\n#line 1 "{GENERATED}"{BINDING_LAUNCHES}'
                  f"static void course_bind(pybind11::module_& m) {{\n{defs}\n"
                  f'    m.def("_course_launches", [] {{ return course_launches(false); }});\n'
                  f'    m.def("_course_reset_launches", [] {{ course_launches(true); }});\n'
                  f'    m.def("_course_launch_log", &course_launch_log, pybind11::arg("since") = 0);\n'
                  f"}}\n{BINDING_MAKE_MODULE}")
    kernels = tuple(sorted(sp.kernels))
    return Units(device_tu, host_tu, binding_tu, module, sp.device_lines, sp.host_lines, kernels)


# ------------------------------------------------------------------------------------------------
# Compiling, with a cache of objects by content
# ------------------------------------------------------------------------------------------------
def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def arch_name(major: int, minor: int) -> str:
    """The architecture a build targets on a GPU of compute capability major.minor: ``"90a"`` on sm_90 (Hopper's
    wgmma and setmaxnreg exist only in code built for sm_90a, which runs on sm_90 GPUs only, as this build does),
    else ``f"{major}{minor}"``.

    >>> arch_name(9, 0), arch_name(8, 6)
    ('90a', '86')
    """
    return f"{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


def _toolchain():
    """Compilers, include and library flags for torch extensions on this machine."""
    import torch
    from torch.utils import cpp_extension as ce
    cuda_home = ce.CUDA_HOME or "/usr/local/cuda"
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    includes = ce.include_paths("cuda") + [sysconfig.get_paths()["include"]]
    inc = [f"-I{p}" for p in includes]
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    sm = arch_name(*torch.cuda.get_device_capability())
    arch = f"-gencode=arch=compute_{sm},code=sm_{sm}"
    libs = [f"-L{ce.TORCH_LIB_PATH}", "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda",
            "-ltorch", "-ltorch_python", f"-L{os.path.join(cuda_home, 'lib64')}", "-lcudart",
            f"-Wl,-rpath,{ce.TORCH_LIB_PATH}"]
    cxx = os.environ.get("CXX", "c++")
    return {"nvcc": nvcc, "cxx": cxx, "inc": inc, "abi": abi, "arch": arch, "libs": libs,
            "id": _digest(torch.__version__, nvcc, cxx, arch, sys.version)}


def nvcc_command(opt: bool = True, extra_cuda_cflags=(), arch: str | None = None) -> list:
    """The nvcc command (without source and output) that compiles a device unit: for this GPU, or
    for ``arch`` (e.g. ``"-arch=sm_90"``), which needs only the CUDA toolkit, not a GPU.

    Notebook 04 compiles a device unit with ``-Xptxas -v`` this way for the register report."""
    if arch is None:
        tc = _toolchain()
        nvcc, arch = tc["nvcc"], tc["arch"]
    else:
        from torch.utils import cpp_extension as ce
        nvcc = shutil.which("nvcc") or os.path.join(ce.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
    return _nvcc_flags(nvcc, arch, opt, extra_cuda_cflags)


def _nvcc_flags(nvcc: str, arch: str, opt: bool, extra_cuda_cflags) -> list:
    return ([nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC", arch]
            + (["-O3", "-lineinfo"] if opt else ["-O0", "-g", "-G"]) + list(extra_cuda_cflags))


def _compile(cmd: list, src_text: str, src_path: Path, obj: Path) -> tuple:
    """Compile one unit unless its object is cached; return (obj, log, seconds)."""
    import time
    if cache_files.usable(obj, "object file"):  # present, with the size and hash it was built with
        return obj, "", 0.0
    src_path.write_text(src_text)
    t0 = time.perf_counter()
    tmp = obj.with_suffix(f".tmp{os.getpid()}.o")
    try:
        r = subprocess.run(cmd + ["-c", str(src_path), "-o", str(tmp)], capture_output=True,
                           text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"compiler timed out after {COMPILE_TIMEOUT_S} s: {' '.join(cmd[:2])}", 0.0
    if r.returncode != 0:
        return None, r.stdout + r.stderr, time.perf_counter() - t0
    tmp.replace(obj)
    cache_files.seal(obj)
    return obj, r.stdout + r.stderr, time.perf_counter() - t0


_UNIT_WHAT = {"device": "the kernels do not compile (nvcc)",
              "host": "the host code does not compile (C++)",
              "binding": "cpp_src or funcs do not match the functions (binding)"}


def _failure(kind: str, log: str, units: Units, cuda_src: str, cpp_src: str,
             other_log: str = "") -> Exception:
    """The exception for a unit that did not compile: the learner's error when the compiler points
    into statements that unit owns, into a line where the other unit (``other_log``) fails too,
    or into cpp_src; else NeedsClassicBuild (an error the split made)."""
    ptxas = [ln.strip() for ln in log.splitlines() if re.match(r"\s*ptxas\s+(error|fatal)", ln)]
    if kind == "device" and ptxas:  # the assembler's limits (registers, shared memory): the kernels'
        hint = ("\n(a kernel may use at most 48 KB (0xc000 bytes) of static __shared__ memory; "
                "for more, use extern __shared__ with the size at launch and cudaFuncSetAttribute)"
                if any("too much shared data" in ln for ln in ptxas) else "")
        return CudaBuildError(f"load_cuda: {_UNIT_WHAT[kind]}:\n" + "\n".join(ptxas) + hint +
                              "\n(the full compiler output is in utils.last_build_log())")
    if kind == "binding":
        sources = {"cpp_src": cpp_src}
    else:
        owned = units.device_lines if kind == "device" else units.host_lines
        lines = {d.line for d in diagnostics(log) if d.file == SOURCE_NAME}
        both = {d.line for d in diagnostics(other_log) if d.file == SOURCE_NAME}
        if not lines & (owned | both):
            return NeedsClassicBuild(f"the {kind} unit does not compile, and not because of the "
                                     f"statements it owns")
        sources = {SOURCE_NAME: cuda_src}
    return CudaBuildError(f"load_cuda: {_UNIT_WHAT[kind]}:\n{format_compile_errors(log, sources)}\n"
                          f"(line numbers count from the first line of {next(iter(sources))}; the full "
                          f"compiler output is in utils.last_build_log())")


_CLEANED: set = set()


def build_split(cuda_src: str, cpp_src: str, funcs: list, opt: bool = True,
                extra_cuda_cflags=(), verbose: bool = False, _retry: bool = True):
    """Build with the split units (see the module docstring); return the loaded module, with the
    build log as ``mod.build_log``. Raises :class:`CudaBuildError` (with ``.log``) for the
    learner's errors and :class:`NeedsClassicBuild` for what the split cannot build."""
    units = make_units(cuda_src, cpp_src, funcs)
    tc = _toolchain()
    nvcc_flags = _nvcc_flags(tc["nvcc"], tc["arch"], opt, extra_cuda_cflags)
    cxx_flags = [tc["cxx"], "-std=c++17", "-fPIC", "-O2" if opt else "-O0", tc["abi"],
                 "-DTORCH_API_INCLUDE_EXTENSION_H", "-w"] + tc["inc"]
    obj_dir = CACHE / "obj"
    src_dir = CACHE / "src"
    obj_dir.mkdir(parents=True, exist_ok=True)
    src_dir.mkdir(parents=True, exist_ok=True)
    if obj_dir not in _CLEANED:  # once per process: temp files of builds that were killed
        _CLEANED.add(obj_dir)
        cache_files.clean_temps(obj_dir)
    jobs = {}
    for kind, text, flags, ext in (("device", units.device, nvcc_flags, "cu"),
                                   ("host", units.host, cxx_flags, "cpp"),
                                   ("binding", units.binding, cxx_flags, "cpp")):
        key = _digest(kind, text, flags, tc["id"])
        jobs[kind] = (flags, text, src_dir / f"{kind}-{key}.{ext}", obj_dir / f"{kind}-{key}.o")
    so_key = _digest(*[j[3].name for j in jobs.values()])
    so_dir = CACHE / "lib" / so_key
    module = f"course_cuda_{so_key}"  # unique to this build (see make_units)
    init_text = init_unit(module)
    init_key = _digest("init", init_text, cxx_flags, tc["id"])
    jobs["init"] = (cxx_flags, init_text, src_dir / f"init-{init_key}.cpp", obj_dir / f"init-{init_key}.o")
    so_path = so_dir / f"{module}.so"
    classic_mark = so_dir / "needs-classic"
    if classic_mark.exists():  # this very source failed to split before: do not compile it again
        raise NeedsClassicBuild(classic_mark.read_text())

    def classic(reason: str, log: str):
        so_dir.mkdir(parents=True, exist_ok=True)
        (so_dir / "build.log").write_text(log)
        classic_mark.write_text(reason)
        return NeedsClassicBuild(reason)

    if not cache_files.usable(so_path, "module"):
        with ThreadPoolExecutor(3) as pool:
            results = {k: pool.submit(_compile, *j) for k, j in jobs.items()}
            results = {k: f.result() for k, f in results.items()}
        log = "\n".join(f"== {kind} unit: {'cached' if secs == 0 and obj else f'{secs:.1f} s'}\n{out}"
                        for kind, (obj, out, secs) in results.items())
        for kind in ("device", "host", "binding"):
            obj, out, _ = results[kind]
            if obj is None:
                other = results["host" if kind == "device" else "device"][1]
                err = _failure(kind, out, units, cuda_src, cpp_src, other)
                if isinstance(err, NeedsClassicBuild):
                    raise classic(str(err), log)
                err.log = log
                raise err
        so_dir.mkdir(parents=True, exist_ok=True)
        cache_files.clean_temps(so_dir)
        tmp = so_dir / f"{module}.tmp{os.getpid()}.so"
        # -Bsymbolic: the library's own references (its PyInit's module definition, the host functions the
        # binding calls) bind to its own definitions, never to a same-named symbol of a module loaded before
        # (every edit of a source keeps the module's name, so that its binding unit stays cached)
        r = subprocess.run([tc["cxx"], "-shared", "-Wl,-Bsymbolic", *[str(r[0]) for r in results.values()], "-o",
                            str(tmp), *tc["libs"]], capture_output=True, text=True,
                           timeout=COMPILE_TIMEOUT_S)
        log += f"\n== link\n{r.stdout}{r.stderr}"
        if r.returncode != 0:  # a learner cannot define a symbol twice without a compile error
            tmp.unlink(missing_ok=True)
            bad = cache_files.blamed(r.stdout + r.stderr, obj_dir)
            if bad and _retry:  # a damaged cached object, not the learner's source
                for p in bad:
                    cache_files.discard(p)
                print(f"The link failed in the cached {', '.join(p.name for p in bad)}: "
                      f"rebuilding {'it' if len(bad) == 1 else 'them'} once.")
                return build_split(cuda_src, cpp_src, funcs, opt, extra_cuda_cflags, verbose,
                                   _retry=False)
            raise classic("the units do not link: " + (r.stdout + r.stderr).strip()[-300:], log)
        tmp.replace(so_path)
        cache_files.seal(so_path)
        cache_files.write_atomic(so_dir / "build.log", log)
    else:  # a cache hit: the log of the build that made this library
        log_file = so_dir / "build.log"
        log = (log_file.read_text() if log_file.exists() else "") + f"\n== loaded from cache: {so_path}"
    if verbose:
        print(log)
    try:
        mod = load_module(module, so_path, funcs)
    except NeedsClassicBuild as e:
        so_path.unlink(missing_ok=True)
        raise classic(str(e), log) from None
    except CudaBuildError as e:
        e.log = log
        raise
    mod.build_log = log
    mod._course_kernels = units.kernels
    return mod


def load_module(name: str, path: Path, funcs=()):
    """Import an extension module from a file (a fresh import even if the name was seen before).
    An undefined symbol that is one of ``funcs`` is the learner's (declared in cpp_src, defined
    nowhere): :class:`CudaBuildError`; any other is the split's: :class:`NeedsClassicBuild`."""
    spec = importlib.util.spec_from_file_location(name, path)
    flags = sys.getdlopenflags()
    try:
        # RTLD_LOCAL (the default, unless something changed it): the builds of a session define the same
        # symbols, and one placed in the global scope would stand in for a later build's own
        sys.setdlopenflags(flags & ~os.RTLD_GLOBAL)
        mod = importlib.util.module_from_spec(spec)  # dlopen: undefined symbols surface here
        spec.loader.exec_module(mod)
    except ImportError as e:
        m = re.search(r"undefined symbol: (\S+)", str(e))
        if not m:
            raise
        sym = m.group(1)
        try:
            sym = subprocess.run(["c++filt", sym], capture_output=True, text=True,
                                 timeout=10).stdout.strip() or sym
        except (OSError, subprocess.SubprocessError):
            pass
        if sym.split("(")[0].split("::")[-1] not in funcs:
            raise NeedsClassicBuild(f"undefined symbol {sym}") from None
        raise CudaBuildError(f"load_cuda: {sym} is declared (in cpp_src) but defined nowhere "
                             f"in cuda_src: define it, or fix its name or parameter types "
                             f"so that they match the declaration") from None
    finally:
        sys.setdlopenflags(flags)
    return mod
