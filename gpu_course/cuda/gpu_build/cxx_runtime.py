"""One C++ runtime per process: link extensions against the libstdc++ this process already runs.

A library that carries its own copy of libstdc++ (linked from ``libstdc++.a``) next to the shared one
that torch loaded has two sets of the runtime's locale tables, and the copy's are never set up: the
first number it formats (``TORCH_CHECK(ok, "got ", n)``, ``std::ostringstream() << n``) crashes the
process or comes out empty, while strings alone pass. That is what the course's builds and torch's own
``load_inline`` did on a GPU image where ``-lstdc++`` resolved to the archive. Naming the shared
library on the link line, before the compiler's own ``-lstdc++``, resolves every runtime symbol there,
so the archive contributes nothing."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# a static member of std::locale's implementation: defined only inside libstdc++ itself, so a library
# that defines it carries a copy of the runtime
RUNTIME_MARK = "_ZNSt6locale5_Impl13_S_id_numericE"


def loaded_libstdcxx(maps: str = "/proc/self/maps") -> str | None:
    """The path of the shared libstdc++ this process has loaded (torch's), or None (not Linux, or none
    loaded)."""
    try:
        lines = Path(maps).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.split()[-1] if line.split() else ""
        if "/libstdc++.so" in path and Path(path).exists():
            return path
    return None


def link_flags() -> list:
    """Linker inputs that bind a new library to this process's libstdc++ (empty where none is loaded)."""
    path = loaded_libstdcxx()
    return [path] if path else []


def carries_own_runtime(library: Path) -> bool | None:
    """Whether a built library defines libstdc++'s own symbols (a second runtime in the process); None
    where ``nm`` is missing."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    r = subprocess.run([nm, "-D", "--defined-only", str(library)], capture_output=True, text=True, timeout=60)
    return RUNTIME_MARK in r.stdout


WARNING = ("{name} carries its own copy of the C++ runtime (libstdc++) beside the one torch loaded: a check "
           "or message that formats a number (TORCH_CHECK(ok, \"got \", n)) can crash the Python process. "
           "Format numbers with std::to_string(n) in messages, or rebuild with the shared libstdc++ on the "
           "link line.")
