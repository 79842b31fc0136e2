"""What the split generates in the device unit for what host code names there, and what it puts in
the host code instead: a launch stub per ``kernel<<<...>>>`` (counting and logging the launch;
:meth:`Stubs.launch_edit`), an attribute stub per ``cudaFuncSetAttribute(kernel, ...)``
(:meth:`Stubs.func_attribute_edits`) and a symbol stub per ``__constant__`` / ``__device__``
variable with its host reference (:meth:`Stubs.device_variable`)."""
from __future__ import annotations

from dataclasses import dataclass

from .. import cxx
from .units import NeedsClassicBuild


def identifiers(toks, a: int, b: int) -> set:
    """The identifiers among toks[a:b]."""
    return {t.text for t in toks[a:b] if t.kind == "id"}


@dataclass
class _Symbol:
    """A __constant__ / __device__ variable the host unit can name (through its stub)."""
    name: str
    qualified: str  # as seen from global scope
    index: int


def in_namespaces(scope: tuple, code: str) -> str:
    """``code`` (a stub) inside the named namespaces of ``scope``, where the statement it serves is."""
    for n in reversed([n for n in scope if n and not n.startswith("extern")]):
        code = f"namespace {n} {{\n{code}\n}}"
    return code


class Stubs:
    """The stub-writing part of ``splitter._Splitter`` (a mixin: it reads and fills the splitter's
    fields: toks, match, src, kernels, top_names, launch_stubs, launch_names, attr_stubs, symbols,
    symbol_stubs, host_decls, hidden_vars, host, macro_at)."""

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
            local = identifiers(toks, *L.template_args) - self.top_names - cxx.KEYWORDS if L.template_args else set()
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
        self.launch_stubs.append(in_namespaces(scope, (
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
            local = identifiers(toks, j + 1, b) - self.top_names - cxx.KEYWORDS
            if local:
                raise NeedsClassicBuild(f"{self.where(k)}: cudaFuncSetAttribute of {name} uses the local "
                                        f"name {sorted(local)[0]}")
            if any(d.template for d in kernel.decls) and (b == j + 1 or toks[j + 1].text != "<"):
                raise NeedsClassicBuild(f"{self.where(k)}: cudaFuncSetAttribute of {name} leaves template "
                                        f"arguments to deduction")
            callee = self.src[toks[a].start:toks[b - 1].end]
            idx = len(self.attr_stubs)
            self.attr_stubs.append(in_namespaces(s.scope, (
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
