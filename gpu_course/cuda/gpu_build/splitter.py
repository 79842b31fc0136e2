"""What belongs where: the learner's source split at top level (read by :mod:`..cxx`, the parser
the CPU emulation uses too) into the device, host and binding units (:func:`make_units`), with a
launch stub per ``<<<...>>>``, a symbol stub per device variable and an attribute stub per
``cudaFuncSetAttribute`` (see the package's docstring). What the split cannot handle with certainty
raises :class:`NeedsClassicBuild`."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from .. import cxx
from ..counters import COUNTS, LOG, RESET
from ..language import FRONTEND_NAMESPACES, INCLUDE_RE, is_torch_header, uses_torch
from ..parsed import parse
from . import templates as T

SOURCE_NAME = "cuda_src"  # what compiler messages call the learner's source (via #line)
GENERATED = "course_generated"  # and the code this package generates


class NeedsClassicBuild(Exception):
    """The split build cannot handle this source; build it as one nvcc unit (the message says why,
    in one sentence)."""


# device built-ins: host code that names them is device code the split did not recognise
_DEVICE_ONLY_RE = re.compile(r"threadIdx|blockIdx|blockDim|gridDim|warpSize|__syncthreads\w*|"
                             r"__syncwarp|__shfl\w*|__ballot\w*|__activemask|atomic[A-Z]\w*|__ldg$")
# headers of device-only APIs (cp.async pipelines, barriers, cooperative groups, warp matrix ops): a host
# compiler fails on them, and host code has no use for them, so only the device unit includes them
_DEVICE_HEADER_RE = re.compile(r"(cuda_pipeline\w*|cuda_awbarrier\w*|cooperative_groups(/.*)?|mma|"
                               r"sm_\d+_intrinsics)\.h$|cuda/(pipeline|barrier|annotated_ptr)$")
_DEFINE_RE = re.compile(r"\s*#\s*define\s+(\w+)(\(([^)]*)\))?")


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

    def __init__(self, src: str, parsed=None):
        p = parsed or parse(src)  # load_cuda's ParsedSource of src (read once), else read here
        self.src = src
        self.toks, self.match, self.stmts = p.toks, p.match, p.statements
        self.decls = {id(s): d for s, d in p.declarations}
        self.device, self.host, self.host_decls = [], [], []
        self.device_lines, self.host_lines = set(), set()
        self.launch_names, self.launch_stubs, self.symbol_stubs = [], [], []
        self.attr_stubs = []   # one per cudaFuncSetAttribute(kernel, ...) in host code
        self.heavy = False
        toks = self.toks
        for i in range(len(toks) - 2):  # torch's C++ frontend (torch::nn ...) or pybind11 in host code
            if toks[i].text == "torch" and toks[i + 1].text == "::" and toks[i + 2].text in FRONTEND_NAMESPACES \
                    or toks[i].text in ("py", "pybind11") and toks[i + 1].text == "::":
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
        m = INCLUDE_RE.match(t.text)
        if m and is_torch_header(m.group(1)):
            if m.group(1) not in T.HOST_TORCH_COVERS:
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
        if uses_torch(toks, s.a, s.b) or launches or ids & set(self.symbols) or \
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
        name = uses_torch(self.toks, s.a, s.b)
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
            - T.SYMBOL_API
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
@dataclass
class Units:
    """The three generated translation units, the module name, which lines of cuda_src each
    compiled unit owns (an error there is the learner's; elsewhere, the split's), the kernels, and
    the names cuda_src declares at file scope, macros included (see attribution.py)."""
    device: str
    host: str
    binding: str
    module: str  # a name from cpp_src and funcs; the loaded module is named after its build (build_split)
    device_lines: set = field(default_factory=set)
    host_lines: set = field(default_factory=set)
    kernels: tuple = ()
    file_names: frozenset = frozenset()


def make_units(cuda_src: str, cpp_src: str = "", funcs=(), parsed=None) -> Units:
    """Split the learner's source into device, host and binding translation units; raises
    :class:`NeedsClassicBuild` for sources the split cannot handle with certainty. (The device and
    host units depend on ``cuda_src`` alone: the CPU emulation's nvcc check passes nothing else.)
    ``parsed``: the :class:`~gpu_course.cuda.parsed.ParsedSource` of ``cuda_src`` if the caller has it."""
    try:
        sp = _Splitter(cuda_src, parsed)
        sp.split()
    except NeedsClassicBuild:
        raise
    except (IndexError, KeyError, ValueError, TypeError, AttributeError) as e:  # source it misread
        raise NeedsClassicBuild(f"the split could not read the source ({type(e).__name__}: {e})") from e
    n = len(sp.launch_stubs)
    half = T.HALF_HEADERS if T.names_half({t.text for t in sp.toks if t.kind == "id"}) else ""
    names = ", ".join(f'"{x}"' for x in sp.launch_names) or "nullptr"
    device_tu = ("// device unit (nvcc, no torch headers), generated by gpu_course/cuda/gpu_build\n"
                 + T.DEVICE_PRELUDE + half + "".join(sp.device)
                 + f'#line 1 "{GENERATED}"\n'
                 + "// launch stubs: one per <<<>>>, each counting its launches\n"
                 + f"static const char* const __course_launch_names[] = {{{names}}};\n"
                 + f"static unsigned long long __course_launch_counts[{max(n, 1)}];\n"
                 + f"static const int __course_launch_n = {n};\n"
                 + T.LAUNCH_LOG + T.LAUNCH_LOG_TABLE
                 + "\n".join(sp.launch_stubs) + T.LAUNCH_TABLE
                 + ("// attribute stubs: cudaFuncSetAttribute of a kernel, for the host unit\n"
                    + "\n".join(sp.attr_stubs) + "\n" if sp.attr_stubs else "")
                 + ("// symbol stubs: the host shadow of each __constant__ / __device__ variable\n"
                    + "\n".join(sp.symbol_stubs) + "\n" if sp.symbol_stubs else ""))
    decls = [f'extern "C" cudaError_t __course_launch_{i}(dim3, dim3, size_t, cudaStream_t, void**);'
             for i in range(n)] + \
        [f'extern "C" cudaError_t __course_func_attr_{i}(cudaFuncAttribute, int);'
         for i in range(len(sp.attr_stubs))] + sp.host_decls
    base = T.HOST_TORCH_FULL if sp.heavy else T.HOST_TORCH
    host_tu = ("// host unit (g++), generated by gpu_course/cuda/gpu_build\n" + base
               + T.LAUNCH_HELPER + half + T.HOST_PRELUDE + "\n".join(decls) + "\n" + "".join(sp.host))
    module = "course_cuda_" + hashlib.sha256((cpp_src + "|" + ",".join(funcs)).encode()) \
        .hexdigest()[:12]
    defs = "\n".join(f'    m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in funcs)
    # The binding makes the module under the name its caller gives (course_make_module): the name is
    # unique to each build (an init unit of two lines, made at the link, holds it), while this unit stays
    # the same, and cached, across every edit of the kernels. A module name shared by two builds would make
    # pybind11 hand back the first build's module.
    binding_tu = (f"// binding unit (g++), generated by gpu_course/cuda/gpu_build\n#include <torch/python.h>\n"
                  f'#line 1 "cpp_src"\n{cpp_src}\n#line 1 "{GENERATED}"{T.BINDING_LAUNCHES}'
                  f"static void course_bind(pybind11::module_& m) {{\n{defs}\n"
                  f'    m.def("{COUNTS}", [] {{ return course_launches(false); }});\n'
                  f'    m.def("{RESET}", [] {{ course_launches(true); }});\n'
                  f'    m.def("{LOG}", &course_launch_log, pybind11::arg("since") = 0);\n'
                  f"}}\n{T.BINDING_MAKE_MODULE}")
    kernels = tuple(sorted(sp.kernels))
    return Units(device_tu, host_tu, binding_tu, module, sp.device_lines, sp.host_lines, kernels,
                 frozenset(sp.top_names))


