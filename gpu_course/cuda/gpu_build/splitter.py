"""What belongs where: the learner's source split at top level (read by :mod:`..cxx`, the parser
the CPU emulation uses too) into the device, host and binding units (:func:`make_units`), with a
launch stub per ``<<<...>>>``, a symbol stub per device variable and an attribute stub per
``cudaFuncSetAttribute`` (see the package's docstring; the stubs: :mod:`.stubs`, the units: :mod:`.units`). What the split cannot handle with certainty
raises :class:`NeedsClassicBuild`."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import cxx
from ..language import FRONTEND_NAMESPACES, INCLUDE_RE, is_torch_header, uses_torch
from ..parsed import parse
from . import templates as T
from .stubs import Stubs, identifiers
from .units import GENERATED, SOURCE_NAME, NeedsClassicBuild, Units, assemble

__all__ = ["make_units", "Units", "NeedsClassicBuild", "SOURCE_NAME", "GENERATED"]

# device built-ins: host code that names them is device code the split did not recognise
_DEVICE_ONLY_RE = re.compile(r"threadIdx|blockIdx|blockDim|gridDim|warpSize|__syncthreads\w*|"
                             r"__syncwarp|__shfl\w*|__ballot\w*|__activemask|atomic[A-Z]\w*|__ldg$")
# headers of device-only APIs (cp.async pipelines, barriers, cooperative groups, warp matrix ops): a host
# compiler fails on them, and host code has no use for them, so only the device unit includes them
_DEVICE_HEADER_RE = re.compile(r"(cuda_pipeline\w*|cuda_awbarrier\w*|cooperative_groups(/.*)?|mma|"
                               r"sm_\d+_intrinsics)\.h$|cuda/(pipeline|barrier|annotated_ptr)$")
_DEFINE_RE = re.compile(r"\s*#\s*define\s+(\w+)(\(([^)]*)\))?")


@dataclass
class _Kernel:
    name: str
    decls: list = field(default_factory=list)  # cxx.Decl of each definition / declaration


class _Splitter(Stubs):
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
                if identifiers(mtoks, L.start, L.lt) & params:
                    raise NeedsClassicBuild(f"{self.where(s.a)}: #define {d.group(1)} launches a "
                                            f"kernel named by a macro parameter")
                self.macro_at = s.a
                edits.append(self.launch_edit(mtoks, mmatch, t.text, L, (), (0, len(mtoks)), keep_lines=False))
            self.put(self.host, s.a, s.b, _apply(t.text, edits))
        else:
            self.put(self.host, s.a, s.b)

    def declaration(self, s, d: cxx.Decl) -> None:
        toks, spec = self.toks, d.specifiers
        ids = identifiers(toks, s.a, s.b)
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
        other_symbol_api = {x for x in identifiers(toks, s.a, s.b) if "Symbol" in x and x.startswith("cuda")} \
            - T.SYMBOL_API
        if other_symbol_api:
            raise NeedsClassicBuild(f"{self.where(s.a)}: {sorted(other_symbol_api)[0]}")
        hidden = identifiers(toks, s.a, s.b) & self.hidden_vars
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


def _apply(text: str, edits: list) -> str:
    """``text`` with each (start, end, replacement) applied (non-overlapping, any order)."""
    out, pos = [], 0
    for start, end, new in sorted(edits):
        if start < pos:
            continue
        out += [text[pos:start], new]
        pos = end
    return "".join(out) + text[pos:]


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
    return assemble(sp, cpp_src, funcs)
