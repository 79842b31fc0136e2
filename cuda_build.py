"""Fast builds of CUDA C from a notebook: the GPU side of ``utils.load_cuda``.

Why not plain ``torch.utils.cpp_extension.load_inline``? Measured on an H100 machine, four small
kernels took 55 s to build and 48 s to rebuild after a one-line edit: nvcc spends nearly all of it
parsing ``torch/extension.h``, and load_inline rebuilds both translation units on every change.
Here the learner's source is split at top level into three translation units, each compiled only
when its own text changes (objects are cached by content hash):

* **device** (nvcc, no torch headers, ~1 s): kernels, ``__device__`` functions, shared
  declarations, and one generated launch stub per ``kernel<<<...>>>`` call site;
* **host** (g++ with ``ATen/ATen.h`` instead of ``torch/extension.h``): the torch wrappers, with
  each ``<<<...>>>`` launch rewritten into a call of its stub;
* **binding** (g++ with ``torch/python.h``): the pybind11 module for ``funcs``, which depends only on
  ``cpp_src`` and so is reused across kernel and wrapper edits.

Editing a kernel recompiles only the device unit. Launch semantics are those of ``<<<>>>``: errors
are reported by ``cudaGetLastError`` (so ``C10_CUDA_KERNEL_LAUNCH_CHECK()`` works as usual). Sources
this split cannot handle (a templated host function that launches a kernel) fall back to one nvcc
unit built the classic way, which is slower but equivalent.
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
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("COURSE_CUDA_CACHE",
                            Path.home() / ".cache" / "gpu-course" / "cuda"))
SOURCE_NAME = "cuda_src"  # what compiler messages call the learner's source (via #line)
COMPILE_TIMEOUT_S = 600
last_log = ""  # the full compiler output of the last build, for utils.load_cuda(verbose=True)


class CudaBuildError(RuntimeError):
    """The CUDA source did not compile, link or load; the message leads with the compiler's own
    error lines, mapped back to lines of ``cuda_src``."""


# ------------------------------------------------------------------------------------------------
# Splitting C++ source at top level
# ------------------------------------------------------------------------------------------------
@dataclass
class Chunk:
    text: str
    line: int  # 1-based line of cuda_src where the chunk starts
    kind: str = ""  # "pp", "code"


def _strip_comments(text: str) -> str:
    """Text without // and /* */ comments (string literals are not special-cased: heads of
    declarations rarely hold strings)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


def split_top_level(src: str) -> list:
    """Split C/C++ source into top-level chunks: preprocessor lines and declarations/definitions
    (a function ends at its closing brace; a struct, class or initializer at the ``;``)."""
    chunks, i, n = [], 0, len(src)
    start, depth, line, start_line = 0, 0, 1, 1

    def flush(end):
        nonlocal start, start_line
        text = src[start:end]
        if text.strip():
            lead = len(text) - len(text.lstrip())
            chunks.append(Chunk(text.strip(), start_line + text[:lead].count("\n"), "code"))
        start, start_line = end, line

    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += src.count("\n", i, j)
            i = j
            continue
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        elif c == "#" and depth == 0 and src[src.rfind("\n", 0, i) + 1:i].strip() == "":
            flush(i)
            j = i
            while True:  # a directive ends at a newline not preceded by a backslash
                k = src.find("\n", j)
                if k < 0:
                    k = n
                    break
                if src[k - 1] != "\\":
                    break
                line += 1
                j = k + 1
            chunks.append(Chunk(src[i:k].strip(), line - src.count("\n", i, k), "pp"))
            start, start_line = k, line
            i = k
            continue
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                head = _strip_comments(src[start:i])
                head = head[:head.find("{")]
                needs_semicolon = "=" in head or re.search(r"\b(struct|class|union|enum)\b", head) \
                    and "(" not in head
                if not needs_semicolon:
                    flush(i + 1)
        elif c == ";" and depth == 0:
            flush(i + 1)
        i += 1
    flush(n)
    return chunks


# ------------------------------------------------------------------------------------------------
# Classifying chunks and rewriting launches
# ------------------------------------------------------------------------------------------------
DEVICE_RE = re.compile(r"\b(__global__|__device__|__shared__|__constant__)\b")
TORCH_RE = re.compile(r"\b(torch|at|c10|pybind11|py)::|\bTORCH_\w+|\bC10_\w+|\bAT_\w+|\bdata_ptr\b"
                      r"|\bCHECK_(INPUT|CUDA|CONTIGUOUS)\b")
TORCH_INCLUDE_RE = re.compile(r"#\s*include\s*[<\"](torch|ATen|c10|pybind11)/")
HEAVY_TORCH_RE = re.compile(r"\btorch::(nn|optim|autograd|jit|data)\b")


class NeedsClassicBuild(Exception):
    """The split build cannot handle this source; build it as one nvcc unit."""


@dataclass
class Launch:
    callee: str   # e.g. "matmul_k<16>"
    grid: str
    block: str
    smem: str
    stream: str
    args: str


def _match_forward(s: str, i: int, open_c: str, close_c: str) -> int:
    """Index just past the bracket matching s[i] == open_c (strings skipped)."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c in "\"'":
            k = j + 1
            while k < len(s) and s[k] != c:
                k += 2 if s[k] == "\\" else 1
            j = k
        elif c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise ValueError(f"unbalanced {open_c}{close_c}")


def _split_args(s: str) -> list:
    """Split at commas outside (), [], {} and <> nesting."""
    parts, depth, cur = [], 0, ""
    for c in s:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def rewrite_launches(text: str, launches: list) -> str:
    """Replace each ``callee<<<cfg>>>(args)`` in ``text`` by a call of its launch stub, appending
    the launches found to ``launches`` (their index names the stub)."""
    out, pos = "", 0
    while True:
        k = text.find("<<<", pos)
        if k < 0:
            return out + text[pos:]
        # the callee: an identifier, possibly qualified and with template arguments
        j = k
        while j > 0 and text[j - 1].isspace():
            j -= 1
        end_callee = j
        if j > 0 and text[j - 1] == ">":
            depth = 0
            while j > 0:
                j -= 1
                if text[j] == ">":
                    depth += 1
                elif text[j] == "<":
                    depth -= 1
                    if depth == 0:
                        break
        while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_:"):
            j -= 1
        callee = text[j:end_callee].strip()
        close = text.find(">>>", k + 3)
        if not callee or close < 0:
            raise NeedsClassicBuild(f"could not read the launch near {text[k - 20:k + 20]!r}")
        cfg = _split_args(text[k + 3:close])
        if not 2 <= len(cfg) <= 4:
            raise NeedsClassicBuild(f"launch configuration <<<{text[k + 3:close]}>>>")
        cfg += ["0"] * (4 - len(cfg))
        p = close + 3
        while text[p].isspace():
            p += 1
        if text[p] != "(":
            raise NeedsClassicBuild("a launch without its argument list")
        q = _match_forward(text, p, "(", ")")
        idx = len(launches)
        launches.append(Launch(callee, *cfg, args=text[p + 1:q - 1].strip()))
        out += text[pos:j] + (
            f"__course_launch_{idx}(dim3({cfg[0]}), dim3({cfg[1]}), (size_t)({cfg[2]}), "
            f"(cudaStream_t)({cfg[3]}), course_launch::pack<decltype(&{callee})>("
            f"{text[p + 1:q - 1]}).ptrs)")
        pos = q


def prototype(chunk_text: str) -> str:
    """The declaration of a function defined in ``chunk_text`` (everything before its body)."""
    head = chunk_text[:chunk_text.find("{")].rstrip()
    return head + ";"


LAUNCH_HELPER = r"""
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <cuda_runtime_api.h>
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
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __host__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
// nvcc gives host code min() and max() over mixed integer types; a plain C++ compiler does not.
// (by value: a conditional of two lvalues is itself an lvalue, so decltype(a > b ? a : b) would be a
// reference to a parameter that dies on return)
template <typename A, typename B> inline std::common_type_t<A, B> max(A a, B b) { return a > b ? a : b; }
template <typename A, typename B> inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
"""
LIGHT_TORCH = ("#include <ATen/ATen.h>\n#include <c10/cuda/CUDAException.h>\n"
               "namespace torch { using namespace at; }  // torch::Tensor, torch::empty, ...\n")


@dataclass
class Units:
    device: str
    host: str
    binding: str
    module: str


def _line(chunk: Chunk) -> str:
    return f'#line {chunk.line} "{SOURCE_NAME}"\n'


def make_units(cuda_src: str, cpp_src: str, funcs: list) -> Units:
    """Split the learner's source into device, host and binding translation units."""
    chunks = split_top_level(cuda_src)
    device, host, launches = [], [], []
    heavy = bool(HEAVY_TORCH_RE.search(cuda_src))
    torch_included = False
    for ch in chunks:
        t = ch.text
        if ch.kind == "pp":
            if TORCH_INCLUDE_RE.search(t):
                if not torch_included:
                    host.append(("#include <torch/extension.h>\n" if heavy else LIGHT_TORCH))
                    torch_included = True
                continue
            device.append(_line(ch) + t + "\n")
            host.append(_line(ch) + t + "\n")
        elif DEVICE_RE.search(t):
            device.append(_line(ch) + t + "\n")
            if "__host__" in t and "__global__" not in t:
                host.append(_line(ch) + t + "\n")  # callable from host code too
            elif "__global__" in t:
                host.append(_line(ch) + prototype(t) + "\n")
        elif TORCH_RE.search(t):
            if "<<<" in t and t.lstrip().startswith("template"):
                raise NeedsClassicBuild("a templated host function launches a kernel")
            host.append(_line(ch) + rewrite_launches(t, launches) + "\n")
        elif "<<<" in t:
            device.append(_line(ch) + t + "\n")  # a launcher without torch types
            host.append(_line(ch) + prototype(t) + "\n")
        else:
            device.append(_line(ch) + t + "\n")
            host.append(_line(ch) + t + "\n")
    stubs = [f'extern "C" cudaError_t __course_launch_{i}(dim3 g, dim3 b, size_t s, '
             f'cudaStream_t st, void** a) {{\n    return cudaLaunchKernel(&{L.callee}, g, b, a, s, st);\n}}'
             for i, L in enumerate(launches)]
    decls = [f'extern "C" cudaError_t __course_launch_{i}(dim3, dim3, size_t, cudaStream_t, void**);'
             for i in range(len(launches))]
    device_tu = ("// device unit (nvcc, no torch headers), generated by cuda_build.py\n"
                 "#include <cuda_runtime.h>\n#include <cstdio>\n" + "".join(device)
                 + "\n// launch stubs\n" + "\n".join(stubs) + "\n")
    host_tu = ("// host unit (g++), generated by cuda_build.py\n"
               + (LIGHT_TORCH if not torch_included else "") + LAUNCH_HELPER + HOST_PRELUDE
               + "\n".join(decls) + "\n" + "".join(host))
    module = "course_cuda_" + hashlib.sha256((cpp_src + "|" + ",".join(funcs)).encode()) \
        .hexdigest()[:12]
    defs = "\n".join(f'    m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in funcs)
    binding_tu = (f"// binding unit (g++), generated by cuda_build.py\n#include <torch/python.h>\n"
                  f"{cpp_src}\nPYBIND11_MODULE({module}, m) {{\n{defs}\n}}\n")
    return Units(device_tu, host_tu, binding_tu, module)


# ------------------------------------------------------------------------------------------------
# Compiling, with a cache of objects by content
# ------------------------------------------------------------------------------------------------
def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def _toolchain():
    """Compilers, include and library flags for torch extensions on this machine."""
    import torch
    from torch.utils import cpp_extension as ce
    cuda_home = ce.CUDA_HOME or "/usr/local/cuda"
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    includes = ce.include_paths("cuda") + [sysconfig.get_paths()["include"]]
    inc = [f"-I{p}" for p in includes]
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    major, minor = torch.cuda.get_device_capability()
    arch = f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"
    libs = [f"-L{ce.TORCH_LIB_PATH}", "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda",
            "-ltorch", "-ltorch_python", f"-L{os.path.join(cuda_home, 'lib64')}", "-lcudart",
            f"-Wl,-rpath,{ce.TORCH_LIB_PATH}"]
    cxx = os.environ.get("CXX", "c++")
    return {"nvcc": nvcc, "cxx": cxx, "inc": inc, "abi": abi, "arch": arch, "libs": libs,
            "id": _digest(torch.__version__, nvcc, cxx, arch, sys.version)}


def _compile(cmd: list, src_text: str, src_path: Path, obj: Path) -> tuple:
    """Compile one unit unless its object is cached; return (obj, log, seconds)."""
    import time
    if obj.exists():
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
    return obj, r.stdout + r.stderr, time.perf_counter() - t0


ERROR_RE = re.compile(rf"{SOURCE_NAME}(?:\((\d+)\)|:(\d+)(?::\d+)?):?\s*(?:fatal )?error:?\s*(.*)")


def explain_errors(log: str, cuda_src: str, what: str, limit: int = 5) -> str:
    """The compiler's error lines first, each with the line of cuda_src it points at."""
    src_lines = cuda_src.splitlines()
    out, seen = [], set()
    for raw in log.splitlines():
        m = ERROR_RE.search(raw)
        if not m:
            continue
        ln = int(m.group(1) or m.group(2))
        msg = m.group(3).strip()
        if (ln, msg) in seen:
            continue
        seen.add((ln, msg))
        code = src_lines[ln - 1].strip() if 0 < ln <= len(src_lines) else ""
        out.append(f"  line {ln}: error: {msg}" + (f"\n      {code}" if code else ""))
        if len(out) == limit:
            break
    if not out:  # an error outside the learner's lines: show the first error lines as they are
        errs = [l for l in log.splitlines() if "error" in l.lower()][:limit]
        out = ["  " + l.strip() for l in (errs or log.strip().splitlines()[-limit:])]
    return (f"load_cuda: {what}:\n" + "\n".join(out) +
            "\n(line numbers count from the first line of cuda_src; the full compiler output is "
            "in utils.last_build_log())")


def build_split(cuda_src: str, cpp_src: str, funcs: list, opt: bool = True,
                extra_cuda_cflags=(), verbose: bool = False):
    """Build with the split units (see the module docstring); return the loaded module."""
    global last_log
    units = make_units(cuda_src, cpp_src, funcs)
    tc = _toolchain()
    nvcc_flags = ([tc["nvcc"], "-std=c++17", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC",
                   tc["arch"]] + (["-O3", "-lineinfo"] if opt else ["-O0", "-g", "-G"])
                  + list(extra_cuda_cflags))
    cxx_flags = [tc["cxx"], "-std=c++17", "-fPIC", "-O2" if opt else "-O0", tc["abi"],
                 "-DTORCH_API_INCLUDE_EXTENSION_H", "-w"] + tc["inc"]
    obj_dir = CACHE / "obj"
    src_dir = CACHE / "src"
    obj_dir.mkdir(parents=True, exist_ok=True)
    src_dir.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for kind, text, flags, ext in (("device", units.device, nvcc_flags, "cu"),
                                   ("host", units.host, cxx_flags, "cpp"),
                                   ("binding", units.binding, cxx_flags, "cpp")):
        key = _digest(kind, text, flags, tc["id"])
        jobs[kind] = (flags, text, src_dir / f"{kind}-{key}.{ext}", obj_dir / f"{kind}-{key}.o")
    so_dir = CACHE / "lib" / _digest(*[j[3].name for j in jobs.values()])
    so_path = so_dir / f"{units.module}.so"
    logs = []
    if not so_path.exists():
        with ThreadPoolExecutor(3) as pool:
            results = {k: pool.submit(_compile, *j) for k, j in jobs.items()}
            results = {k: f.result() for k, f in results.items()}
        for kind, (obj, log, secs) in results.items():
            logs.append(f"== {kind} unit: {'cached' if secs == 0 and obj else f'{secs:.1f} s'}\n{log}")
        last_log = "\n".join(logs)
        for kind in ("device", "host", "binding"):
            obj, log, _ = results[kind]
            if obj is None:
                what = {"device": "the kernels do not compile (nvcc)",
                        "host": "the host code does not compile (C++)",
                        "binding": "cpp_src or funcs do not match the functions (binding)"}[kind]
                raise CudaBuildError(explain_errors(log, cuda_src if kind != "binding"
                                                    else cpp_src, what)) from None
        so_dir.mkdir(parents=True, exist_ok=True)
        tmp = so_dir / f"{units.module}.tmp{os.getpid()}.so"
        r = subprocess.run([tc["cxx"], "-shared", *[str(r[0]) for r in results.values()], "-o",
                            str(tmp), *tc["libs"]], capture_output=True, text=True,
                           timeout=COMPILE_TIMEOUT_S)
        last_log += f"\n== link\n{r.stdout}{r.stderr}"
        if r.returncode != 0:
            raise CudaBuildError(explain_errors(r.stdout + r.stderr, cuda_src,
                                                "the kernels do not link")) from None
        tmp.replace(so_path)
        (so_dir / "build.log").write_text(last_log)
    else:  # a cache hit: the log of the build that made this library
        log_file = so_dir / "build.log"
        last_log = (log_file.read_text() if log_file.exists() else "") + \
            f"\n== loaded from cache: {so_path}"
    if verbose:
        print(last_log)
    return load_module(units.module, so_path)


def load_module(name: str, path: Path):
    """Import an extension module from a file (a fresh import even if the name was seen before)."""
    spec = importlib.util.spec_from_file_location(name, path)
    try:
        mod = importlib.util.module_from_spec(spec)  # dlopen: undefined symbols surface here
        spec.loader.exec_module(mod)
    except ImportError as e:
        m = re.search(r"undefined symbol: (\S+)", str(e))
        if m:
            sym = m.group(1)
            try:
                sym = subprocess.run(["c++filt", sym], capture_output=True, text=True,
                                     timeout=10).stdout.strip() or sym
            except (OSError, subprocess.SubprocessError):
                pass
            raise CudaBuildError(f"load_cuda: {sym} is declared (in cpp_src) but defined nowhere "
                                 f"in cuda_src: define it, or fix its name or parameter types "
                                 f"so that they match the declaration") from None
        raise
    return mod
